package model

import (
	"math"
	"math/rand/v2"
	"testing"
)

// Finite-difference checks of each layer's backward pass, llm.c style: for a
// random linear functional L = Σ c·forward(x), the analytic gradient must
// match central differences. fp32 forward passes limit the achievable match,
// hence the relative tolerance.
const (
	fdEps = 1e-2
	// fdTol: central differences of an fp32 computation with step 1e-2 agree
	// with the analytic gradient to ~1e-3 relative on these smooth layers.
	fdTol = 2e-2
)

func randVec(rng *rand.Rand, n int, scale float64) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(scale * rng.NormFloat64())
	}
	return v
}

func dot64(a, b []float32) float64 {
	var s float64
	for i := range a {
		s += float64(a[i]) * float64(b[i])
	}
	return s
}

// checkGrad compares analytic (for input x) with central differences of
// loss(x) on every element.
func checkGrad(t *testing.T, name string, x, analytic []float32, loss func() float64) {
	t.Helper()
	var maxErr, maxRef float64
	worst := -1
	for i := range x {
		old := x[i]
		x[i] = old + fdEps
		lp := loss()
		x[i] = old - fdEps
		lm := loss()
		x[i] = old
		num := (lp - lm) / (2 * fdEps)
		if d := math.Abs(num - float64(analytic[i])); d > maxErr {
			maxErr, worst = d, i
		}
		maxRef = math.Max(maxRef, math.Abs(num))
	}
	if maxErr > fdTol*math.Max(maxRef, 1e-3) {
		t.Fatalf("%s: max |analytic-numeric| = %.3g at %d (largest gradient %.3g)", name, maxErr, worst, maxRef)
	}
}

func TestRMSNormBackward(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	T, C := 3, 8
	x, w, c := randVec(rng, T*C, 1), randVec(rng, C, 1), randVec(rng, T*C, 1)
	out, rstd := make([]float32, T*C), make([]float32, T)
	loss := func() float64 { rmsNormForward(out, rstd, x, w, T, C, 1e-6); return dot64(c, out) }
	loss()
	dx, dw := make([]float32, T*C), make([]float32, C)
	rmsNormBackward(dx, dw, c, x, w, rstd, T, C)
	checkGrad(t, "dx", x, dx, loss)
	checkGrad(t, "dweight", w, dw, loss)
}

func TestRopeBackward(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	T, nh, HD := 4, 2, 8
	cfg := Config{HeadDim: HD, RopeTheta: 10000}
	freqs := ropeFreqs(cfg)
	pos := []int{0, 3, 7, 100}
	x, c := randVec(rng, T*nh*HD, 1), randVec(rng, T*nh*HD, 1)
	y := make([]float32, len(x))
	var rt ropeTable
	rt.set(freqs, pos)
	loss := func() float64 { copy(y, x); rt.forward(y, T, nh, HD); return dot64(c, y) }
	dx := append([]float32(nil), c...)
	rt.backward(dx, T, nh, HD)
	checkGrad(t, "dx", x, dx, loss)
}

func TestSwigluBackward(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	n := 16
	g, u, c := randVec(rng, n, 2), randVec(rng, n, 1), randVec(rng, n, 1)
	h := make([]float32, n)
	loss := func() float64 { swigluForward(h, g, u, 1, n); return dot64(c, h) }
	dg, du := make([]float32, n), make([]float32, n)
	swigluBackward(dg, du, c, g, u, 1, n)
	checkGrad(t, "dgate", g, dg, loss)
	checkGrad(t, "dup", u, du, loss)
}

func TestAttentionBackward(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	T, NH, KVH, HD := 5, 4, 2, 4
	Q, KV := NH*HD, KVH*HD
	q, k, v := randVec(rng, T*Q, 1), randVec(rng, T*KV, 1), randVec(rng, T*KV, 1)
	c := randVec(rng, T*Q, 1)
	out := make([]float32, T*Q)
	loss := func() float64 { attentionForwardRef(out, q, k, v, T, NH, KVH, HD); return dot64(c, out) }
	dq, dk, dv := make([]float32, T*Q), make([]float32, T*KV), make([]float32, T*KV)
	attentionBackwardRef(dq, dk, dv, c, q, k, v, T, NH, KVH, HD)
	checkGrad(t, "dq", q, dq, loss)
	checkGrad(t, "dk", k, dk, loss)
	checkGrad(t, "dv", v, dv, loss)
}
