package main

import (
	"fmt"
	"path/filepath"
)

// writeQuant writes matmul_quant_amd64.s, the kernels over Q8 and Q4
// panels (blockwise 8- and 4-bit weights, see package kernels' quant.go).
// They live in a file of their own so the fp32/bf16/f16 kernels' file is
// unchanged by them.
func writeQuant(dir string) {
	var g gen
	g.raw(header)
	for _, dt := range []quantType{q8, q4} {
		kernel256q1(&g, dt)
		for mr := 2; mr <= 6; mr++ {
			kernel256q(&g, dt, mr)
		}
		kernel256qm8(&g, dt)
		widen256q(&g, dt)
		for mr := 1; mr <= 6; mr++ {
			kernel512q(&g, dt, mr)
		}
		kernel512qm8(&g, dt)
	}
	for _, dt := range []quantType{q8, q4} {
		packT256q(&g, dt)
	}
	packT256v(&g, q8)
	packT256v(&g, q4)
	write(filepath.Join(dir, "matmul_quant_amd64.s"), g.b.Bytes())
}

// quantType is a blockwise quantized panel format: a k-row of a panel is
// rowBytes bytes holding its 64 weights, and every block of 32 k-rows has
// 64 fp16 scales (128 bytes), one per column.
type quantType struct {
	name     string
	rowBytes int
	// groupOff is the byte offset, in a k-row, of the weights of the
	// 16-column group s.
	groupOff func(s int) int
	// load emits the 16 weights of group s of the k-row at displacement
	// d from BX as int32 values in register lo (its columns 0..7) and hi
	// (8..15).
	load func(g *gen, d int, lo, hi string)
	// loadHalf emits half h (columns 8h..8h+7) of that group alone, as
	// int32 values in register y.
	loadHalf func(g *gen, d, h int, y string)
}

var (
	// q8: int8 weights in natural column order.
	q8 = quantType{name: "q8", rowBytes: 64,
		groupOff: func(s int) int { return 16 * s },
		load: func(g *gen, d int, lo, hi string) {
			g.p("VPMOVSXBD %d(BX), %s", d, lo)
			g.p("VPMOVSXBD %d(BX), %s", d+8, hi)
		},
		loadHalf: func(g *gen, d, h int, y string) {
			g.p("VPMOVSXBD %d(BX), %s", d+8*h, y)
		}}
	// q4: two signed 4-bit weights a byte; byte 8s+i of a k-row holds
	// column 16s+i in its low nibble and 16s+8+i in its high one. One
	// sign-extending load serves both: the high nibble is the byte
	// shifted right 4 (arithmetic), the low one its last 4 bits moved to
	// the top and shifted back down.
	q4 = quantType{name: "q4", rowBytes: 32,
		groupOff: func(s int) int { return 8 * s },
		load: func(g *gen, d int, lo, hi string) {
			g.p("VPMOVSXBD %d(BX), %s", d, hi)
			g.p("VPSLLD $28, %s, %s", hi, lo)
			g.p("VPSRAD $28, %s, %s", lo, lo)
			g.p("VPSRAD $4, %s, %s", hi, hi)
		},
		loadHalf: func(g *gen, d, h int, y string) {
			g.p("VPMOVSXBD %d(BX), %s", d, y)
			if h == 0 {
				g.p("VPSLLD $28, %s, %s", y, y)
				g.p("VPSRAD $28, %s, %s", y, y)
			} else {
				g.p("VPSRAD $4, %s, %s", y, y)
			}
		}}
)

// prefetch emits the prefetches (prefetchRows) of the cache lines that
// start within k-row u of the unrolled loop, from BX.
func (dt quantType) prefetch(g *gen, u int) {
	for off := dt.rowBytes * u; off < dt.rowBytes*(u+1); off++ {
		if off%64 == 0 {
			prefetchRows(g, "BX", off, 64, 1)
		}
	}
}

// Argument frame of the quantized kernels (all 8-byte words):
//
//	a+0 lda+8 b+16 pstride+24 np+32 c+40 ldc+48 k+56 k0+64 flags+72 bias+80 s+88 sstride+96 kb+104
//
// b: the weights of k-row 0 of the first panel; k-rows are rowBytes apart,
// panels pstride bytes. s: the 64 fp16 scales of the block of 32 k-rows
// holding k-row 0; a block's scales are 128 bytes apart, panels' sstride
// bytes. k0 (0..31) is the position of k-row 0 within its block. kb is the
// sum block, as in kernelArgs: the rest is as kernelArgs too.
const quantArgs = 112

// quantLocals is the frame of a quantized kernel: fl-8(SP) the flags of
// the sum block, kl-16(SP) its length, pb-24(SP) and ps-32(SP) the panel's
// first weight and scale bytes, left-40(SP) the k-rows of the panel after
// the sum block, kq-48(SP) the position of the sum block's first k-row in
// its block of 32.
const quantLocals = 48

