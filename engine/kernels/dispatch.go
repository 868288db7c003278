package kernels

import (
	"fmt"
	"runtime"
)

// Linear computes out[M×N] = inp[M×K] · wᵀ + bias (bias may be nil); w is
// [N×K] in any DType. out is overwritten and must not overlap inp. This is
// the entry point the model uses; it dispatches to the fastest variant the
// CPU supports.
//
// The first call packs w into 64-column panels cached in the Mat (see
// Mat.Prepack). Up to streamMaxPanelsM rows read the panels in place (the
// weights stream from memory once, at bandwidth for decode); more rows run
// the blocked GEMM. Safe for concurrent use.
func Linear(out, inp []float32, w *Mat, bias []float32, M int) {
	if j, ok := linearJob(out, inp, w, bias, M, nil); ok {
		j.run()
		j.done()
	}
}

// linearJob checks the arguments of Linear and returns its job; ok is
// false when the product is empty (done: M, N or K is 0). prev, if not
// nil, is an earlier job whose converted input j may share (toDP).
func linearJob(out, inp []float32, w *Mat, bias []float32, M int, prev *job) (j job, ok bool) {
	N, K := w.Rows, w.Cols
	checkLen("Linear out", out, M*N)
	checkLen("Linear inp", inp, M*K)
	if bias != nil {
		checkLen("Linear bias", bias, N)
	}
	if M == 0 || N == 0 {
		return j, false
	}
	if K == 0 {
		for m := range M {
			row := out[m*N : (m+1)*N]
			if bias != nil {
				copy(row, bias[:N])
			} else {
				clear(row)
			}
		}
		return j, false
	}
	j = job{M: M, N: N, K: K, a: inp, lda: K, c: out, ldc: N, first: flagStore}
	if bias != nil {
		j.first |= flagBias
		j.bias = bias
	}
	if w.dpUnit() {
		j.toDP(prev)
		j.kind, j.bf = bPanelsF32, w.dpPanels()
		return j, true
	}
	i8 := w.i8Unit()
	pk := w.quantPanels(i8)
	if i8 {
		j.kind, j.tp = bPanelsI8, pk
		j.toI8(prev)
		return j, true
	}
	switch {
	case pk.bf16 != nil:
		j.kind, j.bh = bPanelsBF16, pk.bf16
	case pk.f16 != nil:
		j.kind, j.bh = bPanelsF16, pk.f16
	case pk.q8 != nil:
		j.kind, j.tp = bPanelsQ8, pk
	case pk.q4 != nil:
		j.kind, j.tp = bPanelsQ4, pk
	default:
		j.kind, j.bf = bPanelsF32, pk.f32
	}
	return j, true
}

// LinearOp is one product of LinearMulti: Out[M×N] = inp · Wᵀ + Bias.
type LinearOp struct {
	Out  []float32
	W    *Mat
	Bias []float32 // nil or length N
	// In, when set, holds this product's own M input rows (M×K) in
	// place of LinearMulti's: products of different inputs in one
	// parallel region (the experts of a mixture, each over its rows).
	In []float32
	M  int
}

// LinearMulti computes several Linear products of the same input rows
// (inp, M×K for every W, unless an op brings its own) in one parallel
// region: the same results as calling Linear for each op, with one fork
// and join instead of one per op, and the small products spread over the
// cores too. Used for the q, k, v and the gate, up projections of a layer.
// Outputs must not overlap any input or each other.
func LinearMulti(inp []float32, M int, ops ...LinearOp) {
	t := runtime.GOMAXPROCS(0)
	var js []job
	var est float64
	for _, op := range ops {
		w, in, m := op.W, inp, M
		if op.In != nil {
			in, m = op.In, op.M
		}
		if t <= 1 || m == 0 || w.Rows == 0 || w.Cols == 0 {
			Linear(op.Out, in, w, op.Bias, m)
			continue
		}
		var prev *job
		if len(js) > 0 {
			prev = &js[len(js)-1]
		}
		j, ok := linearJob(op.Out, in, w, op.Bias, m, prev)
		if !ok {
			continue
		}
		js = append(js, j)
		est += j.estimateNs()
	}
	switch {
	case len(js) == 0:
	case est < parallelMinNs:
		for i := range js {
			js[i].part(0, js[i].M, 0, js[i].panels())
		}
	default:
		runJobs(t, js)
	}
	for i := range js {
		js[i].done()
	}
}

