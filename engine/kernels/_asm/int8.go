package main

import (
	"fmt"
	"path/filepath"
)

// writeInt8 writes matmul_int8_amd64.s, the UnitInt8 kernels: Q8 panels
// times activations rounded to Q8_0 blocks, summed exactly in int32 per
// block of 32 k-rows (VPDPBUSD, AVX512_VNNI) and scaled into fp32 (see
// package kernels' int8.go for the arithmetic they must reproduce).
func writeInt8(dir string) {
	var g gen
	g.raw(header)
	g.raw(int8Data)
	for mr := 1; mr <= 3; mr++ {
		kernelI8Q8(&g, mr)
	}
	kernelI8M8(&g, "q8")
	kernelI8M8(&g, "q4")
	kernelI8Q8T(&g, 6)
	kernelI8(&g, "q4", 1)
	quantActs(&g)
	pairRows(&g)
	q4ToQ8(&g)
	write(filepath.Join(dir, "matmul_int8_amd64.s"), g.b.Bytes())
}

// int8Data holds the constants: i8scales<>+64i is the VPERMI2Q index that
// gathers, from a block's 64 fp16 scales (two zmm), the 16 of the columns
// lane group i of the interleaved weights holds (see kernelI8Q8).
var int8Data = func() string {
	s := "\n"
	for i := range 4 {
		for l := range 8 {
			v := 0
			if l < 4 {
				v = 4*l + i
			}
			s += fmt.Sprintf("DATA i8scales<>+%d(SB)/8, $%d\n", 64*i+8*l, v)
		}
	}
	s += "GLOBL i8scales<>(SB), RODATA|NOPTR, $256\n"
	s += "DATA i8consts<>+0(SB)/4, $0x7fffffff\n"  // |x| mask
	s += "DATA i8consts<>+4(SB)/4, $0x42fe0000\n"  // 127.0
	s += "DATA i8consts<>+8(SB)/4, $0x0d800000\n"  // 2^-100
	s += "DATA i8consts<>+12(SB)/4, $0x0f0f0f0f\n" // low nibbles
	s += "GLOBL i8consts<>(SB), RODATA|NOPTR, $16\n"
	for i := range 32 { // word 2j: word j (row a), word 2j+1: word 16+j (row b)
		s += fmt.Sprintf("DATA i8pairs<>+%d(SB)/2, $%d\n", 2*i, i/2+16*(i%2))
	}
	s += "GLOBL i8pairs<>(SB), RODATA|NOPTR, $64\n"
	return s
}()

// prefetchI8 is how far ahead (bytes) the int8 unit's 6-row kernel
// (kernelI8Q8T) prefetches the weights it streams; the kernels of one to
// three rows use prefetchI8Rows, and all prefetch the scales 8 blocks
// ahead. It was chosen for the one-row kernel, on a Q8 LM head streaming
// from memory (Zen 5, A/B against the exact kernels in one process): none
// 0.75-0.81× the exact kernels' speed, 512 B 1.0×, 1 KiB 1.04-1.10×,
// 1.5 KiB 0.94-0.97×, 4 KiB 0.92-0.99×; the 6-row kernel, whose rows after
// the first read the weights from L2, was not measured apart.
var prefetchI8 = 1024

// prefetchI8Rows is prefetchI8 for kernelI8, the kernels of one to three
// rows (a decoding sequence; two or three sequences, or the last rows of a
// prompt): near, as for the bf16 decoding row (prefetchDecodeDP), so that
// the hardware prefetchers stream the panels and the software prefetches
// do not compete with them. Over a
// cold single sequence's step (Qwen2.5-0.5B's shapes at Q8, benchStepRows
// with variants of the kernel alternated in one process, six runs): 256 B
// 5-11 % faster than 1 KiB in every run, 128 B close behind, 64 and 512 B
// no faster than 1 KiB, 2 KiB slower.
const prefetchI8Rows = 256

// headStartI8 is how much of its first block's weights (bytes) the
// one-row Q8 kernel prefetches at its start, with its first 1 KiB of
// scales: near prefetches leave a stream's start to the hardware
// prefetchers, and a decoding product's call starts a new one. A cold
// single sequence's step (Qwen2.5-0.5B's shapes at Q8, benchStepRows with
// the kernel and a variant alternated in one process, three runs) took
// 1.3-1.7 % less time; in the model (bench/engine profile, variants in
// blocks of 8 steps, three runs) the step's median 0.9-2.6 % less, faster
// in 43, 34 and 27 of 56 pairs.
const headStartI8 = 2048

