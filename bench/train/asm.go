//go:build amd64 && !purego

package main

// pureGo reports that engine/kernels was built without assembly.
const pureGo = false
