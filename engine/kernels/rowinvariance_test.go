package kernels

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// One summation order (kernels.go): a row of a product has the same bits
// whatever rows come with it, and a column whatever columns, so batched
// decoding, prefill in chunks and the trainer's whole-sequence passes give
// each token the numbers it would get alone (batch invariance, true
// on-policy; issue #22).

// rowInvariantMs covers the paths: one row, the decoding chunks (6 + 2),
// streaming over several micro-panels, and the blocked GEMM past
// streamMaxPanelsM (Linear) or streamMaxM (Gemm).
var rowInvariantMs = []int{2, 5, 8, 9, 24, 25, 40, 130}

// sameRows fails unless every row r of all (M×N, row stride N) equals
// one(r), the row computed alone.
func sameRows(t *testing.T, what string, all []float32, M, N int, one func(r int) []float32) {
	t.Helper()
	for r := range M {
		got := one(r)
		for j, v := range got {
			if v != all[r*N+j] {
				t.Fatalf("%s M=%d row %d col %d: %v in the batch, %v alone", what, M, r, j, all[r*N+j], v)
			}
		}
	}
}

// linearRowsAlone checks that each row of Linear(in, w) over every M of
// rowInvariantMs equals the row computed alone (M = 1), bit for bit.
func linearRowsAlone(t *testing.T, rng *rand.Rand, w *Mat, bias []float32) {
	t.Helper()
	K, N := w.Cols, w.Rows
	for _, M := range rowInvariantMs {
		in := randSlice(rng, M*K)
		all := make([]float32, M*N)
		Linear(all, in, w, bias, M)
		one := make([]float32, N)
		sameRows(t, fmt.Sprintf("K=%d N=%d %v", K, N, w.DType), all, M, N, func(r int) []float32 {
			Linear(one, in[r*K:(r+1)*K], w, bias, 1)
			return one
		})
	}
}

func TestLinear_RowInvariant(t *testing.T) {
	forVariants(t, func(t *testing.T) {
		rng := rand.New(rand.NewPCG(1, 2))
		for _, sh := range [][2]int{{64, 192}, {100, 40}, {896, 130}, {600, 64}} {
			K, N := sh[0], sh[1]
			for _, dt := range []DType{F32, BF16, F16} {
				linearRowsAlone(t, rng, randMat(rng, N, K, dt), randSlice(rng, N))
			}
		}
	})
}

// TestGemm_RowInvariant checks Gemm's forward uses (attention scores
// q·Kᵀ and LoRA x·Aᵀ with a transposed B, P·V and u·Bᵀ): a row alone equals
// the row in any batch, and a range of columns alone (a key block of the
// trainer's attention) equals the same columns of the full product, with
// beta 0 and 1.
func TestGemm_RowInvariant(t *testing.T) {
	forVariants(t, func(t *testing.T) {
		rng := rand.New(rand.NewPCG(3, 4))
		for _, sh := range [][2]int{{64, 200}, {16, 77}, {896, 8}, {300, 64}, {32, 5}} {
			K, N := sh[0], sh[1]
			for _, transB := range []bool{true, false} {
				B := randSlice(rng, K*N) // N×K when transB, else K×N
				ldb := N
				if transB {
					ldb = K
				}
				for _, beta := range []float32{0, 1} {
					for _, M := range rowInvariantMs {
						what := fmt.Sprintf("K=%d N=%d transB=%v beta=%v", K, N, transB, beta)
						A := randSlice(rng, M*K)
						C0 := randSlice(rng, M*N)
						all := slices.Clone(C0)
						Gemm(false, transB, M, N, K, A, K, B, ldb, beta, all, N)
						one := make([]float32, N)
						sameRows(t, what, all, M, N, func(r int) []float32 {
							copy(one, C0[r*N:(r+1)*N])
							Gemm(false, transB, 1, N, K, A[r*K:], K, B, ldb, beta, one, N)
							return one
						})
						// Columns [j0, j1) alone: B starts at column j0.
						for _, cut := range [][2]int{{0, min(N, 64)}, {min(N, 64), N}, {N / 3, N}} {
							j0, j1 := cut[0], cut[1]
							if j1 <= j0 {
								continue
							}
							boff := j0
							if transB {
								boff = j0 * K
							}
							part := make([]float32, M*(j1-j0))
							for r := range M {
								copy(part[r*(j1-j0):], C0[r*N+j0:r*N+j1])
							}
							Gemm(false, transB, M, j1-j0, K, A, K, B[boff:], ldb, beta, part, j1-j0)
							for r := range M {
								if !slices.Equal(part[r*(j1-j0):(r+1)*(j1-j0)], all[r*N+j0:r*N+j1]) {
									t.Fatalf("%s M=%d row %d: columns [%d, %d) alone differ from the full product", what, M, r, j0, j1)
								}
							}
						}
					}
				}
			}
		}
	})
}

// TestGemm_ZeroPaddedK: zeros appended to K (within one sum block) leave
// every sum's bits alone, so decoding's P·V over the keys a token sees
// equals the trainer's over the whole key block, whose masked
// probabilities are 0.
func TestGemm_ZeroPaddedK(t *testing.T) {
	forVariants(t, func(t *testing.T) {
		rng := rand.New(rand.NewPCG(5, 6))
		const N, Kfull = 48, 64
		V := randSlice(rng, Kfull*N)
		for _, M := range []int{1, 3, 8, 30} {
			for _, K := range []int{1, 5, 17, 63} {
				A := randSlice(rng, M*K)
				padded := make([]float32, M*Kfull)
				for r := range M {
					copy(padded[r*Kfull:], A[r*K:(r+1)*K])
				}
				short := make([]float32, M*N)
				full := make([]float32, M*N)
				Gemm(false, false, M, N, K, A, K, V, N, 0, short, N)
				Gemm(false, false, M, N, Kfull, padded, Kfull, V, N, 0, full, N)
				if !slices.Equal(short, full) {
					t.Fatalf("M=%d K=%d: zero-padding K to %d changed the product", M, K, Kfull)
				}
			}
		}
	})
}