// LinearBackwardInput accumulates dinp[M×K] += dout[M×N] · w, the input
// gradient of Linear. dinp must not overlap dout. w is read in its own
// layout (each k-row of B = w is a weight row), packed per call (16-bit
// and quantized weights: transposed back, dequantized, from the Linear
// panels; on UnitBF16, transposed from the dp panels Linear reads), so
// training keeps no second copy of a weight.
func LinearBackwardInput(dinp, dout []float32, w *Mat, M int) {
	N, K := w.Rows, w.Cols
	checkLen("LinearBackwardInput dinp", dinp, M*K)
	checkLen("LinearBackwardInput dout", dout, M*N)
	if M == 0 || N == 0 || K == 0 {
		return
	}
	j := job{M: M, N: K, K: N, a: dout, lda: N, c: dinp, ldc: K, first: flagAcc, ldb: K}
	if w.dpUnit() {
		j.toDP(nil)
		j.kind, j.bf = bPanelsDPT, w.dpPanels()
		j.run()
		j.done()
		return
	}
	if w.qdpUnit() {
		j.toDP(nil)
		j.kind, j.tp = bPanelsQDPT, w.panels()
		j.run()
		j.done()
		return
	}
	switch w.DType {
	case F32:
		checkLen("LinearBackwardInput w", w.F32, N*K)
		j.kind, j.bf = bRowsF32, w.F32
	case BF16, F16, Q8, Q4:
		// The Linear panels are the only copy of a 16-bit or quantized weight.
		j.kind, j.tp = bPanelsT, w.quantPanels(false)
	default:
		panic("kernels: unknown dtype " + w.DType.String())
	}
	j.run()
}

// Gemm computes C = beta·C + op(A)·op(B) on fp32 row-major matrices; see
// GemmRef. op(A) is M×K (A stored K×M if transA), op(B) is K×N (B stored N×K
// if transB). beta = 0 overwrites C without reading it. C must not overlap A
// or B. Safe for concurrent use on disjoint C.
func Gemm(transA, transB bool, M, N, K int, A []float32, lda int, B []float32, ldb int, beta float32, C []float32, ldc int) {
	gemmChecked(false, transA, transB, M, N, K, A, lda, B, ldb, beta, C, ldc)
}

// GemmSerial is Gemm on the caller's goroutine alone, with the same bits
// (a product's result never depends on how it is split). It is for
// callers that already keep every core busy with products of their own,
// one attention head per goroutine: there each product's own fork and join
// found no idle core to hand work to and only added scheduling.
func GemmSerial(transA, transB bool, M, N, K int, A []float32, lda int, B []float32, ldb int, beta float32, C []float32, ldc int) {
	gemmChecked(true, transA, transB, M, N, K, A, lda, B, ldb, beta, C, ldc)
}

// gemmChecked is Gemm, on the caller's goroutine alone if serial.
func gemmChecked(serial, transA, transB bool, M, N, K int, A []float32, lda int, B []float32, ldb int, beta float32, C []float32, ldc int) {
	if M <= 0 || N <= 0 {
		return
	}
	checkMat("Gemm C", C, M, N, ldc)
	if transA {
		checkMat("Gemm A", A, K, M, lda)
	} else {
		checkMat("Gemm A", A, M, K, lda)
	}
	if transB {
		checkMat("Gemm B", B, N, K, ldb)
	} else {
		checkMat("Gemm B", B, K, N, ldb)
	}
	if K <= 0 {
		for i := range M {
			row := C[i*ldc : i*ldc+N]
			if beta == 0 {
				clear(row)
			} else {
				Scale(beta, row)
			}
		}
		return
	}
	// A narrow C (LoRA rank, N < 64) from a transposed A (dyᵀ·h) wastes most
	// of each 64-column panel; compute Cᵀ = op(B)ᵀ·op(A)ᵀ instead, where
	// op(A)ᵀ is A as stored, so nothing large needs transposing.
	if transA && N < panelW && M >= panelW {
		tp := getBuf(N * M)
		defer putBuf(tp)
		t := *tp
		gemm(serial, !transB, false, N, M, K, B, ldb, A, lda, 0, t, M)
		for i := range M {
			row := C[i*ldc : i*ldc+N]
			if beta == 0 {
				for j := range row {
					row[j] = t[j*M+i]
				}
			} else {
				for j := range row {
					row[j] = beta*row[j] + t[j*M+i]
				}
			}
		}
		return
	}
	gemm(serial, transA, transB, M, N, K, A, lda, B, ldb, beta, C, ldc)
}

