package main

import "path/filepath"

// writePackT writes pack_amd64.s, the transposing packs of 16-bit panels
// (AVX2) and of dp panels (AVX2 and AVX-512): the B blocks of
// LinearBackwardInput (package kernels' packPanelsT and packDPT).
// They live in a file of their own so the kernels' files are unchanged by
// them.
func writePackT(dir string) {
	var g gen
	g.raw(header)
	packT256u16(&g, "bf16")
	packT256u16(&g, "f16")
	packDPT256(&g)
	packDPT512(&g)
	write(filepath.Join(dir, "pack_amd64.s"), g.b.Bytes())
}

// packT256u16 emits the AVX2 transposing pack of bf16 or f16 panels:
// packed row i (a weight row, i.e. a column of the Linear panel) gets the
// widened words of k-rows 0, 1, ... of the panel. It reads 8×8 tiles, 8
// words of each of 8 consecutive k-rows (so no read is strided), widens
// them to fp32 and transposes them in registers (transpose8x8), storing 8
// columns of 8 packed rows:
//
//	packTBF16_256(dst *float32, src *uint16, groups, kg int)
//	packTF16_256(dst *float32, src *uint16, groups, kg int)
//
// dst: packed row 0, column 0; rows 256 bytes apart. src: the word of
// packed row 0 in k-row 0 of the panel; k-rows 128 bytes apart. groups:
// runs of 8 packed rows; kg (≥ 1): 8-column groups.
//
// In a bf16 panel the words of consecutive weight rows are 2 apart (the
// interleaved order of package kernels' bf16Word: rows 16s+i of a panel
// half are its even or its odd words, by s), so 8 rows are the low words
// of 8 dwords, 32 bytes from src, and the shift that widens them discards
// the other words; the next 8 rows start 32 bytes on. The last dword of a
// run may read one word past its last row: the panels keep padding after
// their end. In an f16 panel they are 8 consecutive words, widened by one
// VCVTPH2PS (exact, as the table of the Go loop: subnormals are
// normalised, infinities kept, NaNs quieted with their payload); the next
// 8 start 16 bytes on.
func packT256u16(g *gen, dt string) {
	name, groupBytes, isa := "packTBF16_256", 32, "AVX2"
	if dt == "f16" {
		name, groupBytes, isa = "packTF16_256", 16, "AVX2+F16C"
	}
	g.text(name, 32, name+": transposing pack of "+dt+" panels to fp32 rows of 64 ("+isa+").")
	g.p("MOVQ dst+0(FP), DI")
	g.p("MOVQ src+8(FP), BX")
	g.p("MOVQ groups+16(FP), R9")
	g.p("TESTQ R9, R9")
	g.p("JEQ done")
	g.label("group")
	g.p("MOVQ BX, SI")
	g.p("MOVQ DI, R8")
	g.p("MOVQ kg+24(FP), R12")
	g.label("kgroup")
	for r := 0; r < 8; r++ {
		if dt == "f16" {
			g.p("VCVTPH2PS %d(SI), Y%d", 128*r, r)
			continue
		}
		g.p("VMOVDQU %d(SI), Y%d", 128*r, r)
		g.p("VPSLLD $16, Y%d, Y%d", r, r)
	}
	transpose8x8(g, "R8")
	g.p("ADDQ $%d, SI", 8*128)
	g.p("ADDQ $32, R8")
	g.p("DECQ R12")
	g.p("JNE kgroup")
	g.p("ADDQ $%d, DI", 8*256)
	g.p("ADDQ $%d, BX", groupBytes)
	g.p("DECQ R9")
	g.p("JNE group")
	g.label("done")
	g.ret()
}

