package kernels

import (
	"fmt"
	"math"
)

// Blockwise quantized weights, laid out as GGML's:
//
//   - Q8 (Q8_0): each run of qBlock consecutive weights of a row (along K)
//     is 32 int8 values q and one fp16 scale d, and stands for d·q.
//   - Q4 (Q4_0): each run of 32 is 16 bytes of 4-bit values n (byte j
//     holds weight j in its low nibble and weight j+16 in its high one)
//     and one fp16 scale d, and stands for (n−8)·d.
//
// d·q and (n−8)·d are exact in fp32 (an 11-bit significand times an 8- or
// 4-bit integer), so "dequantize, then multiply in fp32" has one answer,
// which every kernel reproduces bit for bit: the quantized products sum
// the same fp32 products in the same order as an F32 matrix holding the
// dequantized values (Dequantize), so batch invariance and the sampler's
// and trainer's equal logprobs carry over unchanged. With the bytes and
// scales as GGML's, a GGUF export runs the same values in llama.cpp.
//
// Panels (panels.go) keep one k-row of 64 columns contiguous: Q8 as 64
// int8 in natural column order, Q4 as 32 bytes of signed nibbles (n−8),
// byte 8s+i holding column 16s+i low and 16s+8+i high (one sign-extending
// load widens 16 columns), and the scales as a second array, 64 per block
// of 32 k-rows. The AVX2 kernels read both in place while streaming
// (decode: a quarter or an eighth of fp32's bytes, plus the scales); every
// other path widens a block of panels to fp32 (an AVX2 loop where the CPU
// has it) and runs the fp32 kernels.

// qBlock is the number of weights along K that share one scale.
const qBlock = 32

// NewMatQ8 wraps quantized weights as a Q8 matrix without copying: quants
// is row-major [rows×cols] and scales holds the fp16 scale of each block of
// 32 weights of a row, row-major [rows×cols/32]. cols must be a multiple of
// 32.
func NewMatQ8(rows, cols int, quants []int8, scales []uint16) *Mat {
	m := &Mat{Rows: rows, Cols: cols, DType: Q8, Quants: quants, Scales: scales}
	checkQuant(m)
	return m
}

// NewMatQ4 wraps quantized weights as a Q4 matrix without copying: nibbles
// holds each row's blocks of 32 weights as GGML's Q4_0 does (16 bytes a
// block: byte j is weight j in the low nibble and weight j+16 in the high
// one, value (nibble−8)·d), row-major [rows×cols/2]; scales holds the fp16
// d of each block, row-major [rows×cols/32]. cols must be a multiple of 32.
func NewMatQ4(rows, cols int, nibbles []byte, scales []uint16) *Mat {
	m := &Mat{Rows: rows, Cols: cols, DType: Q4, Nibbles: nibbles, Scales: scales}
	checkQuant(m)
	return m
}

// checkQuant panics unless m holds a well-formed Q8 or Q4 matrix.
func checkQuant(m *Mat) {
	n := len(m.Quants)
	want := m.Rows * m.Cols
	if m.DType == Q4 {
		n, want = len(m.Nibbles), m.Rows*m.Cols/2
	}
	if m.Cols%qBlock != 0 || n != want || len(m.Scales) != m.Rows*m.Cols/qBlock {
		panic(fmt.Sprintf("kernels: %v matrix %dx%d with %d value bytes and %d scales (columns must be a multiple of %d)",
			m.DType, m.Rows, m.Cols, n, len(m.Scales), qBlock))
	}
}

// CanQuantize reports whether a matrix with cols columns can be stored as
// dt (Q8 or Q4: whole blocks of 32 along each row).
func CanQuantize(cols int, dt DType) bool {
	return (dt == Q8 || dt == Q4) && cols%qBlock == 0
}