// kernel256q emits an mr×64 AVX2 microkernel over np quantized panels.
// Each weight becomes d·q in fp32 (q widened to int32, VCVTDQ2PS, VMULPS
// by the fp16 scale widened with VCVTPH2PS; exact), then runs the same
// FMA chain, sum blocks and epilogue as kernel256 on fp32 panels, so the
// results are bit for bit those of k256f32 on the dequantized weights.
//
// Registers: Y0..Y(2mr-1) accumulators of one 16-column group, Y12, Y13
// the weights of one k-row, Y14, Y15 broadcasts of A. Up to 5 rows the
// group's 16 scales sit in Y10, Y11 for a whole block of 32 k-rows; 6
// rows use every register, so each k-row widens its scales again into Y15
// (and broadcasts through Y14 alone). R10, R14 and R15 point at the sum
// block's A, weights and scales; within it CX counts the k-rows left in
// the current block of 32, R13 those after it, R12 points at the block's
// scales.
func kernel256q(g *gen, dt quantType, mr int) {
	name := fmt.Sprintf("k256%sm%d", dt.name, mr)
	g.textFrame(name, quantLocals, quantArgs, fmt.Sprintf("%s: C[%d×64] (+)= A·B over np panels, B %s (AVX2+FMA+F16C).", name, mr, dt.name))
	g.p("MOVQ lda+8(FP), R11")
	g.p("MOVQ np+32(FP), R9")
	g.p("MOVQ ldc+48(FP), R8")
	quantPointers(g)
	regScales := mr <= 5
	quantPanelStart(g)
	for s := 0; s < 4; s++ {
		sfx := fmt.Sprint(s)
		g.p("MOVQ R10, SI")
		if mr > 3 {
			g.p("LEAQ (SI)(R11*2), DI")
			g.p("ADDQ R11, DI")
		}
		g.p("LEAQ %d(R14), BX", dt.groupOff(s))
		g.p("LEAQ %d(R15), R12", 32*s)
		for i := 0; i < 2*mr; i++ {
			g.p("VXORPS Y%d, Y%d, Y%d", i, i, i)
		}
		firstScaleBlock(g, sfx)
		bc := 0
		body := func(u int) {
			if s == 0 {
				dt.prefetch(g, u)
			}
			dt.load(g, dt.rowBytes*u, "Y12", "Y13")
			for h, y := range []string{"Y12", "Y13"} {
				g.p("VCVTDQ2PS %s, %s", y, y)
				if regScales {
					g.p("VMULPS Y%d, %s, %s", 10+h, y, y)
				} else {
					g.p("VCVTPH2PS %d(R12), Y15", 16*h)
					g.p("VMULPS Y15, %s, %s", y, y)
				}
			}
			for r := 0; r < mr; r++ {
				y := "Y14"
				if regScales && bc%2 == 1 {
					y = "Y15"
				}
				bc++
				g.p("VBROADCASTSS %s, %s", aRow(r, 4*u), y)
				g.p("VFMADD231PS Y12, %s, Y%d", y, 2*r)
				g.p("VFMADD231PS Y13, %s, Y%d", y, 2*r+1)
			}
		}
		g.label("sblock" + sfx)
		if regScales {
			g.p("VCVTPH2PS (R12), Y10")
			g.p("VCVTPH2PS 16(R12), Y11")
		}
		dt.rows(g, mr, sfx, body)
		var outs []accOut
		for r := 0; r < mr; r++ {
			outs = append(outs, accOut{r, 2 * r, 64 * s}, accOut{r, 2*r + 1, 64*s + 32})
		}
		epilogue256(g, mr, sfx, "fl-8(SP)", outs)
	}
	quantBlockEnd(g, dt, "R9")
}

// quantM8Start emits the start of the 8-row quantized kernels (AVX2 and
// AVX-512): R11 = lda, np and the prefetch distance pd (one sum block of
// k-rows) in their locals, then quantPanelStart.
func quantM8Start(g *gen, dt quantType) {
	g.p("MOVQ lda+8(FP), R11")
	g.p("MOVQ np+32(FP), CX")
	g.p("MOVQ CX, np-56(SP)")
	g.p("MOVQ kb+104(FP), CX")
	g.p("IMULQ $%d, CX", dt.rowBytes)
	g.p("MOVQ CX, pd-64(SP)")
	quantPointers(g)
	quantPanelStart(g)
}

// aRows8 points SI, DI and R9 at rows 0, 3 and 6 of the sum block's A
// (from R10; aRow).
func aRows8(g *gen) {
	g.p("MOVQ R10, SI")
	g.p("LEAQ (SI)(R11*2), DI")
	g.p("ADDQ R11, DI")
	g.p("LEAQ (DI)(R11*2), R9")
	g.p("ADDQ R11, R9")
}

