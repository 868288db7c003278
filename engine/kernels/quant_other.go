//go:build !amd64 || purego

package kernels

func hasQ8Kernels() bool { return false }

func widenQ8Asm(dst []float32, doff int, p *panels, q, pc, kc int) bool { return false }
