package kernels

import (
	"runtime"
	"sync"
)

// useHugePages enables huge pages for packed weights and pooled
// conversion buffers (packedmem.go; a variable so benchmarks can compare).
var useHugePages = true

// panelW is the width of a B panel: the 64 output columns (4 zmm) that the
// microkernels compute at once.
const panelW = 64

// panels is the cached, kernel-ready copy of an nn.Linear weight [N×K]: the
// transpose B = wᵀ (K×N) cut into ceil(N/64) panels of 64 columns. Panel p
// holds columns 64p..64p+63 as K rows of 64 values, contiguous
// (p*K*64 + k*64 + j); columns past N are zero.
//
// F32 weights are kept as fp32 panels, F16 weights as f16 panels in natural
// column order (the kernels widen 16 columns with one VCVTPH2PS). BF16
// weights stay bf16 in an interleaved order: in each 32-column half of a
// k-row, word 2i is column i and word 2i+1 is column 16+i, so the kernels
// widen 32 weights with one shift and one AND (see bf16Word). So the panels
// cost exactly as much memory as the weight, and decoding (which streams
// every weight once per token) reads 16-bit weights as 16-bit bytes.
//
// For BF16 and F16 the panels are the only copy: building them releases
// Mat.U16 (see Mat.Bits16 for reading the weight back). Large-M calls on
// 16-bit panels widen a KC×NC block per call into a pooled buffer (about
// 2 % of the run time).
type panels struct {
	k, n, np int
	f32      []float32 // F32 weights
	bf16     []uint16  // BF16 weights, interleaved
	f16      []uint16  // F16 weights, natural order
	q8       []int8    // Q8 weights, natural order (quant.go), or the int8 unit's if vnni
	q4       []byte    // Q4 weights, signed nibbles, 32 bytes a k-row (quant.go), or the int8 unit's order if vnni
	vnni     bool      // q8 or q4 is in the int8 unit's order (vnniPos, q4VnniPos)
	qs       []uint16  // Q8, Q4 fp16 scales: panel p, block g, column j at p*(K/32)*64 + g*64 + j
}

// bytes reports the memory held by the panels.
func (p *panels) bytes() int {
	return 4*len(p.f32) + 2*len(p.bf16) + 2*len(p.f16) + len(p.q8) + len(p.q4) + 2*len(p.qs)
}

// vnniPos is the position, within a Q8 panel in the int8 unit's order, of
// the weight at k-row k, column j (< 64), which it holds as w+128 (the
// bits of w xor -128). Each quad of k-rows (4q..4q+3) is 256 bytes, four
// parts u0..u3 of 64 bytes; part i holds in its 16-byte lane L the
// columns 16L+4i..16L+4i+3, each as four consecutive bytes (its four
// k-rows). That is the operand VPDPBUSD takes, unsigned bytes with the
// four products of a dword summed: the kernels load it as it is. Read
// with the natural order's unpacks and sign flip in each kernel, the same
// weights decoded at 0.91× the speed (a cold q8 decoding step, alternated
// in one process).
func vnniPos(k, j int) int { return k/4*256 + j/4%4*64 + j/16*16 + j%4*4 + k%4 }

// q4VnniPos is the byte and the shift of the nibble, within a Q4 panel in
// the int8 unit's order, of the weight at k-row k, column j (< 64), which
// it holds as n = q+8 (GGML's nibble): a quad of k-rows is 128 bytes,
// whose first 64 hold vnniPos's u0 in their low nibbles and u1 in their
// high ones, the next 64 u2 and u3. The kernels split a quad with two
// ANDs and a shift instead of a flip, a split, two permutes and the
// unpacks of vnniPos.
func q4VnniPos(k, j int) (int, uint) {
	i := j / 4 % 4
	return k/4*128 + i/2*64 + j/16*16 + j%4*4 + k%4, uint(4 * (i % 2))
}

// panelPad is the number of zero elements after the last panel, so that
// 32-bit loads of the last 16-bit element stay inside the allocation.
const panelPad = 32

// bf16Word is the position, within a 64-column k-row of a bf16 panel, of
// column j.
func bf16Word(j int) int {
	h, i := j&^31, j&31
	if i < 16 {
		return h + 2*i
	}
	return h + 2*(i-16) + 1
}

// bf16Col is the inverse of bf16Word.
func bf16Col(w int) int {
	h, i := w&^31, w&31
	if i&1 == 0 {
		return h + i/2
	}
	return h + 16 + i/2
}

// pack builds m's first packed copy, once, and releases the stored one
// (for all but F32): the packed copy holds the same bits, and every reader
// (Row, At, Bits16, the products) calls pack first, whose sync.Once orders
// the release before them.
//
// A BF16 weight on UnitBF16 is packed as its dp panels alone (dp.go): they
// hold its bits exactly, in the layout the unit reads, so the weight costs
// its own size once, as on the exact unit. Its 16-bit panels are built
// from them only if the exact unit is asked for later (panels).
func (m *Mat) pack() {
	m.packOnce.Do(func() {
		if m.DType == BF16 && bf16Products() {
			d := m.buildDP()
			m.dp.Store(&d)
		} else {
			m.pk.Store(buildPanels(m))
		}
		if m.DType != F32 {
			m.U16, m.Quants, m.Nibbles, m.Scales = nil, nil, nil, nil
		}
	})
}

