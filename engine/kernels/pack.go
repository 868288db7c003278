package kernels

import "math"

// Packing: copying a block of B into the contiguous 64-column panel layout
// the microkernels read (k-row i of a panel at i*64), widening bf16/f16 to
// fp32 on the way. Each function handles one panel of `rows` k-rows; the
// full-width cases go to the assembly loops when the active variant has
// them, the rest (edges, the Go variant) are plain loops here.

// widenPanel writes rows k-rows of the interleaved bf16 panel at src[soff:]
// as natural-order fp32 to dst[doff:].
func widenPanel(dst []float32, doff int, src []uint16, soff, rows int) {
	if rows == 0 || widenPanelAsm(dst, doff, src, soff, rows) {
		return
	}
	for i := range rows {
		s := src[soff+i*panelW:][:panelW]
		d := dst[doff+i*panelW:][:panelW]
		for w, v := range s {
			d[bf16Col(w)] = BF16ToF32(v)
		}
	}
}

// packRowsF32 copies ncols (≤ 64) columns of rows source rows, lds apart, to
// the panel at dst[doff:], zero-filling columns ncols..63.
func packRowsF32(dst []float32, doff int, src []float32, soff, lds, rows, ncols int) {
	if rows == 0 {
		return
	}
	if ncols == panelW && packRowsF32Asm(dst, doff, src, soff, lds, rows) {
		return
	}
	for i := range rows {
		d := dst[doff+i*panelW:][:panelW]
		copy(d, src[soff+i*lds:][:ncols])
		clear(d[ncols:])
	}
}

// packRowsU16 is packRowsF32 for bf16 or f16 sources (dt).
func packRowsU16(dst []float32, doff int, src []uint16, soff, lds, rows, ncols int, dt DType) {
	if rows == 0 {
		return
	}
	if ncols == panelW && packRowsU16Asm(dst, doff, src, soff, lds, rows, dt) {
		return
	}
	for i := range rows {
		d := dst[doff+i*panelW:][:panelW]
		s := src[soff+i*lds:][:ncols]
		if dt == BF16 {
			for j, v := range s {
				d[j] = BF16ToF32(v)
			}
		} else {
			for j, v := range s {
				d[j] = F16ToF32(v)
			}
		}
		clear(d[ncols:])
	}
}

// packColsF32 is the transposing pack: panel column j, k-row i is
// src[soff + j*lds + i], for j < ncols (≤ 64); columns ncols..63 are zero.
func packColsF32(dst []float32, doff int, src []float32, soff, lds, rows, ncols int) {
	if rows == 0 {
		return
	}
	if packColsF32Asm(dst, doff, panelW, src, soff, lds, rows, ncols) {
		return // the masked gathers wrote the zero columns too
	}
	transpose64(dst, doff, panelW, src, soff, lds, rows, ncols)
	if ncols < panelW {
		for i := range rows {
			clear(dst[doff+i*panelW+ncols : doff+(i+1)*panelW])
		}
	}
}

// transpose64 writes dst[doff + i*ldd + j] = src[soff + j*lds + i] for
// j < ncols (≤ 64) and i < rows.
func transpose64(dst []float32, doff, ldd int, src []float32, soff, lds, rows, ncols int) {
	if rows == 0 || ncols == 0 {
		return
	}
	if ncols == panelW && packColsF32Asm(dst, doff, ldd, src, soff, lds, rows, ncols) {
		return
	}
	// Four source rows at a time: four sequential read streams and
	// 16-byte groups of writes.
	j := 0
	for ; j+4 <= ncols; j += 4 {
		s0 := src[soff+j*lds:][:rows]
		s1 := src[soff+(j+1)*lds:][:rows]
		s2 := src[soff+(j+2)*lds:][:rows]
		s3 := src[soff+(j+3)*lds:][:rows]
		for i := range rows {
			o := doff + i*ldd + j
			dd := dst[o : o+4 : o+4]
			dd[0], dd[1], dd[2], dd[3] = s0[i], s1[i], s2[i], s3[i]
		}
	}
	for ; j < ncols; j++ {
		s := src[soff+j*lds:][:rows]
		for i, v := range s {
			dst[doff+i*ldd+j] = v
		}
	}
}

// transposeF32 writes the rows×cols transpose of src (row stride lds) to
// dst (row stride ldd): dst[c*ldd + r] = src[r*lds + c].
func transposeF32(dst []float32, ldd int, src []float32, lds, rows, cols int) {
	// Blocks of 64 source rows become 64-wide column blocks of dst.
	for r := 0; r < rows; r += panelW {
		transpose64(dst, r, ldd, src, r*lds, lds, cols, min(panelW, rows-r))
	}
}

