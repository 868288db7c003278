package kernels

import (
	"fmt"
	"math"
)

// Blockwise 8-bit weights (DType Q8), laid out as GGML's Q8_0: each run of
// q8Block consecutive weights of a row (along K) is 32 int8 values q and one
// fp16 scale d, and stands for the values d·q. d·q is exact in fp32 (an
// 11-bit significand times an 8-bit integer), so "dequantize, then multiply
// in fp32" has one answer, which every kernel reproduces bit for bit: the
// Q8 products sum the same fp32 products in the same order as an F32 matrix
// holding the dequantized values (Dequantize), so batch invariance and the
// sampler's and trainer's equal logprobs carry over unchanged. With the
// scale in fp16, as in GGML, a GGUF export runs the same values in
// llama.cpp.
//
// Panels (panels.go) keep the int8 values in natural column order, one
// 64-byte k-row per panel row, and the scales as a second array, 64 per
// block of 32 k-rows. The AVX2 kernels read both in place while streaming
// (decode, a quarter of fp32's bytes); every other path widens a block of
// panels to fp32 (an AVX2 loop where the CPU has it) and runs the fp32
// kernels.

// q8Block is the number of weights along K that share one scale.
const q8Block = 32

// NewMatQ8 wraps quantized weights as a Q8 matrix without copying: quants
// is row-major [rows×cols] and scales holds the fp16 scale of each block of
// 32 weights of a row, row-major [rows×cols/32]. cols must be a multiple of
// 32.
func NewMatQ8(rows, cols int, quants []int8, scales []uint16) *Mat {
	m := &Mat{Rows: rows, Cols: cols, DType: Q8, Quants: quants, Scales: scales}
	checkQ8(m)
	return m
}

// checkQ8 panics unless m holds a well-formed Q8 matrix.
func checkQ8(m *Mat) {
	if m.Cols%q8Block != 0 || len(m.Quants) != m.Rows*m.Cols || len(m.Scales) != m.Rows*m.Cols/q8Block {
		panic(fmt.Sprintf("kernels: Q8 matrix %dx%d with %d values and %d scales (columns must be a multiple of %d)",
			m.Rows, m.Cols, len(m.Quants), len(m.Scales), q8Block))
	}
}

// CanQuantize reports whether a matrix with cols columns can be stored as
// dt (Q8: whole blocks of 32 along each row).
func CanQuantize(cols int, dt DType) bool {
	return dt == Q8 && cols%q8Block == 0
}

// Quantize returns m stored as dt (Q8), rounding each weight to the
// nearest multiple of its block's scale d = max|w|/127 (d rounded to fp16,
// or up where a subnormal scale lost too much, then the weights to d·q
// with |q| ≤ 127, so each is within d/2 of its value). m is left as it was; when it is
// not yet packed its stored copy is read directly. It fails when a row
// length is not a multiple of 32 or a weight is not finite.
func Quantize(m *Mat, dt DType) (*Mat, error) {
	if dt != Q8 {
		return nil, fmt.Errorf("kernels: cannot quantize to %v", dt)
	}
	N, K := m.Rows, m.Cols
	if !CanQuantize(K, dt) {
		return nil, fmt.Errorf("kernels: cannot quantize a %dx%d matrix to Q8: rows of %d are not whole blocks of %d", N, K, K, q8Block)
	}
	q := make([]int8, N*K)
	s := make([]uint16, N*K/q8Block)
	row := make([]float32, K)
	for n := range N {
		m.storedRow(row, n)
		if err := quantizeRowQ8(q[n*K:(n+1)*K], s[n*K/q8Block:(n+1)*K/q8Block], row); err != nil {
			return nil, fmt.Errorf("kernels: quantize row %d: %w", n, err)
		}
	}
	return NewMatQ8(N, K, q, s), nil
}