// prefetchI8M8 is how far ahead (bytes) the 8-row kernel prefetches the
// Q8 panels it reads in place. Measured over a cold decoding step of a
// group of 8 (Qwen2.5-0.5B's shapes, BenchmarkI8Step's loop, variants
// alternated in one process, three runs): 2 KiB (the next block)
// 18.1–19.3 ms, 4 KiB 16.1–17.5, 8 KiB 15.0–16.7, an L2 prefetch 8–16 KiB
// ahead 16.4–18.5, none 24.3–25.6. The one-row kernels did best at
// 1 KiB then (11.1–12.4 ms a single sequence's step, 512 B 11.5–12.8,
// 2 KiB 14.3–16.6, 4 KiB 13.4–15.2; 256 B untried): prefetchI8Rows.
// 8 KiB again since the prefetches are non-temporal (prefetchM8): a
// decoding group's whole step (Qwen2.5-0.5B, prompt 128, blocks of 8
// steps of each alternated in one process) against 4 KiB, q8 faster in
// 49-87 of 112 pairs, medians -1.2 to +5.0 % (four runs); q4 (which
// prefetches half as far) 0.1-1.8 % (three runs).
const prefetchI8M8 = 8192

// prefetchI8Q4 is how far ahead (bytes) the one-row kernel and the
// widening of Q4 panels prefetch them. A cold single sequence's step over
// Q4 panels (variants alternated in one process, three runs): 1 KiB
// 8.0–8.8 ms, 2 KiB 7.4–8.5, 4 KiB 7.3–8.2, 8 KiB 7.1–8.1. The one-row
// kernel's prefetches are non-temporal (prefetchM8): the step's products
// (benchStepRows, seven runs) 1-9 % faster than with PREFETCHT0, median
// 5 % (16 KiB, PREFETCHT1 and none no better, a quad loop unrolled twice
// slower), and the model's q4 decode (blocks of 8 steps of each
// alternated in one process, six runs, prompts of 128 and 512 tokens)
// 0.5-8.6 % faster, median 4.7 %.
const prefetchI8Q4 = 8192

// kernelI8Q8 emits i8q8m{mr}: mr rows × 64 columns per panel over np
// contiguous Q8 panels and all of K, stored to C.
//
//	a+0 lda+8 ad+16 ac+24 ald+32 b+40 np+48 s+56 c+64 ldc+72 k+80
//
// a: the first row's int8 activations, rows lda bytes apart; ad, ac: its
// blocks' fp32 scales and int32 corrections (−128·Σq), rows ald bytes
// apart; b: the first Q8 panel (K k-rows of 64 int8), the next right
// after; s: its fp16 scales (K/32 blocks of 64), the next panel's right
// after; c: C, rows ldc bytes apart, 64 floats per panel.
//
// The panels are in the int8 unit's order (package kernels' vnniPos): per
// quad of four k-rows, 256 bytes u0..u3, whose dword d of lane L holds the
// four k-rows of column 16L+4i+d (ui), each weight stored unsigned as
// w+128. Per block of 32 k-rows, a quad is loaded at a time; VPDPBUSD adds each
// dword's four products with the row's four activations (broadcast) into
// int32 accumulators started at the block's correction, so they end at
// Σ w·q exactly. Each is then converted to fp32 (exact: |Σ| < 2^24) and
// added, times (column scale · row scale), to fp32 accumulators in the
// same interleaved order, which a 4×4 shuffle of 128-bit lanes puts back
// into column order before the store.
func kernelI8Q8(g *gen, mr int) { kernelI8(g, "q8", mr) }