// TestTile_SumBlocks checks the kernels' sum blocks (tileArgs.kb): one call
// over all k-rows has the bits of one call per block, the first with the
// tile's flags and the later ones adding to C, for every row count, dtype,
// flag set and a partial last panel, on contiguous panels with prefetch
// (streaming) and without.
func TestTile_SumBlocks(t *testing.T) {
	forVariants(t, func(t *testing.T) {
		rng := rand.New(rand.NewPCG(7, 8))
		for _, sh := range [][3]int{{600, 200, 192}, {70, 24, 100}, {64, 64, 64}, {0, 8, 64}} {
			K, kb, N := sh[0], sh[1], sh[2]
			for _, dt := range []DType{F32, BF16, F16} {
				pk := randMat(rng, N, max(K, 1), dt).panels()
				for _, mr := range []int{1, 2, 3, 4, 5, 6, 8} {
					if mr == 8 && dt == F32 {
						continue // the 8-row kernel is for 16-bit panels
					}
					a := randSlice(rng, mr*max(K, 1))
					bias := randSlice(rng, N)
					c0 := randSlice(rng, mr*N)
					for _, flags := range []int{flagStore, flagAcc, flagStore | flagBias, flagAcc | flagBias} {
						for _, prefetch := range []int{0, prefetchAhead} {
							if mr == 8 && prefetch == 0 {
								continue
							}
							base := tileArgs{mr: mr, a: a, lda: max(K, 1), ldb: panelW, pstride: pk.k * panelW,
								np: (N + panelW - 1) / panelW, ncols: N, ldc: N, bias: bias, prefetch: prefetch}
							switch dt {
							case F32:
								base.bf = pk.f32
							case BF16:
								base.bh = pk.bf16
							case F16:
								base.bh, base.f16 = pk.f16, true
							}
							one := slices.Clone(c0)
							u := base
							u.k, u.kb, u.c, u.flags = K, kb, one, flags
							tile(&u)
							blocks := slices.Clone(c0)
							for k0 := 0; k0 == 0 || k0 < K; k0 += kb {
								u := base
								u.k, u.c, u.flags = min(kb, K-k0), blocks, flags
								u.aoff, u.boff = k0, k0*panelW
								if k0 > 0 {
									u.flags = flagAcc
								}
								tile(&u)
							}
							if !slices.Equal(one, blocks) {
								t.Fatalf("%v K=%d kb=%d N=%d mr=%d flags=%d prefetch=%d: one call differs from a call per block", dt, K, kb, N, mr, flags, prefetch)
							}
						}
					}
				}
			}
		}
	})
}

// GemmKBlocks has the bits of a Gemm per sum block (the first storing,
// the later ones adding), on every variant and path (one row, a decoding
// group's rows, streamed and blocked), for a K that is a whole number of
// blocks and one that ends in a short block; so do GemmKBlocksAdd after
// it and their serial forms.
func TestGemmKBlocks_IsGemmPerBlock(t *testing.T) {
	forVariants(t, func(t *testing.T) {
		rng := rand.New(rand.NewPCG(11, 12))
		for _, sh := range [][4]int{{7, 64, 640, 64}, {1, 64, 600, 64}, {8, 130, 200, 24}, {40, 70, 129, 64}, {3, 64, 50, 64}} {
			M, N, K, kb := sh[0], sh[1], sh[2], sh[3]
			a, b := randSlice(rng, M*K), randSlice(rng, K*N)
			got, want := randSlice(rng, M*N), make([]float32, M*N)
			GemmKBlocks(M, N, K, kb, a, K, b, N, got, N)
			for k0 := 0; k0 < K; k0 += kb {
				beta := float32(1)
				if k0 == 0 {
					beta = 0
				}
				Gemm(false, false, M, N, min(kb, K-k0), a[k0:], K, b[k0*N:], N, beta, want, N)
			}
			if !slices.Equal(got, want) {
				t.Fatalf("M=%d N=%d K=%d kb=%d: one call differs from a Gemm per block", M, N, K, kb)
			}
			// Split after a whole number of blocks, the rest added on.
			if K > kb {
				split := (K - 1) / kb / 2 * kb
				if split == 0 {
					split = kb
				}
				GemmKBlocks(M, N, split, kb, a, K, b, N, got, N)
				GemmKBlocksAdd(M, N, K-split, kb, a[split:], K, b[split*N:], N, got, N)
				if !slices.Equal(got, want) {
					t.Fatalf("M=%d N=%d K=%d kb=%d: GemmKBlocks then GemmKBlocksAdd after %d differ from one call", M, N, K, kb, split)
				}
				clear(got)
				GemmKBlocksSerial(M, N, split, kb, a, K, b, N, got, N)
				GemmKBlocksAddSerial(M, N, K-split, kb, a[split:], K, b[split*N:], N, got, N)
				if !slices.Equal(got, want) {
					t.Fatalf("M=%d N=%d K=%d kb=%d: the serial calls differ from one call", M, N, K, kb)
				}
			}
		}
	})
}
