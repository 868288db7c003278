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

// BenchmarkDecodeQuant is decoding's products with Q8 and Q4 weights: one
// row, a group of four and of eight, over the LM head and the MLP's
// gate/up shape of Qwen2.5-0.5B, as the bytes of weights streamed per
// second (Q8: 34 bytes, Q4: 18 bytes per 32 weights) and GFLOP/s; Q8 on
// UnitInt8 too where the CPU has it ("Q8-int8", "Q4-int8").
func BenchmarkDecodeQuant(b *testing.B) {
	r := rand.New(rand.NewPCG(6, 6))
	for _, sh := range []struct {
		name string
		N, K int
	}{{"lm_head_151936x896", 151936, 896}, {"gate_up_4864x896", 4864, 896}} {
		src := NewMatF32(sh.N, sh.K, randSlice(r, sh.N*sh.K))
		for _, dt := range []DType{Q8, Q4} {
			w, err := Quantize(src, dt)
			if err != nil {
				b.Fatal(err)
			}
			w.Prepack()
			bytes := float64(sh.N*sh.K) / 32 * 34
			if dt == Q4 {
				bytes = float64(sh.N*sh.K) / 32 * 18
			}
			units := []Unit{UnitFP32}
			if hasI8() {
				units = append(units, UnitInt8)
			}
			for _, u := range units {
				name := fmt.Sprint(dt)
				if u == UnitInt8 {
					name += "-int8"
				}
				for _, M := range []int{1, 4, 8, 64} {
					inp := randSlice(r, M*sh.K)
					out := make([]float32, M*sh.N)
					b.Run(fmt.Sprintf("%s/%s/M=%d", sh.name, name, M), func(b *testing.B) {
						saved := unit
						defer func() { unit = saved }()
						unit = u
						for b.Loop() {
							Linear(out, inp, w, nil, M)
						}
						s := b.Elapsed().Seconds() / float64(b.N)
						b.ReportMetric(bytes/s/1e9, "GB/s")
						b.ReportMetric(2*float64(M*sh.N*sh.K)/s/1e9, "GFLOP/s")
					})
				}
			}
		}
	}
}
