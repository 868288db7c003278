package main

import (
	"fmt"
	"path/filepath"
)

// writeQ8 writes matmul_q8_amd64.s, the kernels over Q8 panels (blockwise
// 8-bit weights, see package kernels' quant.go). They live in a file of
// their own so the fp32/bf16/f16 kernels' file is unchanged by them.
func writeQ8(dir string) {
	var g gen
	g.raw(header)
	for mr := 1; mr <= 6; mr++ {
		kernel256q8(&g, mr)
	}
	widenQ8256(&g)
	write(filepath.Join(dir, "matmul_q8_amd64.s"), g.b.Bytes())
}

// Argument frame of the Q8 kernels (all 8-byte words):
//
//	a+0 lda+8 b+16 pstride+24 np+32 c+40 ldc+48 k+56 k0+64 flags+72 bias+80 s+88 sstride+96
//
// b: the int8 values of k-row 0 of the first panel; k-rows are 64 bytes
// apart, panels pstride bytes. s: the 64 fp16 scales of the block of 32
// k-rows holding k-row 0; a block's scales are 128 bytes apart, panels'
// sstride bytes. k0 (0..31) is the position of k-row 0 within its block.
// The rest is as kernelArgs.
const q8Args = 104

// kernel256q8 emits an mr×64 AVX2 microkernel over np Q8 panels. Each
// weight becomes d·q in fp32 (VPMOVSXBD, VCVTDQ2PS, VMULPS by the fp16
// scale widened with VCVTPH2PS; exact), then runs the same FMA chain and
// epilogue as kernel256 on fp32 panels, so the results are bit for bit
// those of k256f32 on the dequantized weights.
//
// Registers: Y0..Y(2mr-1) accumulators of one 16-column group, Y12, Y13
// the weights of one k-row, Y14, Y15 broadcasts of A. Up to 5 rows the
// group's 16 scales sit in Y10, Y11 for the whole block of 32 k-rows; 6
// rows use every register, so each k-row widens its scales again into Y15
// (and broadcasts through Y14 alone). CX counts the k-rows left in the
// current block, R13 those after it; R12 points at the block's scales, R15
// at the panel's.
func kernel256q8(g *gen, mr int) {
	name := fmt.Sprintf("k256q8m%d", mr)
	g.text(name, q8Args, fmt.Sprintf("%s: C[%d×64] (+)= A·B over np panels, B Q8 (AVX2+FMA+F16C).", name, mr))
	g.p("MOVQ a+0(FP), R10")
	g.p("MOVQ lda+8(FP), R11")
	g.p("MOVQ b+16(FP), R14")
	g.p("MOVQ np+32(FP), R9")
	g.p("MOVQ c+40(FP), DX")
	g.p("MOVQ ldc+48(FP), R8")
	g.p("MOVQ bias+80(FP), AX")
	g.p("MOVQ s+88(FP), R15")
	regScales := mr <= 5
	g.label("panel")
	for s := 0; s < 4; s++ {
		sfx := fmt.Sprint(s)
		c0, c1 := 64*s, 64*s+32
		g.p("MOVQ R10, SI")
		if mr > 3 {
			g.p("LEAQ (SI)(R11*2), DI")
			g.p("ADDQ R11, DI")
		}
		g.p("LEAQ %d(R14), BX", 16*s)
		g.p("LEAQ %d(R15), R12", 32*s)
		for i := 0; i < 2*mr; i++ {
			g.p("VXORPS Y%d, Y%d, Y%d", i, i, i)
		}
		// CX = min(32 - k0, k), R13 = k - CX.
		g.p("MOVQ k+56(FP), R13")
		g.p("MOVQ $32, CX")
		g.p("SUBQ k0+64(FP), CX")
		g.p("CMPQ CX, R13")
		g.p("JLE first" + sfx)
		g.p("MOVQ R13, CX")
		g.label("first" + sfx)
		g.p("SUBQ CX, R13")
		bc := 0
		body := func(u int) {
			for h, y := range []string{"Y12", "Y13"} {
				g.p("VPMOVSXBD %d(BX), %s", 64*u+8*h, y)
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
		g.label("block" + sfx)
		if regScales {
			g.p("VCVTPH2PS (R12), Y10")
			g.p("VCVTPH2PS 16(R12), Y11")
		}
		g.p("CMPQ CX, $4")
		g.p("JLT tail" + sfx)
		g.label("loop4" + sfx)
		for u := 0; u < 4; u++ {
			body(u)
		}
		g.p("ADDQ $16, SI")
		if mr > 3 {
			g.p("ADDQ $16, DI")
		}
		g.p("ADDQ $256, BX")
		g.p("SUBQ $4, CX")
		g.p("CMPQ CX, $4")
		g.p("JGE loop4" + sfx)
		g.label("tail" + sfx)
		g.p("TESTQ CX, CX")
		g.p("JEQ blockend" + sfx)
		g.label("loop1" + sfx)
		body(0)
		g.p("ADDQ $4, SI")
		if mr > 3 {
			g.p("ADDQ $4, DI")
		}
		g.p("ADDQ $64, BX")
		g.p("DECQ CX")
		g.p("JNE loop1" + sfx)
		g.label("blockend" + sfx)
		// Next block of 32 k-rows (or fewer at the end), if any.
		g.p("TESTQ R13, R13")
		g.p("JEQ epilogue" + sfx)
		g.p("ADDQ $128, R12")
		g.p("MOVQ $32, CX")
		g.p("CMPQ CX, R13")
		g.p("JLE next" + sfx)
		g.p("MOVQ R13, CX")
		g.label("next" + sfx)
		g.p("SUBQ CX, R13")
		g.p("JMP block" + sfx)
		g.label("epilogue" + sfx)
		g.p("MOVQ flags+72(FP), CX")
		if mr > 3 {
			g.p("LEAQ (DX)(R8*2), R13")
			g.p("ADDQ R8, R13")
		}
		g.p("TESTQ $1, CX")
		g.p("JEQ nocadd" + sfx)
		for r := 0; r < mr; r++ {
			g.p("VADDPS %s, Y%d, Y%d", cRow(r, c0), 2*r, 2*r)
			g.p("VADDPS %s, Y%d, Y%d", cRow(r, c1), 2*r+1, 2*r+1)
		}
		g.label("nocadd" + sfx)
		g.p("TESTQ $2, CX")
		g.p("JEQ store" + sfx)
		for r := 0; r < mr; r++ {
			g.p("VADDPS %d(AX), Y%d, Y%d", c0, 2*r, 2*r)
			g.p("VADDPS %d(AX), Y%d, Y%d", c1, 2*r+1, 2*r+1)
		}
		g.label("store" + sfx)
		for r := 0; r < mr; r++ {
			g.p("VMOVUPS Y%d, %s", 2*r, cRow(r, c0))
			g.p("VMOVUPS Y%d, %s", 2*r+1, cRow(r, c1))
		}
	}
	g.p("ADDQ $256, DX")
	g.p("ADDQ $256, AX")
	g.p("ADDQ pstride+24(FP), R14")
	g.p("ADDQ sstride+96(FP), R15")
	g.p("DECQ R9")
	g.p("JNE panel")
	g.ret()
}

// widenQ8256 emits widenQ8_256(dst *float32, q *int8, s *uint16, rows, k0
// int): rows k-rows of a Q8 panel (64 int8 each, contiguous) to fp32
// k-rows of 64 (256 bytes), each value d·q with d the fp16 scale of its
// column in the block of 32 k-rows; s points at the 64 scales of the block
// holding k-row 0, and k0 (0..31) is that row's position in it. The
// blocked path (many rows) widens a block of panels so before the fp32
// kernels run.
func widenQ8256(g *gen) {
	g.text("widenQ8_256", 40, "widenQ8_256: Q8 panel k-rows to fp32 k-rows (AVX2+F16C).")
	g.p("MOVQ dst+0(FP), DI")
	g.p("MOVQ q+8(FP), SI")
	g.p("MOVQ s+16(FP), DX")
	g.p("MOVQ rows+24(FP), CX")
	g.p("MOVQ $32, BX")
	g.p("SUBQ k0+32(FP), BX")
	g.label("block")
	// BX = k-rows of this block to do: min(BX, CX).
	g.p("CMPQ BX, CX")
	g.p("JLE widen")
	g.p("MOVQ CX, BX")
	g.label("widen")
	g.p("SUBQ BX, CX")
	for i := 0; i < 8; i++ {
		g.p("VCVTPH2PS %d(DX), Y%d", 16*i, 8+i)
	}
	g.label("row")
	for i := 0; i < 8; i++ {
		g.p("VPMOVSXBD %d(SI), Y%d", 8*i, i)
		g.p("VCVTDQ2PS Y%d, Y%d", i, i)
		g.p("VMULPS Y%d, Y%d, Y%d", 8+i, i, i)
		g.p("VMOVUPS Y%d, %d(DI)", i, 32*i)
	}
	g.p("ADDQ $64, SI")
	g.p("ADDQ $256, DI")
	g.p("DECQ BX")
	g.p("JNE row")
	g.p("TESTQ CX, CX")
	g.p("JEQ done")
	g.p("ADDQ $128, DX")
	g.p("MOVQ $32, BX")
	g.p("JMP block")
	g.label("done")
	g.ret()
}