// Quantize returns m stored as dt, Q8 or Q4. m is left as it was; when it
// is not yet packed its stored copy is read directly. It fails when a row
// length is not a multiple of 32 or a weight is not finite.
//
// Q8 rounds each weight to the nearest multiple of its block's scale d =
// max|w|/127 (d rounded to fp16, or up where a subnormal scale lost too
// much, then the weights to d·q with |q| ≤ 127, so each is within d/2 of
// its value). Q4 quantizes as GGML's reference quantize_row_q4_0 does, so
// its bytes are those llama.cpp's own Q4_0 conversion writes: d =
// m/−8 with m the block's weight of largest magnitude (the first, on a
// tie), stored in fp16, and each weight w to the nibble trunc(w·(1/d) +
// 8.5) clamped to 15, with d and 1/d in fp32 (so a weight is within about
// d/2 of its value, up to the fp16 rounding of d).
func Quantize(m *Mat, dt DType) (*Mat, error) {
	if dt != Q8 && dt != Q4 {
		return nil, fmt.Errorf("kernels: cannot quantize to %v", dt)
	}
	N, K := m.Rows, m.Cols
	if !CanQuantize(K, dt) {
		return nil, fmt.Errorf("kernels: cannot quantize a %dx%d matrix to %v: rows of %d are not whole blocks of %d", N, K, dt, K, qBlock)
	}
	var q8 []int8
	var q4 []byte
	if dt == Q8 {
		q8 = make([]int8, N*K)
	} else {
		q4 = make([]byte, N*K/2)
	}
	s := make([]uint16, N*K/qBlock)
	row := make([]float32, K)
	for n := range N {
		m.storedRow(row, n)
		var err error
		sc := s[n*K/qBlock : (n+1)*K/qBlock]
		if dt == Q8 {
			err = quantizeRowQ8(q8[n*K:(n+1)*K], sc, row)
		} else {
			err = quantizeRowQ4(q4[n*K/2:(n+1)*K/2], sc, row)
		}
		if err != nil {
			return nil, fmt.Errorf("kernels: quantize row %d: %w", n, err)
		}
	}
	if dt == Q8 {
		return NewMatQ8(N, K, q8, s), nil
	}
	return NewMatQ4(N, K, q4, s), nil
}

// checkFinite fails on the first weight of a block that is not finite.
func checkFinite(x []float32, col int) error {
	for i, v := range x {
		if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
			return fmt.Errorf("weight %v at column %d is not finite", v, col+i)
		}
	}
	return nil
}

// quantizeRowQ8 quantizes one row (a whole number of blocks).
func quantizeRowQ8(q []int8, scales []uint16, row []float32) error {
	for b := range scales {
		x := row[b*qBlock : (b+1)*qBlock]
		if err := checkFinite(x, b*qBlock); err != nil {
			return err
		}
		var amax float32
		for _, v := range x {
			amax = max(amax, float32(math.Abs(float64(v))))
		}
		h := F32ToF16(amax / 127)
		if amax/F16ToF32(h) > 127.5 {
			// A subnormal fp16 scale rounded down by more than a
			// half step of 127: take the next one up, so no weight
			// is clamped.
			h++
		}
		scales[b] = h
		d := F16ToF32(h)
		qb := q[b*qBlock : (b+1)*qBlock]
		if d == 0 {
			clear(qb)
			continue
		}
		for i, v := range x {
			// Round to nearest, ties away from zero (C's roundf, as
			// GGML); |v/d| ≤ 127.5, so the clamp only keeps -128 out.
			r := math.Round(float64(v / d))
			qb[i] = int8(max(-127, min(127, r)))
		}
	}
	return nil
}

// quantizeRowQ4 quantizes one row (a whole number of blocks) into GGML
// Q4_0 nibbles (len(row)/2 bytes) and scales, with GGML's reference
// rounding (see Quantize).
func quantizeRowQ4(q []byte, scales []uint16, row []float32) error {
	for b := range scales {
		x := row[b*qBlock : (b+1)*qBlock]
		if err := checkFinite(x, b*qBlock); err != nil {
			return err
		}
		var amax, m float32
		for _, v := range x {
			if a := float32(math.Abs(float64(v))); amax < a {
				amax, m = a, v
			}
		}
		d := m / -8
		var id float32
		if d != 0 {
			id = 1 / d
		}
		h := F32ToF16(d)
		if math.IsInf(float64(F16ToF32(h)), 0) {
			return fmt.Errorf("weight %v in the block at column %d is too large for a Q4 scale in fp16", m, b*qBlock)
		}
		scales[b] = h
		nib := func(v float32) byte {
			// Each step rounded to fp32 (the conversions keep Go
			// from fusing them), truncated toward zero as C's cast.
			t := float32(float32(v*id) + 8.5)
			return byte(min(15, int8(t)))
		}
		qb := q[b*qBlock/2 : (b+1)*qBlock/2]
		for j := range qb {
			qb[j] = nib(x[j]) | nib(x[j+qBlock/2])<<4
		}
	}
	return nil
}

