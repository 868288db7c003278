package kernels

import (
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"
	"testing"
)

// Tolerances. The oracle is a float64 naive product; the kernels accumulate
// in fp32 in a different order (FMA, k unrolled, K blocked by 256), so each
// output may differ by a few ulps of the sum of |terms|. The worst-case bound
// is K·2⁻²⁴ relative to Σ|a·b|; random-sign data gives about √K·2⁻²⁴.
const (
	// gemmRelTol bounds |got−want| / (Σ_k |a_k·b_k| + |bias| + |beta·C|): 2⁻²⁴
	// times ~300, enough for K ≤ 5000 with random signs (observed ≤ 1e-6).
	gemmRelTol = 2e-5
	// gemmAbsTol absorbs outputs whose terms all vanish.
	gemmAbsTol = 1e-30
	// vecRelTol is the same bound for Dot over n ≤ 5000 elements.
	vecRelTol = 2e-5
)

// forVariants runs f once per implementation this CPU supports, with that
// implementation forced on and the tile bounds checks enabled.
func forVariants(t *testing.T, f func(t *testing.T)) {
	t.Helper()
	saved, savedDebug := active, debugChecks
	defer func() { active, debugChecks = saved, savedDebug }()
	for _, v := range supportedVariants() {
		active, debugChecks = v, true
		t.Run(v.String(), f)
	}
}

// supportedVariants lists the implementations this CPU can run, fastest last.
func supportedVariants() []variant {
	vs := []variant{varGo}
	for _, v := range []variant{varAVX2, varAVX512} {
		if v <= bestVariant() {
			vs = append(vs, v)
		}
	}
	return vs
}

// thin reports whether case i is skipped under the race detector, which
// keeps every third case.
func thin(i int) bool { return raceEnabled && i%3 != 0 }

// dtypesFor returns the weight dtypes to test for case i: all three, or
// under the race detector one of them in turn.
func dtypesFor(i int) []DType {
	all := []DType{F32, BF16, F16}
	if raceEnabled {
		return all[i%3 : i%3+1]
	}
	return all
}

func randSlice(r *rand.Rand, n int) []float32 {
	s := make([]float32, n)
	for i := range s {
		s[i] = float32(r.Float64()*2 - 1)
	}
	return s
}

// randMat returns a random N×K weight stored as dt.
func randMat(r *rand.Rand, N, K int, dt DType) *Mat {
	v := randSlice(r, N*K)
	m := &Mat{Rows: N, Cols: K, DType: dt}
	switch dt {
	case F32:
		m.F32 = v
	case BF16:
		m.U16 = make([]uint16, len(v))
		for i, x := range v {
			m.U16[i] = F32ToBF16(x)
		}
	case F16:
		m.U16 = make([]uint16, len(v))
		for i, x := range v {
			m.U16[i] = F32ToF16(x)
		}
	}
	return m
}

// closeTo compares got with the float64 oracle want, whose per-element
// magnitudes (sum of |terms|) are scale, and reports the first failure.
func closeTo(t *testing.T, what string, got []float32, want, scale []float64) {
	t.Helper()
	var maxAbs, maxRel float64
	first := -1
	for i, w := range want {
		d := math.Abs(float64(got[i]) - w)
		if math.IsNaN(float64(got[i])) {
			d = math.Inf(1)
		}
		rel := d / max(scale[i], gemmAbsTol)
		maxAbs, maxRel = max(maxAbs, d), max(maxRel, rel)
		if d > gemmAbsTol+gemmRelTol*scale[i] && first < 0 {
			first = i
		}
	}
	if first >= 0 {
		t.Errorf("%s: index %d: got %v; want %v (max abs diff %.3g, max rel diff %.3g, tol %g)",
			what, first, got[first], want[first], maxAbs, maxRel, gemmRelTol)
	}
}

// linear64 is the float64 oracle of Linear: want and scale for each output.
func linear64(inp []float32, w *Mat, bias []float32, M int) (want, scale []float64) {
	N, K := w.Rows, w.Cols
	want, scale = make([]float64, M*N), make([]float64, M*N)
	row := make([]float32, K)
	for n := range N {
		w.Row(row, n)
		for m := range M {
			var s, a float64
			for k, x := range inp[m*K : (m+1)*K] {
				p := float64(x) * float64(row[k])
				s += p
				a += math.Abs(p)
			}
			if bias != nil {
				s += float64(bias[n])
				a += math.Abs(float64(bias[n]))
			}
			want[m*N+n], scale[m*N+n] = s, a
		}
	}
	return want, scale
}