// kernel256qm8 emits the 8-row kernel k256{q8,q4}m8 for a decoding group
// of eight sequences: eight passes over each sum block, pass p computing
// eight columns of all eight rows with kernel256q's arithmetic (each weight
// d·q, exact, then one FMA chain per output), so each weight is widened
// once for the eight rows instead of once in the six-row pass and again in
// the two-row one, with the other kernels' bits. Every pass prefetches its
// share of the lines of the panel's next sum block into L2, so the weights
// stream in under all of the compute; called over whole panels (all of K),
// the block after a panel's last is the next panel's first. (For 16-bit
// panels an 8×8 tile, one broadcast per FMA, measured slower than 6 + 2
// rows with kernel256's next-block prefetch; dequantizing twice tips the
// balance here: a decoding group of 8 ran 4–25 % faster at q8 and q4.)
//
// Registers: Y0..Y7 the accumulators of rows 0..7, Y8 the weights, Y9 and
// Y10 broadcasts, Y11 the pass's eight scales of the current block of 32
// k-rows. A rows from SI, DI and R9 (aRow); R8 holds the prefetch distance
// in the k-loop and ldc in the epilogue; np counts down in a local. R10,
// R14, R15, R12, R13 and CX as in kernel256q.
func kernel256qm8(g *gen, dt quantType) {
	const mr = 8
	name := "k256" + dt.name + "m8"
	g.textFrame(name, quantLocals+16, quantArgs, fmt.Sprintf("%s: C[8×64] (+)= A·B over np panels, B %s, one pass over the weights for 8 rows (AVX2+FMA+F16C).", name, dt.name))
	quantM8Start(g, dt)
	lines := 4 * dt.rowBytes / 64 // cache lines of four k-rows
	for p := 0; p < 8; p++ {
		sfx := fmt.Sprint(p)
		s, h := p/2, p%2 // 16-column group, and its half
		boff := dt.groupOff(s)
		aRows8(g)
		g.p("LEAQ %d(R14), BX", boff)
		g.p("LEAQ %d(R15), R12", 32*s+16*h)
		g.p("MOVQ pd-64(SP), R8")
		for r := 0; r < mr; r++ {
			g.p("VXORPS Y%d, Y%d, Y%d", r, r, r)
		}
		firstScaleBlock(g, sfx)
		body := func(u int) {
			if u == 0 && p < lines {
				// Line p of the next sum block's four k-rows.
				g.p("PREFETCHT1 %d(BX)(R8*1)", 64*p-boff)
			}
			if p == 0 {
				dt.prefetch(g, u)
			}
			dt.loadHalf(g, dt.rowBytes*u, h, "Y8")
			g.p("VCVTDQ2PS Y8, Y8")
			g.p("VMULPS Y11, Y8, Y8")
			for r := 0; r < mr; r++ {
				y := 9 + r%2
				g.p("VBROADCASTSS %s, Y%d", aRow(r, 4*u), y)
				g.p("VFMADD231PS Y8, Y%d, Y%d", y, r)
			}
		}
		g.label("sblock" + sfx)
		g.p("VCVTPH2PS (R12), Y11")
		dt.rows(g, mr, sfx, body)
		g.p("MOVQ ldc+48(FP), R8")
		var outs []accOut
		for r := 0; r < mr; r++ {
			outs = append(outs, accOut{r, r, 4 * (16*s + 8*h)})
		}
		epilogue256(g, mr, sfx, "fl-8(SP)", outs)
	}
	quantBlockEnd(g, dt, "np-56(SP)")
}

// rows emits a quantized kernel's loop over the k-rows of a sum block
// from label sblock (the caller's scales of the block of 32 k-rows set
// there): body per k-row (kloop256), BX moving on by the k-rows, then on
// to the next block of 32 (nextScaleBlock) or to label epilogue.
func (dt quantType) rows(g *gen, mr int, sfx string, body func(u int)) {
	kloop256(g, mr, sfx, "sblockend"+sfx, body,
		func() { g.p("ADDQ $%d, BX", 4*dt.rowBytes) },
		func() { g.p("ADDQ $%d, BX", dt.rowBytes) })
	nextScaleBlock(g, sfx)
	g.label("epilogue" + sfx)
}

// quantPointers emits the quantized kernels' C (DX), bias (AX), weights
// (R14, and pb-24(SP)) and scales (R15, and ps-32(SP)) from their args.
func quantPointers(g *gen) {
	g.p("MOVQ c+40(FP), DX")
	g.p("MOVQ bias+80(FP), AX")
	g.p("MOVQ b+16(FP), R14")
	g.p("MOVQ R14, pb-24(SP)")
	g.p("MOVQ s+88(FP), R15")
	g.p("MOVQ R15, ps-32(SP)")
}

// quantPanelStart emits the start of a panel and of each of its sum
// blocks in the quantized kernels: R10, R14 and R15 at the panel's A,
// weights and scales, the flags and k-row counts in their locals, then
// (label block) CX = kl-16(SP) = the sum block's length, taken from
// left-40(SP).
func quantPanelStart(g *gen) {
	g.label("panel")
	g.p("MOVQ a+0(FP), R10")
	g.p("MOVQ pb-24(SP), R14")
	g.p("MOVQ ps-32(SP), R15")
	g.p("MOVQ flags+72(FP), CX")
	g.p("MOVQ CX, fl-8(SP)")
	g.p("MOVQ k0+64(FP), CX")
	g.p("MOVQ CX, kq-48(SP)")
	g.p("MOVQ k+56(FP), CX")
	g.p("MOVQ CX, left-40(SP)")
	g.label("block")
	g.p("MOVQ left-40(SP), CX")
	g.p("CMPQ CX, kb+104(FP)")
	g.p("JLE blen")
	g.p("MOVQ kb+104(FP), CX")
	g.label("blen")
	g.p("SUBQ CX, left-40(SP)")
	g.p("MOVQ CX, kl-16(SP)")
}

// firstScaleBlock emits CX = the k-rows of the sum block in its first
// block of 32 (min(32 - kq, kl)) and R13 = those after it.
func firstScaleBlock(g *gen, sfx string) {
	g.p("MOVQ kl-16(SP), R13")
	g.p("MOVQ $32, CX")
	g.p("SUBQ kq-48(SP), CX")
	takeRows(g, "first"+sfx)
}

// takeRows emits CX = min(CX, R13) and R13 -= CX: the k-rows of the next
// block of 32 and those after it (label names the skip).
func takeRows(g *gen, label string) {
	g.p("CMPQ CX, R13")
	g.p("JLE " + label)
	g.p("MOVQ R13, CX")
	g.label(label)
	g.p("SUBQ CX, R13")
}

// nextScaleBlock emits label sblockend: on to the next block of 32 k-rows
// (or fewer at the end) at sblock, R12 at its scales, or to epilogue when
// the sum block is done.
func nextScaleBlock(g *gen, sfx string) {
	g.label("sblockend" + sfx)
	g.p("TESTQ R13, R13")
	g.p("JEQ epilogue" + sfx)
	g.p("ADDQ $128, R12")
	g.p("MOVQ $32, CX")
	takeRows(g, "next"+sfx)
	g.p("JMP sblock" + sfx)
}

