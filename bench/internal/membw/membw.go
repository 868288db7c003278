// Package membw measures the memory read bandwidth a benchmark is bounded by:
// decoding one sequence reads every weight once per token, so its tokens/s
// times the bytes read per token can be set beside what the machine can read
// at all, measured the same way in the same run.
package membw

import (
	"runtime"
	"slices"
	"sync"
	"time"

	"github.com/artgo/art/engine/kernels"
)

// Floats is the length of each of the two arrays Read streams: 2 × 256 MiB,
// far beyond any last-level cache of the machines we run on.
const Floats = 64 << 20

// Probe holds the arrays between measurements, so a benchmark that measures
// once per round pays for the 512 MiB allocation once.
type Probe struct {
	a, b []float32
}

// NewProbe allocates and touches the two arrays.
func NewProbe() *Probe {
	p := &Probe{a: make([]float32, Floats), b: make([]float32, Floats)}
	for i := range p.a {
		p.a[i], p.b[i] = 1, 1
	}
	return p
}

// Read returns the read bandwidth in GB/s (10⁹ bytes) with threads
// goroutines, each taking kernels.Dot over its share of both arrays: the
// median of reps passes.
func (p *Probe) Read(threads, reps int) float64 {
	threads = max(1, min(threads, runtime.GOMAXPROCS(0)))
	reps = max(1, reps)
	n := len(p.a)
	times := make([]float64, 0, reps)
	for range reps {
		t0 := time.Now()
		var wg sync.WaitGroup
		for w := range threads {
			lo, hi := w*n/threads, (w+1)*n/threads
			wg.Add(1)
			go func() {
				defer wg.Done()
				kernels.Dot(p.a[lo:hi], p.b[lo:hi])
			}()
		}
		wg.Wait()
		times = append(times, time.Since(t0).Seconds())
	}
	slices.Sort(times)
	return 8 * float64(n) / times[len(times)/2] / 1e9
}
