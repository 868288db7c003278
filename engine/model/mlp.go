package model

import "math"

// swigluForward computes h = silu(gate) * up elementwise over n values.
func swigluForward(h, gate, up []float32, n int) {
	for i := 0; i < n; i++ {
		g := gate[i]
		h[i] = g / (1 + float32(math.Exp(float64(-g)))) * up[i]
	}
}