// quantBlockEnd emits the end of a sum block of the quantized kernels: the
// later sum blocks of the panel add to C; A, the weights and the scales
// move on by the block; then the next panel, np counting down in panels
// (a register or a local).
func quantBlockEnd(g *gen, dt quantType, panels string) {
	g.p("MOVQ $1, fl-8(SP)")
	g.p("MOVQ kl-16(SP), CX")
	g.p("LEAQ (R10)(CX*4), R10")
	g.p("MOVQ CX, R13")
	g.p("IMULQ $%d, R13", dt.rowBytes)
	g.p("ADDQ R13, R14")
	g.p("ADDQ kq-48(SP), CX")
	g.p("MOVQ CX, R13")
	g.p("ANDQ $31, R13")
	g.p("MOVQ R13, kq-48(SP)")
	g.p("SHRQ $5, CX")
	g.p("SHLQ $7, CX")
	g.p("ADDQ CX, R15")
	g.p("CMPQ left-40(SP), $0")
	g.p("JNE block")
	g.p("MOVQ pb-24(SP), R14")
	g.p("ADDQ pstride+24(FP), R14")
	g.p("MOVQ R14, pb-24(SP)")
	g.p("MOVQ ps-32(SP), R15")
	g.p("ADDQ sstride+96(FP), R15")
	g.p("MOVQ R15, ps-32(SP)")
	g.p("ADDQ $256, DX")
	g.p("ADDQ $256, AX")
	g.p("DECQ %s", panels)
	g.p("JNE panel")
	g.ret()
}

// quantLocals1 is the frame of the one-row kernel: quantLocals, then the
// 64 scales of the current block of 32 k-rows widened to fp32 (256 bytes,
// from -quantLocals1(SP)).
const quantLocals1 = quantLocals + 256

// kernel256q1 emits the one-row (decoding) kernel k256{q8,q4}m1: the
// arithmetic of kernel256q (each weight d·q, exact, then one FMA chain per
// output, sum blocks, epilogue), so the same bits, but all 64 columns of a
// k-row in one pass. kernel256q's one-row pass has two accumulators, so its
// FMA chain (four cycles a k-row) bounds it at 16 weights per four cycles,
// and it reads each panel four times; here eight accumulators keep both FMA
// units busy. The scales that kernel256q keeps in registers live in a
// stack buffer, widened once per block of 32 k-rows: VMULPS reads them as
// memory operands.
//
// Registers: Y0..Y7 accumulators (column group s, half h at 2s+h), Y8 the
// broadcast of A, Y9..Y14 weights in flight. R10, R14, R15, R12, R13 and
// CX as in kernel256q.
func kernel256q1(g *gen, dt quantType) {
	name := "k256" + dt.name + "m1"
	g.textFrame(name, quantLocals1, quantArgs, fmt.Sprintf("%s: C[1×64] (+)= A·B over np panels, B %s (AVX2+FMA+F16C).", name, dt.name))
	scale := func(i int) string { return fmt.Sprintf("sc-%d(SP)", quantLocals1-32*i) }
	g.p("MOVQ np+32(FP), R9")
	quantPointers(g)
	quantPanelStart(g)
	g.p("MOVQ R10, SI")
	g.p("MOVQ R14, BX")
	g.p("MOVQ R15, R12")
	for i := 0; i < 8; i++ {
		g.p("VXORPS Y%d, Y%d, Y%d", i, i, i)
	}
	firstScaleBlock(g, "")
	tmp := 0
	next := func() string {
		y := fmt.Sprintf("Y%d", 9+tmp%6)
		tmp++
		return y
	}
	body := func(u int) {
		dt.prefetch(g, u)
		g.p("VBROADCASTSS %s, Y8", aRow(0, 4*u))
		for s := 0; s < 4; s++ {
			lo, hi := next(), next()
			dt.load(g, dt.rowBytes*u+dt.groupOff(s), lo, hi)
			for h, y := range []string{lo, hi} {
				g.p("VCVTDQ2PS %s, %s", y, y)
				g.p("VMULPS %s, %s, %s", scale(2*s+h), y, y)
				g.p("VFMADD231PS %s, Y8, Y%d", y, 2*s+h)
			}
		}
	}
	g.label("sblock")
	for i := 0; i < 8; i++ {
		g.p("VCVTPH2PS %d(R12), Y9", 16*i)
		g.p("VMOVUPS Y9, %s", scale(i))
	}
	dt.rows(g, 1, "", body)
	var outs []accOut
	for i := 0; i < 8; i++ {
		outs = append(outs, accOut{0, i, 32 * i})
	}
	epilogue256(g, 1, "", "fl-8(SP)", outs)
	quantBlockEnd(g, dt, "R9")
}

