package kernels

import "fmt"

// Vector helpers. Each has a plain Go reference (the *Ref twin, the test
// oracle); the exported function runs the active variant's assembly on the
// bulk of the slice and finishes the tail in Go.

// Dot returns Σ a[i]·b[i]. len(b) must equal len(a).
func Dot(a, b []float32) float32 {
	checkSame("Dot", len(a), len(b))
	n := len(a)
	s, done := dotAsm(a, b, n)
	for i := done; i < n; i++ {
		s += a[i] * b[i]
	}
	return s
}

// DotRef is the reference for Dot.
func DotRef(a, b []float32) float32 {
	checkSame("DotRef", len(a), len(b))
	var s float32
	for i, v := range a {
		s += v * b[i]
	}
	return s
}

// Axpy computes y[i] += alpha·x[i]. len(y) must equal len(x).
func Axpy(alpha float32, x, y []float32) {
	checkSame("Axpy", len(x), len(y))
	done := axpyAsm(alpha, x, y, len(x))
	for i := done; i < len(x); i++ {
		y[i] += alpha * x[i]
	}
}

// AxpyRef is the reference for Axpy.
func AxpyRef(alpha float32, x, y []float32) {
	checkSame("AxpyRef", len(x), len(y))
	for i, v := range x {
		y[i] += alpha * v
	}
}

// Scale computes x[i] *= alpha.
func Scale(alpha float32, x []float32) {
	done := scaleAsm(alpha, x, len(x))
	for i := done; i < len(x); i++ {
		x[i] *= alpha
	}
}

// ScaleRef is the reference for Scale.
func ScaleRef(alpha float32, x []float32) {
	for i := range x {
		x[i] *= alpha
	}
}

// SoftmaxGrad computes dp[i] = p[i]·(dp[i] − c)·scale, the last step of a
// softmax's backward pass (c = Σ p·dp), rounded as written.
func SoftmaxGrad(dp, p []float32, c, scale float32) {
	checkSame("SoftmaxGrad", len(dp), len(p))
	done := softmaxGradAsm(dp, p, c, scale)
	SoftmaxGradRef(dp[done:], p[done:], c, scale)
}

// SoftmaxGradRef is the reference for SoftmaxGrad.
func SoftmaxGradRef(dp, p []float32, c, scale float32) {
	checkSame("SoftmaxGradRef", len(dp), len(p))
	for i := range dp {
		dp[i] = p[i] * (dp[i] - c) * scale
	}
}

// SumSquares returns Σ x[i]², each square exact and the sum in float64
// (the sum of an RMSNorm). The bulk is summed in 16 lanes, element i in
// lane i mod 16, the lanes added pairwise at the end (sumSquaresLanes),
// the tail in order: the same bits with or without assembly.
func SumSquares(x []float32) float64 {
	done := len(x) &^ 15
	s, ok := sumSquaresAsm(x[:done])
	if !ok {
		s = sumSquaresLanes(x[:done])
	}
	for _, v := range x[done:] {
		s += float64(v) * float64(v)
	}
	return s
}

// sumSquaresLanes is SumSquares's bulk (len(x) a multiple of 16) in Go, in
// the assembly's order: lane l sums elements l, l+16, ...; lanes l and
// l+4, l+8, l+12 are added as four vectors of four (v0+v1, v2+v3, then
// the two), then lanes 0+2 and 1+3 of that, then the two.
func sumSquaresLanes(x []float32) float64 {
	var lane [16]float64
	for i := 0; i < len(x); i += 16 {
		for l, v := range x[i : i+16] {
			lane[l] += float64(v) * float64(v)
		}
	}
	var v [4]float64
	for l := range 4 {
		v[l] = (lane[l] + lane[4+l]) + (lane[8+l] + lane[12+l])
	}
	return (v[0] + v[2]) + (v[1] + v[3])
}

// SumSquaresRef is the reference for SumSquares: the squares summed in
// order (equal to it within float64 rounding).
func SumSquaresRef(x []float32) float64 {
	var s float64
	for _, v := range x {
		s += float64(v) * float64(v)
	}
	return s
}

// NormScale computes out[i] = x[i]·r·w[i] in fp32, rounding after each
// product (an RMSNorm's output: r the row's reciprocal rms, w the norm's
// weight). out may alias x.
func NormScale(out, x, w []float32, r float32) {
	checkSame("NormScale", len(out), len(x))
	checkSame("NormScale", len(w), len(x))
	done := normScaleAsm(out, x, w, r)
	NormScaleRef(out[done:], x[done:], w[done:], r)
}

// NormScaleRef is the reference for NormScale.
func NormScaleRef(out, x, w []float32, r float32) {
	checkSame("NormScaleRef", len(out), len(x))
	checkSame("NormScaleRef", len(w), len(x))
	for i, v := range x {
		out[i] = v * r * w[i]
	}
}

// WidenBF16 writes the fp32 value of each bfloat16 src[i] to dst[i] (exact).
// len(dst) must equal len(src).
func WidenBF16(dst []float32, src []uint16) {
	checkSame("WidenBF16", len(dst), len(src))
	done := widenAsm(dst, src, len(src))
	for i := done; i < len(src); i++ {
		dst[i] = BF16ToF32(src[i])
	}
}

// WidenBF16Ref is the reference for WidenBF16.
func WidenBF16Ref(dst []float32, src []uint16) {
	checkSame("WidenBF16Ref", len(dst), len(src))
	for i, v := range src {
		dst[i] = BF16ToF32(v)
	}
}

func checkSame(what string, a, b int) {
	if a != b {
		panic(fmt.Sprintf("kernels: %s lengths differ: %d and %d", what, a, b))
	}
}