type mnk struct{ M, N, K int }

// linearShapes sweeps each dimension around the tile edges (6 rows, 64
// columns, K unrolled by 4 and blocked by 256) and adds a few large shapes
// that cross the N block (16 panels), thread splits and the M threshold.
func linearShapes() []mnk {
	var s []mnk
	for M := 1; M <= 17; M++ {
		for _, N := range []int{65, 129} {
			for _, K := range []int{3, 64, 301} {
				s = append(s, mnk{M, N, K})
			}
		}
	}
	for _, N := range []int{1, 5, 6, 7, 16, 17, 32, 33, 63, 64, 65, 127, 128, 129} {
		for _, M := range []int{1, 7, 30} {
			for _, K := range []int{1, 301} {
				s = append(s, mnk{M, N, K})
			}
		}
	}
	for _, K := range []int{1, 3, 4, 5, 16, 17, 255, 256, 257, 600} {
		for _, M := range []int{2, 40} {
			s = append(s, mnk{M, 70, K})
		}
	}
	return append(s,
		mnk{128, 70, 100}, mnk{129, 70, 100}, // either side of streamMaxPanelsM
		mnk{133, 200, 300}, // blocked: K blocks, panel split over threads
		mnk{140, 1100, 40}, // blocked: more panels than one N block
		mnk{200, 64, 300},  // blocked, one panel: rows split over threads
		mnk{3, 1500, 700},  // streaming, several calls per thread
		mnk{13, 700, 900},  // streaming with row chunks and L2 groups
		mnk{9, 130, 4100},  // streaming with K split to fit L2
		mnk{8, 320, 301},   // 8-row kernel, full panels, K tail
		mnk{8, 192, 4100},  // 8-row kernel with K split (accumulating blocks)
		mnk{16, 128, 70},   // two 8-row chunks
		mnk{24, 650, 130},  // three 8-row chunks, partial last panel
	)
}

func TestLinear(t *testing.T) {
	forVariants(t, func(t *testing.T) {
		r := rand.New(rand.NewPCG(1, 2))
		for i, sh := range linearShapes() {
			if thin(i) && i < len(linearShapes())-9 || raceEnabled && active == varGo && sh.M*sh.N*sh.K > 1<<21 {
				continue
			}
			for _, dt := range dtypesFor(i) {
				w := randMat(r, sh.N, sh.K, dt)
				inp := randSlice(r, sh.M*sh.K)
				var bias []float32
				if (i+int(dt))%2 == 0 {
					bias = randSlice(r, sh.N)
				}
				out := randSlice(r, sh.M*sh.N) // overwritten
				Linear(out, inp, w, bias, sh.M)
				want, scale := linear64(inp, w, bias, sh.M)
				closeTo(t, fmt.Sprintf("M=%d N=%d K=%d %v bias=%v", sh.M, sh.N, sh.K, dt, bias != nil), out, want, scale)
			}
		}
	})
}

// TestLinearThreads runs shapes whose work splits over goroutines with an
// odd GOMAXPROCS, so the panel and row ranges are uneven.
func TestLinearThreads(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(3))
	forVariants(t, func(t *testing.T) {
		r := rand.New(rand.NewPCG(3, 4))
		for _, sh := range []mnk{{1, 1000, 300}, {8, 450, 200}, {60, 260, 300}, {130, 64, 200}, {40, 130, 300}} {
			for _, dt := range []DType{F32, BF16, F16} {
				w := randMat(r, sh.N, sh.K, dt)
				inp := randSlice(r, sh.M*sh.K)
				bias := randSlice(r, sh.N)
				out := make([]float32, sh.M*sh.N)
				Linear(out, inp, w, bias, sh.M)
				want, scale := linear64(inp, w, bias, sh.M)
				closeTo(t, fmt.Sprintf("M=%d N=%d K=%d %v", sh.M, sh.N, sh.K, dt), out, want, scale)
			}
		}
	})
}

func TestLinearZeroK(t *testing.T) {
	w := &Mat{Rows: 3, Cols: 0, DType: BF16}
	out := []float32{9, 9, 9, 9, 9, 9}
	Linear(out, nil, w, []float32{1, 2, 3}, 2)
	for i, want := range []float32{1, 2, 3, 1, 2, 3} {
		if out[i] != want {
			t.Fatalf("out[%d] = %v; want %v", i, out[i], want)
		}
	}
}