// widen256q emits widen{Q8,Q4}_256(dst *float32, q *T, s *uint16, rows, k0
// int): rows k-rows of a quantized panel (contiguous) to fp32 k-rows of 64
// (256 bytes), each value d·q with d the fp16 scale of its column in the
// block of 32 k-rows; s points at the 64 scales of the block holding
// k-row 0, and k0 (0..31) is that row's position in it. The blocked path
// (many rows) widens a block of panels so before the fp32 kernels run.
func widen256q(g *gen, dt quantType) {
	name := "widen" + map[string]string{"q8": "Q8", "q4": "Q4"}[dt.name] + "_256"
	g.text(name, 40, name+": quantized panel k-rows to fp32 k-rows (AVX2+F16C).")
	g.p("MOVQ dst+0(FP), DI")
	g.p("MOVQ q+8(FP), BX")
	g.p("MOVQ s+16(FP), DX")
	g.p("MOVQ rows+24(FP), CX")
	g.p("MOVQ $32, SI")
	g.p("SUBQ k0+32(FP), SI")
	g.label("block")
	// SI = k-rows of this block to do: min(SI, CX).
	g.p("CMPQ SI, CX")
	g.p("JLE widen")
	g.p("MOVQ CX, SI")
	g.label("widen")
	g.p("SUBQ SI, CX")
	for i := 0; i < 8; i++ {
		g.p("VCVTPH2PS %d(DX), Y%d", 16*i, 8+i)
	}
	g.label("row")
	for s := 0; s < 4; s++ {
		dt.load(g, dt.groupOff(s), fmt.Sprintf("Y%d", 2*s), fmt.Sprintf("Y%d", 2*s+1))
		for h := 0; h < 2; h++ {
			y := 2*s + h
			g.p("VCVTDQ2PS Y%d, Y%d", y, y)
			g.p("VMULPS Y%d, Y%d, Y%d", 8+2*s+h, y, y)
			g.p("VMOVUPS Y%d, %d(DI)", y, 64*s+32*h)
		}
	}
	g.p("ADDQ $%d, BX", dt.rowBytes)
	g.p("ADDQ $256, DI")
	g.p("DECQ SI")
	g.p("JNE row")
	g.p("TESTQ CX, CX")
	g.p("JEQ done")
	g.p("ADDQ $128, DX")
	g.p("MOVQ $32, SI")
	g.p("JMP block")
	g.label("done")
	g.ret()
}

// packT256q emits packT{Q8,Q4}_256, the transposing pack of
// LinearBackwardInput over quantized panels (package kernels'
// packPanelsTQuant): B = w, so k-row n of the packed block is weight row n,
// which in the Linear panels is column n%64 of panel n/64, 64 columns
// apart. Read k-row by k-row, 8 consecutive weight rows (columns of a
// panel) are 8 contiguous weights: each 8×8 tile of the panel is widened
// (one sign-extending load a k-row, VCVTDQ2PS, VMULPS by the 8 rows'
// scales of the block: d·q, exact, as widen256q and kernel256q compute
// it), transposed in registers (unpack, shuffle, 128-bit permute) and
// stored as 8 columns of 8 packed rows, so no read is strided.
//
//	packTQ8_256(dst *float32, q *int8, s *uint16, groups, kg int)
//	packTQ4_256(dst *float32, q *byte, s *uint16, groups, kg, high int)
//
// dst: packed row 0, column 0; rows 256 bytes apart. q: the weights of
// k-row k0 of the panel (k0 a multiple of 32) holding row 0, at its column
// (Q8) or at its 8-byte group (Q4: byte 8s+i holds column 16s+i in its low
// nibble and 16s+8+i in its high one; high = 1 when row 0 is a high
// nibble); k-rows are rowBytes apart. s: the 8 fp16 scales of rows 0..7 in
// the block of k0; blocks 128 bytes apart. groups: runs of 8 rows, all in
// the same panel; kg: 8-column groups (4 or 8: 32 or 64 columns).
//
// Registers: Y0..Y7 the tile's k-rows, then its transposition with
// Y8..Y14; Y15 the scales; R10 (Q4) is 1 while the rows are high nibbles.
func packT256q(g *gen, dt quantType) {
	upper := map[string]string{"q8": "Q8", "q4": "Q4"}[dt.name]
	name := "packT" + upper + "_256"
	args := 40
	if dt.name == "q4" {
		args = 48
	}
	g.text(name, args, name+": transposing pack of "+dt.name+" panels to fp32 rows of 64 (AVX2+F16C).")
	g.p("MOVQ dst+0(FP), DI")
	g.p("MOVQ q+8(FP), BX")
	g.p("MOVQ s+16(FP), DX")
	g.p("MOVQ groups+24(FP), R9")
	if dt.name == "q4" {
		g.p("MOVQ high+40(FP), R10")
	}
	g.p("TESTQ R9, R9")
	g.p("JEQ done")
	g.label("group")
	g.p("MOVQ BX, SI")
	g.p("MOVQ DX, R11")
	g.p("MOVQ DI, R8")
	g.p("XORQ R12, R12")
	g.label("kgroup")
	// A new block of 32 k-rows every 4 column groups: its scales.
	g.p("TESTQ $3, R12")
	g.p("JNE loads")
	g.p("VCVTPH2PS (R11), Y15")
	g.p("ADDQ $128, R11")
	g.label("loads")
	load := func() {
		for r := 0; r < 8; r++ {
			g.p("VPMOVSXBD %d(SI), Y%d", r*dt.rowBytes, r)
			if dt.name == "q4" {
				g.p("VPSLLD $28, Y%d, Y%d", r, r)
				g.p("VPSRAD $28, Y%d, Y%d", r, r)
			}
			g.p("VCVTDQ2PS Y%d, Y%d", r, r)
			g.p("VMULPS Y15, Y%d, Y%d", r, r)
		}
	}
	if dt.name == "q4" {
		// The high nibbles: the sign-extended byte shifted right 4.
		g.p("TESTQ R10, R10")
		g.p("JEQ lownib")
		for r := 0; r < 8; r++ {
			g.p("VPMOVSXBD %d(SI), Y%d", r*dt.rowBytes, r)
			g.p("VPSRAD $4, Y%d, Y%d", r, r)
			g.p("VCVTDQ2PS Y%d, Y%d", r, r)
			g.p("VMULPS Y15, Y%d, Y%d", r, r)
		}
		g.p("JMP transpose")
		g.label("lownib")
	}
	load()
	g.label("transpose")
	transpose8x8(g, "R8")
	g.p("ADDQ $%d, SI", 8*dt.rowBytes)
	g.p("ADDQ $32, R8")
	g.p("INCQ R12")
	g.p("CMPQ R12, kg+32(FP)")
	g.p("JNE kgroup")
	g.p("ADDQ $%d, DI", 8*256)
	g.p("ADDQ $16, DX")
	if dt.name == "q4" {
		// After the high nibbles of a byte group, the next group of bytes.
		g.p("TESTQ R10, R10")
		g.p("JEQ low")
		g.p("ADDQ $8, BX")
		g.label("low")
		g.p("XORQ $1, R10")
	} else {
		g.p("ADDQ $8, BX")
	}
	g.p("DECQ R9")
	g.p("JNE group")
	g.label("done")
	g.ret()
}