// kernelI8 emits i8{dt}m{mr}: kernelI8Q8, or for dt "q4" (one row) the
// same over Q4 panels read in place (a decoding row: no widened copy).
// Q4 panels in the int8 unit's order (package kernels' q4VnniPos) hold a
// quad of k-rows in two zmm of nibbles, each weight as n = q+8: u0 in the
// first's low nibbles, u1 in its high ones, u2 and u3 in the second's
// (splitQ4). The sums then count 8·Σq instead of 128·Σq beyond Σ w·q: the
// block's correction arithmetically shifted right by 4.
func kernelI8(g *gen, dt string, mr int) {
	q4 := dt == "q4"
	name := fmt.Sprintf("i8%sm%d", dt, mr)
	bType := "*int8"
	if q4 {
		bType = "*byte"
	}
	g.text(name, 88, fmt.Sprintf("func %s(a *int8, lda uintptr, ad *float32, ac *int32, ald uintptr, b %s, np int, s *uint16, c *float32, ldc uintptr, k int)", name, bType))
	accF := func(m, i int) string { return fmt.Sprintf("Z%d", 4*m+i) }
	accI := func(m, i int) string { return fmt.Sprintf("Z%d", 12+4*m+i) }
	// row m (0..2) of base, whose rows are its stride register apart.
	stride := map[string]string{"DI": "R11", "R12": "R9", "R13": "R9", "DX": "R8"}
	row := func(base string, m int, d int) string { return rowAddr([3]string{base}, stride[base], m, d) }
	i8Args(g)
	if q4 {
		g.p("MOVL $0x0f0f0f0f, AX")
		g.p("VPBROADCASTD AX, Z6")
	}
	if !q4 && mr == 1 {
		for o := 0; o < headStartI8; o += 64 {
			g.p("PREFETCHT0 %d(BX)", o)
		}
		for o := 0; o < 1024; o += 64 {
			g.p("PREFETCHT0 %d(R10)", o)
		}
	}
	g.label(name + "_panel")
	for m := range mr {
		for i := range 4 {
			g.p("VPXORD %s, %s, %s", accF(m, i), accF(m, i), accF(m, i))
		}
	}
	g.p("MOVQ SI, DI")
	g.p("MOVQ ad+16(FP), R12")
	g.p("MOVQ ac+24(FP), R13")
	g.p("MOVQ k+80(FP), AX")
	g.p("SHRQ $5, AX")
	g.label(name + "_block")
	for m := range mr {
		g.p("VPBROADCASTD %s, %s", row("R13", m, 0), accI(m, 0))
		if q4 {
			g.p("VPSRAD $4, %s, %s", accI(m, 0), accI(m, 0))
		}
		for i := 1; i < 4; i++ {
			g.p("VMOVDQA64 %s, %s", accI(m, 0), accI(m, i))
		}
	}
	// The block's eight quads of k-rows, in a loop (each load's stride is
	// then one quad, which the hardware prefetchers follow).
	g.p("MOVQ $8, R14")
	g.label(name + "_quad")
	if q4 {
		for h := range 2 { // u2h, u2h+1
			g.p(prefetchM8+" %d(BX)", 64*h+prefetchI8Q4)
			splitQ4(g, fmt.Sprintf("%d(BX)", 64*h), 6, quadU[2*h], quadU[2*h+1])
		}
	} else {
		loadQuad(g, 0, "BX", prefetchI8Rows)
	}
	for m := range mr {
		if mr == 1 { // one broadcast load, not four
			g.p("VPBROADCASTD %s, Z31", row("DI", m, 0))
			for i := range 4 {
				g.p("VPDPBUSD Z31, %s, %s", quadU[i], accI(m, i))
			}
			continue
		}
		for i := range 4 {
			g.p("VPDPBUSD.BCST %s, %s, %s", row("DI", m, 0), quadU[i], accI(m, i))
		}
	}
	if q4 {
		g.p("ADDQ $128, BX")
	} else {
		g.p("ADDQ $256, BX")
	}
	g.p("ADDQ $4, DI")
	g.p("DECQ R14")
	g.p("JNZ %s_quad", name)
	// The block's column scales, in each ui's column order, as fp32.
	g.p("PREFETCHT0 %d(R10)", 8*128)
	g.p("PREFETCHT0 %d(R10)", 8*128+64)
	columnScales(g, 24, 26)
	g.p("ADDQ $128, R10")
	for m := range mr {
		g.p("VBROADCASTSS %s, Z24", row("R12", m, 0))
		for i := range 4 {
			g.p("VMULPS Z24, Z%d, Z25", 26+i)
			g.p("VCVTDQ2PS %s, %s", accI(m, i), accI(m, i))
			g.p("VMULPS Z25, %s, %s", accI(m, i), accI(m, i))
			g.p("VADDPS %s, %s, %s", accI(m, i), accF(m, i), accF(m, i))
		}
	}
	g.p("ADDQ $4, R12")
	g.p("ADDQ $4, R13")
	g.p("DECQ AX")
	g.p("JNZ %s_block", name)
	// Back to column order: accF(m, i) lane L holds columns 16L+4i..+3.
	for m := range mr {
		a := func(i int) string { return accF(m, i) }
		columnOrder(g, a(0), a(1), a(2), a(3))
		for i := range 4 {
			g.p("VMOVUPS %s, %s", a(i), row("DX", m, 64*i))
		}
	}
	g.p("ADDQ $256, DX")
	g.p("DECQ CX")
	g.p("JNZ %s_panel", name)
	g.ret()
}

