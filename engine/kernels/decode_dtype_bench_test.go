//go:build linux

package kernels

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// BenchmarkDecodeDType is one decoding step's LM-head product (M = 1)
// with the weights stored as bf16 or f16: both stream 2 bytes per weight,
// so any difference is the widening.
func BenchmarkDecodeDType(b *testing.B) {
	r := rand.New(rand.NewPCG(5, 5))
	const N, K = 151936, 896
	for _, dt := range []DType{BF16, F16} {
		w := randMat(r, N, K, dt)
		w.Prepack()
		inp := randSlice(r, K)
		out := make([]float32, N)
		b.Run(fmt.Sprint(dt), func(b *testing.B) {
			for b.Loop() {
				Linear(out, inp, w, nil, 1)
			}
			b.ReportMetric(float64(2*N*K)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GB/s")
		})
	}
}