// packT256v emits packT{Q8,Q4}V_256, packT256q's pack over panels in the
// int8 unit's order (package kernels' vnniPos, q4VnniPos), for 8 weight
// rows: columns c..c+7 of a panel (c a multiple of 8), whose four k-rows
// of a quad are a dword each. Q8: columns c..c+3 in 16 bytes and c+4..c+7
// in the 16 bytes 64 further, each weight w+128; Q4: both in the same 16
// bytes, c..c+3 in the low nibbles and c+4..c+7 in the high ones, each
// weight q+8. Two quads (8 k-rows) of those are 4 loads (Q8) or 2 (Q4,
// then split); unpacking their dwords gives each row's 8 weights as a
// qword, which becomes its 8 packed values: back to the signed weight
// (Q8: XOR 0x80, Q4: less 8), sign-extended, converted and times the
// row's scale (d·q, exact, as packT256q computes it). No transposition
// is left to do: the order already holds each column's k-rows together.
//
//	packTQ8V_256(dst *float32, q *int8, s *uint16, kg int)
//	packTQ4V_256(dst *float32, q *byte, s *uint16, kg int)
//
// dst: packed row 0, column 0; rows 256 bytes apart. q: the 16 bytes of
// columns c..c+3 in the quad of k-row k0 (k0 a multiple of 32); quads 256
// (Q8) or 128 (Q4) bytes apart. s: the 8 fp16 scales of rows 0..7 in the
// block of k0; blocks 128 bytes apart. kg: 8-column groups (4 or 8: 32 or
// 64 columns).
//
// Registers: X0..X6 the loads and their unpacking, Y8..Y15 the rows'
// scales broadcast, X7 the sign bits (Q8) or 8s (Q4), X3 (Q4) 0x0f.
func packT256v(g *gen, dt quantType) {
	q4 := dt.name == "q4"
	upper, quad := "Q8", 256
	if q4 {
		upper, quad = "Q4", 128
	}
	name := "packT" + upper + "V_256"
	g.text(name, 32, name+": transposing pack of 8 rows of "+dt.name+" panels in the int8 unit's order to fp32 rows of 64 (AVX2+F16C).")
	g.p("MOVQ dst+0(FP), DI")
	g.p("MOVQ q+8(FP), SI")
	g.p("MOVQ s+16(FP), R11")
	g.p("MOVQ kg+24(FP), CX")
	if q4 {
		g.p("MOVL $0x08080808, AX")
	} else {
		g.p("MOVL $0x80808080, AX")
	}
	g.p("MOVD AX, X7")
	g.p("VPBROADCASTD X7, X7")
	if q4 {
		g.p("MOVL $0x0f0f0f0f, AX")
		g.p("MOVD AX, X3")
		g.p("VPBROADCASTD X3, X3")
	}
	g.p("XORQ R12, R12")
	g.label("kgroup")
	// A new block of 32 k-rows every 4 column groups: its scales.
	g.p("TESTQ $3, R12")
	g.p("JNE loads")
	for r := range 8 {
		g.p("VPBROADCASTW %d(R11), X%d", 2*r, 8+r)
		g.p("VCVTPH2PS X%d, Y%d", 8+r, 8+r)
	}
	g.p("ADDQ $128, R11")
	g.label("loads")
	if q4 { // X0, X1: columns c..c+3 of the two quads; X2, X4: c+4..c+7
		g.p("VMOVDQU (SI), X0")
		g.p("VMOVDQU %d(SI), X1", quad)
		g.p("VPSRLW $4, X0, X2")
		g.p("VPSRLW $4, X1, X4")
		for _, x := range []int{0, 1, 2, 4} {
			g.p("VPAND X3, X%d, X%d", x, x)
		}
		g.p("VPUNPCKLDQ X1, X0, X5") // rows 0, 1
		g.p("VPUNPCKHDQ X1, X0, X6") // rows 2, 3
		g.p("VPUNPCKLDQ X4, X2, X0") // rows 4, 5
		g.p("VPUNPCKHDQ X4, X2, X1") // rows 6, 7
	} else {
		g.p("VMOVDQU (SI), X0")
		g.p("VMOVDQU %d(SI), X1", quad)
		g.p("VMOVDQU 64(SI), X2")
		g.p("VMOVDQU %d(SI), X4", quad+64)
		g.p("VPUNPCKLDQ X1, X0, X5") // rows 0, 1
		g.p("VPUNPCKHDQ X1, X0, X6") // rows 2, 3
		g.p("VPUNPCKLDQ X4, X2, X0") // rows 4, 5
		g.p("VPUNPCKHDQ X4, X2, X1") // rows 6, 7
	}
	for i, x := range []int{5, 6, 0, 1} {
		if q4 {
			g.p("VPSUBB X7, X%d, X%d", x, x)
		} else {
			g.p("VPXOR X7, X%d, X%d", x, x)
		}
		g.p("VPSHUFD $0x4E, X%d, X2", x)
		g.p("VPMOVSXBD X%d, Y4", x)
		g.p("VPMOVSXBD X2, Y2")
		for h, y := range []int{4, 2} {
			r := 2*i + h
			g.p("VCVTDQ2PS Y%d, Y%d", y, y)
			g.p("VMULPS Y%d, Y%d, Y%d", 8+r, y, y)
			g.p("VMOVUPS Y%d, %d(DI)", y, 256*r)
		}
	}
	g.p("ADDQ $%d, SI", 2*quad)
	g.p("ADDQ $32, DI")
	g.p("INCQ R12")
	g.p("CMPQ R12, CX")
	g.p("JNE kgroup")
	g.ret()
}