// packPanelsT packs the B block of LinearBackwardInput (B = w, k-row n is
// weight row n) from w's 16-bit Linear panels p: dst[doff + i*64 + j] =
// w[pc+i][col0+j] for i < kc and j < ncols (≤ 64), zero for j ≥ ncols.
// w[n][k] sits at k-row k, word p.word(n) of panel n/64, so each run of
// k-rows inside one source panel is a transpose of an L1-sized tile: on
// AVX-512 gathered whole, on AVX2 in 8×8 tiles of contiguous reads (the
// edges of a run that do not fill a tile, and the Go variant, in the loop
// here; the same bits).
func packPanelsT(dst []float32, doff int, p *panels, pc, kc, col0, ncols int) {
	if p.q8 != nil || p.q4 != nil {
		packPanelsTQuant(dst, doff, p, pc, kc, col0, ncols)
		return
	}
	src, dt := p.u16()
	var tab *[1 << 16]float32
	if dt == F16 {
		tab = f16Table()
	}
	K := p.k
	for i := 0; i < kc; {
		// A run of rows whose words in the panel are evenly spaced: 16
		// (bf16, stride 2 words) or the rest of the panel (f16, stride 1).
		n := pc + i
		run, stride := min(kc-i, panelW-n%panelW), 1
		if dt == BF16 {
			run, stride = min(kc-i, 16-n%16), 2
		}
		soff := (n/panelW)*K*panelW + col0*panelW + p.word(n)
		done, cols := packPanelsTAsm(dst, doff+i*panelW, src, soff, stride, run, ncols, dt)
		if done == run && cols == ncols {
			i += run
			continue
		}
		// What the assembly left: columns cols.. of its rows, all of the
		// others.
		for r := range run {
			j0 := 0
			if r < done {
				j0 = cols
			}
			d := dst[doff+(i+r)*panelW:][:panelW]
			s := src[soff+r*stride:]
			if dt == BF16 {
				for j := j0; j < ncols; j++ {
					d[j] = BF16ToF32(s[j*panelW])
				}
			} else {
				for j := j0; j < ncols; j++ {
					d[j] = tab[s[j*panelW]]
				}
			}
			if r >= done {
				clear(d[ncols:])
			}
		}
		i += run
	}
}

// packDPT packs the B block of LinearBackwardInput on UnitBF16 (B = w as
// bf16 pairs: pair-row i holds weight rows 2i and 2i+1) from w's dp panels
// d (B = wᵀ: each run of 64 words holds one pair of weight columns of 64
// weight rows; K2 pairs of columns a panel): dst[doff + i*64 + j] =
// (w[2(pc+i)][col0+j], w[2(pc+i)+1][col0+j]) for i < kc and j < ncols,
// zero for j ≥ ncols. Rows 2(pc+i) and 2(pc+i)+1 are neighbours in their
// panel, so their words for one column pair are one aligned 64-bit word
// (lo₀ hi₀ lo₁ hi₁ in 16-bit units), and the two output pairs are the same
// four halves as lo₀ lo₁ hi₀ hi₁; the pairs of rows of one panel are
// consecutive qwords, which the assembly transposes in tiles. col0 is even
// (a panel's first column); rows past the weight's last read as the
// panel's zero padding.
func packDPT(dst []float32, doff int, d []float32, K2, pc, kc, col0, ncols int) {
	for i := 0; i < kc; {
		n := 2 * (pc + i)
		run := min(kc-i, (panelW-n%panelW)/2) // pair-rows left in n's panel
		soff := (n/panelW)*K2*panelW + n%panelW + col0/2*panelW
		done, cols := packDPTAsm(dst, doff+i*panelW, d, soff, run, ncols)
		for r := range run {
			j0 := 0
			if r < done {
				j0 = cols
			}
			out := dst[doff+(i+r)*panelW:][:panelW]
			s := d[soff+2*r:]
			for j := j0; j < ncols; j += 2 {
				q := uint64(math.Float32bits(s[j/2*panelW])) | uint64(math.Float32bits(s[j/2*panelW+1]))<<32
				q = q&0xffff00000000ffff | q>>16&0xffff0000 | q<<16&0xffff00000000
				out[j] = math.Float32frombits(uint32(q))
				out[j+1] = math.Float32frombits(uint32(q >> 32)) // past an odd ncols: cleared below
			}
			clear(out[ncols:])
		}
		i += run
	}
}