// TestLinearConcurrent calls Linear on one fresh Mat from several goroutines:
// the lazy packing must happen once and race-free.
func TestLinearConcurrent(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	const M, N, K = 3, 300, 200
	w := randMat(r, N, K, BF16)
	inp := randSlice(r, M*K)
	want, scale := linear64(inp, w, nil, M)
	var wg sync.WaitGroup
	outs := make([][]float32, 4)
	for g := range outs {
		outs[g] = make([]float32, M*N)
		wg.Add(1)
		go func() {
			defer wg.Done()
			Linear(outs[g], inp, w, nil, M)
		}()
	}
	wg.Wait()
	for g, out := range outs {
		closeTo(t, fmt.Sprintf("goroutine %d", g), out, want, scale)
	}
	if got, want := w.PackedBytes(), 2*K*((N+63)/64*64); got != want {
		t.Errorf("PackedBytes = %d; want %d", got, want)
	}
}

func TestLinearBackwardInput(t *testing.T) {
	forVariants(t, func(t *testing.T) {
		r := rand.New(rand.NewPCG(7, 8))
		shapes := []mnk{{1, 5, 7}, {6, 64, 64}, {7, 65, 63}, {13, 129, 127}, {17, 301, 65},
			{40, 300, 520}, {64, 257, 130}, {100, 70, 1100}, {5, 3, 200}}
		for i, sh := range shapes {
			for _, dt := range dtypesFor(i) {
				w := randMat(r, sh.N, sh.K, dt)
				dout := randSlice(r, sh.M*sh.N)
				dinp := randSlice(r, sh.M*sh.K)
				want, scale := make([]float64, len(dinp)), make([]float64, len(dinp))
				for m := range sh.M {
					for k := range sh.K {
						s, a := float64(dinp[m*sh.K+k]), math.Abs(float64(dinp[m*sh.K+k]))
						for n := range sh.N {
							p := float64(dout[m*sh.N+n]) * float64(w.At(n, k))
							s += p
							a += math.Abs(p)
						}
						want[m*sh.K+k], scale[m*sh.K+k] = s, a
					}
				}
				LinearBackwardInput(dinp, dout, w, sh.M)
				closeTo(t, fmt.Sprintf("M=%d N=%d K=%d %v", sh.M, sh.N, sh.K, dt), dinp, want, scale)
			}
		}
	})
}

type gemmCase struct {
	tA, tB        bool
	M, N, K       int
	lda, ldb, ldc int // 0: tight
	beta          float32
	nanC          bool
}

func TestGemm(t *testing.T) {
	var cases []gemmCase
	shapes := []mnk{{1, 1, 1}, {1, 70, 130}, {3, 16, 300}, {5, 7, 3}, {6, 64, 1}, {7, 65, 301}, {13, 129, 64}, {17, 8, 200},
		{64, 8, 300}, {100, 16, 90}, {70, 33, 257}, {30, 200, 20}, {8, 300, 600}, {120, 140, 150},
		{40, 64, 300}} // the last: rows of one panel's width read in place
	for i, sh := range shapes {
		for _, tA := range []bool{false, true} {
			for _, tB := range []bool{false, true} {
				for _, beta := range []float32{0, 1, 0.5} {
					c := gemmCase{tA: tA, tB: tB, M: sh.M, N: sh.N, K: sh.K, beta: beta, nanC: beta == 0}
					if i%2 == 1 { // sub-matrices of wider arrays
						c.lda, c.ldb, c.ldc = 3, 5, 2
					}
					cases = append(cases, c)
				}
			}
		}
	}
	// Small transpose chunks: the larger transA cases run in row blocks.
	defer func(c int) { transAChunk = c }(transAChunk)
	transAChunk = 2000
	forVariants(t, func(t *testing.T) {
		r := rand.New(rand.NewPCG(9, 10))
		for i, c := range cases {
			if thin(i) {
				continue
			}
			ar, ac := c.M, c.K
			if c.tA {
				ar, ac = c.K, c.M
			}
			br, bc := c.K, c.N
			if c.tB {
				br, bc = c.N, c.K
			}
			lda, ldb, ldc := ac+c.lda, bc+c.ldb, c.N+c.ldc
			A, B, C := randSlice(r, ar*lda), randSlice(r, br*ldb), randSlice(r, c.M*ldc)
			if c.nanC {
				for i := range C {
					if i%3 == 0 {
						C[i] = float32(math.NaN())
					}
				}
			}
			want, scale := make([]float64, len(C)), make([]float64, len(C))
			for i := range C {
				want[i], scale[i] = float64(C[i]), 0 // untouched by default
			}
			for i := range c.M {
				for j := range c.N {
					var s, a float64
					if c.beta != 0 {
						s = float64(c.beta) * float64(C[i*ldc+j])
						a = math.Abs(s)
					}
					for k := range c.K {
						ai, bi := i*lda+k, k*ldb+j
						if c.tA {
							ai = k*lda + i
						}
						if c.tB {
							bi = j*ldb + k
						}
						av, bv := A[ai], B[bi]
						p := float64(av) * float64(bv)
						s += p
						a += math.Abs(p)
					}
					want[i*ldc+j], scale[i*ldc+j] = s, a
				}
			}
			Gemm(c.tA, c.tB, c.M, c.N, c.K, A, lda, B, ldb, c.beta, C, ldc)
			// Elements outside the M×N window (padding, possibly NaN) must be
			// left exactly as they were.
			for i := range C {
				if col := i % ldc; col >= c.N && !(math.IsNaN(want[i]) && math.IsNaN(float64(C[i]))) && float64(C[i]) != want[i] {
					t.Fatalf("%+v: padding C[%d] changed to %v", c, i, C[i])
				}
			}
			for i := range C {
				if i%ldc >= c.N {
					want[i], C[i] = 0, 0
				}
			}
			closeTo(t, fmt.Sprintf("%+v", c), C, want, scale)
		}
	})
}