// transpose8x8 emits the transpose of an 8×8 fp32 tile held in Y0..Y7 (Yr:
// columns 0..7 of source row r) and its store: packed row j, column j of
// source rows 0..7, at 256*j bytes from base. Clobbers Y0..Y14.
func transpose8x8(g *gen, base string) {
	// Pairs of rows interleave, then pairs of pairs, then 128-bit halves
	// swap.
	g.p("VUNPCKLPS Y1, Y0, Y8")
	g.p("VUNPCKHPS Y1, Y0, Y9")
	g.p("VUNPCKLPS Y3, Y2, Y10")
	g.p("VUNPCKHPS Y3, Y2, Y11")
	g.p("VUNPCKLPS Y5, Y4, Y12")
	g.p("VUNPCKHPS Y5, Y4, Y13")
	g.p("VUNPCKLPS Y7, Y6, Y14")
	g.p("VUNPCKHPS Y7, Y6, Y7")
	g.p("VSHUFPS $0x44, Y10, Y8, Y0") // columns 0 | 4 of rows 0..3
	g.p("VSHUFPS $0xEE, Y10, Y8, Y1") // 1 | 5
	g.p("VSHUFPS $0x44, Y11, Y9, Y2") // 2 | 6
	g.p("VSHUFPS $0xEE, Y11, Y9, Y3") // 3 | 7
	g.p("VSHUFPS $0x44, Y14, Y12, Y4")
	g.p("VSHUFPS $0xEE, Y14, Y12, Y5")
	g.p("VSHUFPS $0x44, Y7, Y13, Y6")
	g.p("VSHUFPS $0xEE, Y7, Y13, Y8")
	for j, uv := range [][2]int{{0, 4}, {1, 5}, {2, 6}, {3, 8}} {
		u, v := uv[0], uv[1] // column j | j+4 of rows 0..3 and of 4..7
		g.p("VPERM2F128 $0x20, Y%d, Y%d, Y9", v, u)
		g.p("VPERM2F128 $0x31, Y%d, Y%d, Y10", v, u)
		g.p("VMOVUPS Y9, %d(%s)", 256*j, base)
		g.p("VMOVUPS Y10, %d(%s)", 256*(j+4), base)
	}
}

// packDPT256 emits the AVX2 transposing pack of dp panels (package kernels'
// packDPT: the B block of LinearBackwardInput on UnitBF16). In a dp panel
// the words of two neighbouring weight rows for one pair of weight columns
// are one qword (lo₀ hi₀ lo₁ hi₁ in 16-bit units), and consecutive pairs
// of rows are consecutive qwords; the packed block wants, for each pair of
// rows, the pairs of columns side by side, each qword as lo₀ lo₁ hi₀ hi₁.
// So it reads 4×4 tiles of qwords (4 pairs of rows of each of 4 column
// pairs, 32 contiguous bytes each), transposes them in registers and
// swaps the middle halves of every qword (VPSHUFB):
//
//	packDPT256(dst, src *float32, groups, cg int)
//
// dst: packed pair-row 0, column 0; pair-rows 256 bytes apart. src: the
// qword of pair-row 0, column pair 0; column pairs 256 bytes apart.
// groups: runs of 4 pair-rows; cg (≥ 1): groups of 4 column pairs.
func packDPT256(g *gen) {
	g.text("packDPT256", 32, "packDPT256: transposing pack of dp panels, 4×4 tiles of qwords (AVX2).")
	packDPTLoop(g, 4, "VPERMQ $0x44, Y15, Y15", func() {
		for c := 0; c < 4; c++ { // Yc: column pair c of pair-rows 0..3
			g.p("VMOVDQU %d(SI), Y%d", 256*c, c)
		}
		g.p("VPUNPCKLQDQ Y1, Y0, Y4") // rows 0 | 2, column pairs 0, 1
		g.p("VPUNPCKHQDQ Y1, Y0, Y5") // rows 1 | 3, column pairs 0, 1
		g.p("VPUNPCKLQDQ Y3, Y2, Y6") // rows 0 | 2, column pairs 2, 3
		g.p("VPUNPCKHQDQ Y3, Y2, Y7") // rows 1 | 3, column pairs 2, 3
		for r, src := range [][3]string{{"0x20", "Y6", "Y4"}, {"0x20", "Y7", "Y5"}, {"0x31", "Y6", "Y4"}, {"0x31", "Y7", "Y5"}} {
			g.p("VPERM2I128 $%s, %s, %s, Y%d", src[0], src[1], src[2], r)
			g.p("VPSHUFB Y15, Y%d, Y%d", r, r)
			g.p("VMOVDQU Y%d, %d(R8)", r, 256*r)
		}
	})
}

