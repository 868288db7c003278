package kernels

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// ulps is the distance between a and b in units in the last place (0 for
// two NaNs).
func ulps(a, b float32) float64 {
	if a != a && b != b {
		return 0
	}
	if a == b {
		return 0
	}
	if a != a || b != b || math.Signbit(float64(a)) != math.Signbit(float64(b)) {
		return math.Inf(1)
	}
	x, y := int64(math.Float32bits(a)), int64(math.Float32bits(b))
	return math.Abs(float64(x - y))
}

// expInputs returns n values in [-lim, lim] with, when special, the values
// the assembly must hand to Go (NaN, above 88) or flush (below -87.3)
// sprinkled in.
func expInputs(r *rand.Rand, n int, lim float64, special bool) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = float32((2*r.Float64() - 1) * lim)
	}
	if special && n > 0 {
		sp := []float32{float32(math.NaN()), 89, 100, -87.2, -87.4, -200, 0, float32(math.Copysign(0, -1)), 88, -87.3,
			float32(math.Inf(1)), float32(math.Inf(-1))}
		for k, v := range sp {
			x[(k*37+5)%n] = v
		}
	}
	return x
}

// TestExpVec checks ExpShift, SwiGLU and SwiGLUBackward against their
// references on every variant, lengths around the block size and the
// chunk bound, and special values.
func TestExpVec(t *testing.T) {
	forVariants(t, func(t *testing.T) {
		r := rand.New(rand.NewPCG(21, 22))
		for _, n := range []int{0, 1, 15, 16, 17, 100, 1000, expChunk + 40} {
			for _, special := range []bool{false, true} {
				name := fmt.Sprintf("n=%d/special=%v", n, special)
				// ExpShift
				x := expInputs(r, n, 30, special)
				shift := float32(3.5)
				want := append([]float32(nil), x...)
				ws, wd := ExpShiftRef(want, shift)
				got := append([]float32(nil), x...)
				gs, gd := ExpShift(got, shift)
				for i := range got {
					if ulps(got[i], want[i]) > 1 {
						t.Fatalf("ExpShift %s: index %d (x = %v): %v, reference %v", name, i, x[i], got[i], want[i])
					}
				}
				if !(math.Abs(gs-ws) <= 1e-12*math.Abs(ws)) && !(math.IsNaN(gs) && math.IsNaN(ws)) && !(gs == ws) {
					t.Fatalf("ExpShift %s: sum %v, reference %v", name, gs, ws)
				}
				if !(math.Abs(gd-wd) <= 1e-12*math.Abs(wd)+1e-300) && !(math.IsNaN(gd) && math.IsNaN(wd)) && !(gd == wd) {
					t.Fatalf("ExpShift %s: dot %v, reference %v", name, gd, wd)
				}
				if m, w := Max(x), MaxRef(x); m != w {
					t.Fatalf("Max %s: %v, reference %v", name, m, w)
				}
				// SwiGLU and its backward
				g, u, dh := expInputs(r, n, 12, special), expInputs(r, n, 2, false), expInputs(r, n, 2, false)
				h1, h2 := make([]float32, n), make([]float32, n)
				SwiGLURef(h1, g, u)
				SwiGLU(h2, g, u)
				dg1, du1, dg2, du2 := make([]float32, n), make([]float32, n), make([]float32, n), make([]float32, n)
				SwiGLUBackwardRef(dg1, du1, dh, g, u)
				SwiGLUBackward(dg2, du2, dh, g, u)
				for i := range h1 {
					if ulps(h2[i], h1[i]) > 1 || ulps(dg2[i], dg1[i]) > 1 || ulps(du2[i], du1[i]) > 1 {
						t.Fatalf("SwiGLU %s: index %d (gate %v): h %v/%v dgate %v/%v dup %v/%v (got/reference)",
							name, i, g[i], h2[i], h1[i], dg2[i], dg1[i], du2[i], du1[i])
					}
				}
				// In place, as the inference forward calls it.
				SwiGLU(g, g, u)
				for i := range g {
					if ulps(g[i], h1[i]) > 1 {
						t.Fatalf("SwiGLU in place %s: index %d: %v, reference %v", name, i, g[i], h1[i])
					}
				}
			}
		}
	})
}

// TestExpf checks Expf against math.Exp over its range.
func TestExpf(t *testing.T) {
	var worst float64
	for x := float32(-87); x < 88; x += 0.01 {
		want := math.Exp(float64(x))
		got := float64(Expf(x))
		worst = math.Max(worst, math.Abs(got-want)/want)
	}
	if worst > 3e-7 {
		t.Errorf("Expf: max relative error %.3g", worst)
	}
	if Expf(-100) != 0 || !math.IsInf(float64(Expf(100)), 1) || Expf(0) != 1 {
		t.Error("Expf: edge cases")
	}
}

// BenchmarkExpShift compares the vectorised log-sum-exp pass, with and
// without its second sum, with the reference on an LM-head row.
func BenchmarkExpShift(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 2))
	x := expInputs(r, 151936, 10, false)
	y := make([]float32, len(x))
	for _, kind := range []string{"ExpShift", "ExpShiftSum", "ref"} {
		b.Run(kind, func(b *testing.B) {
			b.SetBytes(int64(4 * len(x)))
			for b.Loop() {
				copy(y, x)
				switch kind {
				case "ExpShift":
					ExpShift(y, 10)
				case "ExpShiftSum":
					ExpShiftSum(y, 10)
				default:
					ExpShiftRef(y, 10)
				}
			}
		})
	}
}