func TestGemmZeroK(t *testing.T) {
	C := []float32{float32(math.NaN()), 2, 3, 4}
	Gemm(false, false, 2, 2, 0, nil, 0, nil, 2, 0, C, 2)
	for i, v := range C {
		if v != 0 {
			t.Fatalf("beta=0: C[%d] = %v; want 0", i, v)
		}
	}
	C = []float32{1, 2, 3, 4}
	Gemm(false, false, 2, 2, 0, nil, 0, nil, 2, 0.5, C, 2)
	for i, v := range C {
		if want := float32(i+1) / 2; v != want {
			t.Fatalf("beta=0.5: C[%d] = %v; want %v", i, v, want)
		}
	}
}

// TestRefs checks the reference twins themselves against the float64 oracle.
func TestRefs(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	for _, dt := range []DType{F32, BF16, F16} {
		w := randMat(r, 37, 53, dt)
		inp := randSlice(r, 5*53)
		bias := randSlice(r, 37)
		out := make([]float32, 5*37)
		LinearRef(out, inp, w, bias, 5)
		want, scale := linear64(inp, w, bias, 5)
		closeTo(t, "LinearRef "+dt.String(), out, want, scale)
	}
}

func TestBF16Layout(t *testing.T) {
	seen := make(map[int]bool)
	for j := range panelW {
		w := bf16Word(j)
		if w < 0 || w >= panelW || seen[w] || bf16Col(w) != j {
			t.Fatalf("bf16Word(%d) = %d, bf16Col = %d", j, w, bf16Col(w))
		}
		seen[w] = true
	}
}

