//go:build linux

package kernels

import (
	"fmt"
	"math/rand/v2"
	"syscall"
	"testing"
)

// BenchmarkLMHead is the LM head of model.LMHeadBackward in chunks of M
// rows: the logits (Linear) and the input gradient (LinearBackwardInput,
// which packs the head per call, so short chunks pay for it often). Up to
// streamMaxPanelsM rows stream the bf16 panels in place; more run the
// blocked GEMM. GFLOP/cpu-s (per CPU second of the process) is less
// sensitive to other load on a shared machine than GFLOP/s.
func BenchmarkLMHead(b *testing.B) {
	r := rand.New(rand.NewPCG(3, 3))
	const N, K = 151936, 896
	w := randMat(r, N, K, BF16)
	w.Prepack()
	for _, M := range []int{64, 128, 256} {
		inp := randSlice(r, M*K)
		out := make([]float32, M*N)
		b.Run(fmt.Sprintf("M=%d/forward", M), func(b *testing.B) {
			c0 := cpuSecs()
			for b.Loop() {
				Linear(out, inp, w, nil, M)
			}
			b.ReportMetric(2*float64(M)*N*K*float64(b.N)/(cpuSecs()-c0)/1e9, "GFLOP/cpu-s")
			reportGFLOPs(b, M, N, K)
		})
		b.Run(fmt.Sprintf("M=%d/backward", M), func(b *testing.B) {
			c0 := cpuSecs()
			for b.Loop() {
				LinearBackwardInput(inp, out, w, M)
			}
			b.ReportMetric(2*float64(M)*N*K*float64(b.N)/(cpuSecs()-c0)/1e9, "GFLOP/cpu-s")
			reportGFLOPs(b, M, N, K)
		})
	}
}

// cpuSecs is the process's user+system CPU time.
func cpuSecs() float64 { return rusageSecs(syscall.RUSAGE_SELF) }

// threadCPUSecs is the calling thread's user+system CPU time.
func threadCPUSecs() float64 { return rusageSecs(1 /* RUSAGE_THREAD */) }

func rusageSecs(who int) float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(who, &ru); err != nil {
		panic(err)
	}
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
}
