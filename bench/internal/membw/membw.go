// Package membw measures the memory read bandwidth a benchmark is bounded by:
// decoding one sequence reads every weight once per token, so its tokens/s
// times the bytes read per token can be set beside what the machine can read
// at all, measured the same way in the same run.
package membw

import (
	"math"
	"runtime"
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
// best of reps passes after an untimed one. The best, not the median: on a
// shared VM one pass can run at a fraction of the machine's speed (a probe
// of 7 GB/s beside a decode streaming 46 GB/s was seen), and the wall a
// decode is set beside is what the memory can deliver, as the peers are
// measured at their best.
func (p *Probe) Read(threads, reps int) float64 {
	threads = max(1, min(threads, runtime.GOMAXPROCS(0)))
	n := len(p.a)
	pass := func() float64 {
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
		return time.Since(t0).Seconds()
	}
	pass()
	best := math.Inf(1)
	for range max(1, reps) {
		best = min(best, pass())
	}
	return 8 * float64(n) / best / 1e9
}