// TestExpVec_AVX2SumOrder checks the AVX2 sums' bits against Go's on many
// short rows whose values span a wide range: there a float64 sum rounds,
// so adding a block's elements in another order changes its last bits
// (long rows of the test below hide that: their totals absorb it). It also
// checks every element, and that nothing after a row is written.
func TestExpVec_AVX2SumOrder(t *testing.T) {
	if bestVariant() < varAVX2 {
		t.Skip("this CPU has no AVX2")
	}
	saved := active
	defer func() { active = saved }()
	r := rand.New(rand.NewPCG(5, 6))
	// Whole groups of 4 blocks, single blocks after them and a partial
	// last block (the AVX2 code masks its missing lanes).
	lengths := []int{64, 80, 128, 208, 5, 37, 71, 143}
	for trial := range 20000 {
		n := lengths[trial%len(lengths)]
		x := make([]float32, n)
		for i := range x {
			x[i] = float32(5 - 60*r.Float64())
		}
		// Each row sits in a buffer with sentinels after it, which no
		// variant may touch.
		row := func() []float32 {
			buf := append(append([]float32(nil), x...), make([]float32, 16)...)
			for i := n; i < len(buf); i++ {
				buf[i] = float32(i)
			}
			return buf
		}
		active = varGo
		wx := row()
		ws, wd := ExpShift(wx[:n], 0)
		active = varAVX2
		gx, sx := row(), row()
		gs, gd := ExpShift(gx[:n], 0)
		gsum := ExpShiftSum(sx[:n], 0)
		if math.Float64bits(gs) != math.Float64bits(ws) || math.Float64bits(gd) != math.Float64bits(wd) ||
			math.Float64bits(gsum) != math.Float64bits(ws) {
			t.Fatalf("row %d (n=%d): AVX2 sums %v, %v (ExpShiftSum %v); Go %v, %v", trial, n, gs, gd, gsum, ws, wd)
		}
		for i := range wx {
			if math.Float32bits(gx[i]) != math.Float32bits(wx[i]) || math.Float32bits(sx[i]) != math.Float32bits(wx[i]) {
				t.Fatalf("row %d (n=%d): element %d: AVX2 %v (ExpShiftSum %v); Go %v", trial, n, i, gx[i], sx[i], wx[i])
			}
		}
	}
}

// TestExpVec_AVX2SameBitsAsGo checks that the AVX2 row operations give the
// very bits the Go code gives, sums included: on an AVX2 machine they
// replaced Go without changing any result (a run's seed reproduces the
// same tokens and history with or without them).
func TestExpVec_AVX2SameBitsAsGo(t *testing.T) {
	if bestVariant() < varAVX2 {
		t.Skip("this CPU has no AVX2")
	}
	saved := active
	defer func() { active = saved }()
	r := rand.New(rand.NewPCG(23, 24))
	type result struct {
		x, h, dg, du []float32
		sum, dot     float64
		max          float32
		xs           []float32 // ExpShiftSum's
		sumOnly      float64
	}
	run := func(v variant, x, g, u, dh []float32, shift float32) result {
		active = v
		var res result
		res.x = append([]float32(nil), x...)
		res.sum, res.dot = ExpShift(res.x, shift)
		res.xs = append([]float32(nil), x...)
		res.sumOnly = ExpShiftSum(res.xs, shift)
		res.max = Max(x)
		n := len(g)
		res.h, res.dg, res.du = make([]float32, n), make([]float32, n), make([]float32, n)
		SwiGLU(res.h, g, u)
		SwiGLUBackward(res.dg, res.du, dh, g, u)
		return res
	}
	same := func(a, b []float32) int {
		for i := range a {
			if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
				return i
			}
		}
		return -1
	}
	for _, n := range []int{16, 40, 1000, 151936, expChunk + 48} {
		for _, special := range []bool{false, true} {
			x := expInputs(r, n, 30, special)
			g, u, dh := expInputs(r, n, 12, special), expInputs(r, n, 2, false), expInputs(r, n, 2, false)
			want, got := run(varGo, x, g, u, dh, 4.25), run(varAVX2, x, g, u, dh, 4.25)
			name := fmt.Sprintf("n=%d/special=%v", n, special)
			for what, pair := range map[string][2][]float32{"ExpShift": {got.x, want.x}, "ExpShiftSum": {got.xs, want.x}, "SwiGLU": {got.h, want.h},
				"SwiGLUBackward dgate": {got.dg, want.dg}, "SwiGLUBackward dup": {got.du, want.du}} {
				if i := same(pair[0], pair[1]); i >= 0 {
					t.Fatalf("%s %s: index %d: AVX2 %v, Go %v", what, name, i, pair[0][i], pair[1][i])
				}
			}
			sameF64 := func(a, b float64) bool { return math.Float64bits(a) == math.Float64bits(b) || a != a && b != b }
			if !sameF64(got.sum, want.sum) || !sameF64(got.dot, want.dot) || !sameF64(got.sumOnly, want.sum) {
				t.Fatalf("ExpShift %s: sums %v, %v (ExpShiftSum %v); Go %v, %v", name, got.sum, got.dot, got.sumOnly, want.sum, want.dot)
			}
			if math.Float32bits(got.max) != math.Float32bits(want.max) {
				t.Fatalf("Max %s: AVX2 %v, Go %v", name, got.max, want.max)
			}
		}
	}
}
