package model

import (
	"github.com/artgo/art/engine/kernels"
	"github.com/artgo/art/internal/parallel"
)

// Rows per goroutine below which SwiGLU runs inline.
const swigluMinRows = 2

// swigluForward computes h = silu(gate) * up over T rows of F values, rows
// split over the cores. h may alias gate.
func swigluForward(h, gate, up []float32, T, F int) {
	parallel.For(T, swigluMinRows, func(lo, hi int) {
		kernels.SwiGLU(h[lo*F:hi*F], gate[lo*F:hi*F], up[lo*F:hi*F])
	})
}

// swigluBackward computes dgate and dup (T, F) from dh, the gradient of
// h = silu(gate)*up, overwriting them.
func swigluBackward(dgate, dup, dh, gate, up []float32, T, F int) {
	parallel.For(T, swigluMinRows, func(lo, hi int) {
		s := func(x []float32) []float32 { return x[lo*F : hi*F] }
		kernels.SwiGLUBackward(s(dgate), s(dup), s(dh), s(gate), s(up))
	})
}