func TestVectors(t *testing.T) {
	forVariants(t, func(t *testing.T) {
		r := rand.New(rand.NewPCG(13, 14))
		for _, n := range []int{0, 1, 5, 7, 8, 15, 16, 17, 31, 33, 63, 64, 65, 127, 129, 1000, 4099} {
			a, b := randSlice(r, n), randSlice(r, n)
			var want, scale float64
			for i := range a {
				want += float64(a[i]) * float64(b[i])
				scale += math.Abs(float64(a[i]) * float64(b[i]))
			}
			for name, got := range map[string]float32{"Dot": Dot(a, b), "DotRef": DotRef(a, b)} {
				if d := math.Abs(float64(got) - want); d > vecRelTol*scale+gemmAbsTol {
					t.Errorf("%s n=%d: got %v; want %v (diff %.3g)", name, n, got, want, d)
				}
			}

			y1, y2 := randSlice(r, n), make([]float32, n)
			copy(y2, y1)
			Axpy(0.75, a, y1)
			AxpyRef(0.75, a, y2)
			for i := range y1 {
				// One fused vs two rounded operations: at most 1 ulp apart.
				if d := math.Abs(float64(y1[i] - y2[i])); d > 1e-6*(math.Abs(float64(y2[i]))+1) {
					t.Fatalf("Axpy n=%d: index %d: got %v; want %v", n, i, y1[i], y2[i])
				}
			}

			copy(y1, a)
			copy(y2, a)
			Scale(-1.5, y1)
			ScaleRef(-1.5, y2)
			for i := range y1 {
				if y1[i] != y2[i] {
					t.Fatalf("Scale n=%d: index %d: got %v; want %v", n, i, y1[i], y2[i])
				}
			}

			copy(y1, a)
			copy(y2, a)
			SoftmaxGrad(y1, b, 0.3, 0.125)
			SoftmaxGradRef(y2, b, 0.3, 0.125)
			for i := range y1 {
				if math.Float32bits(y1[i]) != math.Float32bits(y2[i]) {
					t.Fatalf("SoftmaxGrad n=%d: index %d: got %v; want %v", n, i, y1[i], y2[i])
				}
			}

			// SumSquares: the same bits on every variant (the lanes' order
			// in Go), and the ordered sum within float64 rounding.
			got, wantSS := SumSquares(a), sumSquaresLanes(a[:n&^15])
			for _, v := range a[n&^15:] {
				wantSS += float64(v) * float64(v)
			}
			if math.Float64bits(got) != math.Float64bits(wantSS) {
				t.Fatalf("SumSquares n=%d: got %v; want %v in the lanes' order", n, got, wantSS)
			}
			if ref := SumSquaresRef(a); math.Abs(got-ref) > 1e-14*ref {
				t.Fatalf("SumSquares n=%d: got %v; the ordered sum is %v", n, got, ref)
			}

			NormScale(y1, a, b, 0.37)
			NormScaleRef(y2, a, b, 0.37)
			for i := range y1 {
				if math.Float32bits(y1[i]) != math.Float32bits(y2[i]) {
					t.Fatalf("NormScale n=%d: index %d: got %v; want %v", n, i, y1[i], y2[i])
				}
			}
			copy(y1, a)
			NormScale(y1, y1, b, 0.37) // in place
			for i := range y1 {
				if math.Float32bits(y1[i]) != math.Float32bits(y2[i]) {
					t.Fatalf("NormScale in place n=%d: index %d: got %v; want %v", n, i, y1[i], y2[i])
				}
			}

			src := make([]uint16, n)
			for i := range src {
				src[i] = uint16(r.Uint32())
			}
			d1, d2 := make([]float32, n), make([]float32, n)
			WidenBF16(d1, src)
			WidenBF16Ref(d2, src)
			for i := range d1 {
				if math.Float32bits(d1[i]) != math.Float32bits(d2[i]) {
					t.Fatalf("WidenBF16 n=%d: index %d: got %#x; want %#x", n, i, math.Float32bits(d1[i]), math.Float32bits(d2[i]))
				}
			}
		}
	})
}

// TestLinearAllocs checks that a small Linear (one goroutine) allocates
// nothing once the weight is packed: it runs per token per layer.
func TestLinearAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	r := rand.New(rand.NewPCG(15, 16))
	for _, dt := range []DType{F32, BF16} {
		w := randMat(r, 128, 96, dt)
		inp, out, bias := randSlice(r, 2*96), make([]float32, 2*128), randSlice(r, 128)
		Linear(out, inp, w, bias, 2)
		if n := testing.AllocsPerRun(20, func() { Linear(out, inp, w, bias, 2) }); n != 0 {
			t.Errorf("%v: %v allocations per Linear; want 0", dt, n)
		}
	}
}

// TestLinearNonFinite puts NaN and Inf in two input rows: they must reach
// every output of their own row and no other row (the kernels' lanes and
// padded panel columns must not mix rows).
func TestLinearNonFinite(t *testing.T) {
	forVariants(t, func(t *testing.T) {
		r := rand.New(rand.NewPCG(17, 18))
		for _, sh := range []mnk{{7, 70, 33}, {13, 130, 40}, {150, 65, 20}} {
			for _, dt := range []DType{F32, BF16} {
				w := randMat(r, sh.N, sh.K, dt)
				inp := randSlice(r, sh.M*sh.K)
				inp[0*sh.K+5] = float32(math.NaN())
				inp[3*sh.K+2] = float32(math.Inf(1))
				out := make([]float32, sh.M*sh.N)
				Linear(out, inp, w, nil, sh.M)
				for m := range sh.M {
					for n := range sh.N {
						v := float64(out[m*sh.N+n])
						bad := math.IsNaN(v) || math.IsInf(v, 0)
						if (m == 0 || m == 3) != bad {
							t.Fatalf("M=%d N=%d K=%d %v: out[%d][%d] = %v", sh.M, sh.N, sh.K, dt, m, n, v)
						}
					}
				}
			}
		}
	})
}