// kernelI8M8 emits i8{dt}m8: kernelI8Q8's sums for 8 rows at once (a
// decoding group, or eight rows of a prompt), reading each panel from
// memory once, in place; for dt "q4" over Q4 panels in the int8 unit's
// order, each half quad's nibbles split as kernelI8 splits them for one
// row (weights n = q+8, corrections shifted right by 4).
//
//	a+0 ad+8 ac+16 b+24 np+32 s+40 c+48 ldc+56 k+64 t+72
//
// a, ad, ac: the 8 rows' activations interleaved (q8Acts.gq): quad i of
// row r at a[32i+4r], block g's scales and corrections at ad[8g+r] and
// ac[8g+r]; b, np, s, c, ldc, k as kernelI8Q8's; t: 2 KiB of scratch, 64
// bytes aligned.
//
// Eight rows of 64 int32 sums would take every register, so each block of
// 32 k-rows is summed in two halves of the panel, u0,u1 then u2,u3: 16
// accumulators (8 rows × 2) started at the rows' corrections, each
// VPDPBUSD a register of weights and a row's broadcast quad, the panel
// prefetched a few KiB ahead (prefetchI8M8) with prefetchM8's
// non-temporal hint. The fp32 accumulators are in t (row r's ui at
// 256r+64i), added to exactly as kernelI8Q8 adds to its registers; after
// a panel's last block each row goes back to column order into C.
func kernelI8M8(g *gen, dt string) {
	q4 := dt == "q4"
	name := "i8" + dt + "m8"
	bType, block, quad, ahead := "*int8", 2048, 256, prefetchI8M8 // a block's and a quad's bytes of weights
	if q4 {
		bType, block, quad, ahead = "*byte", 1024, 128, prefetchI8M8/2
	}
	g.text(name, 80, fmt.Sprintf("func %s(a *int8, ad *float32, ac *int32, b %s, np int, s *uint16, c *float32, ldc uintptr, k int, t *byte)", name, bType))
	acc := func(r, i int) string { return fmt.Sprintf("Z%d", 2*r+i) }
	tile := func(r, i int) string { return fmt.Sprintf("%d(DI)", 256*r+64*i) }
	// body sums the block at BX.
	body := func() {
		// The block's column scales, in each ui's column order (Z18+i).
		columnScales(g, 24, 18)
		for h := range 2 {
			for r := range 8 {
				g.p("VPBROADCASTD %d(R13), %s", 4*r, acc(r, 0))
				if q4 {
					g.p("VPSRAD $4, %s, %s", acc(r, 0), acc(r, 0))
				}
				g.p("VMOVDQA64 %s, %s", acc(r, 0), acc(r, 1))
			}
			for q := range 8 {
				if q4 { // u2h, u2h+1: one zmm of nibbles
					off := quad*q + 64*h
					g.p(prefetchM8+" %d(BX)", ahead+off)
					splitQ4(g, fmt.Sprintf("%d(BX)", off), 30, "Z16", "Z17")
				} else {
					for i := range 2 {
						off := quad*q + 64*(2*h+i)
						g.p(prefetchM8+" %d(BX)", ahead+off)
						g.p("VMOVDQU64 %d(BX), Z%d", off, 16+i)
					}
				}
				for r := range 8 {
					g.p("VPBROADCASTD %d(R11), Z%d", 32*q+4*r, 22+r%2)
					g.p("VPDPBUSD Z%d, Z16, %s", 22+r%2, acc(r, 0))
					g.p("VPDPBUSD Z%d, Z17, %s", 22+r%2, acc(r, 1))
				}
			}
			for r := range 8 {
				g.p("VBROADCASTSS %d(R12), Z22", 4*r)
				for i := range 2 {
					g.p("VMULPS Z22, Z%d, Z23", 18+2*h+i)
					g.p("VCVTDQ2PS %s, %s", acc(r, i), acc(r, i))
					g.p("VMULPS Z23, %s, %s", acc(r, i), acc(r, i))
					g.p("VMOVAPS %s, Z31", tile(r, 2*h+i))
					g.p("VADDPS %s, Z31, Z31", acc(r, i))
					g.p("VMOVAPS Z31, %s", tile(r, 2*h+i))
				}
			}
		}
	}
	g.p("MOVQ a+0(FP), SI")
	g.p("MOVQ b+24(FP), BX")
	g.p("MOVQ np+32(FP), CX")
	g.p("MOVQ s+40(FP), R10")
	g.p("MOVQ c+48(FP), DX")
	g.p("MOVQ ldc+56(FP), R8")
	g.p("MOVQ t+72(FP), DI")
	if q4 {
		g.p("MOVL $0x0f0f0f0f, AX")
		g.p("VPBROADCASTD AX, Z30")
	}
	g.label(name + "_panel")
	clearTile(g, 8, tile)
	g.p("MOVQ SI, R11")
	g.p("MOVQ ad+8(FP), R12")
	g.p("MOVQ ac+16(FP), R13")
	g.p("MOVQ k+64(FP), AX")
	g.p("SHRQ $5, AX")
	g.label(name + "_block")
	body()
	g.p("ADDQ $%d, BX", block)
	g.p("ADDQ $256, R11")
	g.p("ADDQ $32, R12")
	g.p("ADDQ $32, R13")
	g.p("ADDQ $128, R10")
	g.p("DECQ AX")
	g.p("JNZ %s_block", name)
	// Back to column order, as kernelI8Q8 does, row by row into C.
	tileToC(g, 8, tile)
	g.p("ADDQ $256, DX")
	g.p("DECQ CX")
	g.p("JNZ %s_panel", name)
	g.ret()
}

