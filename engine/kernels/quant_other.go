//go:build !amd64 || purego

package kernels

func hasQuantKernels() bool { return false }

func widenQuantAsm(dst []float32, doff int, p *panels, q, pc, kc int) bool { return false }

func packPanelsTQuantAsm(dst []float32, doff int, p *panels, pc, kc, col0, ncols int) int { return 0 }