// TestMatReadback checks that packing a BF16 or F16 weight releases U16 and
// that Row, At and Bits16 read the same bits back from the panels (the
// oracles of the other tests read weights through Row and At).
func TestMatReadback(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	for _, sh := range [][2]int{{1, 1}, {5, 3}, {64, 7}, {65, 33}, {130, 64}, {200, 129}} {
		for _, dt := range []DType{BF16, F16} {
			N, K := sh[0], sh[1]
			w := randMat(r, N, K, dt)
			orig := append([]uint16(nil), w.U16...)
			if got := w.Bits16(); !slices.Equal(got, orig) || w.PackedBytes() != 0 {
				t.Fatalf("%v %dx%d: Bits16 before packing: equal %v, packed %d bytes; want the stored bits, nothing packed", dt, N, K, slices.Equal(got, orig), w.PackedBytes())
			}
			w.Prepack()
			if w.U16 != nil {
				t.Fatalf("%v %dx%d: U16 kept after packing", dt, N, K)
			}
			if got := w.Bits16(); !slices.Equal(got, orig) {
				t.Fatalf("%v %dx%d: Bits16 after packing differs from the stored bits", dt, N, K)
			}
			widen := BF16ToF32
			if dt == F16 {
				widen = F16ToF32
			}
			row := make([]float32, K)
			for n := range N {
				w.Row(row, n)
				for k := range K {
					want := widen(orig[n*K+k])
					if row[k] != want || w.At(n, k) != want {
						t.Fatalf("%v %dx%d: (%d,%d) Row %v At %v; want %v", dt, N, K, n, k, row[k], w.At(n, k), want)
					}
				}
			}
		}
	}
}

// TestLinearMulti checks LinearMulti against separate Linear calls (the
// same kernels, so the same bits) on mixes of large and tiny products.
func TestLinearMulti(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(max(2, runtime.GOMAXPROCS(0))))
	for _, u := range Units() {
		t.Run(u.String(), func(t *testing.T) { withUnit(t, u, testLinearMulti) })
	}
}

// testLinearMulti checks LinearMulti against one Linear per op on the
// unit in use; ops 2 and 3 take the shared input one after the other (on
// UnitBF16 they share its conversion to pairs).
func testLinearMulti(t *testing.T) {
	forVariants(t, func(t *testing.T) {
		r := rand.New(rand.NewPCG(13, 14))
		for _, M := range []int{1, 3, 8, 20, 150} {
			for _, dt := range []DType{F32, BF16, F16} {
				K := 130
				var ops []LinearOp
				var want [][]float32
				inp := randSlice(r, M*K)
				for i, N := range []int{700, 64, 5, 300, 0} {
					w := randMat(r, N, K, dt)
					var bias []float32
					if i%2 == 0 {
						bias = randSlice(r, N)
					}
					op := LinearOp{W: w, Bias: bias}
					in, m := inp, M
					if i == 1 { // its own input rows, as a mixture's experts
						m = 1 + (M+i)%7
						in = randSlice(r, m*K)
						op.In, op.M = in, m
					}
					op.Out = randSlice(r, m*N)
					ref := make([]float32, m*N)
					Linear(ref, in, w, bias, m)
					ops = append(ops, op)
					want = append(want, ref)
				}
				LinearMulti(inp, M, ops...)
				for i, op := range ops {
					if !slices.Equal(op.Out, want[i]) {
						t.Fatalf("M=%d %v op %d: LinearMulti differs from Linear", M, dt, i)
					}
				}
			}
		}
	})
}

