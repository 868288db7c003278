package kernels

import (
	"math"
	"sync"
	"unsafe"

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
	// The first M/8·8 rows again in groups of 8 for the 8-row kernel
	// (where the CPU runs it; else nil): group g's quad i (k-rows 4i..4i+3)
	// of its row r at gq[8K·g+32i+4r], block b's scale and correction at
	// gd[8(nb·g+b)+r] and gc[…], so one pointer walks all 8 rows.
	gq []int8
	gd []float32
	gc []int32
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
	x.gq, x.gd, x.gc = x.gq[:0], x.gd[:0], x.gc[:0] // no groups until group; room kept
	return x
}

// group fills x's groups of 8 rows (gq, gd, gc) from its M rows of K.
func (x *q8Acts) group(M, K int) {
	G, nb := M/8, K/qBlock
	if G == 0 {
		return
	}
	n := G * 8 * K
	if cap(x.gq) < n {
		x.gq, x.gd, x.gc = make([]int8, n), make([]float32, n/qBlock), make([]int32, n/qBlock)
	}
	x.gq, x.gd, x.gc = x.gq[:n], x.gd[:n/qBlock], x.gc[:n/qBlock]
	quads := K / 4
	src := unsafe.Slice((*uint32)(unsafe.Pointer(&x.q[0])), len(x.q)/4)
	dst := unsafe.Slice((*uint32)(unsafe.Pointer(&x.gq[0])), n/4)
	for g := range G {
		gdst := dst[g*8*quads:][:8*quads]
		for r := range 8 {
			row := src[(8*g+r)*quads:][:quads]
			for i, v := range row {
				gdst[8*i+r] = v
			}
			for b := range nb {
				x.gd[8*(nb*g+b)+r] = x.d[(8*g+r)*nb+b]
				x.gc[8*(nb*g+b)+r] = x.corr[(8*g+r)*nb+b]
			}
		}
	}
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
	if hasI8() && useI8M8 && j.M < i8GroupMaxM {
		j.qa.group(j.M, j.K)
	}
	j.src, j.srcLda = &j.a[0], j.lda
}

// useI8M8 and useI8M6 enable the 8-row kernel (i8q8m8) and the 6-row one
// (i8q8m6t); benchmarks flip them for an A/B against the 3-row kernels in
// one process (BenchmarkI8Step).
var useI8M8, useI8M6 = true, true

// The 8-row kernel takes products of fewer than i8GroupMaxM rows (a
// decoding group: streaming the weights once, with the next block's loads
// under this one's sums, it beat the 6-row kernel; from L2, with a
// prompt's rows, the 6-row kernel did better: 750-800 GOP/s against
// 440-720 at 512 rows), at any K: an MLP's down projection (K = 4864,
// whose 8 rows of activations, 38 KiB, are read again for every panel)
// took 0.82× (Q8) and 0.74× (Q4) the time of 6 + 2 rows (24 cold
// products, alternated in one process).
const i8GroupMaxM = 16

// partI8 computes rows [m0, m1) and panels [p0, p1) of a UnitInt8 job:
// runs of panels that stay in L2 while groups of rows (i8Rows) read them
// (a decoding row or group of 8 streams each panel once). A row or a
// group of 8 reads Q4 panels in place where the kernels run; other rows
// read them widened to Q8 panels (the same values, n−8, and scales) in a
// scratch buffer, once per run. Every kernel makes the same integer sums,
// so the same bits.
func (j *job) partI8(m0, m1, p0, p1 int) {
	ncp := max(1, min(p1-p0, streamL2/(j.K*panelW)))
	grouped := len(j.qa.gq) / j.K // rows
	allGrouped := m0%8 == 0 && (m1-m0)%8 == 0 && m1 <= grouped
	var scratch *[]int8
	if j.tp.q4 != nil && (!hasI8() || m1-m0 > 1 && !allGrouped) {
		scratch = getQ8Scratch(ncp * j.K * panelW)
		defer q8ScratchPool.Put(scratch)
	}
	for jp := p0; jp < p1; jp += ncp {
		np := min(ncp, p1-jp)
		wide, base := j.tp, 0 // Q8 panels: the job's, or Q4 ones widened
		if scratch != nil {
			wide, base = q4AsQ8(*scratch, j.tp, jp, np), jp
		}
		for m := m0; m < m1; {
			mr := i8Rows(m, m1, grouped)
			if mr == 8 {
				j.rowsI8(j.tp, 0, m, mr, jp, np)
			} else {
				j.rowsI8(wide, base, m, mr, jp, np)
			}
			m += mr
		}
	}
}

// i8Rows is how many rows from m (of rows up to m1) the next kernel call
// takes: 8 where they are one of A's groups (the first grouped rows, in
// eights), else 6 or up to 3, stopping at the next group.
func i8Rows(m, m1, grouped int) int {
	if m%8 == 0 && m+8 <= min(m1, grouped) {
		return 8
	}
	end := m1
	if next := (m + 8) &^ 7; next < grouped { // the next multiple of 8
		end = min(end, next)
	}
	if useI8M6 && end-m >= 6 {
		return 6
	}
	return min(3, end-m)
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

// q4AsQ8 widens Q4 panels [jp, jp+np) of p, in the int8 unit's order,
// into dst as Q8 panels in that order and returns them as panels (panel jp
// first), sharing p's scales.
func q4AsQ8(dst []int8, p *panels, jp, np int) *panels {
	if !p.vnni {
		panic("kernels: q4AsQ8 of Q4 panels not in the int8 unit's order")
	}
	K, nb := p.k, p.k/qBlock
	dst = dst[:np*K*panelW]
	rows := np * K // k-rows of 64 weights, whole quads (K is whole blocks)
	src := p.q4[jp*K*panelW/2:][:rows*panelW/2]
	done := q4ToQ8Done(dst, src, rows)
	for r := done; r < rows; r++ {
		in, quad := src[r/4*2*panelW:][:2*panelW], dst[r/4*4*panelW:][:4*panelW]
		for c := range panelW {
			b, sh := q4VnniPos(r%4, c)
			quad[vnniPos(r%4, c)] = int8(in[b]>>sh&15) - 8 ^ -128
		}
	}
	return &panels{k: K, n: np * panelW, np: np, q8: dst, vnni: true, qs: p.qs[jp*nb*panelW:][:np*nb*panelW]}
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
	for p := jp + direct; p < jp+np; p++ {
		// Declared here, not above: zeroing it for every call, when most
		// have no partial panel, cost 2 % of a decoding group's CPU (the
		// kernels' streams had evicted the stack's lines).
		var tile [8 * panelW]float32
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
// (where the tests run UnitInt8 too), over Q8 panels in the int8 unit's
// order.
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
						dot += int32(panel[vnniPos(k, col)]^-128) * int32(q[k])
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
