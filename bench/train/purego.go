//go:build purego || !amd64

package main

// pureGo reports that engine/kernels was built without assembly.
const pureGo = true
