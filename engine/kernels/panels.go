package kernels

import (
	"runtime"
	"sync"
)

// panelW is the width of a B panel: the 64 output columns (4 zmm) that the
// microkernels compute at once.
const panelW = 64

// panels is the cached, kernel-ready copy of an nn.Linear weight [N×K]: the
// transpose B = wᵀ (K×N) cut into ceil(N/64) panels of 64 columns. Panel p
// holds columns 64p..64p+63 as K rows of 64 values, contiguous
// (p*K*64 + k*64 + j); columns past N are zero.
//
// F32 and F16 weights are kept as fp32 panels. BF16 weights stay bf16 (the
// same bytes as the checkpoint) in an interleaved order: in each 32-column
// half of a k-row, word 2i is column i and word 2i+1 is column 16+i, so the
// kernels widen 32 weights with one shift and one AND (see bf16Word).
//
// Memory: fp32 panels cost 4·K·64·ceil(N/64) bytes (as much as an F32
// weight, twice an F16 one); bf16 panels cost as much as the BF16 weight.
// The Mat keeps its own data, so the engine holds both copies. Large-M
// calls on bf16 panels widen a KC×NC block per call into a pooled buffer
// (about 2 % of the run time) instead of keeping a second fp32 copy.
type panels struct {
	k, n, np int
	f32      []float32 // F32 and F16 weights
	bf16     []uint16  // BF16 weights, interleaved
}

// bytes reports the memory held by the panels.
func (p *panels) bytes() int { return 4*len(p.f32) + 2*len(p.bf16) }

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

// panels returns the panel copy of m, building it on first use.
// It is safe for concurrent use.
func (m *Mat) panels() *panels {
	m.packOnce.Do(func() { m.pk.Store(buildPanels(m)) })
	return m.pk.Load()
}

// Prepack builds the packed copy that Linear uses, so the cost (a transpose
// of the weight, tens to hundreds of milliseconds for large matrices) is paid
// at load time instead of in the first forward pass. Calling it is optional.
func (m *Mat) Prepack() { m.panels() }

// PackedBytes reports the memory held by the packed copy (0 before the first
// Linear call or Prepack).
func (m *Mat) PackedBytes() int {
	if p := m.pk.Load(); p != nil {
		return p.bytes()
	}
	return 0
}

func buildPanels(m *Mat) *panels {
	N, K := m.Rows, m.Cols
	p := &panels{k: K, n: N, np: (N + panelW - 1) / panelW}
	size := p.np * K * panelW
	switch m.DType {
	case F32, F16:
		p.f32 = make([]float32, size)
	case BF16:
		p.bf16 = make([]uint16, size)
	default:
		panic("kernels: unknown dtype " + m.DType.String())
	}
	if size == 0 {
		return p
	}
	if m.DType == F32 {
		checkLen("Mat.F32", m.F32, N*K)
	} else if len(m.U16) < N*K {
		panic("kernels: Mat.U16 shorter than Rows*Cols")
	}
	// Transpose panel by panel, spread over the available cores.
	t := min(runtime.GOMAXPROCS(0), p.np)
	if N*K < 1<<16 {
		t = 1
	}
	var wg sync.WaitGroup
	for w := range t {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for q := w; q < p.np; q += t {
				p.fill(m, q)
			}
		}()
	}
	wg.Wait()
	return p
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
			dst := p.f32[base+j:]
			for k, v := range src {
				dst[k*panelW] = F16ToF32(v)
			}
		case BF16:
			src := m.U16[n*K : (n+1)*K]
			dst := p.bf16[base+bf16Word(j):]
			for k, v := range src {
				dst[k*panelW] = v
			}
		}
	}
}