// quantizeRowQ8 quantizes one row (a whole number of blocks).
func quantizeRowQ8(q []int8, scales []uint16, row []float32) error {
	for b := range scales {
		x := row[b*q8Block : (b+1)*q8Block]
		var amax float32
		for _, v := range x {
			if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
				return fmt.Errorf("weight %v at column %d is not finite", v, b*q8Block)
			}
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
		qb := q[b*q8Block : (b+1)*q8Block]
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
// see them (for Q8, d·q). It is the oracle of the quantized products.
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
	N, K, G := m.Rows, m.Cols, m.Cols/q8Block
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
	K, G := m.Cols, m.Cols/q8Block
	qb := (n/panelW)*K*panelW + n%panelW
	for k := range quants[:K] {
		quants[k] = p.q8[qb+k*panelW]
	}
	sb := (n/panelW)*G*panelW + n%panelW
	for g := range scales[:G] {
		scales[g] = p.q8s[sb+g*panelW]
	}
}

// QuantizeRowQ8 quantizes one row of weights (a whole number of blocks of
// 32) as Quantize does, into quants (len(row)) and scales (len(row)/32).
func QuantizeRowQ8(quants []int8, scales []uint16, row []float32) error {
	if len(row)%q8Block != 0 || len(quants) < len(row) || len(scales) < len(row)/q8Block {
		return fmt.Errorf("kernels: QuantizeRowQ8 of %d values into %d quants and %d scales", len(row), len(quants), len(scales))
	}
	return quantizeRowQ8(quants[:len(row)], scales[:len(row)/q8Block], row)
}

// q8At returns weight (n, k) of Q8 panels, dequantized.
func (p *panels) q8At(n, k int) float32 {
	G := p.k / q8Block
	q := p.q8[(n/panelW)*p.k*panelW+k*panelW+n%panelW]
	d := p.q8s[(n/panelW)*G*panelW+(k/q8Block)*panelW+n%panelW]
	return float32(q) * f16Table()[d]
}

// fillQ8 writes weight row n = 64q+j of m into column j of panel q.
func (p *panels) fillQ8(m *Mat, q, j int) {
	K, G := p.k, p.k/q8Block
	n := q*panelW + j
	dst := p.q8[q*K*panelW+j:]
	for k, v := range m.Quants[n*K : (n+1)*K] {
		dst[k*panelW] = v
	}
	sd := p.q8s[q*G*panelW+j:]
	for g, v := range m.Scales[n*G : (n+1)*G] {
		sd[g*panelW] = v
	}
}

// widenQ8 writes k-rows [pc, pc+kc) of Q8 panel q of p, dequantized, as a
// natural-order fp32 panel at dst[doff:].
func widenQ8(dst []float32, doff int, p *panels, q, pc, kc int) {
	if kc == 0 || widenQ8Asm(dst, doff, p, q, pc, kc) {
		return
	}
	K, G := p.k, p.k/q8Block
	tab := f16Table()
	for i := range kc {
		k := pc + i
		src := p.q8[q*K*panelW+k*panelW:][:panelW]
		sc := p.q8s[q*G*panelW+(k/q8Block)*panelW:][:panelW]
		d := dst[doff+i*panelW:][:panelW]
		for j, v := range src {
			d[j] = float32(v) * tab[sc[j]]
		}
	}
}

// packPanelsTQ8 is packPanelsT for Q8 panels: dst[doff + i*64 + j] =
// w[pc+i][col0+j], dequantized, for i < kc and j < ncols (≤ 64), zero for
// j ≥ ncols.
func packPanelsTQ8(dst []float32, doff int, p *panels, pc, kc, col0, ncols int) {
	K, G := p.k, p.k/q8Block
	tab := f16Table()
	for i := range kc {
		n := pc + i
		qs := p.q8[(n/panelW)*K*panelW+n%panelW:]
		ss := p.q8s[(n/panelW)*G*panelW+n%panelW:]
		d := dst[doff+i*panelW:][:panelW]
		for j := range ncols {
			k := col0 + j
			d[j] = float32(qs[k*panelW]) * tab[ss[(k/q8Block)*panelW]]
		}
		clear(d[ncols:])
	}
}