// kernelI8Q8T emits i8q8m{mr}t: kernelI8Q8's sums for mr rows (at most
// 6) with the fp32 accumulators in t (64 bytes aligned, row r's ui at
// 256r+64i) instead of registers, which leaves room for 4·mr int32 ones:
// each quad of k-rows is loaded once for all mr rows.
//
//	kernelI8Q8's arguments, then t+88
func kernelI8Q8T(g *gen, mr int) {
	name := fmt.Sprintf("i8q8m%dt", mr)
	g.text(name, 96, fmt.Sprintf("func %s(a *int8, lda uintptr, ad *float32, ac *int32, ald uintptr, b *int8, np int, s *uint16, c *float32, ldc uintptr, k int, t *byte)", name))
	acc := func(r, i int) string { return fmt.Sprintf("Z%d", 4*r+i) }
	tile := func(r, i int) string { return fmt.Sprintf("%d(DI)", 256*r+64*i) }
	// row r of base: rows 0-2 from base, 3-5 from base3 (base + 3 strides).
	row := func(base, base3, stride string, r, d int) string {
		return rowAddr([3]string{base, base3}, stride, r, d)
	}
	i8Args(g)
	g.p("MOVQ t+88(FP), DI")
	g.label(name + "_panel")
	clearTile(g, mr, tile)
	g.p("MOVQ SI, R15")
	g.p("MOVQ ad+16(FP), R12")
	g.p("MOVQ ac+24(FP), R13")
	g.p("MOVQ k+80(FP), AX")
	g.p("SHRQ $5, AX")
	g.label(name + "_block")
	g.p("LEAQ (R13)(R9*2), R14")
	g.p("ADDQ R9, R14")
	for r := range mr {
		g.p("VPBROADCASTD %s, %s", row("R13", "R14", "R9", r, 0), acc(r, 0))
		for i := 1; i < 4; i++ {
			g.p("VMOVDQA64 %s, %s", acc(r, 0), acc(r, i))
		}
	}
	g.p("LEAQ (R15)(R11*2), R14")
	g.p("ADDQ R11, R14")
	for q := range 8 {
		loadQuad(g, 256*q, "BX", prefetchI8)
		for r := range mr {
			g.p("VPBROADCASTD %s, Z31", row("R15", "R14", "R11", r, 4*q))
			for i := range 4 {
				g.p("VPDPBUSD Z31, %s, %s", quadU[i], acc(r, i))
			}
		}
	}
	g.p("ADDQ $2048, BX")
	g.p("ADDQ $32, R15")
	// The block's column scales, in each ui's column order (Z24+i).
	g.p("PREFETCHT0 %d(R10)", 8*128)
	g.p("PREFETCHT0 %d(R10)", 8*128+64)
	columnScales(g, 28, 24)
	g.p("ADDQ $128, R10")
	g.p("LEAQ (R12)(R9*2), R14")
	g.p("ADDQ R9, R14")
	for r := range mr {
		g.p("VBROADCASTSS %s, Z28", row("R12", "R14", "R9", r, 0))
		for i := range 4 {
			g.p("VMULPS Z28, Z%d, Z29", 24+i)
			g.p("VCVTDQ2PS %s, %s", acc(r, i), acc(r, i))
			g.p("VMULPS Z29, %s, %s", acc(r, i), acc(r, i))
			g.p("VMOVAPS %s, Z31", tile(r, i))
			g.p("VADDPS %s, Z31, Z31", acc(r, i))
			g.p("VMOVAPS Z31, %s", tile(r, i))
		}
	}
	g.p("ADDQ $4, R12")
	g.p("ADDQ $4, R13")
	g.p("DECQ AX")
	g.p("JNZ %s_block", name)
	// Back to column order, as kernelI8Q8 does, row by row into C.
	tileToC(g, mr, tile)
	g.p("ADDQ $256, DX")
	g.p("DECQ CX")
	g.p("JNZ %s_panel", name)
	g.ret()
}

