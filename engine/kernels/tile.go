package kernels

import "fmt"

// variant names one implementation of the hot loops.
type variant uint8

const (
	varGo     variant = iota // portable Go, any CPU
	varAVX2                  // AVX2 + FMA assembly
	varAVX512                // AVX-512 F/BW assembly
)

func (v variant) String() string {
	switch v {
	case varGo:
		return "go"
	case varAVX2:
		return "avx2"
	case varAVX512:
		return "avx512"
	}
	return fmt.Sprintf("variant(%d)", uint8(v))
}

// active is the implementation in use: the best one the CPU supports, chosen
// once at start-up (bestVariant). Tests switch it with setVariant while no
// kernel runs; nothing else writes it.
var active = bestVariant()

// Tile flags: what the microkernel does with the tile it computed.
const (
	flagStore = 0      // C = A·B
	flagAcc   = 1 << 0 // C += A·B
	flagBias  = 1 << 1 // also add bias[column]
)

// tileArgs describes one microkernel call: C[mr × ncols] (+)= A[mr × k] ·
// B[k × ncols], where B is np consecutive 64-column panels. mr is at most 6,
// or 8 for contiguous pre-packed panels (prefetch > 0): 16-bit or dp ones,
// which the AVX-512 variant runs in one pass over B, or quantized ones,
// which the AVX2 quantized kernels do (on the AVX2 and AVX-512 variants);
// the others run them as 6 + 2 rows.
//
// All offsets and strides count elements. A row r is a[aoff+r*lda:][:k];
// B k-row i of panel p starts at boff + p*pstride + i*ldb and holds 64
// values (fp32 in bf, or interleaved bf16 in bh); C row r column j is
// c[coff + r*ldc + j]; bias column j is bias[biasoff+j]. Panels hold 64
// columns except that the last may be partial: (np-1)*64 < ncols <= np*64.
//
// The k-rows are summed in sum blocks of kb (the last may be shorter; kb
// 0 means one block of all k): each block from zero in one accumulator per
// output, then added to C: the first block as flags say, the later ones
// with flagAcc alone. So one call gives C the bits of one call per block.
type tileArgs struct {
	mr, k, kb          int
	a                  []float32
	aoff, lda          int
	bf                 []float32
	bh                 []uint16
	f16                bool // bh holds f16 in natural column order (else interleaved bf16)
	boff, ldb, pstride int
	np, ncols          int
	c                  []float32
	coff, ldc          int
	flags              int
	bias               []float32
	biasoff            int
	prefetch           int // > 0: B is pre-packed panels read in place (bblock.prefetch); prefetch this many bytes ahead
	q                  qArgs
	// dp: a and bf hold bf16 pairs (dp.go), k and kb count pairs, and
	// the products run on the bf16 dot-product unit.
	dp bool
}

// qArgs describe B as Q8 or Q4 panels read in place (q8 or q4 set; bf
// and bh are then nil): k-row i of panel p holds 64 weights at element
// boff + p*pstride + i*ldb (int8 in q8; two a byte in q4, so at byte half
// that), and the scales of the block holding k-row i, 64 fp16 values,
// are at soff + p*sstride + ((k0+i)/32)*64 in s: k0 (< 32) is the
// position of k-row 0 within its block of 32.
type qArgs struct {
	q8            []int8
	q4            []byte
	s             []uint16
	soff, sstride int
	k0            int
}

// quantized reports whether the tile's B is quantized panels.
func (q *qArgs) quantized() bool { return q.q8 != nil || q.q4 != nil }

// debugChecks makes tile verify every access of t against its slices before
// the assembly runs. Tests turn it on; the kernels themselves do not check.
var debugChecks = false

// tile runs one microkernel call with the active implementation.
func tile(t *tileArgs) {
	if debugChecks {
		t.check()
	}
	if t.mr > 6 && !(active == varAVX512 && (t.bh != nil || t.dp) || t.q.quantized()) {
		// Six rows, then the rest.
		u := *t
		u.mr = 6
		tile(&u)
		u.mr = t.mr - 6
		u.aoff += 6 * t.lda
		u.coff += 6 * t.ldc
		tile(&u)
		return
	}
	if t.dp && active != varAVX512 {
		// Only the AVX-512 variant has the bf16 dot-product kernels; the
		// others (a test that forces one) emulate them exactly.
		tileGo(t)
		return
	}
	switch {
	case t.q.quantized(): // only where hasQuantKernels: the AVX2 kernels
		tile256(t)
	case active == varAVX512:
		tile512(t)
	case active == varAVX2:
		tile256(t)
	default:
		tileGo(t)
	}
}