// storedRow widens row r of m into dst, from the stored copy while m is not
// packed (no panels are built just to read it), else through Row.
func (m *Mat) storedRow(dst []float32, r int) {
	c := m.Cols
	if m.pk.Load() == nil {
		switch {
		case m.DType == F32 && m.F32 != nil:
			copy(dst[:c], m.F32[r*c:(r+1)*c])
			return
		case m.DType == BF16 && m.U16 != nil:
			for k, v := range m.U16[r*c : (r+1)*c] {
				dst[k] = BF16ToF32(v)
			}
			return
		case m.DType == F16 && m.U16 != nil:
			tab := f16Table()
			for k, v := range m.U16[r*c : (r+1)*c] {
				dst[k] = tab[v]
			}
			return
		}
	}
	m.Row(dst, r)
}

// Dequantize returns a new F32 matrix holding m's values as the kernels
// see them (for Q8, d·q; for Q4, (n−8)·d). It is the oracle of the
// quantized products.
func Dequantize(m *Mat) *Mat {
	out := make([]float32, m.Rows*m.Cols)
	for n := range m.Rows {
		m.storedRow(out[n*m.Cols:(n+1)*m.Cols], n)
	}
	return NewMatF32(m.Rows, m.Cols, out)
}

// Q8Blocks returns the quantized weights and scales of a Q8 matrix in the
// layout of NewMatQ8 (row-major; new copies read back from the panels,
// building them if needed). For export.
func (m *Mat) Q8Blocks() (quants []int8, scales []uint16) {
	N, K, G := m.Rows, m.Cols, m.Cols/qBlock
	quants = make([]int8, N*K)
	scales = make([]uint16, N*G)
	for n := range N {
		m.Q8Row(quants[n*K:(n+1)*K], scales[n*G:(n+1)*G], n)
	}
	return quants, scales
}

// Q8Row copies the quantized weights (len Cols) and scales (len Cols/32) of
// row n of a Q8 matrix, read back from the panels (building them if
// needed). For export, row by row.
func (m *Mat) Q8Row(quants []int8, scales []uint16, n int) {
	if m.DType != Q8 {
		panic("kernels: Q8Row of a " + m.DType.String() + " matrix")
	}
	p := m.panels()
	K := m.Cols
	for k := range quants[:K] {
		quants[k] = p.q8At(n, k)
	}
	p.rowScales(scales, n)
}

// Q4Row copies the GGML Q4_0 nibbles (len Cols/2, as NewMatQ4) and scales
// (len Cols/32) of row n of a Q4 matrix, read back from the panels
// (building them if needed). For export, row by row.
func (m *Mat) Q4Row(nibbles []byte, scales []uint16, n int) {
	if m.DType != Q4 {
		panic("kernels: Q4Row of a " + m.DType.String() + " matrix")
	}
	p := m.panels()
	nibbles = nibbles[:m.Cols/2]
	clear(nibbles)
	for k := range m.Cols {
		v := byte(p.q4Nibble(n, k)+8) & 15
		nibbles[k/qBlock*qBlock/2+k%(qBlock/2)] |= v << (4 * (k % qBlock / (qBlock / 2)))
	}
	p.rowScales(scales, n)
}

// Q4Blocks returns the nibbles and scales of a Q4 matrix in the layout of
// NewMatQ4 (new copies read back from the panels). For tests and export.
func (m *Mat) Q4Blocks() (nibbles []byte, scales []uint16) {
	N, K, G := m.Rows, m.Cols, m.Cols/qBlock
	nibbles = make([]byte, N*K/2)
	scales = make([]uint16, N*G)
	for n := range N {
		m.Q4Row(nibbles[n*K/2:(n+1)*K/2], scales[n*G:(n+1)*G], n)
	}
	return nibbles, scales
}

// rowScales copies the scales of weight row n (len K/32) out of the
// panels.
func (p *panels) rowScales(scales []uint16, n int) {
	G := p.k / qBlock
	sb := (n/panelW)*G*panelW + n%panelW
	for g := range scales[:G] {
		scales[g] = p.qs[sb+g*panelW]
	}
}