// i8Args loads the int8 kernels' common arguments: SI a, R11 lda, R9 ald,
// BX b, CX np, R10 s, DX c, R8 ldc.
func i8Args(g *gen) {
	g.p("MOVQ a+0(FP), SI")
	g.p("MOVQ lda+8(FP), R11")
	g.p("MOVQ ald+32(FP), R9")
	g.p("MOVQ b+40(FP), BX")
	g.p("MOVQ np+48(FP), CX")
	g.p("MOVQ s+56(FP), R10")
	g.p("MOVQ c+64(FP), DX")
	g.p("MOVQ ldc+72(FP), R8")
}

// columnScales loads a block's 64 fp16 column scales at R10 into Z{tmp}
// and Z{tmp+1} and writes them as fp32 into Z{dst}..Z{dst+3}, Z{dst+i}
// in the column order of quadU[i] (i8scales<>).
func columnScales(g *gen, tmp, dst int) {
	g.p("VMOVDQU64 (R10), Z%d", tmp)
	g.p("VMOVDQU64 64(R10), Z%d", tmp+1)
	for i := range 4 {
		g.p("VMOVDQU64 i8scales<>+%d(SB), Z%d", 64*i, dst+i)
		g.p("VPERMI2Q Z%d, Z%d, Z%d", tmp+1, tmp, dst+i)
		g.p("VCVTPH2PS Y%d, Z%d", dst+i, dst+i)
	}
}

// loadQuad loads the quad of k-rows at off(base) of Q8 panels in the int8
// unit's order into quadU, prefetching ahead bytes further on (none if 0).
func loadQuad(g *gen, off int, base string, ahead int) {
	for i, u := range quadU {
		if ahead > 0 {
			g.p("PREFETCHT0 %d(%s)", off+64*i+ahead, base)
		}
		g.p("VMOVDQU64 %d(%s), %s", off+64*i, base, u)
	}
}

// quadU are the registers the kernels load u0..u3 of a quad into.
var quadU = [4]string{"Z24", "Z25", "Z26", "Z27"}

// columnOrder puts one row's sums a0..a3 (ai's lane L holds columns
// 16L+4i..+3, the order of quadU) back into column order, in place, by a
// 4×4 shuffle of 128-bit lanes (Z24..Z27 are clobbered).
func columnOrder(g *gen, a0, a1, a2, a3 string) {
	g.p("VSHUFF32X4 $0x44, %s, %s, Z24", a1, a0)
	g.p("VSHUFF32X4 $0xEE, %s, %s, Z25", a1, a0)
	g.p("VSHUFF32X4 $0x44, %s, %s, Z26", a3, a2)
	g.p("VSHUFF32X4 $0xEE, %s, %s, Z27", a3, a2)
	g.p("VSHUFF32X4 $0x88, Z26, Z24, %s", a0)
	g.p("VSHUFF32X4 $0xDD, Z26, Z24, %s", a1)
	g.p("VSHUFF32X4 $0x88, Z27, Z25, %s", a2)
	g.p("VSHUFF32X4 $0xDD, Z27, Z25, %s", a3)
}

