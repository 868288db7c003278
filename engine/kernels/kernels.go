// Package kernels holds the engine's numeric hot loops: matrix multiplies with
// weights stored as f32, bf16, f16 or blockwise 8- or 4-bit (Q8, Q4,
// quant.go: the same bits as fp32 on the dequantized weights), and the element-wise
// helpers around them.
//
// Every kernel has a plain Go reference (the *Ref functions in this file) that
// stays as the test oracle; faster variants (Go assembly for AVX-512/AVX2,
// selected at run time) must agree with it. Shapes use the llm.c letters:
// M rows of activations, K input features, N output features.
//
// # Dispatch
//
// The engine calls Linear, LinearBackwardInput and Gemm (dispatch.go), the
// vector helpers Dot, Axpy, Scale and WidenBF16 (vec.go), and the softmax
// and SwiGLU row operations Max, ExpShift, SwiGLU and SwiGLUBackward
// (expvec.go; hand-written AVX-512 only, else Go). Underneath, one
// implementation is active for the whole process, chosen once at start-up
// from the CPU flags (golang.org/x/sys/cpu): AVX-512 F+BW, else AVX2+FMA,
// else portable Go; the purego build tag and non-amd64 builds have only Go.
// The variants share everything except the microkernel and the packing
// loops, and the tests force each supported one in turn.
//
// All matrix products run through one driver (matmul.go) around a
// microkernel that computes up to 6 rows × 64 columns of C from A rows read
// in place (broadcast) and B in 64-column panels (4 zmm per k-row):
//
//   - Linear packs the weight once, lazily, into panels cached in the Mat
//     (panels.go: in the weight's own dtype, fp32, bf16 or f16, so the
//     panels cost no extra width; for bf16/f16 they replace the stored copy,
//     which packing releases). Up to streamMaxPanelsM rows (decode, short
//     prefill) read the panels in place, panel group by panel group, with
//     software prefetch, so the weights stream from memory once at
//     bandwidth and bf16/f16 are widened in registers; groups and K slices
//     are sized so that later row chunks find them in L2. Up to 6 rows (one
//     micro-panel: a decoding sequence) stream whole panels, all of K, per
//     kernel call, the kernel adding each K block's sums to C as it goes
//     (tileArgs.kb). Eight rows (a decoding group) run an 8-row AVX-512
//     kernel that reads each weight once for all of them (when useM8 is
//     on). More rows run the blocked GEMM: K blocks of at
//     most 256, N blocks filling half of the L2 (fp32 panels read in place, 16-bit
//     ones widened per block into an L2 buffer), 6-row micro-panels of A
//     sweeping each block.
//   - Q8 and Q4 weights (quant.go) keep int8 (or packed 4-bit) panels plus
//     a panel of fp16 scales per 32 k-rows; streamed rows run kernels
//     that dequantize in registers (AVX2, and their 16-column versions on
//     the AVX-512 variant; the Go
//     variant, and the blocked GEMM, widen each block to fp32 first), with
//     the bits of fp32 on the dequantized values.
//   - LinearBackwardInput reads the weight as B = w (fp32: the stored rows;
//     bf16/f16/Q8/Q4: transposed back out of the Linear panels), packing and
//     widening B blocks per call.
//   - Gemm packs op(B) per block (a copy, or a gather-transpose for
//     transB) or, for few rows, reads B in place; it transposes A once (in
//     row blocks) when transA and computes narrow transA products (LoRA
//     weight gradients) as Cᵀ to fill the panels.
//
// # Units
//
// The weight products (Linear, LinearBackwardInput) run on one Unit for
// the whole process (dp.go): exact fp32 (UnitFP32), or bf16 (UnitBF16:
// both factors rounded to bf16, exact products summed in fp32 by
// VDPBF16PS, on AVX-512 CPUs with AVX512_BF16), chosen on first use by
// timing both microkernels unless ART_MATMUL_UNIT says. The bf16 unit reads
// each weight rounded to bf16 pairs in the fp32 panels' layout ("dp
// panels": a bf16 weight's only copy, an f16 or f32 weight's second one;
// the input gradient transposes blocks of them per call), converts each
// product's activations to pairs, and runs the fp32 drivers and kernel
// contract on pairs, so everything below holds for it too. UnitInt8
// (int8.go, asked for, never chosen by timing) runs Q8 and Q4 weights'
// forward products on int8 activations rounded per block of 32, summed
// exactly in int32 by VPDPBUSD, in one fixed order of its own (its
// kernels stream whole panels over all of K, so the sum blocks below do
// not apply to them); other weights as on UnitBF16. Gemm (LoRA, attention)
// is fp32 in every unit.
//
// # One summation order
//
// Every forward product sums in one order whatever the number of rows, the
// path (streamed or blocked) and the split over goroutines: K is cut into
// the same sum blocks (sumBlockK, a function of K alone), each output sums
// its block's k in order from zero in one accumulator, and the block sums
// are added to C in order (the bias with the first), whether a kernel call
// covers one block or several (TestTile_SumBlocks). So a row of C has the
// same bits alone, in a decoding batch, in a prefill chunk or in a
// training sequence: batch invariance, and the trainer's logprobs equal
// the sampler's bit for bit (true on-policy, issue #22). The tests
// TestLinear_RowInvariant and TestGemm_RowInvariant hold it for every
// variant; a variant's bits still differ from another variant's.
//
// Work is split over GOMAXPROCS goroutines in chunks of 64-column panels (or
// of rows, when there are few panels), two to 32 per goroutine, taken from
// a shared counter (a decoding product's: each goroutine's own run first,
// then the others' last) so a descheduled goroutine delays a call by one
// chunk only; each chunk writes its own part of C, with scratch from a sync.Pool,
// so concurrent calls are safe; LinearMulti runs several products of one
// input in a single such region. Calls estimated
// below ~25 µs stay on the caller's goroutine. Each assembly call is bounded
// (≤ ~1 ms) so the scheduler and GC are never held off for long.
package kernels

