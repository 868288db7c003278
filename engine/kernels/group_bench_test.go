//go:build linux

package kernels

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// BenchmarkDecodeGroupDP is a decoding group of 8 rows on UnitBF16 over
// Qwen2.5-0.5B's LM head and gate/up shapes: the 8-row kernel (one pass
// over the weights) against 6 + 2 rows, interleaved in one process, as the
// bytes of weights streamed per second.
func BenchmarkDecodeGroupDP(b *testing.B) {
	if !hasDP() {
		b.Skip("no AVX512_BF16")
	}
	defer func(u Unit, v bool) { unit, useDPM8 = u, v }(currentUnit(), useDPM8)
	unit = UnitBF16
	r := rand.New(rand.NewPCG(8, 8))
	for _, sh := range []struct {
		name string
		N, K int
	}{{"lm_head_151936x896", 151936, 896}, {"gate_up_9728x896", 9728, 896}, {"down_896x4864", 896, 4864}, {"qkv_1152x896", 1152, 896}} {
		w := randMat(r, sh.N, sh.K, BF16)
		w.Prepack()
		const M = 8
		inp := randSlice(r, M*sh.K)
		out := make([]float32, M*sh.N)
		for _, m8 := range []bool{true, false} {
			b.Run(fmt.Sprintf("%s/m8=%v", sh.name, m8), func(b *testing.B) {
				useDPM8 = m8
				for b.Loop() {
					Linear(out, inp, w, nil, M)
				}
				b.ReportMetric(float64(2*sh.N*sh.K)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GB/s")
			})
		}
	}
}