// clearTile zeroes rows rows of an L1 tile of fp32 sums (Z31 is
// clobbered).
func clearTile(g *gen, rows int, tile func(r, i int) string) {
	g.p("VPXORD Z31, Z31, Z31")
	for r := range rows {
		for i := range 4 {
			g.p("VMOVAPS Z31, %s", tile(r, i))
		}
	}
}

// tileToC stores rows rows of fp32 sums from an L1 tile (row r's ui at
// tile(r, i)) into C at DX (rows R8 bytes apart) in column order.
func tileToC(g *gen, rows int, tile func(r, i int) string) {
	g.p("MOVQ DX, R14")
	for r := range rows {
		for i := range 4 {
			g.p("VMOVAPS %s, Z%d", tile(r, i), i)
		}
		columnOrder(g, "Z0", "Z1", "Z2", "Z3")
		for i := range 4 {
			g.p("VMOVUPS Z%d, %d(R14)", i, 64*i)
		}
		if r < rows-1 {
			g.p("ADDQ R8, R14")
		}
	}
}

// quantActs emits quantActsAsm: blocks of 32 fp32 activations rounded to
// Q8_0 as package kernels' quantizeActBlock does, bit for bit: d =
// amax/127 and q = x·(127/amax) converted to int32 under the default
// rounding (to nearest even), then narrowed (|q| ≤ 127, so no
// saturation), corr = −128·Σq. It stops before the first block holding
// a NaN or an infinity, or whose values are all at most 2^-100 in
// magnitude, and returns how many blocks it did (Go does that block).
//
//	q+0 d+8 corr+16 x+24 n+32 ret+40
func quantActs(g *gen) {
	g.text("quantActsAsm", 48, "func quantActsAsm(q *int8, d *float32, corr *int32, x *float32, n int) int")
	g.p("MOVQ q+0(FP), DI")
	g.p("MOVQ d+8(FP), R8")
	g.p("MOVQ corr+16(FP), R9")
	g.p("MOVQ x+24(FP), SI")
	g.p("MOVQ n+32(FP), CX")
	g.p("XORQ AX, AX")
	g.p("VBROADCASTSS i8consts<>+0(SB), Z31")
	g.p("VMOVSS i8consts<>+4(SB), X30")
	g.p("VMOVSS i8consts<>+8(SB), X29")
	g.label("qa_loop")
	g.p("CMPQ AX, CX")
	g.p("JGE qa_done")
	g.p("VMOVUPS (SI), Z0")
	g.p("VMOVUPS 64(SI), Z1")
	g.p("VFPCLASSPSZ $0x99, Z0, K1")
	g.p("VFPCLASSPSZ $0x99, Z1, K2")
	g.p("KORTESTW K1, K2")
	g.p("JNZ qa_done")
	g.p("VANDPS Z31, Z0, Z2")
	g.p("VANDPS Z31, Z1, Z3")
	g.p("VMAXPS Z3, Z2, Z2")
	g.p("VEXTRACTF32X8 $1, Z2, Y3")
	g.p("VMAXPS Y3, Y2, Y2")
	g.p("VEXTRACTF128 $1, Y2, X3")
	g.p("VMAXPS X3, X2, X2")
	g.p("VPERMILPS $0x4E, X2, X3")
	g.p("VMAXPS X3, X2, X2")
	g.p("VPERMILPS $0xB1, X2, X3")
	g.p("VMAXPS X3, X2, X2")
	g.p("VUCOMISS X29, X2")
	g.p("JBE qa_done")
	g.p("VDIVSS X2, X30, X4") // 127/amax
	g.p("VDIVSS X30, X2, X5") // amax/127
	g.p("VMOVSS X5, (R8)")
	g.p("VBROADCASTSS X4, Z4")
	g.p("VMULPS Z4, Z0, Z0")
	g.p("VMULPS Z4, Z1, Z1")
	g.p("VCVTPS2DQ Z0, Z0")
	g.p("VCVTPS2DQ Z1, Z1")
	g.p("VPMOVSDB Z0, X6")
	g.p("VPMOVSDB Z1, X7")
	g.p("VMOVDQU X6, (DI)")
	g.p("VMOVDQU X7, 16(DI)")
	g.p("VPADDD Z1, Z0, Z0")
	g.p("VEXTRACTI32X8 $1, Z0, Y1")
	g.p("VPADDD Y1, Y0, Y0")
	g.p("VEXTRACTI128 $1, Y0, X1")
	g.p("VPADDD X1, X0, X0")
	g.p("VPSHUFD $0x4E, X0, X1")
	g.p("VPADDD X1, X0, X0")
	g.p("VPSHUFD $0xB1, X0, X1")
	g.p("VPADDD X1, X0, X0")
	g.p("VMOVD X0, DX")
	g.p("IMULL $-128, DX")
	g.p("MOVL DX, (R9)")
	g.p("ADDQ $128, SI")
	g.p("ADDQ $32, DI")
	g.p("ADDQ $4, R8")
	g.p("ADDQ $4, R9")
	g.p("INCQ AX")
	g.p("JMP qa_loop")
	g.label("qa_done")
	g.p("MOVQ AX, ret+40(FP)")
	g.ret()
}