// TestLinearBatchInvariant checks that a row of a decoding group (up to 8
// rows) gets exactly the bits it gets alone (M = 1), with the 8-row kernel
// or without, so batched and unbatched generation agree to the bit.
func TestLinearBatchInvariant(t *testing.T) {
	defer func(v bool) { useM8 = v }(useM8)
	forVariants(t, func(t *testing.T) {
		r := rand.New(rand.NewPCG(15, 16))
		for _, m8 := range []bool{false, true} {
			useM8 = m8
			for _, sh := range []mnk{{8, 640, 301}, {7, 650, 4100}, {8, 650, 4100}, {8, 130, 64}} {
				for _, dt := range []DType{F32, BF16, F16} {
					w := randMat(r, sh.N, sh.K, dt)
					bias := randSlice(r, sh.N)
					inp := randSlice(r, sh.M*sh.K)
					out := make([]float32, sh.M*sh.N)
					Linear(out, inp, w, bias, sh.M)
					one := make([]float32, sh.N)
					for m := range sh.M {
						Linear(one, inp[m*sh.K:(m+1)*sh.K], w, bias, 1)
						if !slices.Equal(one, out[m*sh.N:(m+1)*sh.N]) {
							t.Fatalf("m8=%v %v %v: row %d differs between M=%d and M=1", m8, sh, dt, m, sh.M)
						}
					}
				}
			}
		}
	})
}

// TestLinearM8 runs the Linear shapes with the AVX-512 8-row kernel
// enabled (it is off by default; see useM8) against the float64 reference.
// (The quantized 8-row kernels are TestLinearQ8's and TestLinearQ4's.)
func TestLinearM8(t *testing.T) {
	defer func(v bool) { useM8 = v }(useM8)
	useM8 = true
	forVariants(t, func(t *testing.T) {
		if active == varAVX512 {
			testLinearM8(t)
		}
	})
}

func testLinearM8(t *testing.T) {
	r := rand.New(rand.NewPCG(17, 18))
	for i, sh := range linearShapes() {
		if sh.M < 8 || thin(i) {
			continue
		}
		for _, dt := range []DType{BF16, F16} {
			w := randMat(r, sh.N, sh.K, dt)
			inp := randSlice(r, sh.M*sh.K)
			var bias []float32
			if i%2 == 0 {
				bias = randSlice(r, sh.N)
			}
			out := randSlice(r, sh.M*sh.N)
			Linear(out, inp, w, bias, sh.M)
			want, scale := linear64(inp, w, bias, sh.M)
			closeTo(t, fmt.Sprintf("M=%d N=%d K=%d %v bias=%v", sh.M, sh.N, sh.K, dt, bias != nil), out, want, scale)
		}
	}
}

// TestLinear_BlockPanelsInvariant checks that the N blocking of the
// blocked path (sized to the machine's L2) changes no bits: the sums run in
// the same K blocks whatever the block width, so another machine's blocks
// give the same numbers.
func TestLinear_BlockPanelsInvariant(t *testing.T) {
	defer func(bp int) { blockPanels = bp }(blockPanels)
	forVariants(t, func(t *testing.T) {
		rng := rand.New(rand.NewPCG(5, 6))
		const M, K, N = 140, 300, 600 // blocked path; 10 panels, the last partial
		in := randSlice(rng, M*K)
		for _, dt := range []DType{F32, BF16, F16} {
			w := randMat(rng, N, K, dt)
			dy := randSlice(rng, M*N)
			var want, wantDx []float32
			for _, bp := range []int{16, 2, 3, 4, 7} {
				blockPanels = bp
				got, dx := make([]float32, M*N), make([]float32, M*K)
				Linear(got, in, w, nil, M)
				LinearBackwardInput(dx, dy, w, M)
				if want == nil {
					want, wantDx = got, dx
					continue
				}
				if !slices.Equal(got, want) || !slices.Equal(dx, wantDx) {
					t.Fatalf("%v: blockPanels %d changes the bits of Linear or LinearBackwardInput", dt, bp)
				}
			}
		}
	})
}

func TestBlockPanelsFor(t *testing.T) {
	t.Logf("this machine: L2 of %d bytes, blocks of %d panels", l2Bytes(), blockPanels)
	for _, c := range []struct{ l2, want int }{
		{0, 16},        // unknown: the default
		{2 << 20, 16},  // Intel hosts' 2 MiB
		{512 << 10, 4}, // Zen 3
		{1 << 20, 8},   // Zen 4
		{64 << 10, 2},  // never fewer than 2
		{32 << 20, 16}, // never more than 16
	} {
		if got := blockPanelsFor(c.l2); got != c.want {
			t.Errorf("blockPanelsFor(%d) = %d, want %d", c.l2, got, c.want)
		}
	}
	for _, c := range []struct {
		s    string
		want int
	}{{"512K", 512 << 10}, {"2048K", 2 << 20}, {"2M", 2 << 20}, {"", 0}, {"K", 0}, {"x1K", 0}, {"-4K", 0}} {
		if got := parseCacheSize(c.s); got != c.want {
			t.Errorf("parseCacheSize(%q) = %d, want %d", c.s, got, c.want)
		}
	}
}

