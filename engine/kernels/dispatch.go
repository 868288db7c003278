package kernels

// Linear computes out[M×N] = inp[M×K] · wᵀ + bias (bias may be nil); w is
// [N×K] in any DType. out is overwritten. This is the entry point the model
// uses; it dispatches to the fastest variant the CPU supports.
func Linear(out, inp []float32, w *Mat, bias []float32, M int) {
	LinearRef(out, inp, w, bias, M)
}

// LinearBackwardInput accumulates dinp[M×K] += dout[M×N] · w.
func LinearBackwardInput(dinp, dout []float32, w *Mat, M int) {
	LinearBackwardInputRef(dinp, dout, w, M)
}

// Gemm computes C = beta·C + op(A)·op(B) on fp32 row-major matrices; see GemmRef.
func Gemm(transA, transB bool, M, N, K int, A []float32, lda int, B []float32, ldb int, beta float32, C []float32, ldc int) {
	GemmRef(transA, transB, M, N, K, A, lda, B, ldb, beta, C, ldc)
}
