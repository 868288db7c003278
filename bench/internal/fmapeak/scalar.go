package fmapeak

import "runtime"

// goUnit names the fallback probe, where there is no assembly: the engine
// then runs its plain Go loops, so this is their ceiling, not the CPU's.
const goUnit = "fp32 multiply-add, plain Go (no vector assembly on this platform)"

// runGo is the probe in Go: eight independent multiply-add chains.
func runGo(n int) float64 {
	var a [8]float32
	x, y := float32(0.999), float32(1e-3)
	for range n {
		for j := range a {
			a[j] = a[j]*x + y
		}
	}
	s := float32(0)
	for _, v := range a {
		s += v
	}
	runtime.KeepAlive(s) // the arithmetic must not be dropped
	return float64(n) * 16
}
