//go:build amd64 && !purego

package kernels

import "math"

// The exponential row operations implemented (by hand) in expvec_amd64.s,
// for AVX-512 and AVX2. Each processes n elements (a multiple of 16; any n
// for expShift256) from the start and returns how many it did: all of
// them, or up to the first block (16, or 8 for the AVX2 SwiGLU) holding an
// exponent argument above 88 or NaN, which the caller does in Go.

//go:noescape
func expShift512(x *float32, n int, shift float32, acc *[2]float64) int

//go:noescape
func max512(x *float32, n int) float32

//go:noescape
func swiglu512(h, gate, up *float32, n int) int

//go:noescape
func swigluBack512(dgate, dup, dh, gate, up *float32, n int) int

//go:noescape
func expShift256(x *float32, n int, shift float32, acc *[2]float64, dot bool) int

//go:noescape
func max256(x *float32, n int) float32

//go:noescape
func swiglu256(h, gate, up *float32, n int) int

//go:noescape
func swigluBack256(dgate, dup, dh, gate, up *float32, n int) int

// expShiftAsm does ExpShift's first elements of x and returns how many:
// the AVX2 code takes a partial last block too (masked), the AVX-512 code
// whole blocks only.
func expShiftAsm(x []float32, shift float32, acc *[2]float64, dot bool) int {
	if len(x) == 0 {
		return 0
	}
	switch active {
	case varAVX512:
		if n := len(x) / expBlock * expBlock; n > 0 {
			return expShift512(&x[0], n, shift, acc)
		}
	case varAVX2:
		return expShift256(&x[0], len(x), shift, acc, dot)
	}
	return 0
}

// maxAsm returns the largest of the first done elements of x (-Inf if
// none).
func maxAsm(x []float32) (m float32, done int) {
	m = float32(math.Inf(-1))
	if active != varAVX512 && active != varAVX2 {
		return m, 0
	}
	done = len(x) / expBlock * expBlock
	for i := 0; i < done; i += expChunk {
		if active == varAVX512 {
			m = max(m, max512(&x[i], min(expChunk, done-i)))
		} else {
			m = max(m, max256(&x[i], min(expChunk, done-i)))
		}
	}
	return m, done
}

func swigluAsm(h, gate, up []float32) int {
	if len(h) == 0 {
		return 0
	}
	switch active {
	case varAVX512:
		return swiglu512(&h[0], &gate[0], &up[0], len(h))
	case varAVX2:
		return swiglu256(&h[0], &gate[0], &up[0], len(h))
	}
	return 0
}

func swigluBackAsm(dgate, dup, dh, gate, up []float32) int {
	if len(dh) == 0 {
		return 0
	}
	switch active {
	case varAVX512:
		return swigluBack512(&dgate[0], &dup[0], &dh[0], &gate[0], &up[0], len(dh))
	case varAVX2:
		return swigluBack256(&dgate[0], &dup[0], &dh[0], &gate[0], &up[0], len(dh))
	}
	return 0
}