import (
	"fmt"
	"sync"
	"sync/atomic"
)

// DType is how a weight matrix is stored in memory. Compute is always fp32.
type DType uint8

const (
	F32 DType = iota
	BF16
	F16
	// Q8 is blockwise 8-bit (GGML's Q8_0): each run of 32 weights along a
	// row holds 32 int8 values and one fp16 scale (quant.go).
	Q8
	// Q4 is blockwise 4-bit (GGML's Q4_0): each run of 32 weights along a
	// row holds 32 4-bit values n and one fp16 scale d, standing for
	// (n−8)·d (quant.go).
	Q4
)

func (d DType) String() string {
	switch d {
	case F32:
		return "F32"
	case BF16:
		return "BF16"
	case F16:
		return "F16"
	case Q8:
		return "Q8"
	case Q4:
		return "Q4"
	}
	return fmt.Sprintf("DType(%d)", uint8(d))
}

// Mat is a row-major Rows×Cols weight matrix kept in its checkpoint dtype.
// An nn.Linear weight is [out features, in features] = [N, K].
// Exactly one of F32 (DType F32), U16 (raw bf16/f16 bits), Quants with
// Scales (DType Q8, see NewMatQ8) or Nibbles with Scales (DType Q4, see
// NewMatQ4) is set when it is built.
//
// A Mat is read-only once built: Linear caches a packed copy of it (see
// Prepack), so its data must not change after the first call, and a Mat
// must not be copied by value after first use (build a new one instead).
// For BF16, F16, Q8 and Q4 the packed copy replaces the stored one: the
// first use (Linear, LinearBackwardInput, Prepack, Row, At,
// Q8Blocks, Q4Blocks) sets U16 (Quants, Nibbles and Scales) to nil, so
// after that read the weight through Row, At, Bits16, Q8Row or Q4Row,
// never the fields.
type Mat struct {
	Rows, Cols int
	DType      DType
	F32        []float32
	U16        []uint16
	Quants     []int8   // DType Q8: row-major quantized weights
	Nibbles    []byte   // DType Q4: GGML Q4_0 nibbles, row-major [Rows×Cols/2]
	Scales     []uint16 // DType Q8, Q4: fp16 scale of each block of 32, row-major [Rows×Cols/32]

	packOnce sync.Once                 // builds the first packed copy, pk or dp (Mat.pack)
	mu       sync.Mutex                // builds the other of pk and dp later
	pk       atomic.Pointer[panels]    // lazily built panel copy of the weights, see panels.go
	alt      atomic.Pointer[panels]    // Q8, Q4: the panels in the other order, if a unit asked for it (quantPanels)
	dp       atomic.Pointer[[]float32] // the weight rounded to bf16 pairs for UnitBF16's products (dp.go)
}

// NewMatF32 wraps data (len rows*cols) as an F32 matrix without copying.
func NewMatF32(rows, cols int, data []float32) *Mat {
	if len(data) != rows*cols {
		panic(fmt.Sprintf("kernels: NewMatF32 %dx%d with %d values", rows, cols, len(data)))
	}
	return &Mat{Rows: rows, Cols: cols, DType: F32, F32: data}
}