// TestGemmSerial checks that the serial products give Gemm's and
// GemmPanels' bits on shapes large enough for those to fork (and through
// every path of Gemm: transposed A, the narrow-C swap, beta).
func TestGemmSerial(t *testing.T) {
	forVariants(t, func(t *testing.T) {
		rng := rand.New(rand.NewPCG(13, 14))
		for _, sh := range []mnk{{512, 64, 64}, {64, 64, 512}, {300, 130, 200}, {200, 8, 300}} {
			for _, tA := range []bool{false, true} {
				for _, tB := range []bool{false, true} {
					for _, beta := range []float32{0, 1, 0.5} {
						M, N, K := sh.M, sh.N, sh.K
						A, B, C0 := randSlice(rng, M*K), randSlice(rng, N*K), randSlice(rng, M*N)
						want, got := append([]float32(nil), C0...), append([]float32(nil), C0...)
						lda, ldb := K, N
						if tA {
							lda = M
						}
						if tB {
							ldb = K
						}
						Gemm(tA, tB, M, N, K, A, lda, B, ldb, beta, want, N)
						GemmSerial(tA, tB, M, N, K, A, lda, B, ldb, beta, got, N)
						for i := range want {
							if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
								t.Fatalf("%v tA=%v tB=%v beta=%v: C[%d] = %v, Gemm gives %v", sh, tA, tB, beta, i, got[i], want[i])
							}
						}
					}
				}
			}
			// GemmPanels: B as panels of its rows, two panels apart.
			M, N, K := sh.M, sh.N, sh.K
			A, B := randSlice(rng, M*K), randSlice(rng, N*K)
			np, ps := (N+PanelWidth-1)/PanelWidth, 2*K*PanelWidth
			P := make([]float32, (np-1)*ps+K*PanelWidth)
			for n := range N {
				for k := range K {
					P[n/PanelWidth*ps+k*PanelWidth+n%PanelWidth] = B[n*K+k]
				}
			}
			want, got := make([]float32, M*N), make([]float32, M*N)
			GemmPanels(M, N, K, A, K, P, ps, want, N)
			GemmPanelsSerial(M, N, K, A, K, P, ps, got, N)
			for i := range want {
				if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
					t.Fatalf("GemmPanels %v: C[%d] = %v, GemmPanels gives %v", sh, i, got[i], want[i])
				}
			}
		}
	})
}

// TestGemmPanels checks the in-place product over B in panels against
// Gemm on B's rows, bit for bit, on every variant: the decoder's attention
// reads its cached keys this way and the trainer's attention uses Gemm,
// so sampler and trainer agree only if the two are equal. Panels are
// spaced wider than K×64 (the KV cache interleaves kv heads) and the
// unused columns of the last panel hold NaN, which must not reach C.
func TestGemmPanels(t *testing.T) {
	forVariants(t, func(t *testing.T) {
		rng := rand.New(rand.NewPCG(7, 8))
		for _, K := range []int{64, 128, 40} {
			for _, N := range []int{1, 50, 64, 65, 200} {
				for _, M := range []int{1, 3, 7, 8, 14, 130, 200} {
					for _, spread := range []int{1, 3} {
						A, B := randSlice(rng, M*K), randSlice(rng, N*K)
						np, ps := (N+PanelWidth-1)/PanelWidth, spread*K*PanelWidth
						P := make([]float32, (np-1)*ps+K*PanelWidth)
						for i := range P {
							P[i] = float32(math.NaN())
						}
						for n := range N {
							for k := range K {
								P[n/PanelWidth*ps+k*PanelWidth+n%PanelWidth] = B[n*K+k]
							}
						}
						want, got := make([]float32, M*N), make([]float32, M*N)
						Gemm(false, true, M, N, K, A, K, B, K, 0, want, N)
						GemmPanels(M, N, K, A, K, P, ps, got, N)
						for i := range want {
							if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
								t.Fatalf("M=%d N=%d K=%d stride %d: C[%d] = %v, Gemm on the rows gives %v", M, N, K, ps, i, got[i], want[i])
							}
						}
					}
				}
			}
		}
	})
}