// QuantizeRowQ8 quantizes one row of weights (a whole number of blocks of
// 32) as Quantize does, into quants (len(row)) and scales (len(row)/32).
func QuantizeRowQ8(quants []int8, scales []uint16, row []float32) error {
	if len(row)%qBlock != 0 || len(quants) < len(row) || len(scales) < len(row)/qBlock {
		return fmt.Errorf("kernels: QuantizeRowQ8 of %d values into %d quants and %d scales", len(row), len(quants), len(scales))
	}
	return quantizeRowQ8(quants[:len(row)], scales[:len(row)/qBlock], row)
}

// QuantizeRowQ4 quantizes one row of weights (a whole number of blocks of
// 32) as Quantize does, into GGML Q4_0 nibbles (len(row)/2) and scales
// (len(row)/32).
func QuantizeRowQ4(nibbles []byte, scales []uint16, row []float32) error {
	if len(row)%qBlock != 0 || len(nibbles) < len(row)/2 || len(scales) < len(row)/qBlock {
		return fmt.Errorf("kernels: QuantizeRowQ4 of %d values into %d bytes and %d scales", len(row), len(nibbles), len(scales))
	}
	return quantizeRowQ4(nibbles[:len(row)/2], scales[:len(row)/qBlock], row)
}

// scale returns the fp16 scale of weight (n, k) of quantized panels.
func (p *panels) scale(n, k int) uint16 {
	G := p.k / qBlock
	return p.qs[(n/panelW)*G*panelW+(k/qBlock)*panelW+n%panelW]
}

// qAt returns weight (n, k) of Q8 or Q4 panels, dequantized.
func (p *panels) qAt(n, k int) float32 {
	var q int
	if p.q4 != nil {
		q = p.q4Nibble(n, k)
	} else {
		q = int(p.q8At(n, k))
	}
	return float32(q) * f16Table()[p.scale(n, k)]
}

// q4Pos returns the byte of column j (< 64) within a k-row of a Q4 panel
// and the shift of its nibble in it.
func q4Pos(j int) (byteOff int, shift uint) {
	return 8*(j/16) + j%8, uint(4 * (j % 16 / 8))
}

// q4Nibble returns weight (n, k) of Q4 panels as the signed n−8.
func (p *panels) q4Nibble(n, k int) int {
	if p.vnni {
		b, sh := q4VnniPos(k, n%panelW)
		return int(p.q4[(n/panelW)*p.k*panelW/2+b]>>sh&15) - 8
	}
	b, sh := q4Pos(n % panelW)
	return int(signedNibble(p.q4[(n/panelW)*p.k*panelW/2+k*panelW/2+b], sh))
}

// signedNibble reads the 4-bit two's-complement value at bit sh (0 or 4)
// of a Q4 panel byte: n−8 for GGML's nibble n.
func signedNibble(b byte, sh uint) int8 { return int8(b>>sh<<4) >> 4 }

// fillQuant writes weight row n = 64q+j of a Q8 or Q4 m into column j of
// panel q.
func (p *panels) fillQuant(m *Mat, q, j int) {
	K, G := p.k, p.k/qBlock
	n := q*panelW + j
	// The orders' loops written out (setQ8 and setQ4 say the same per
	// weight): packing through them took 2–3.5× as long.
	switch {
	case m.DType == Q8 && p.vnni:
		dst := p.q8[q*K*panelW:][:K*panelW]
		for k, v := range m.Quants[n*K : (n+1)*K] {
			dst[vnniPos(k, j)] = v ^ -128
		}
	case m.DType == Q4 && p.vnni:
		dst := p.q4[q*K*panelW/2:][:K*panelW/2]
		src := m.Nibbles[n*K/2 : (n+1)*K/2]
		for k := range K {
			v := src[k/qBlock*qBlock/2+k%(qBlock/2)] >> (4 * (k % qBlock / (qBlock / 2)))
			b, sh := q4VnniPos(k, j)
			dst[b] |= (v & 15) << sh
		}
	case m.DType == Q8:
		dst := p.q8[q*K*panelW+j:]
		for k, v := range m.Quants[n*K : (n+1)*K] {
			dst[k*panelW] = v
		}
	default:
		b, sh := q4Pos(j)
		dst := p.q4[q*K*panelW/2+b:]
		src := m.Nibbles[n*K/2 : (n+1)*K/2]
		for k := range K {
			v := src[k/qBlock*qBlock/2+k%(qBlock/2)] >> (4 * (k % qBlock / (qBlock / 2)))
			// The GGML nibble n stands for n−8: as a signed nibble,
			// n xor 8.
			dst[k*panelW/2] |= (v&15 ^ 8) << sh
		}
	}
	sd := p.qs[q*G*panelW+j:]
	for g, v := range m.Scales[n*G : (n+1)*G] {
		sd[g*panelW] = v
	}
}