// lastPanel62 splits the partial last panel (rem columns after full whole
// ones) of an 8-row tile into its first 6 rows and its last 2, for the
// kernels of up to 6 rows.
func (t *tileArgs) lastPanel62(full, rem int) (six, two tileArgs) {
	six = *t
	six.np, six.ncols, six.mr = 1, rem, 6
	six.boff += full * t.pstride
	six.q.soff += full * t.q.sstride // quantized panels' scales
	six.coff += full * panelW
	six.biasoff += full * panelW
	two = six
	two.mr = 2
	two.aoff += 6 * t.lda
	two.coff += 6 * t.ldc
	return six, two
}

// sumBlock is the length of t's sum blocks, at least 1.
func (t *tileArgs) sumBlock() int {
	if t.kb <= 0 || t.kb > t.k {
		return max(t.k, 1)
	}
	return t.kb
}

func (t *tileArgs) check() {
	bad := func(what string, need, have int) {
		panic(fmt.Sprintf("kernels: tile %s out of range: need %d, have %d (%+v)", what, need, have,
			struct{ mr, k, np, ncols int }{t.mr, t.k, t.np, t.ncols}))
	}
	if t.mr < 1 || t.mr > 8 || t.mr > 6 && (t.mr != 8 || t.prefetch == 0 || t.bh == nil && !t.dp && !t.q.quantized()) || t.np < 1 || t.ncols <= (t.np-1)*panelW || t.ncols > t.np*panelW || t.kb < 0 {
		panic(fmt.Sprintf("kernels: bad tile mr=%d np=%d ncols=%d kb=%d", t.mr, t.np, t.ncols, t.kb))
	}
	if t.k > 0 {
		if n := t.aoff + (t.mr-1)*t.lda + t.k; n > len(t.a) {
			bad("A", n, len(t.a))
		}
		nb := len(t.bf)
		if t.bh != nil {
			nb = len(t.bh)
		}
		if q := &t.q; q.quantized() {
			nb = len(q.q8) + 2*len(q.q4)
			if !hasQuantKernels() {
				panic("kernels: quantized panels in place need the AVX2 kernels")
			}
			if n := q.soff + (t.np-1)*q.sstride + (q.k0+t.k-1)/qBlock*panelW + panelW; n > len(q.s) {
				bad("quantized scales", n, len(q.s))
			}
		}
		if n := t.boff + (t.np-1)*t.pstride + (t.k-1)*t.ldb + panelW; n > nb {
			bad("B", n, nb)
		}
	}
	if n := t.coff + (t.mr-1)*t.ldc + t.ncols; n > len(t.c) {
		bad("C", n, len(t.c))
	}
	if t.flags&flagBias != 0 {
		if n := t.biasoff + t.ncols; n > len(t.bias) {
			bad("bias", n, len(t.bias))
		}
	}
}

// tileGo is the portable microkernel: the same contract as the assembly,
// one panel at a time with a 6×64 accumulator block; for dp tiles the
// emulation of the bf16 dot-product kernels (dpWord).
func tileGo(t *tileArgs) {
	var acc [6][panelW]float32
	var brow [panelW]float32
	kb := t.sumBlock()
	for p := 0; p < t.np; p++ {
		nc := min(panelW, t.ncols-p*panelW)
		bbase := t.boff + p*t.pstride
		flags := t.flags
		for k0 := 0; k0 == 0 || k0 < t.k; k0 += kb {
			for r := 0; r < t.mr; r++ {
				acc[r] = [panelW]float32{}
			}
			for i := k0; i < min(k0+kb, t.k); i++ {
				o := bbase + i*t.ldb
				if t.bh != nil && t.f16 {
					tab := f16Table()
					for w, v := range t.bh[o : o+panelW] {
						brow[w] = tab[v]
					}
				} else if t.bh != nil {
					src := t.bh[o : o+panelW]
					for w, v := range src {
						brow[bf16Col(w)] = BF16ToF32(v)
					}
				} else {
					copy(brow[:nc], t.bf[o:o+nc])
				}
				for r := 0; r < t.mr; r++ {
					av := t.a[t.aoff+r*t.lda+i]
					ar := &acc[r]
					if t.dp { // av and brow hold bf16 pairs
						for j := range nc {
							ar[j] = dpWord(ar[j], av, brow[j])
						}
						continue
					}
					for j := range nc {
						ar[j] += av * brow[j]
					}
				}
			}
			t.flush(acc[:t.mr], p, nc, flags)
			flags = flagAcc
		}
	}
}

// flush ends a sum block of the Go tiles: row r of panel p's first nc
// columns of C becomes acc[r] (+ C as flags say) (+ bias), added in the
// kernels' order.
func (t *tileArgs) flush(acc [][panelW]float32, p, nc, flags int) {
	for r := range acc {
		crow := t.c[t.coff+r*t.ldc+p*panelW:][:nc]
		ar := acc[r][:nc]
		if flags&flagAcc != 0 {
			for j := range crow {
				ar[j] += crow[j]
			}
		}
		if flags&flagBias != 0 {
			b := t.bias[t.biasoff+p*panelW:][:nc]
			for j := range b {
				ar[j] += b[j]
			}
		}
		copy(crow, ar)
	}
}
