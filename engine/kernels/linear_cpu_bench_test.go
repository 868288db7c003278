//go:build linux

package kernels

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"testing"
)

// BenchmarkLinearCPU is the cost of the products of Qwen2.5-0.5B (bf16
// weights) for decoding one sequence (M = 1) and a group of eight (M = 8),
// and of a training or prefill chunk (M = 512, the layers' products), as
// CPU time of the calling thread per call (cpu-µs/op): with GOMAXPROCS = 1
// (run it with -cpu 1) Linear runs on the caller's thread, and its CPU time
// is far steadier than wall time on a machine shared with other jobs.
// Compare two builds by alternating short runs of their test binaries and
// taking medians (BENCHMARKS.md, "The cost of true on-policy").
func BenchmarkLinearCPU(b *testing.B) {
	r := rand.New(rand.NewPCG(7, 7))
	for _, sh := range benchShapes {
		w := randMat(r, sh.N, sh.K, BF16)
		w.Prepack()
		for _, M := range []int{1, 8, 512} {
			if M*sh.N > 1<<24 {
				continue // the LM head runs in chunks of fewer rows when training
			}
			inp := randSlice(r, M*sh.K)
			out := make([]float32, M*sh.N)
			b.Run(fmt.Sprintf("%s/M=%d", sh.name, M), func(b *testing.B) {
				runtime.LockOSThread()
				defer runtime.UnlockOSThread()
				c0 := threadCPUSecs()
				for b.Loop() {
					Linear(out, inp, w, nil, M)
				}
				b.ReportMetric((threadCPUSecs()-c0)*1e6/float64(b.N), "cpu-µs/op")
			})
		}
	}
}

// BenchmarkLinearBackwardInputCPU is the cost of the input gradient of the
// layers' products of Qwen2.5-0.5B in a 512-token training step, the
// backward pass's share of the base weights, with them stored as bf16, Q8
// or Q4 (issue 18: a quantized step no slower than bf16), as CPU time of
// the calling thread per call (run it with -cpu 1, as BenchmarkLinearCPU).
func BenchmarkLinearBackwardInputCPU(b *testing.B) {
	r := rand.New(rand.NewPCG(8, 8))
	const M = 512
	for _, sh := range benchShapes[:4] { // the layers' products
		src := randMat(r, sh.N, sh.K, F32)
		for _, dt := range []DType{BF16, Q8, Q4} {
			w := src
			switch dt {
			case BF16:
				w = randMat(r, sh.N, sh.K, BF16)
			default:
				var err error
				if w, err = Quantize(src, dt); err != nil {
					b.Fatal(err)
				}
			}
			w.Prepack()
			dout := randSlice(r, M*sh.N)
			dinp := make([]float32, M*sh.K)
			b.Run(fmt.Sprintf("%s/M=%d/%v", sh.name, M, dt), func(b *testing.B) {
				runtime.LockOSThread()
				defer runtime.UnlockOSThread()
				c0 := threadCPUSecs()
				for b.Loop() {
					LinearBackwardInput(dinp, dout, w, M)
				}
				b.ReportMetric((threadCPUSecs()-c0)*1e6/float64(b.N), "cpu-µs/op")
			})
		}
	}
}
