package model

import "github.com/artgo/art/engine/kernels"

// swigluForward computes h = silu(gate) * up elementwise over n values.
func swigluForward(h, gate, up []float32, n int) {
	for i := 0; i < n; i++ {
		g := gate[i]
		h[i] = g / (1 + kernels.Expf(-g)) * up[i]
	}
}

// swigluBackward computes dgate and dup (n) from dh, the gradient of
// h = silu(gate)*up, overwriting them. dgate may alias gate only if the
// forward values are no longer needed (they are read before the write).
func swigluBackward(dgate, dup, dh, gate, up []float32, n int) {
	for i := 0; i < n; i++ {
		g := gate[i]
		sig := 1 / (1 + kernels.Expf(-g))
		silu := g * sig
		dsilu := sig * (1 + g*(1-sig))
		d := dh[i]
		dup[i] = d * silu
		dgate[i] = d * up[i] * dsilu
	}
}
