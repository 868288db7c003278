//go:build amd64 && !purego

package kernels

import "math"

// The exponential row operations implemented (by hand) in expvec_amd64.s,
// AVX-512 only. Each processes 16-element blocks of n (a multiple of 16)
// from the start and returns how many elements it did: all of them, or up
// to the first block holding an exponent argument above 88 or NaN, which
// the caller does in Go.

//go:noescape
func expShift512(x *float32, n int, shift float32, acc *[2]float64) int

//go:noescape
func max512(x *float32, n int) float32

//go:noescape
func swiglu512(h, gate, up *float32, n int) int

//go:noescape
func swigluBack512(dgate, dup, dh, gate, up *float32, n int) int

func expShiftAsm(x []float32, shift float32, acc *[2]float64) int {
	if active != varAVX512 || len(x) == 0 {
		return 0
	}
	return expShift512(&x[0], len(x), shift, acc)
}

// maxAsm returns the largest of the first done elements of x (-Inf if
// none).
func maxAsm(x []float32) (m float32, done int) {
	m = float32(math.Inf(-1))
	if active != varAVX512 {
		return m, 0
	}
	done = len(x) / expBlock * expBlock
	for i := 0; i < done; i += expChunk {
		m = max(m, max512(&x[i], min(expChunk, done-i)))
	}
	return m, done
}

func swigluAsm(h, gate, up []float32) int {
	if active != varAVX512 || len(h) == 0 {
		return 0
	}
	return swiglu512(&h[0], &gate[0], &up[0], len(h))
}

func swigluBackAsm(dgate, dup, dh, gate, up []float32) int {
	if active != varAVX512 || len(dh) == 0 {
		return 0
	}
	return swigluBack512(&dgate[0], &dup[0], &dh[0], &gate[0], &up[0], len(dh))
}
