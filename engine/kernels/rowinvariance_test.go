package kernels

import (
	"math/rand/v2"
	"testing"
)

// Ensure a row of Linear's product does not depend on how many rows come
// with it: batched decoding and prefill in chunks give each sequence the
// numbers it would get alone (batch invariance; issue #22). Gemm with a
// transposed B is not row-invariant yet (dot products up to dotMaxM rows,
// panels beyond), which is why attention scores can differ in the last
// bits between a prompt prefilled whole and in chunks.
func TestLinear_RowInvariant(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, shape := range [][2]int{{64, 192}, {64, 64}, {128, 896}} {
		K, N := shape[0], shape[1]
		wd := make([]float32, N*K)
		for i := range wd {
			wd[i] = float32(rng.NormFloat64())
		}
		w := NewMatF32(N, K, wd)
		for _, M := range []int{2, 5, 8, 24, 25, 29, 40, 130} {
			in := make([]float32, M*K)
			for i := range in {
				in[i] = float32(rng.NormFloat64())
			}
			all := make([]float32, M*N)
			Linear(all, in, w, nil, M)
			one := make([]float32, N)
			for r := 0; r < M; r++ {
				Linear(one, in[r*K:(r+1)*K], w, nil, 1)
				for j := range one {
					if one[j] != all[r*N+j] {
						t.Fatalf("K=%d N=%d M=%d row %d col %d: %v in the batch, %v alone", K, N, M, r, j, all[r*N+j], one[j])
					}
				}
			}
		}
	}
}