// PanelWidth is the number of B rows in one panel of GemmPanels.
const PanelWidth = panelW

// GemmPanels computes C[M×N] = A[M×K]·Bᵀ for B (N×K) held in panels of
// PanelWidth of its rows: rows [64p, 64p+64) as K×64 values, k-major
// (B[p·pstride + k·64 + j] is row 64p+j, column k; the layout Linear packs
// fp32 weights into), with pstride ≥ 64·K. Columns of the last panel past
// N are read but never reach C. It gives the bits of Gemm(false, true, ...)
// on B's rows, which packs B on every call: the decoder keeps its cached
// keys in this layout so that attention reads them in place.
func GemmPanels(M, N, K int, A []float32, lda int, B []float32, pstride int, C []float32, ldc int) {
	gemmPanels(false, M, N, K, A, lda, B, pstride, C, ldc)
}

// GemmPanelsSerial is GemmPanels on the caller's goroutine alone, with the
// same bits (see GemmSerial).
func GemmPanelsSerial(M, N, K int, A []float32, lda int, B []float32, pstride int, C []float32, ldc int) {
	gemmPanels(true, M, N, K, A, lda, B, pstride, C, ldc)
}

func gemmPanels(serial bool, M, N, K int, A []float32, lda int, B []float32, pstride int, C []float32, ldc int) {
	if storeEmpty("GemmPanels", M, N, K, C, ldc) {
		return
	}
	checkMat("GemmPanels A", A, M, K, lda)
	if pstride < K*panelW {
		panic(fmt.Sprintf("kernels: GemmPanels panel stride %d < %d (K×64)", pstride, K*panelW))
	}
	checkLen("GemmPanels B", B, ((N+panelW-1)/panelW-1)*pstride+K*panelW)
	j := job{M: M, N: N, K: K, a: A, lda: lda, kind: bPanelsF32, bf: B, pstride: pstride, c: C, ldc: ldc, first: flagStore, serial: serial}
	j.run()
}

// transAChunk bounds the scratch (elements) of the transposed A in gemm:
// a taller op(A) is done in row blocks (the LM-head weight gradient has
// M = 151936). A variable so tests can make it small.
var transAChunk = 1 << 22

func gemm(serial, transA, transB bool, M, N, K int, A []float32, lda int, B []float32, ldb int, beta float32, C []float32, ldc int) {
	if !transA {
		gemmRows(serial, transB, M, N, K, A, lda, B, ldb, beta, C, ldc)
		return
	}
	// The kernels broadcast A from rows: transpose A (stored K×M) up front,
	// with gathers at ~0.2 ns per element, into scratch shared by all
	// goroutines, in blocks of rows when it is large.
	mb := M
	if M*K > transAChunk {
		mb = max(6, transAChunk/K/6*6)
	}
	tp := getBuf(min(mb, M) * K)
	defer putBuf(tp)
	for m0 := 0; m0 < M; m0 += mb {
		rows := min(mb, M-m0)
		transposeF32(*tp, K, A[m0:], lda, K, rows)
		gemmRows(serial, transB, rows, N, K, *tp, K, B, ldb, beta, C[m0*ldc:], ldc)
	}
}

// gemmRows is gemm for A stored M×K.
func gemmRows(serial, transB bool, M, N, K int, A []float32, lda int, B []float32, ldb int, beta float32, C []float32, ldc int) {
	// A transposed B runs in the panel kernels too, even for one row of A
	// (decode attention scores q·Kᵀ, LoRA x·Aᵀ), where dot products read B
	// in place faster: a dot product sums in another order than the
	// kernels, so a row's scores would depend on how many rows came with
	// it, and the sampler's logprobs would differ from the trainer's.
	j := job{M: M, N: N, K: K, a: A, lda: lda, bf: B, ldb: ldb, c: C, ldc: ldc, serial: serial}
	j.kind = bRowsF32
	if transB {
		j.kind = bColsF32
	}
	switch beta {
	case 0:
		j.first = flagStore
	case 1:
		j.first = flagAcc
	default:
		j.first, j.beta, j.scale = flagAcc, beta, true
	}
	j.run()
}

