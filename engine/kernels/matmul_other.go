//go:build !amd64 || purego

package kernels

// Without amd64 assembly (other architectures, or the purego build tag) only
// the portable Go variant exists.

func bestVariant() variant { return varGo }

func hasDP() bool { return false }

func tile512(t *tileArgs) { panic("kernels: AVX-512 variant not built") }
func tile256(t *tileArgs) { panic("kernels: AVX2 variant not built") }

func widenPanelAsm(dst []float32, doff int, src []uint16, soff, rows int) bool { return false }

func packRowsF32Asm(dst []float32, doff int, src []float32, soff, lds, rows int) bool {
	return false
}

func packRowsU16Asm(dst []float32, doff int, src []uint16, soff, lds, rows int, dt DType) bool {
	return false
}

func packColsF32Asm(dst []float32, doff, ldd int, src []float32, soff, lds, rows, ncols int) bool {
	return false
}

func packPanelsTAsm(dst []float32, doff int, src []uint16, soff, stride, rows, ncols int, dt DType) (done, cols int) {
	return 0, 0
}

func packDPTAsm(dst []float32, doff int, src []float32, soff, rows, ncols int) (done, cols int) {
	return 0, 0
}