// packDPTLoop emits the frame of the dp packs around body, one tile of
// tile × tile qwords: it loads the arguments (DI dst, BX src, R9 groups,
// R12 cg) and the byte shuffle of one 128-bit lane into X15 (qword bytes
// 0 1 4 5 2 3 6 7), which spread then widens to the tile's registers; body
// reads the tile at SI and writes it at R8; the loops walk the column
// pairs (cgroup) within each run of tile pair-rows (group).
func packDPTLoop(g *gen, tile int, spread string, body func()) {
	g.p("MOVQ dst+0(FP), DI")
	g.p("MOVQ src+8(FP), BX")
	g.p("MOVQ groups+16(FP), R9")
	g.p("TESTQ R9, R9")
	g.p("JEQ done")
	g.p("MOVQ $0x0706030205040100, AX")
	g.p("VMOVQ AX, X15")
	g.p("MOVQ $0x0f0e0b0a0d0c0908, AX")
	g.p("VPINSRQ $1, AX, X15, X15")
	g.p(spread)
	g.label("group")
	g.p("MOVQ BX, SI")
	g.p("MOVQ DI, R8")
	g.p("MOVQ cg+24(FP), R12")
	g.label("cgroup")
	body()
	g.p("ADDQ $%d, SI", tile*256)
	g.p("ADDQ $%d, R8", 8*tile)
	g.p("DECQ R12")
	g.p("JNE cgroup")
	g.p("ADDQ $%d, DI", tile*256)
	g.p("ADDQ $%d, BX", 8*tile)
	g.p("DECQ R9")
	g.p("JNE group")
	g.label("done")
	g.ret()
}

// packDPT512 is packDPT256 on AVX-512 registers: 8×8 tiles of qwords (8
// pairs of rows of each of 8 column pairs, one 64-byte load each),
// transposed in three rounds of shuffles (qwords within 128-bit lanes,
// then lanes twice) and each qword's middle halves swapped as there, 40 %
// fewer instructions a byte than the AVX2 tiles, prefetching packDPTAhead
// bytes ahead. A cold gate-sized weight (4864 × 896) packs 1.45× as fast as
// on the AVX2 tiles (0.60 against 0.88 ms, one thread):
//
//	packDPT512(dst, src *float32, groups, cg int)
//
// dst, src as packDPT256's; groups: runs of 8 pair-rows; cg (≥ 1): groups
// of 8 column pairs (16 columns).
func packDPT512(g *gen) {
	g.text("packDPT512", 32, "packDPT512: transposing pack of dp panels, 8×8 tiles of qwords (AVX-512).")
	packDPTLoop(g, 8, "VSHUFI64X2 $0, Z15, Z15, Z16", func() {
		for c := 0; c < 8; c++ { // Zc: pair-rows 0..7 of column pair c
			g.p("PREFETCHT0 %d(SI)", 256*c+packDPTAhead)
			g.p("VMOVDQU64 %d(SI), Z%d", 256*c, c)
		}
		for i := 0; i < 4; i++ { // Z8+2i, Z9+2i: column pairs 2i, 2i+1 interleaved
			g.p("VPUNPCKLQDQ Z%d, Z%d, Z%d", 2*i+1, 2*i, 8+2*i)
			g.p("VPUNPCKHQDQ Z%d, Z%d, Z%d", 2*i+1, 2*i, 9+2*i)
		}
		// Lanes: Z0..Z3 from column pairs 0-3, Z4..Z7 from 4-7.
		for h := 0; h < 2; h++ {
			a, b := 8+4*h, 10+4*h // unpacklo of pairs (4h, 4h+1) and (4h+2, 4h+3)
			g.p("VSHUFI64X2 $0x88, Z%d, Z%d, Z%d", b, a, 4*h+0)
			g.p("VSHUFI64X2 $0xdd, Z%d, Z%d, Z%d", b, a, 4*h+1)
			g.p("VSHUFI64X2 $0x88, Z%d, Z%d, Z%d", b+1, a+1, 4*h+2)
			g.p("VSHUFI64X2 $0xdd, Z%d, Z%d, Z%d", b+1, a+1, 4*h+3)
		}
		// Z4h+0 holds pair-rows 0 and 4, +1 rows 2 and 6, +2 rows 1 and 5, +3
		// rows 3 and 7: the last round puts each pair-row in a register.
		for j, rows := range [4][2]int{{0, 4}, {2, 6}, {1, 5}, {3, 7}} {
			g.p("VSHUFI64X2 $0x88, Z%d, Z%d, Z%d", 4+j, j, 8+rows[0])
			g.p("VSHUFI64X2 $0xdd, Z%d, Z%d, Z%d", 4+j, j, 8+rows[1])
		}
		for r := 0; r < 8; r++ {
			g.p("VPSHUFB Z16, Z%d, Z%d", 8+r, 8+r)
			g.p("VMOVDQU64 Z%d, %d(R8)", 8+r, 256*r)
		}
	})
}

// packDPTAhead is how far ahead (bytes) packDPT512 prefetches the column
// pairs it will read: the weights come from memory, and reading 64 bytes
// of every 256 the hardware prefetchers left the pack latency-bound (a
// cold 4864 × 896 weight packed in 0.76 ms without, 0.59–0.61 with 4–8
// KiB; 2 KiB 0.70).
const packDPTAhead = 8192