// pairRows emits pairRowsAsm: dst[j] = the bf16 pair (a[j], b[j]) (a in
// the low half, each rounded as VCVTNE2PS2BF16 rounds: to nearest even,
// denormals to zero) for j < n, n a multiple of 16: two rows of a weight
// block become one pair-row of the bf16 unit's B.
//
//	dst+0 a+8 b+16 n+24
func pairRows(g *gen) {
	g.text("pairRowsAsm", 32, "func pairRowsAsm(dst, a, b *float32, n int)")
	g.p("MOVQ dst+0(FP), DI")
	g.p("MOVQ a+8(FP), SI")
	g.p("MOVQ b+16(FP), DX")
	g.p("MOVQ n+24(FP), CX")
	g.p("SHRQ $4, CX")
	g.p("JEQ pr_done")
	g.p("VMOVDQU64 i8pairs<>(SB), Z3")
	g.label("pr_loop")
	g.p("VMOVUPS (SI), Z0")
	g.p("VMOVUPS (DX), Z1")
	vcvtne2ps2bf16(g, 2, 1, 0)
	g.p("VPERMW Z2, Z3, Z2")
	g.p("VMOVUPS Z2, (DI)")
	g.p("ADDQ $64, SI")
	g.p("ADDQ $64, DX")
	g.p("ADDQ $64, DI")
	g.p("DECQ CX")
	g.p("JNE pr_loop")
	g.label("pr_done")
	g.ret()
}

// q4ToQ8 emits q4ToQ8Asm: quads of Q4 panels in the int8 unit's order
// (two zmm of nibbles n = q+8) as quads of Q8 panels in that order (u0..u3,
// each weight q+128), for the kernels of 2 to 6 rows: each zmm's nibbles
// split (splitQ4), plus 120.
//
//	dst+0 src+8 quads+16
func q4ToQ8(g *gen) {
	g.text("q4ToQ8Asm", 24, "func q4ToQ8Asm(dst *int8, src *byte, quads int)")
	g.p("MOVQ dst+0(FP), DI")
	g.p("MOVQ src+8(FP), SI")
	g.p("MOVQ quads+16(FP), CX")
	g.p("TESTQ CX, CX")
	g.p("JEQ q4_done")
	g.p("MOVL $0x0f0f0f0f, AX")
	g.p("VPBROADCASTD AX, Z31")
	g.p("MOVL $0x78787878, AX")
	g.p("VPBROADCASTD AX, Z30")
	g.label("q4_loop")
	g.p("PREFETCHT0 %d(SI)", prefetchI8Q4)
	g.p("PREFETCHT0 %d(SI)", prefetchI8Q4+64)
	for h := range 2 {
		splitQ4(g, fmt.Sprintf("%d(SI)", 64*h), 31, "Z0", "Z1")
		for i := range 2 {
			g.p("VPADDB Z30, Z%d, Z%d", i, i)
			g.p("VMOVDQU64 Z%d, %d(DI)", i, 128*h+64*i)
		}
	}
	g.p("ADDQ $128, SI")
	g.p("ADDQ $256, DI")
	g.p("DECQ CX")
	g.p("JNE q4_loop")
	g.label("q4_done")
	g.ret()
}

// splitQ4 emits the split of the 64 bytes at mem (one zmm of a Q4 quad in
// the int8 unit's order) into its low nibbles, lo, and its high ones, hi:
// bytes 0..15 (mask: the zmm register of 0x0f bytes).
func splitQ4(g *gen, mem string, mask int, lo, hi string) {
	g.p("VPSRLW $4, %s, %s", mem, hi)
	g.p("VPANDD %s, Z%d, %s", mem, mask, lo)
	g.p("VPANDD Z%d, %s, %s", mask, hi, hi)
}