// weights512 emits the weights of 16-column groups s and s+1 (s even) of
// the k-row at displacement d from BX as int32 values in zmm registers z0
// and z1. For q8, z0 and z1 are the groups in natural order. For q4 they
// are its nibbles as stored (quantType q4): one sign-extending load of the
// pair's 16 bytes, then z0 = the low nibbles (lanes 0..7: columns 16s+i,
// lanes 8..15: 16s+16+i) and z1 = the high ones (16s+8+i, 16s+24+i), the
// "nibble order" that scales512 and unnibble512 follow, which halves the
// instructions that unpack them.
func (dt quantType) weights512(g *gen, d, s, z0, z1 int) {
	if dt.name == "q8" {
		g.p("VPMOVSXBD %d(BX), Z%d", d+dt.groupOff(s), z0)
		g.p("VPMOVSXBD %d(BX), Z%d", d+dt.groupOff(s+1), z1)
		return
	}
	g.p("VPMOVSXBD %d(BX), Z%d", d+dt.groupOff(s), z1)
	g.p("VPSLLD $28, Z%d, Z%d", z1, z0)
	g.p("VPSRAD $28, Z%d, Z%d", z0, z0)
	g.p("VPSRAD $4, Z%d, Z%d", z1, z1)
}

// scales512 emits the fp32 scales of groups s and s+1 (s even) of the
// block of 32 k-rows at R12 into z0 and z1, in weights512's order (tmp: a
// scratch register).
func (dt quantType) scales512(g *gen, s, z0, z1, tmp int) {
	if dt.name == "q8" {
		g.p("VCVTPH2PS %d(R12), Z%d", 32*s, z0)
		g.p("VCVTPH2PS %d(R12), Z%d", 32*(s+1), z1)
		return
	}
	for h, z := range []int{z0, z1} {
		g.p("VCVTPH2PS %d(R12), Y%d", 32*s+16*h, z)
		g.p("VCVTPH2PS %d(R12), Y%d", 32*(s+1)+16*h, tmp)
		g.p("VINSERTF64X4 $1, Y%d, Z%d, Z%d", tmp, z, z)
	}
}

// unnibble512 emits, for q4, the accumulators z0, z1 of groups s, s+1 in
// weights512's order back into column order (z0: group s, z1: group s+1;
// t0, t1 scratch), so the epilogue adds and stores natural columns. Only
// the lanes move: every column's sum is unchanged.
func (dt quantType) unnibble512(g *gen, z0, z1, t0, t1 int) {
	if dt.name == "q8" {
		return
	}
	g.p("VSHUFF64X2 $0x44, Z%d, Z%d, Z%d", z1, z0, t0)
	g.p("VSHUFF64X2 $0xEE, Z%d, Z%d, Z%d", z1, z0, t1)
	g.p("VMOVAPS Z%d, Z%d", t0, z0)
	g.p("VMOVAPS Z%d, Z%d", t1, z1)
}