// panels returns the panel copy of m, building it on first use.
// It is safe for concurrent use.
func (m *Mat) panels() *panels {
	m.pack()
	if p := m.pk.Load(); p != nil {
		return p
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.pk.Load() == nil { // packed as dp panels alone
		m.pk.Store(buildPanels(m))
	}
	return m.pk.Load()
}

// u16 returns the 16-bit panel data and its dtype (nil for fp32 panels).
func (p *panels) u16() ([]uint16, DType) {
	if p.bf16 != nil {
		return p.bf16, BF16
	}
	if p.f16 != nil {
		return p.f16, F16
	}
	return nil, F32
}

// word is the position of weight row n (column n of B) within a k-row of
// its panel.
func (p *panels) word(n int) int {
	if p.bf16 != nil {
		return bf16Word(n % panelW)
	}
	return n % panelW
}

// rowBits copies the raw 16-bit values of weight row n to dst (len ≥ K).
func (p *panels) rowBits(dst []uint16, n int) {
	src, _ := p.u16()
	base := (n/panelW)*p.k*panelW + p.word(n)
	for k := range p.k {
		dst[k] = src[base+k*panelW]
	}
}

// Bits16 returns the raw bf16/f16 bits of a BF16 or F16 weight, row-major
// [Rows×Cols], without packing it: the stored slice itself while the
// matrix is unpacked (callers must not modify it), else a copy read back
// from the panels. Saving a model so costs no packing and, unpacked, no
// copy.
func (m *Mat) Bits16() []uint16 {
	if m.DType != BF16 && m.DType != F16 {
		panic("kernels: Bits16 of a " + m.DType.String() + " matrix")
	}
	if u := m.U16; u != nil { // packing sets the panels before it drops U16
		return u
	}
	out := make([]uint16, m.Rows*m.Cols)
	for n := range m.Rows {
		m.rowBits(out[n*m.Cols:(n+1)*m.Cols], n)
	}
	return out
}

// rowBits copies the raw bits of weight row n of a packed BF16 or F16
// matrix to dst (len ≥ Cols), from its panels or, packed as dp panels
// alone, from those.
func (m *Mat) rowBits(dst []uint16, n int) {
	if p := m.pk.Load(); p != nil {
		p.rowBits(dst, n)
		return
	}
	d := *m.dp.Load()
	for k := range m.Cols {
		dst[k] = dpBits(d, m.Cols, n, k)
	}
}

// Prepack builds the packed copy that Linear uses (on UnitBF16 also the
// bf16 pairs it reads), so the cost (a transpose of the weight, tens to
// hundreds of milliseconds for large matrices) is paid at load time
// instead of in the first forward pass. Calling it is optional.
func (m *Mat) Prepack() {
	if m.dpUnit() {
		m.dpPanels()
	} else {
		m.panels()
	}
}

// PackedBytes reports the memory held by the packed copies (0 before the
// first Linear call or Prepack).
func (m *Mat) PackedBytes() int {
	n := 0
	if p := m.pk.Load(); p != nil {
		n += p.bytes()
	}
	if p := m.alt.Load(); p != nil {
		n += len(p.q8) + len(p.q4)
	}
	if d := m.dp.Load(); d != nil {
		n += 4 * len(*d)
	}
	return n
}

// LinearBytes reports the bytes of packed weights one Linear call over all
// of m reads on the unit in use (0 before the first call or Prepack):
// what decoding streams from memory per token.
func (m *Mat) LinearBytes() int {
	if m.dpUnit() {
		if d := m.dp.Load(); d != nil {
			return 4 * len(*d)
		}
		return 0
	}
	if m.DType == Q8 || m.DType == Q4 {
		if p := m.loadQuant(m.i8Unit()); p != nil {
			return p.bytes()
		}
		return 0
	}
	if p := m.pk.Load(); p != nil {
		return p.bytes()
	}
	return 0
}

// quantPanels returns the panels of a Q8 or Q4 m in the int8 unit's order
// (vnni) or the natural one, building them on first use: packing makes the
// order of the unit in use then, and a later product on the other unit
// (tests that switch units; SetUnit) converts a second copy once. Any
// other m's panels are returned as they are.
func (m *Mat) quantPanels(vnni bool) *panels {
	p := m.panels()
	if m.DType != Q8 && m.DType != Q4 || p.vnni == vnni {
		return p
	}
	if a := m.alt.Load(); a != nil {
		return a
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.alt.Load() == nil {
		m.alt.Store(p.reorderQuant())
	}
	return m.alt.Load()
}

// loadQuant is the quantized panels of m in the order asked for, nil if
// not built.
func (m *Mat) loadQuant(vnni bool) *panels {
	for _, p := range []*panels{m.pk.Load(), m.alt.Load()} {
		if p != nil && p.vnni == vnni {
			return p
		}
	}
	return nil
}

// reorderQuant returns a copy of Q8 or Q4 panels in the other order
// (sharing the scales).
func (p *panels) reorderQuant() *panels {
	r := *p
	r.vnni = !p.vnni
	if p.q4 != nil {
		r.q4 = packed[byte](len(p.q4), 0)
	} else {
		r.q8 = packed[int8](len(p.q8), 0)
	}
	spread(p.np*p.k*panelW, min(runtime.GOMAXPROCS(0), p.np), func(w, t int) {
		for q := w; q < p.np; q += t {
			for k := range p.k {
				for j := range panelW {
					n := q*panelW + j
					if p.q4 != nil {
						r.setQ4(n, k, p.q4Nibble(n, k))
					} else {
						r.setQ8(n, k, p.q8At(n, k))
					}
				}
			}
		}
	})
	return &r
}

// setQ8 stores weight (n, k) of Q8 panels in their order.
func (p *panels) setQ8(n, k int, v int8) {
	base := (n / panelW) * p.k * panelW
	if p.vnni {
		p.q8[base+vnniPos(k, n%panelW)] = v ^ -128
	} else {
		p.q8[base+k*panelW+n%panelW] = v
	}
}

// setQ4 stores weight (n, k) of Q4 panels (the signed q = n−8) in their
// order, into a nibble still zero.
func (p *panels) setQ4(n, k, q int) {
	base := (n / panelW) * p.k * panelW / 2
	if p.vnni {
		b, sh := q4VnniPos(k, n%panelW)
		p.q4[base+b] |= byte(q+8) << sh
	} else {
		b, sh := q4Pos(n % panelW)
		p.q4[base+k*panelW/2+b] |= byte(q&15) << sh
	}
}

// q8At returns weight (n, k) of Q8 panels, as stored in either order.
func (p *panels) q8At(n, k int) int8 {
	base := (n / panelW) * p.k * panelW
	if p.vnni {
		return p.q8[base+vnniPos(k, n%panelW)] ^ -128
	}
	return p.q8[base+k*panelW+n%panelW]
}

func buildPanels(m *Mat) *panels {
	N, K := m.Rows, m.Cols
	p := &panels{k: K, n: N, np: (N + panelW - 1) / panelW, vnni: (m.DType == Q8 || m.DType == Q4) && m.i8Unit()}
	size := p.np * K * panelW
	switch m.DType {
	case F32:
		p.f32 = heapFloats(size) // not from a slab: see heapFloats
	case BF16:
		p.bf16 = packed[uint16](size, panelPad)
	case F16:
		p.f16 = packed[uint16](size, panelPad)
	case Q8:
		p.q8 = packed[int8](size, 0)
		p.qs = packed[uint16](size/qBlock, 0)
	case Q4:
		p.q4 = packed[byte](size/2, 0)
		p.qs = packed[uint16](size/qBlock, 0)
	default:
		panic("kernels: unknown dtype " + m.DType.String())
	}
	if size == 0 {
		return p
	}
	if m.DType == F32 {
		checkLen("Mat.F32", m.F32, N*K)
	} else if m.DType == Q8 || m.DType == Q4 {
		checkQuant(m)
	} else if m.dp.Load() == nil && len(m.U16) < N*K { // dp panels alone: U16 released
		panic("kernels: Mat.U16 shorter than Rows*Cols")
	}
	// Transpose panel by panel, spread over the available cores.
	spread(N*K, min(runtime.GOMAXPROCS(0), p.np), func(w, t int) {
		for q := w; q < p.np; q += t {
			p.fill(m, q)
		}
	})
	return p
}

// spread runs fill(w, t) for workers w = 0..t-1 on their own goroutines
// and waits for them, or fill(0, 1) alone for a matrix of fewer than 2^16
// weights (starting goroutines costs more). A worker takes every t-th
// piece of the work from its own w.
func spread(weights, t int, fill func(w, t int)) {
	if weights < 1<<16 || t <= 1 {
		fill(0, 1)
		return
	}
	var wg sync.WaitGroup
	for w := range t {
		wg.Add(1)
		go func() {
			defer wg.Done()
			fill(w, t)
		}()
	}
	wg.Wait()
}

// fill writes panel q of p from m.
func (p *panels) fill(m *Mat, q int) {
	K := p.k
	base := q * K * panelW
	for j := range panelW {
		n := q*panelW + j
		if n >= p.n {
			break
		}
		switch m.DType {
		case F32:
			src := m.F32[n*K : (n+1)*K]
			dst := p.f32[base+j:]
			for k, v := range src {
				dst[k*panelW] = v
			}
		case F16:
			src := m.U16[n*K : (n+1)*K]
			dst := p.f16[base+j:]
			for k, v := range src {
				dst[k*panelW] = v
			}
		case BF16:
			dst := p.bf16[base+bf16Word(j):]
			if m.U16 == nil { // from the dp panels (pack)
				d := *m.dp.Load()
				for k := range K {
					dst[k*panelW] = dpBits(d, K, n, k)
				}
				continue
			}
			for k, v := range m.U16[n*K : (n+1)*K] {
				dst[k*panelW] = v
			}
		case Q8, Q4:
			p.fillQuant(m, q, j)
		}
	}
}
