package model

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/artgo/art/engine/kernels"
)

// maxRelDiff returns max|a-b| / max(max|b|, 1e-6).
func maxRelDiff(a, b []float32) float64 {
	var d, s float64
	for i := range a {
		d = math.Max(d, math.Abs(float64(a[i])-float64(b[i])))
		s = math.Max(s, math.Abs(float64(b[i])))
	}
	return d / math.Max(s, 1e-6)
}

// TestTrainAttention compares the block-causal training attention with the
// references attentionForwardRef and attentionBackwardRef, on lengths around the
// key block size, and checks its gradient by finite differences.
func TestTrainAttention(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	NH, KVH, HD := 4, 2, 8
	Q, KV := NH*HD, KVH*HD
	var w attnWork
	for _, T := range []int{1, 5, attnBlock - 1, attnBlock, attnBlock + 1, 2*attnBlock + 17, 3 * attnBlock} {
		t.Run(fmt.Sprint("T=", T), func(t *testing.T) {
			q, k, v := randVec(rng, T*Q, 1), randVec(rng, T*KV, 1), randVec(rng, T*KV, 1)
			dout := randVec(rng, T*Q, 1)
			want, got := make([]float32, T*Q), randVec(rng, T*Q, 1) // got starts dirty
			attentionForwardRef(want, q, k, v, T, NH, KVH, HD)
			trainAttentionForward(&w, got, q, k, v, T, NH, KVH, HD, 0, -1)
			if d := maxRelDiff(got, want); d > 1e-5 {
				t.Errorf("forward: max relative difference %.3g", d)
			}
			// Backward accumulates: start both from the same nonzero values.
			init := func(n int) []float32 { return randVec(rng, n, 1) }
			dq0, dk0, dv0 := init(T*Q), init(T*KV), init(T*KV)
			dq1, dk1, dv1 := append([]float32(nil), dq0...), append([]float32(nil), dk0...), append([]float32(nil), dv0...)
			attentionBackwardRef(dq0, dk0, dv0, dout, q, k, v, T, NH, KVH, HD)
			trainAttentionBackward(&w, dq1, dk1, dv1, dout, q, k, v, T, NH, KVH, HD, 0, -1)
			for _, c := range []struct {
				name      string
				got, want []float32
			}{{"dq", dq1, dq0}, {"dk", dk1, dk0}, {"dv", dv1, dv0}} {
				if d := maxRelDiff(c.got, c.want); d > 1e-5 {
					t.Errorf("backward %s: max relative difference %.3g", c.name, d)
				}
			}
		})
	}
	// Finite differences on a two-block sequence (few elements checked
	// per tensor would miss the block edges, so all are).
	T := attnBlock + 3
	q, k, v := randVec(rng, T*Q, 1), randVec(rng, T*KV, 1), randVec(rng, T*KV, 1)
	c := randVec(rng, T*Q, 1)
	out := make([]float32, T*Q)
	loss := func() float64 { trainAttentionForward(&w, out, q, k, v, T, NH, KVH, HD, 0, -1); return dot64(c, out) }
	dq, dk, dv := make([]float32, T*Q), make([]float32, T*KV), make([]float32, T*KV)
	trainAttentionBackward(&w, dq, dk, dv, c, q, k, v, T, NH, KVH, HD, 0, -1)
	checkGrad(t, "dq", q, dq, loss)
	checkGrad(t, "dk", k, dk, loss)
	checkGrad(t, "dv", v, dv, loss)
}

// TestTrainAttention_KeptProbs checks that the backward pass reading the
// probabilities its forward pass kept gives the very bits of recomputing
// them, with and without a sliding window, and that it reads them once.
func TestTrainAttention_KeptProbs(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	NH, KVH, HD := 4, 2, 8
	Q, KV := NH*HD, KVH*HD
	for _, T := range []int{1, attnBlock + 1, 2*attnBlock + 17} {
		for _, window := range []int{0, 20} {
			var w attnWork
			q, k, v := randVec(rng, T*Q, 1), randVec(rng, T*KV, 1), randVec(rng, T*KV, 1)
			dout := randVec(rng, T*Q, 1)
			out := make([]float32, T*Q)
			grads := func(layer int) [3][]float32 {
				g := [3][]float32{make([]float32, T*Q), make([]float32, T*KV), make([]float32, T*KV)}
				trainAttentionBackward(&w, g[0], g[1], g[2], dout, q, k, v, T, NH, KVH, HD, window, layer)
				return g
			}
			trainAttentionForward(&w, out, q, k, v, T, NH, KVH, HD, window, 1)
			if len(w.keptT) < 2 || w.keptT[1] != T {
				t.Fatalf("T=%d window=%d: forward kept no probabilities for layer 1", T, window)
			}
			kept := grads(1)
			if w.keptT[1] != 0 {
				t.Errorf("T=%d window=%d: kept probabilities not marked read", T, window)
			}
			recomputed := grads(-1)
			for i, name := range []string{"dq", "dk", "dv"} {
				for j := range kept[i] {
					if math.Float32bits(kept[i][j]) != math.Float32bits(recomputed[i][j]) {
						t.Fatalf("T=%d window=%d: %s[%d] = %v from kept probabilities, %v recomputed", T, window, name, j, kept[i][j], recomputed[i][j])
					}
				}
			}
		}
	}
}