// kernel512q emits k512{q8,q4}m{mr} (mr 1..6), kernel256q on AVX-512
// registers: all 64 columns of a k-row in one pass, four accumulators a
// row (16 columns each), the 64 scales of the block of 32 k-rows widened
// once into Z24..Z27. Each output is the same chain as in kernel256q and
// kernel256q1 (d·q exact, one FMA a k-row in order, the same sum blocks and
// epilogue), so the bits are k256{q8,q4}m{mr}'s: only the number of columns
// an instruction carries differs (and, for q4, the lanes the columns take
// until the epilogue), which halves the instructions per weight.
//
// Registers: Z(4r+g) the accumulator of row r, group g; Z24..Z27 scales;
// Z30, Z31 broadcasts of A; the weights in flight rotate through the rest
// (Z28, Z29 and those the accumulators leave). R10, R14, R15, R12, R13 and
// CX as in kernel256q; R9 counts panels, R8 = ldc, R11 = lda.
func kernel512q(g *gen, dt quantType, mr int) {
	name := fmt.Sprintf("k512%sm%d", dt.name, mr)
	g.textFrame(name, quantLocals, quantArgs, fmt.Sprintf("%s: C[%d×64] (+)= A·B over np panels, B %s (AVX-512).", name, mr, dt.name))
	g.p("MOVQ lda+8(FP), R11")
	g.p("MOVQ np+32(FP), R9")
	g.p("MOVQ ldc+48(FP), R8")
	quantPointers(g)
	quantPanelStart(g)
	g.p("MOVQ R10, SI")
	if mr > 3 {
		g.p("LEAQ (SI)(R11*2), DI")
		g.p("ADDQ R11, DI")
	}
	g.p("MOVQ R14, BX")
	g.p("MOVQ R15, R12")
	for i := 0; i < 4*mr; i++ {
		g.p("VPXORD Z%d, Z%d, Z%d", i, i, i)
	}
	firstScaleBlock(g, "")
	free := []int{28, 29}
	for z := 4 * mr; z < 24; z++ {
		free = append(free, z)
	}
	if mr == 1 {
		free = free[2:10] // eight in flight, as measured fastest
	}
	tmp := 0
	body := func(u int) {
		dt.prefetch(g, u)
		if mr <= 2 { // a broadcast register a row: each row's once a k-row
			for r := 0; r < mr; r++ {
				g.p("VBROADCASTSS %s, Z%d", aRow(r, 4*u), 30+r)
			}
		}
		for s := 0; s < 4; s += 2 {
			w0, w1 := free[tmp%len(free)], free[(tmp+1)%len(free)]
			tmp += 2
			dt.weights512(g, dt.rowBytes*u, s, w0, w1)
			for h, z := range []int{w0, w1} {
				g.p("VCVTDQ2PS Z%d, Z%d", z, z)
				g.p("VMULPS Z%d, Z%d, Z%d", 24+s+h, z, z)
				if mr == 1 { // each weight's FMA right after its scaling
					g.p("VFMADD231PS Z%d, Z30, Z%d", z, s+h)
				}
			}
			if mr == 1 {
				continue
			}
			for r := 0; r < mr; r++ {
				b := 30 + r%2
				if mr > 2 {
					g.p("VBROADCASTSS %s, Z%d", aRow(r, 4*u), b)
				}
				g.p("VFMADD231PS Z%d, Z%d, Z%d", w0, b, 4*r+s)
				g.p("VFMADD231PS Z%d, Z%d, Z%d", w1, b, 4*r+s+1)
			}
		}
	}
	g.label("sblock")
	dt.scales512(g, 0, 24, 25, 28)
	dt.scales512(g, 2, 26, 27, 28)
	dt.rows(g, mr, "", body)
	var outs []accOut
	for r := 0; r < mr; r++ {
		dt.unnibble512(g, 4*r, 4*r+1, 28, 29)
		dt.unnibble512(g, 4*r+2, 4*r+3, 28, 29)
		for i := 0; i < 4; i++ {
			outs = append(outs, accOut{r, 4*r + i, 64 * i})
		}
	}
	epilogueRegs(g, "Z", mr, "", "fl-8(SP)", outs)
	quantBlockEnd(g, dt, "R9")
}

// kernel512qm8 emits k512{q8,q4}m8, kernel256qm8 on AVX-512 registers: a
// decoding group of 8 rows in one pass over the weights, each panel in two
// passes of 32 columns (16 accumulators: 8 rows × 2 groups of 16 columns)
// where kernel256qm8 takes eight of 8. Each output's chain is
// kernel256qm8's, so the bits are k256{q8,q4}m8's.
//
// Registers: Z0..Z15 accumulators (row r, group h at 2r+h), Z16, Z17 the
// groups' scales, Z18, Z19 their weights, Z20..Z23 broadcasts of A.
func kernel512qm8(g *gen, dt quantType) {
	const mr = 8
	name := "k512" + dt.name + "m8"
	g.textFrame(name, quantLocals+16, quantArgs, fmt.Sprintf("%s: C[8×64] (+)= A·B over np panels, B %s, one pass over the weights for 8 rows (AVX-512).", name, dt.name))
	quantM8Start(g, dt)
	lines := 4 * dt.rowBytes / 64 // cache lines of four k-rows
	for p := 0; p < 2; p++ {
		sfx := fmt.Sprint(p)
		aRows8(g)
		g.p("MOVQ R14, BX")
		g.p("MOVQ R15, R12")
		g.p("MOVQ pd-64(SP), R8")
		for r := 0; r < 2*mr; r++ {
			g.p("VPXORD Z%d, Z%d, Z%d", r, r, r)
		}
		firstScaleBlock(g, sfx)
		body := func(u int) {
			if u == 0 {
				// Lines of the next sum block's four k-rows, half each pass.
				for l := p * lines / 2; l < (p+1)*lines/2; l++ {
					g.p("PREFETCHT1 %d(BX)(R8*1)", 64*l)
				}
			}
			if p == 0 {
				dt.prefetch(g, u)
			}
			dt.weights512(g, dt.rowBytes*u, 2*p, 18, 19)
			for h := 0; h < 2; h++ {
				g.p("VCVTDQ2PS Z%d, Z%d", 18+h, 18+h)
				g.p("VMULPS Z%d, Z%d, Z%d", 16+h, 18+h, 18+h)
			}
			for r := 0; r < mr; r++ {
				b := 20 + r%4
				g.p("VBROADCASTSS %s, Z%d", aRow(r, 4*u), b)
				g.p("VFMADD231PS Z18, Z%d, Z%d", b, 2*r)
				g.p("VFMADD231PS Z19, Z%d, Z%d", b, 2*r+1)
			}
		}
		g.label("sblock" + sfx)
		dt.scales512(g, 2*p, 16, 17, 18)
		dt.rows(g, mr, sfx, body)
		for r := 0; r < mr; r++ {
			dt.unnibble512(g, 2*r, 2*r+1, 18, 19)
		}
		g.p("MOVQ ldc+48(FP), R8")
		var outs []accOut
		for r := 0; r < mr; r++ {
			for h := 0; h < 2; h++ {
				outs = append(outs, accOut{r, 2*r + h, 4 * (32*p + 16*h)})
			}
		}
		epilogueRegs(g, "Z", mr, sfx, "fl-8(SP)", outs)
	}
	quantBlockEnd(g, dt, "np-56(SP)")
}