// GemmKBlocks is C = A·B (A M×K, B K×N, both row-major) summed in blocks
// of kb k-rows (the last may be shorter) instead of the product's own: the
// same bits as Gemm(beta 0) over the first kb k-rows of A and B followed
// by one Gemm(beta 1) per later block, in one call. Decoding attention
// multiplies the probabilities by V so, in the key blocks the trainer
// sums them in, without a call per block.
func GemmKBlocks(M, N, K, kb int, A []float32, lda int, B []float32, ldb int, C []float32, ldc int) {
	gemmKBlocks(false, "GemmKBlocks", flagStore, M, N, K, kb, A, lda, B, ldb, C, ldc)
}

// GemmKBlocksSerial is GemmKBlocks on the caller's goroutine alone, with
// the same bits (see GemmSerial).
func GemmKBlocksSerial(M, N, K, kb int, A []float32, lda int, B []float32, ldb int, C []float32, ldc int) {
	gemmKBlocks(true, "GemmKBlocks", flagStore, M, N, K, kb, A, lda, B, ldb, C, ldc)
}

// GemmKBlocksAdd is C += A·B summed in blocks of kb k-rows: the same bits
// as one Gemm(beta 1) per block. After GemmKBlocks over the first k-rows
// (a whole number of blocks), it continues that product over the rest:
// decoding attention whose first keys are another cache's (a prompt's
// prefix shared by the samples of a group) sums them so, in the same
// blocks as over one cache.
func GemmKBlocksAdd(M, N, K, kb int, A []float32, lda int, B []float32, ldb int, C []float32, ldc int) {
	gemmKBlocks(false, "GemmKBlocksAdd", flagAcc, M, N, K, kb, A, lda, B, ldb, C, ldc)
}

// GemmKBlocksAddSerial is GemmKBlocksAdd on the caller's goroutine alone,
// with the same bits (see GemmSerial).
func GemmKBlocksAddSerial(M, N, K, kb int, A []float32, lda int, B []float32, ldb int, C []float32, ldc int) {
	gemmKBlocks(true, "GemmKBlocksAdd", flagAcc, M, N, K, kb, A, lda, B, ldb, C, ldc)
}

func gemmKBlocks(serial bool, what string, first, M, N, K, kb int, A []float32, lda int, B []float32, ldb int, C []float32, ldc int) {
	if first == flagAcc {
		// Adding nothing leaves C as it is.
		if M <= 0 || N <= 0 || K <= 0 {
			return
		}
		checkMat(what+" C", C, M, N, ldc)
	}
	if kb <= 0 {
		panic(fmt.Sprintf("kernels: %s sum block %d ≤ 0", what, kb))
	}
	if first == flagStore && storeEmpty(what, M, N, K, C, ldc) {
		return
	}
	checkMat(what+" A", A, M, K, lda)
	checkMat(what+" B", B, K, N, ldb)
	j := job{M: M, N: N, K: K, a: A, lda: lda, kind: bRowsF32, bf: B, ldb: ldb, c: C, ldc: ldc, first: first, kb: min(kb, K), serial: serial}
	j.run()
}

// storeEmpty checks C of a product that stores C = A·B (what names it)
// and reports whether nothing is left to do: no rows or columns, or an
// inner size of 0, for which it zeroes C.
func storeEmpty(what string, M, N, K int, C []float32, ldc int) bool {
	if M <= 0 || N <= 0 {
		return true
	}
	checkMat(what+" C", C, M, N, ldc)
	if K > 0 {
		return false
	}
	for i := range M {
		clear(C[i*ldc : i*ldc+N])
	}
	return true
}

// checkMat panics unless s holds a rows×cols matrix with row stride ld.
func checkMat(what string, s []float32, rows, cols, ld int) {
	if rows <= 0 || cols <= 0 {
		return
	}
	if ld < cols {
		panic(fmt.Sprintf("kernels: %s leading dimension %d < %d columns", what, ld, cols))
	}
	checkLen(what, s, (rows-1)*ld+cols)
}
