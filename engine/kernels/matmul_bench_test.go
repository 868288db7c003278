package kernels

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// Real shapes of Qwen2.5-0.5B (hidden 896, 14 query heads and 2 kv heads of
// 64, FFN 4864, vocabulary 151936, tied embeddings), as N×K = out×in.
var benchShapes = []struct {
	name string
	N, K int
}{
	{"q_o_896x896", 896, 896},
	{"kv_128x896", 128, 896},
	{"gate_up_4864x896", 4864, 896},
	{"down_896x4864", 896, 4864},
	{"lm_head_151936x896", 151936, 896},
}

// BenchmarkLinear reports GFLOP/s (2·M·N·K per op) of Linear on the model's
// shapes for decode (M=1, 8) and prefill/training (M=512) rows, with bf16
// and fp32 weights. Compare runs with benchstat.
func BenchmarkLinear(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 1))
	for _, sh := range benchShapes {
		for _, dt := range []DType{BF16, F32} {
			w := randMat(r, sh.N, sh.K, dt)
			w.Prepack()
			for _, M := range []int{1, 8, 512} {
				for _, u := range Units() {
					b.Run(fmt.Sprintf("%s/M=%d/%v/%v", sh.name, M, dt, u), func(b *testing.B) {
						unit = u
						defer func() { unit = UnitFP32 }()
						inp := randSlice(r, M*sh.K)
						out := make([]float32, M*sh.N)
						for b.Loop() {
							Linear(out, inp, w, nil, M)
						}
						reportGFLOPs(b, M, sh.N, sh.K)
					})
				}
			}
		}
	}
}

// BenchmarkLinearBackwardInput reports GFLOP/s of the input gradient on the
// training shapes (M=512).
func BenchmarkLinearBackwardInput(b *testing.B) {
	r := rand.New(rand.NewPCG(2, 2))
	for _, sh := range benchShapes[:4] {
		for _, dt := range []DType{BF16, F32} {
			w := randMat(r, sh.N, sh.K, dt)
			const M = 512
			for _, u := range Units() {
				b.Run(fmt.Sprintf("%s/M=%d/%v/%v", sh.name, M, dt, u), func(b *testing.B) {
					unit = u
					defer func() { unit = UnitFP32 }()
					dout := randSlice(r, M*sh.N)
					dinp := make([]float32, M*sh.K)
					for b.Loop() {
						LinearBackwardInput(dinp, dout, w, M)
					}
					reportGFLOPs(b, M, sh.N, sh.K)
				})
			}
		}
	}
}

// BenchmarkGemm covers the LoRA products (rank 16, T=512 tokens, hidden 896)
// and attention, for training and for decoding one or eight tokens.
func BenchmarkGemm(b *testing.B) {
	const T, d, rk = 512, 896, 16
	cases := []struct {
		name    string
		tA, tB  bool
		M, N, K int
	}{
		{"lora_down_x·Aᵀ", false, true, T, rk, d},
		{"lora_up_h·Bᵀ", false, true, T, d, rk},
		{"lora_dA_dhᵀ·x", true, false, rk, d, T},
		{"lora_dB_dyᵀ·h", true, false, d, rk, T},
		{"lora_dh_dy·B", false, false, T, rk, d},
		{"decode_lora_down_M1", false, true, 1, rk, d},
		{"decode_lora_up_M1", false, true, 1, d, rk},
		{"decode_lora_down_M8", false, true, 8, rk, d},
		{"decode_attn_qKᵀ_M1", false, true, 1, 1024, 64},
		{"decode_attn_pV_M1", false, false, 1, 64, 1024},
		{"attn_QKᵀ", false, true, T, T, 64},
		{"attn_PV", false, false, T, 64, T},
		{"square_1024", false, false, 1024, 1024, 1024},
	}
	r := rand.New(rand.NewPCG(3, 3))
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			A, B, C := randSlice(r, c.M*c.K), randSlice(r, c.K*c.N), make([]float32, c.M*c.N)
			lda, ldb := c.K, c.N
			if c.tA {
				lda = c.M
			}
			if c.tB {
				ldb = c.K
			}
			for b.Loop() {
				Gemm(c.tA, c.tB, c.M, c.N, c.K, A, lda, B, ldb, 0, C, c.N)
			}
			reportGFLOPs(b, c.M, c.N, c.K)
		})
	}
}

func reportGFLOPs(b *testing.B, M, N, K int) {
	b.ReportMetric(2*float64(M)*float64(N)*float64(K)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
}
