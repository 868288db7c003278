// Package fmapeak measures the fp32 fused multiply-add peak of this CPU on
// the vector unit the engine's kernels use (AVX-512 or AVX2+FMA), so the
// benchmarks can print a kernel's GFLOP/s as a share of what the machine
// can do, measured in the same run rather than taken from a datasheet: the
// same CPU model runs at different clocks in different VMs.
//
// The probe is a loop of independent FMAs on registers (twelve chains, more
// than two FMA units × four cycles of latency need): no memory traffic, so
// it is the compute ceiling of the unit, not of any real product.
package fmapeak

import (
	"runtime"
	"sync"
	"time"
)

// Result is one measurement.
type Result struct {
	GFLOPS  float64 // all threads together
	Threads int
	Unit    string // e.g. "fp32 FMA, AVX2 (256-bit)"
}

// Measure runs the probe on threads goroutines, each locked to its OS
// thread, for about d, rounds times, and returns the best round: noise
// (other processes, frequency ramps) only lowers a round, never raises it.
func Measure(threads int, d time.Duration, rounds int) Result {
	return Result{GFLOPS: best(threads, d, rounds, run), Threads: threads, Unit: unit()}
}

// MeasureBF16 is Measure for the bf16 dot-product unit (VDPBF16PS: bf16
// pairs multiplied and added into fp32, a product counting 2 flops) that
// the kernels' UnitBF16 runs on; ok is false on a CPU without it.
func MeasureBF16(threads int, d time.Duration, rounds int) (r Result, ok bool) {
	return measureOptional(threads, d, rounds, runBF16, "bf16 dot products (VDPBF16PS), AVX-512 (512-bit)")
}

// MeasureInt8 is Measure for the int8 dot-product unit (VPDPBUSD: four
// u8·s8 products added into an int32 lane, a product counting 2 ops)
// that the kernels' UnitInt8 runs Q8 products on; ok is false on a CPU
// without it.
func MeasureInt8(threads int, d time.Duration, rounds int) (r Result, ok bool) {
	return measureOptional(threads, d, rounds, runInt8, "int8 dot products (VPDPBUSD; an int8 multiply-add counts 2 ops, as a flop), AVX-512 (512-bit)")
}

// measureOptional is Measure for a unit the CPU may lack: run reports
// false where it does.
func measureOptional(threads int, d time.Duration, rounds int, run func(n int) (float64, bool), unit string) (Result, bool) {
	if _, ok := run(1); !ok {
		return Result{}, false
	}
	probe := func(n int) float64 { f, _ := run(n); return f }
	return Result{GFLOPS: best(threads, d, rounds, probe), Threads: threads, Unit: unit}, true
}

// best is the best of rounds runs of probe.
func best(threads int, d time.Duration, rounds int, probe func(n int) float64) float64 {
	threads = max(threads, 1)
	b := 0.0
	for range max(rounds, 1) {
		b = max(b, measureOnce(threads, d, probe))
	}
	return b
}

func measureOnce(threads int, d time.Duration, probe func(n int) float64) float64 {
	var wg sync.WaitGroup
	start := make(chan struct{})
	rates := make([]float64, threads)
	for i := range threads {
		wg.Add(1)
		go func() {
			defer wg.Done()
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			<-start
			var flops float64
			t0 := time.Now()
			for time.Since(t0) < d {
				flops += probe(probeIters)
			}
			rates[i] = flops / time.Since(t0).Seconds() / 1e9
		}()
	}
	close(start)
	wg.Wait()
	total := 0.0
	for _, r := range rates {
		total += r
	}
	return total
}

// probeIters is the loop count of one probe call: about a millisecond, so
// the clock is read rarely and a call never holds the scheduler for long.
const probeIters = 1 << 17
