package fmapeak

import (
	"testing"
	"time"
)

func TestMeasure(t *testing.T) {
	r := Measure(1, 20*time.Millisecond, 2)
	t.Logf("%.1f GFLOP/s, %s", r.GFLOPS, r.Unit)
	// Even the plain Go loop on a loaded machine does well over this; a
	// probe that did not run, or counted its flops wrong by orders of
	// magnitude, would not.
	if r.GFLOPS < 0.05 || r.GFLOPS > 1e5 {
		t.Fatalf("implausible peak %.3f GFLOP/s", r.GFLOPS)
	}
	if r.Threads != 1 || r.Unit == "" {
		t.Fatalf("result %+v", r)
	}
}

func TestRunCountsFlops(t *testing.T) {
	// run's flop count must scale with its iterations; the vector loops
	// count 192 or 384 flops an iteration, the Go loop 16.
	a, b := run(1000), run(3000)
	if a <= 0 || b != 3*a {
		t.Fatalf("run(1000) = %v, run(3000) = %v", a, b)
	}
	if per := a / 1000; per != 16 && per != 192 && per != 384 {
		t.Fatalf("%v flops an iteration", per)
	}
}

func TestMeasureBF16(t *testing.T) {
	r, ok := MeasureBF16(1, 20*time.Millisecond, 2)
	if !ok {
		t.Skip("this CPU has no AVX512_BF16: no bf16 unit to measure")
	}
	t.Logf("%.1f GFLOP/s, %s", r.GFLOPS, r.Unit)
	if r.GFLOPS < 1 || r.GFLOPS > 1e5 {
		t.Fatalf("implausible bf16 peak %.3f GFLOP/s", r.GFLOPS)
	}
}

func TestMeasureInt8(t *testing.T) {
	r, ok := MeasureInt8(1, 20*time.Millisecond, 2)
	if !ok {
		t.Skip("this CPU has no AVX512_VNNI: no int8 unit to measure")
	}
	t.Logf("%.1f GOP/s, %s", r.GFLOPS, r.Unit)
	if r.GFLOPS < 1 || r.GFLOPS > 1e5 {
		t.Fatalf("implausible int8 peak %.3f GOP/s", r.GFLOPS)
	}
}
