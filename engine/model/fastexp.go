package model

import "math"

// expf is exp for float32 arguments, about 4× faster than math.Exp and
// accurate to ~2 ulp: x = k·ln2 + r with |r| ≤ ln2/2, exp(r) by a degree-6
// polynomial, then scaled by 2^k through the exponent bits. Softmax and
// SiLU spend most of their time here.
func expf(x float32) float32 {
	switch {
	case x > 88: // 2^k would overflow the exponent field near the top
		return float32(math.Exp(float64(x)))
	case x < -87.3:
		return 0
	case x != x: // NaN
		return x
	}
	const (
		log2e = 1.44269504088896341
		ln2hi = 0.693359375
		ln2lo = -2.12194440e-4
	)
	k := float32(math.Floor(float64(x*log2e + 0.5)))
	r := x - k*ln2hi - k*ln2lo
	// Taylor coefficients of exp on [-ln2/2, ln2/2].
	p := float32(1.0/720)*r + 1.0/120
	p = p*r + 1.0/24
	p = p*r + 1.0/6
	p = p*r + 0.5
	p = p*r + 1
	p = p*r + 1
	return p * math.Float32frombits(uint32(int32(k)+127)<<23)
}