// Row widens row r of m into dst (len Cols). For BF16, F16, Q8 and Q4 it reads
// the panels (a strided gather, about a microsecond per 1k columns; the
// embedding lookup uses it once per token).
func (m *Mat) Row(dst []float32, r int) {
	c := m.Cols
	switch m.DType {
	case F32:
		copy(dst[:c], m.F32[r*c:(r+1)*c])
	case BF16, F16:
		m.pack()
		p := m.pk.Load()
		if p == nil { // packed as dp panels alone
			d := *m.dp.Load()
			for k := range dst[:c] {
				dst[k] = BF16ToF32(dpBits(d, c, r, k))
			}
			return
		}
		src, dt := p.u16()
		base := (r/panelW)*p.k*panelW + p.word(r)
		dst = dst[:c]
		if dt == BF16 {
			for k := range dst {
				dst[k] = BF16ToF32(src[base+k*panelW])
			}
		} else {
			for k := range dst {
				dst[k] = f16Table()[src[base+k*panelW]]
			}
		}
	case Q8, Q4:
		p := m.panels()
		for k := range dst[:c] {
			dst[k] = p.qAt(r, k)
		}
	default:
		panic("kernels: unknown dtype " + m.DType.String())
	}
}

// At returns element (r, c) widened to fp32. For tests and slow paths only.
func (m *Mat) At(r, c int) float32 {
	switch m.DType {
	case F32:
		return m.F32[r*m.Cols+c]
	case BF16, F16:
		m.pack()
		p := m.pk.Load()
		if p == nil { // packed as dp panels alone
			return BF16ToF32(dpBits(*m.dp.Load(), m.Cols, r, c))
		}
		src, dt := p.u16()
		v := src[(r/panelW)*p.k*panelW+c*panelW+p.word(r)]
		if dt == BF16 {
			return BF16ToF32(v)
		}
		return F16ToF32(v)
	case Q8, Q4:
		return m.panels().qAt(r, c)
	}
	panic("kernels: unknown dtype " + m.DType.String())
}

// LinearRef computes out[M×N] = inp[M×K] · wᵀ + bias, with w [N×K] and bias
// [N] or nil. out is overwritten. It is the reference for Linear.
func LinearRef(out, inp []float32, w *Mat, bias []float32, M int) {
	N, K := w.Rows, w.Cols
	checkLen("LinearRef out", out, M*N)
	checkLen("LinearRef inp", inp, M*K)
	row := make([]float32, K)
	for n := 0; n < N; n++ {
		w.Row(row, n)
		var b float32
		if bias != nil {
			b = bias[n]
		}
		for m := 0; m < M; m++ {
			x := inp[m*K : (m+1)*K]
			var s float32
			for k, v := range x {
				s += v * row[k]
			}
			out[m*N+n] = s + b
		}
	}
}

// LinearBackwardInputRef accumulates dinp[M×K] += dout[M×N] · w, the input
// gradient of LinearRef. It is the reference for LinearBackwardInput.
func LinearBackwardInputRef(dinp, dout []float32, w *Mat, M int) {
	N, K := w.Rows, w.Cols
	checkLen("LinearBackwardInputRef dinp", dinp, M*K)
	checkLen("LinearBackwardInputRef dout", dout, M*N)
	row := make([]float32, K)
	for n := 0; n < N; n++ {
		w.Row(row, n)
		for m := 0; m < M; m++ {
			g := dout[m*N+n]
			if g == 0 {
				continue
			}
			d := dinp[m*K : (m+1)*K]
			for k, v := range row {
				d[k] += g * v
			}
		}
	}
}

// GemmRef computes C[M×N] = beta·C + op(A)·op(B), where op(A) is M×K and op(B)
// is K×N; transA means A is stored K×M, transB means B is stored N×K. All
// matrices are row-major with leading dimensions lda, ldb, ldc. beta = 0
// overwrites C (NaNs in C do not propagate). It is the reference for Gemm.
func GemmRef(transA, transB bool, M, N, K int, A []float32, lda int, B []float32, ldb int, beta float32, C []float32, ldc int) {
	for i := 0; i < M; i++ {
		for j := 0; j < N; j++ {
			var s float32
			for k := 0; k < K; k++ {
				var a, b float32
				if transA {
					a = A[k*lda+i]
				} else {
					a = A[i*lda+k]
				}
				if transB {
					b = B[j*ldb+k]
				} else {
					b = B[k*ldb+j]
				}
				s += a * b
			}
			if beta == 0 {
				C[i*ldc+j] = s
			} else {
				C[i*ldc+j] = beta*C[i*ldc+j] + s
			}
		}
	}
}

func checkLen(what string, s []float32, n int) {
	if len(s) < n {
		panic(fmt.Sprintf("kernels: %s has %d values, need %d", what, len(s), n))
	}
}