// TestLayersMatchReference checks the row-parallel layers against the
// serial references (they must be bit-identical).
func TestLayersMatchReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	T, C, nh, HD := 67, 24, 3, 8
	x, w, dy := randVec(rng, T*C, 1), randVec(rng, C, 1), randVec(rng, T*C, 1)
	same := func(name string, a, b []float32) {
		t.Helper()
		for i := range a {
			if a[i] != b[i] {
				t.Fatalf("%s: index %d: %v, reference %v", name, i, a[i], b[i])
			}
		}
	}
	// The vectorised SwiGLU matches to the bit unless the Go compiler
	// fuses multiply-adds (GOAMD64=v3): allow 1 ulp.
	close1 := func(name string, a, b []float32) {
		t.Helper()
		for i := range a {
			d := int64(math.Float32bits(a[i])) - int64(math.Float32bits(b[i]))
			if d < -1 || d > 1 {
				t.Fatalf("%s: index %d: %v, reference %v", name, i, a[i], b[i])
			}
		}
	}
	o1, o2, r1, r2 := make([]float32, T*C), make([]float32, T*C), make([]float32, T), make([]float32, T)
	rmsNormForwardRows(o1, r1, x, w, T, C, 1e-6)
	rmsNormForward(o2, r2, x, w, T, C, 1e-6)
	same("rmsnorm out", o2, o1)
	same("rmsnorm rstd", r2, r1)
	d1, d2 := make([]float32, T*C), make([]float32, T*C)
	rmsNormBackwardRows(d1, nil, dy, x, w, r1, T, C)
	rmsNormBackward(d2, nil, dy, x, w, r1, T, C)
	same("rmsnorm dx", d2, d1)

	g, u := randVec(rng, T*C, 3), randVec(rng, T*C, 1)
	kernels.SwiGLURef(o1, g, u)
	swigluForward(o2, g, u, T, C)
	close1("swiglu", o2, o1)
	dg1, du1, dg2, du2 := make([]float32, T*C), make([]float32, T*C), make([]float32, T*C), make([]float32, T*C)
	kernels.SwiGLUBackwardRef(dg1, du1, dy, g, u)
	swigluBackward(dg2, du2, dy, g, u, T, C)
	close1("swiglu dgate", dg2, dg1)
	close1("swiglu dup", du2, du1)

	freqs := ropeFreqs(Config{HeadDim: HD, RopeTheta: 10000})
	pos := make([]int, T)
	for i := range pos {
		pos[i] = i
	}
	var rt ropeTable
	rt.set(freqs, pos)
	xr := randVec(rng, T*nh*HD, 1)
	a, b := append([]float32(nil), xr...), append([]float32(nil), xr...)
	ropeRef(a, pos, freqs, T, nh, HD, false)
	rt.forward(b, T, nh, HD)
	same("rope", b, a)
	ropeRef(a, pos, freqs, T, nh, HD, true)
	rt.backward(b, T, nh, HD)
	same("rope backward", b, a)
}

// TestExpShift checks the float32 log-sum-exp pieces of LMHeadBackward
// (kernels.Max, kernels.ExpShift) against float64 on a vocabulary-sized row.
func TestExpShift(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 14))
	for _, n := range []int{1, 2, 255, 257, 151936} {
		z := randVec(rng, n, 4)
		want := math.Inf(-1)
		for _, v := range z {
			want = math.Max(want, float64(v))
		}
		var sum, ez float64
		for _, v := range z {
			e := math.Exp(float64(v) - want)
			sum += e
			ez += e * (float64(v) - want)
		}
		mx := kernels.Max(z)
		if float64(mx) != want {
			t.Fatalf("n=%d: max %v, want %v", n, mx, want)
		}
		e := append([]float32(nil), z...)
		s, se := kernels.ExpShift(e, mx)
		if math.Abs(s-sum) > 1e-6*sum || math.Abs(se-ez) > 1e-6*math.Max(1, math.Abs(ez)) {
			t.Errorf("n=%d: sums %v %v, want %v %v", n, s, se, sum, ez)
		}
		// z - max is rounded to float32 first: ~1e-7·|z - max| relative.
		for i, v := range z {
			if w := math.Exp(float64(v) - want); math.Abs(float64(e[i])-w) > 5e-6*w {
				t.Fatalf("n=%d: exp at %d: %v, want %v", n, i, e[i], w)
			}
		}
	}
}
