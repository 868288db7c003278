package kernels

import "math"

// Exponential-based row operations of the training passes (softmax and
// SwiGLU), vectorised for AVX-512 in exp_amd64.s. The Go functions here are
// the references; the assembly computes the same float32 operations in the
// same order, so it agrees with them to the last bit (unless the Go
// compiler fuses multiply-adds, GOAMD64=v3 and up: then to ~1 ulp). Lanes
// whose exponent argument is above 88 or NaN, rare in softmax and SwiGLU,
// are done by the Go code.

// Expf is exp for float32 arguments, accurate to ~2 ulp: x = k·ln2 + r with
// |r| ≤ ln2/2, exp(r) by a degree-6 polynomial, then scaled by 2^k through
// the exponent bits. Below -87.3 it returns 0; above 88 it defers to
// math.Exp.
func Expf(x float32) float32 {
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

// expBlock is the number of elements the assembly handles per step.
const expBlock = 16

// expChunk bounds one assembly call (elements), keeping calls short.
const expChunk = 1 << 16

// ExpShift sets x[i] = Expf(x[i] - shift) and returns Σ x[i] (the new
// values) and Σ x[i]·(old x[i] - shift), the pieces of a log-sum-exp and
// of an entropy. The sums are accumulated in float64.
func ExpShift(x []float32, shift float32) (sum, dot float64) { return expShift(x, shift, true) }

// ExpShiftSum is ExpShift without the second sum (a softmax's), the same
// bits of the first.
func ExpShiftSum(x []float32, shift float32) float64 {
	sum, _ := expShift(x, shift, false)
	return sum
}

// expShift is ExpShift; without dot, the second sum it returns is
// meaningless (the assembly may skip it).
func expShift(x []float32, shift float32, dot bool) (float64, float64) {
	var acc [2]float64
	n := len(x)
	for i := 0; i < n; {
		m := min(n-i, expChunk)
		done := expShiftAsm(x[i:i+m], shift, &acc, dot)
		i += done
		if done == m {
			continue
		}
		// The block the assembly stopped at, or a tail it does not take: in Go.
		j := min(i+expBlock, n)
		s, d := expShiftGo(x[i:j], shift)
		acc[0] += s
		acc[1] += d
		i = j
	}
	return acc[0], acc[1]
}

func expShiftGo(x []float32, shift float32) (sum, dot float64) {
	for i, v := range x {
		d := v - shift
		e := Expf(d)
		x[i] = e
		sum += float64(e)
		dot += float64(e * d)
	}
	return sum, dot
}

// ExpShiftRef is the reference for ExpShift.
func ExpShiftRef(x []float32, shift float32) (sum, dot float64) { return expShiftGo(x, shift) }

// Max returns the largest element of x, skipping NaNs (a NaN never
// replaces the running maximum, which starts at -Inf; NaNs in x still
// reach an ExpShift by it).
func Max(x []float32) float32 {
	m, done := maxAsm(x)
	for _, v := range x[done:] {
		if v > m {
			m = v
		}
	}
	return m
}

// MaxRef is the reference for Max.
func MaxRef(x []float32) float32 {
	m := float32(math.Inf(-1))
	for _, v := range x {
		if v > m {
			m = v
		}
	}
	return m
}

// SwiGLU computes h[i] = silu(gate[i])·up[i] = gate[i]/(1+exp(-gate[i]))·up[i].
// h may alias gate or up.
func SwiGLU(h, gate, up []float32) {
	n := len(h)
	checkSame("SwiGLU gate", len(gate), n)
	checkSame("SwiGLU up", len(up), n)
	for i := 0; i < n; {
		if full := (n - i) / expBlock * expBlock; full > 0 {
			m := min(full, expChunk)
			done := swigluAsm(h[i:i+m], gate[i:i+m], up[i:i+m])
			i += done
			if done == m {
				continue
			}
		}
		j := min(i+expBlock, n)
		SwiGLURef(h[i:j], gate[i:j], up[i:j])
		i = j
	}
}

// SwiGLURef is the reference for SwiGLU.
func SwiGLURef(h, gate, up []float32) {
	for i := range h {
		g := gate[i]
		h[i] = g / (1 + Expf(-g)) * up[i]
	}
}

// SwiGLUBackward sets dgate and dup from dh, the gradient of h =
// silu(gate)·up. dgate may alias gate (each gate value is read before its
// gradient is written).
func SwiGLUBackward(dgate, dup, dh, gate, up []float32) {
	n := len(dh)
	checkSame("SwiGLUBackward dgate", len(dgate), n)
	checkSame("SwiGLUBackward dup", len(dup), n)
	checkSame("SwiGLUBackward gate", len(gate), n)
	checkSame("SwiGLUBackward up", len(up), n)
	for i := 0; i < n; {
		if full := (n - i) / expBlock * expBlock; full > 0 {
			m := min(full, expChunk)
			done := swigluBackAsm(dgate[i:i+m], dup[i:i+m], dh[i:i+m], gate[i:i+m], up[i:i+m])
			i += done
			if done == m {
				continue
			}
		}
		j := min(i+expBlock, n)
		SwiGLUBackwardRef(dgate[i:j], dup[i:j], dh[i:j], gate[i:j], up[i:j])
		i = j
	}
}

// SwiGLUBackwardRef is the reference for SwiGLUBackward.
func SwiGLUBackwardRef(dgate, dup, dh, gate, up []float32) {
	for i := range dh {
		g := gate[i]
		sig := 1 / (1 + Expf(-g))
		silu := g * sig
		dsilu := sig * (1 + g*(1-sig))
		d := dh[i]
		dup[i] = d * silu
		dgate[i] = d * up[i] * dsilu
	}
}