// widenQuant writes k-rows [pc, pc+kc) of Q8 or Q4 panel q of p (in
// natural order), dequantized, as a natural-order fp32 panel at dst[doff:].
func widenQuant(dst []float32, doff int, p *panels, q, pc, kc int) {
	if kc == 0 || widenQuantAsm(dst, doff, p, q, pc, kc) {
		return
	}
	K, G := p.k, p.k/qBlock
	tab := f16Table()
	for i := range kc {
		k := pc + i
		sc := p.qs[q*G*panelW+(k/qBlock)*panelW:][:panelW]
		d := dst[doff+i*panelW:][:panelW]
		if p.q4 != nil {
			src := p.q4[q*K*panelW/2+k*panelW/2:][:panelW/2]
			for j := range d {
				b, sh := q4Pos(j)
				d[j] = float32(signedNibble(src[b], sh)) * tab[sc[j]]
			}
			continue
		}
		src := p.q8[q*K*panelW+k*panelW:][:panelW]
		for j, v := range src {
			d[j] = float32(v) * tab[sc[j]]
		}
	}
}

// packPanelsTQuant is packPanelsT for Q8 and Q4 panels: dst[doff + i*64 +
// j] = w[pc+i][col0+j], dequantized, for i < kc and j < ncols (≤ 64), zero
// for j ≥ ncols. Weight rows pc+i are columns of the Linear panels, so the
// rows of one panel are read k-row by k-row (contiguous weights, one tile
// of the panel at a time; AVX2 where the CPU has it) and written as
// columns of the packed block, which stays in L1.
func packPanelsTQuant(dst []float32, doff int, p *panels, pc, kc, col0, ncols int) {
	K, G := p.k, p.k/qBlock
	tab := f16Table()
	var sc [panelW]float32 // the run's scales in the current block
	var q4off [panelW]int  // Q4: byte of each row's column in a k-row
	var q4sh [panelW]uint  // and the shift of its nibble
	for i := packPanelsTQuantAsm(dst, doff, p, pc, kc, col0, ncols); i < kc; {
		// A run of weight rows in one panel: columns j0.. of panel n/64.
		n := pc + i
		j0, run := n%panelW, min(kc-i, panelW-n%panelW)
		d := dst[doff+i*panelW : doff+(i+run)*panelW]
		if p.q4 != nil {
			for r := range run {
				b, sh := q4Pos(j0 + r)
				q4off[r], q4sh[r] = b, sh
			}
		}
		for j := range ncols {
			k := col0 + j
			if j == 0 || k%qBlock == 0 {
				ss := p.qs[(n/panelW)*G*panelW+(k/qBlock)*panelW+j0:][:run]
				for r, h := range ss {
					sc[r] = tab[h]
				}
			}
			if p.q4 != nil && p.vnni {
				src := p.q4[(n/panelW)*K*panelW/2+k/4*2*panelW:][:2*panelW]
				for r := range run {
					b, sh := q4VnniPos(k%4, j0+r)
					d[r*panelW+j] = float32(int(src[b]>>sh&15)-8) * sc[r]
				}
				continue
			}
			if p.q4 != nil {
				src := p.q4[(n/panelW)*K*panelW/2+k*panelW/2:][:panelW/2]
				for r := range run {
					d[r*panelW+j] = float32(int8(src[q4off[r]]>>q4sh[r]<<4)>>4) * sc[r]
				}
				continue
			}
			if p.vnni {
				src := p.q8[(n/panelW)*K*panelW+k/4*4*panelW:][:4*panelW]
				for r := range run {
					d[r*panelW+j] = float32(src[vnniPos(k%4, j0+r)]^-128) * sc[r]
				}
				continue
			}
			src := p.q8[(n/panelW)*K*panelW+k*panelW+j0:][:run]
			for r, v := range src {
				d[r*panelW+j] = float32(v) * sc[r]
			}
		}
		if ncols < panelW {
			for r := range run {
				clear(d[r*panelW+ncols : (r+1)*panelW])
			}
		}
		i += run
	}
}
