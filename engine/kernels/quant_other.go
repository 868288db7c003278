//go:build !amd64 || purego

package kernels

func hasQ8Kernels() bool { return false }
