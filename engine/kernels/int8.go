package kernels

import (
	"math"
	"sync"

	"github.com/artgo/art/internal/parallel"
)

// UnitInt8's products of Q8 and Q4 weights (Linear, forward only; a Q4
// weight's values n−8 are int8 values too): each row of
// activations is rounded to Q8_0 blocks as llama.cpp rounds them before
// its own int8 products: per block of 32 values x, d = max|x|/127 and
// q = round(x·(127/max|x|)) to nearest even, |q| ≤ 127, all in fp32. A
// block's products with a column's 32 weights are then summed exactly in
// int32 (Σ w·q, |Σ| < 2^24), and the output adds, block after block from
// zero,
//
//	acc = acc + float32(Σ w·q) · (dw·d)
//
// with dw the column's fp16 scale, each · and + rounded to fp32 in that
// order (not fused). Every kernel and row count computes exactly that, so
// a row's logprobs do not depend on its batch and sampler and trainer
// agree bit for bit, as on the other units. A block whose activations
// include a NaN or an infinity gives NaN outputs; one whose activations
// are all at most 2^-100 in magnitude counts as zero (127/max|x| would
// overflow fp32 below ~4e-37).
//
// The input gradient (LinearBackwardInput) of Q8 and Q4 weights on
// UnitInt8 runs on the bf16 dot products where the CPU has them (else
// exact fp32): the dequantized weights and the output gradient rounded to
// bf16, as UnitBF16 rounds 16-bit weights' gradients. It is not a sampled
// logprob, so sampler and trainer still agree; rounding it to 8 bits
// would only add noise.

// q8Acts is A rounded to Q8_0 blocks: row m's values at q[m·K:], its
// blocks' scales d and corrections −128·Σq (what the kernels' unsigned
// weights, w+128, add beyond Σ w·q) at m·K/32.
type q8Acts struct {
	q    []int8
	d    []float32
	corr []int32
}

var actsPool sync.Pool

// getActs returns pooled room for M rows of K (a multiple of 32).
func getActs(M, K int) *q8Acts {
	n, nb := M*K, M*K/qBlock
	x, _ := actsPool.Get().(*q8Acts)
	if x == nil || cap(x.q) < n {
		x = &q8Acts{q: make([]int8, n), d: make([]float32, nb), corr: make([]int32, nb)}
	}
	x.q, x.d, x.corr = x.q[:n], x.d[:nb], x.corr[:nb]
	return x
}

// quantizeActs rounds rows × K values of src (row stride lds) into x, on
// all cores when there are many.
func quantizeActs(x *q8Acts, src []float32, rows, K, lds int) {
	nb := K / qBlock
	parallel.For(rows, max(1, (1<<18)/K), func(lo, hi int) {
		for m := lo; m < hi; m++ {
			row := src[m*lds : m*lds+K]
			q, d, corr := x.q[m*K:(m+1)*K], x.d[m*nb:(m+1)*nb], x.corr[m*nb:(m+1)*nb]
			for g := 0; g < nb; g++ {
				g += quantActsRow(q[g*qBlock:], d[g:], corr[g:], row[g*qBlock:])
				if g < nb {
					d[g], corr[g] = quantizeActBlock(q[g*qBlock:][:qBlock], row[g*qBlock:][:qBlock])
				}
			}
		}
	})
}

// tinyAct is the largest magnitude of a block of activations that
// counts as zero: 2^-100.
var tinyAct = float32(math.Ldexp(1, -100))

// quantizeActBlock rounds one block of 32 activations to q and returns
// its scale and correction.
func quantizeActBlock(q []int8, x []float32) (d float32, corr int32) {
	var amax float32
	for _, v := range x {
		amax = max(amax, float32(math.Abs(float64(v))))
	}
	if amax <= tinyAct || math.IsNaN(float64(amax)) || math.IsInf(float64(amax), 0) {
		clear(q)
		if amax <= tinyAct {
			return 0, 0
		}
		return float32(math.NaN()), 0
	}
	inv := 127 / amax
	var sum int32
	for i, v := range x {
		r := int8(math.RoundToEven(float64(v * inv)))
		q[i] = r
		sum += int32(r)
	}
	return amax / 127, -128 * sum
}

// toI8 makes j (Linear over Q8 or Q4 panels on UnitInt8) read A rounded to
// Q8_0 blocks: into a pooled buffer, or the one shared already made for
// the same input (an earlier job of LinearMulti).
func (j *job) toI8(shared *job) {
	if shared != nil && shared.qa != nil && shared.src == &j.a[0] && shared.M == j.M && shared.K == j.K && shared.srcLda == j.lda {
		j.qa, j.src, j.srcLda = shared.qa, shared.src, shared.srcLda
		return
	}
	j.qa, j.qaOwn = getActs(j.M, j.K), true
	quantizeActs(j.qa, j.a, j.M, j.K, j.lda)
	j.src, j.srcLda = &j.a[0], j.lda
}

// partI8 computes rows [m0, m1) and panels [p0, p1) of a UnitInt8 job:
// runs of panels that stay in L2 while groups of up to 3 rows read them
// (a decoding row streams each panel once). For more than one row, Q4
// panels are first widened to Q8 panels (the same values, n−8, and
// scales) in a scratch buffer, once per run; one row reads them in place
// where the kernels run (the same integer sums, so the same bits).
func (j *job) partI8(m0, m1, p0, p1 int) {
	ncp := max(1, min(p1-p0, streamL2/(j.K*panelW)))
	var scratch *[]int8
	if j.tp.q4 != nil && (m1-m0 > 1 || !hasI8()) {
		scratch = getQ8Scratch(ncp * j.K * panelW)
		defer q8ScratchPool.Put(scratch)
	}
	for jp := p0; jp < p1; jp += ncp {
		np := min(ncp, p1-jp)
		pk, base := j.tp, 0
		if scratch != nil {
			pk, base = q4AsQ8(*scratch, j.tp, jp, np), jp
		}
		for m := m0; m < m1; m += 3 {
			j.rowsI8(pk, base, m, min(3, m1-m), jp, np)
		}
	}
}

