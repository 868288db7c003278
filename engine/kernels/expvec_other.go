//go:build !amd64 || purego

package kernels

import "math"

// Without assembly the exponential row operations run entirely in Go.

func expShiftAsm(x []float32, shift float32, acc *[2]float64, dot bool) int { return 0 }
func maxAsm(x []float32) (float32, int)                                     { return float32(math.Inf(-1)), 0 }
func swigluAsm(h, gate, up []float32) int                                   { return 0 }
func swigluBackAsm(dgate, dup, dh, gate, up []float32) int                  { return 0 }