var q8ScratchPool sync.Pool

// getQ8Scratch returns pooled room for n int8 weights.
func getQ8Scratch(n int) *[]int8 {
	if b, ok := q8ScratchPool.Get().(*[]int8); ok && cap(*b) >= n {
		*b = (*b)[:n]
		return b
	}
	b := make([]int8, n)
	return &b
}

// q4AsQ8 widens Q4 panels [jp, jp+np) of p into dst as Q8 panels and
// returns them as panels (panel jp first), sharing p's scales.
func q4AsQ8(dst []int8, p *panels, jp, np int) *panels {
	K, nb := p.k, p.k/qBlock
	dst = dst[:np*K*panelW]
	rows := np * K // k-rows of 64 weights, an even number
	src := p.q4[jp*K*panelW/2:][:rows*panelW/2]
	done := q4ToQ8Done(dst, src, rows)
	for r := done; r < rows; r++ {
		in, out := src[r*panelW/2:][:panelW/2], dst[r*panelW:][:panelW]
		for c := range out {
			b, sh := q4Pos(c)
			out[c] = signedNibble(in[b], sh)
		}
	}
	return &panels{k: K, n: np * panelW, np: np, q8: dst, qs: p.qs[jp*nb*panelW:][:np*nb*panelW]}
}

// rowsI8 computes mr rows from m of panels [jp, jp+np) (panel jp of the
// job is panel jp−base of pk): whole panels straight into C (a Linear
// job's: stored, never accumulated), a last partial one through a
// scratch tile; then the bias.
func (j *job) rowsI8(pk *panels, base, m, mr, jp, np int) {
	direct := min(np, j.N/panelW-jp)
	if direct > 0 {
		j.callI8(pk, m, mr, jp-base, direct, j.c[m*j.ldc+jp*panelW:], j.ldc)
	}
	var tile [3 * panelW]float32
	for p := jp + direct; p < jp+np; p++ {
		j.callI8(pk, m, mr, p-base, 1, tile[:], panelW)
		cols := min(panelW, j.N-p*panelW)
		for r := range mr {
			copy(j.c[(m+r)*j.ldc+p*panelW:][:cols], tile[r*panelW:][:cols])
		}
	}
	if j.first&flagBias != 0 {
		c0, c1 := jp*panelW, min((jp+np)*panelW, j.N)
		for r := range mr {
			dst := j.c[(m+r)*j.ldc+c0 : (m+r)*j.ldc+c1]
			for i := range dst {
				dst[i] += j.bias[c0+i]
			}
		}
	}
}

// callI8 computes rows [m, m+mr) of Q8 panels [p, p+np) of pk, all of K,
// into c (row stride ldc, panel p's first column at c[0]).
func (j *job) callI8(pk *panels, m, mr, p, np int, c []float32, ldc int) {
	if !i8Asm(j.qa, m, mr, pk, p, np, j.K, c, ldc) {
		i8Go(j.qa, m, mr, pk, p, np, j.K, c, ldc)
	}
}

// i8Go is the kernels' arithmetic in Go, for CPUs without AVX512_VNNI
// (where the tests run UnitInt8 too).
func i8Go(x *q8Acts, m, mr int, pk *panels, p, np, K int, c []float32, ldc int) {
	nb := K / qBlock
	for r := range mr {
		q := x.q[(m+r)*K:][:K]
		for pp := range np {
			panel := pk.q8[(p+pp)*K*panelW:][:K*panelW]
			scales := pk.qs[(p+pp)*nb*panelW:][:nb*panelW]
			for col := range panelW {
				var acc float32
				for g := range nb {
					var dot int32
					for k := g * qBlock; k < (g+1)*qBlock; k++ {
						dot += int32(panel[k*panelW+col]) * int32(q[k])
					}
					sc := F16ToF32(scales[g*panelW+col]) * x.d[(m+r)*nb+g]
					acc += float32(float32(dot) * sc)
				}
				c[r*ldc+pp*panelW+col] = acc
			}
		}
	}
}

// qdpUnit reports whether m's input gradient runs on the bf16 dot
// products from its quantized panels (bPanelsQDPT): a Q8 or Q4 weight on
// UnitInt8, on a CPU with the bf16 unit.
func (m *Mat) qdpUnit() bool { return m.i8Unit() && hasDP() }

// packQDPT packs the B block of LinearBackwardInput on the bf16 dot
// products from quantized panels: pair-row i of panel q holds weight rows
// 2(pc+i) and 2(pc+i)+1, dequantized and rounded to a bf16 pair, of the
// weight columns col0.. (ncols of them, zero past). tmp (≥ 2·kc·64) takes
// the dequantized rows first.
func packQDPT(dst []float32, doff int, p *panels, tmp []float32, pc, kc, col0, ncols int) {
	packPanelsTQuant(tmp, 0, p, 2*pc, 2*kc, col0, ncols)
	for i := range kc {
		pairRows(dst[doff+i*panelW:][:panelW], tmp[2*i*panelW:][:panelW], tmp[(2*i+1)*panelW:][:panelW])
	}
}

// pairRows writes dst[j] = the bf16 pair (a[j], b[j]), as toPairs rounds.
func pairRows(dst, a, b []float32) {
	for j := pairRowsDone(dst, a, b); j < len(dst); j++ {
		dst[j] = bf16Pair(a[j], b[j])
	}
}
