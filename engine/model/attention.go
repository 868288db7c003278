package model

import (
	"math"
	"sync"

	"github.com/artgo/art/engine/kernels"
	"github.com/artgo/art/internal/parallel"
)

// attentionForward computes causal grouped-query attention for n new tokens
// of one sequence whose keys and values (post-RoPE) are already in the cache
// at positions [0, start+n). q is (n, NH*HD) for the new tokens, kc and vc are
// the cache rows (≥ start+n, KVH*HD), out is (n, NH*HD). Token i (absolute
// position start+i) attends to cache positions 0..start+i.
//
// Per head it forms the (n, start+n) score matrix with one GEMM, applies
// the causal mask and softmax row by row, and multiplies by V with a second
// GEMM, so the inner loops run in the matmul kernels.
func attentionForward(out, q, kc, vc []float32, start, n, NH, KVH, HD int) {
	parallel.For(NH, 1, func(lo, hi int) {
		sp := getScores(n * (start + n))
		defer scorePool.Put(sp)
		for h := lo; h < hi; h++ {
			attentionHead(out, q, kc, vc, start, n, h, NH, KVH, HD, *sp)
		}
	})
}

// attentionHead is attentionForward for query head h, with p (≥ n·(start+n)
// values) as scratch for the scores.
func attentionHead(out, q, kc, vc []float32, start, n, h, NH, KVH, HD int, p []float32) {
	Q, KV := NH*HD, KVH*HD
	kvh := h / (NH / KVH)
	tk := start + n
	p = p[:n*tk]
	scale := float32(1 / math.Sqrt(float64(HD)))
	kernels.Gemm(false, true, n, tk, HD, q[h*HD:], Q, kc[kvh*HD:], KV, 0, p, tk)
	for i := 0; i < n; i++ {
		softmaxCausalVec(p[i*tk:(i+1)*tk], start+i+1, scale)
	}
	kernels.Gemm(false, false, n, HD, tk, p, tk, vc[kvh*HD:], KV, 0, out[h*HD:], Q)
}

// attentionSegments runs attentionForward at layer l for every segment of
// a batch (whose q rows and outputs start at row offs[i] of q and out), with
// all (segment, head) pairs in one parallel loop: decoding n sequences then
// costs one fork-join per layer instead of n.
func attentionSegments(out, q []float32, segs []Segment, offs []int, l, NH, KVH, HD int) {
	Q := NH * HD
	parallel.For(len(segs)*NH, 1, func(lo, hi int) {
		var sp *[]float32
		for it := lo; it < hi; it++ {
			s, h := segs[it/NH], it%NH
			t0 := offs[it/NH]
			need := s.N * (s.Cache.Len + s.N)
			if sp == nil || cap(*sp) < need {
				if sp != nil {
					scorePool.Put(sp)
				}
				sp = getScores(need)
			}
			attentionHead(out[t0*Q:(t0+s.N)*Q], q[t0*Q:(t0+s.N)*Q], s.Cache.K[l], s.Cache.V[l], s.Cache.Len, s.N, h, NH, KVH, HD, (*sp)[:need])
		}
		if sp != nil {
			scorePool.Put(sp)
		}
	})
}

// scorePool recycles the attention score scratch between calls.
var scorePool sync.Pool

func getScores(n int) *[]float32 {
	if p, ok := scorePool.Get().(*[]float32); ok {
		if cap(*p) >= n {
			*p = (*p)[:n]
			return p
		}
	}
	s := make([]float32, n)
	return &s
}

// softmaxCausal turns row (scores of one query) into probabilities over its
// first visible entries after scaling, and zeroes the masked rest.
func softmaxCausal(row []float32, visible int, scale float32) {
	maxv := float32(math.Inf(-1))
	for j := 0; j < visible; j++ {
		row[j] *= scale
		maxv = max(maxv, row[j])
	}
	var sum float32
	for j := 0; j < visible; j++ {
		e := kernels.Expf(row[j] - maxv)
		row[j] = e
		sum += e
	}
	inv := 1 / sum
	for j := 0; j < visible; j++ {
		row[j] *= inv
	}
	clear(row[visible:])
}

// attentionBackward is the gradient of attentionForward over a whole
// sequence (start 0, T tokens, keys k and values v are the sequence's own
// (T, KV) rows). Given dout (T, Q) it accumulates dq (T, Q), dk and dv
// (T, KV). The attention probabilities are recomputed per head instead of
// being stored, so only one (T, T) matrix per worker is alive at a time.
func attentionBackward(dq, dk, dv, dout, q, k, v []float32, T, NH, KVH, HD int) {
	Q, KV := NH*HD, KVH*HD
	group := NH / KVH
	scale := float32(1 / math.Sqrt(float64(HD)))
	// Query heads sharing a kv head write the same dk and dv rows, so the
	// work is split by kv head.
	parallel.For(KVH, 1, func(lo, hi int) {
		p := make([]float32, T*T)
		dp := make([]float32, T*T)
		for kvh := lo; kvh < hi; kvh++ {
			for h := kvh * group; h < (kvh+1)*group; h++ {
				kernels.Gemm(false, true, T, T, HD, q[h*HD:], Q, k[kvh*HD:], KV, 0, p, T)
				for i := 0; i < T; i++ {
					softmaxCausal(p[i*T:(i+1)*T], i+1, scale)
				}
				// dV += Pᵀ·dO ; dP = dO·Vᵀ
				kernels.Gemm(true, false, T, HD, T, p, T, dout[h*HD:], Q, 1, dv[kvh*HD:], KV)
				kernels.Gemm(false, true, T, T, HD, dout[h*HD:], Q, v[kvh*HD:], KV, 0, dp, T)
				// dS = P∘(dP − Σ_j P∘dP)·scale, row by row (masked entries have P = 0)
				for i := 0; i < T; i++ {
					pr, dr := p[i*T:(i+1)*T], dp[i*T:(i+1)*T]
					var pdp float32
					for j := 0; j <= i; j++ {
						pdp += pr[j] * dr[j]
					}
					for j := 0; j <= i; j++ {
						dr[j] = pr[j] * (dr[j] - pdp) * scale
					}
					clear(dr[i+1:])
				}
				// dQ += dS·K ; dK += dSᵀ·Q
				kernels.Gemm(false, false, T, HD, T, dp, T, k[kvh*HD:], KV, 1, dq[h*HD:], Q)
				kernels.Gemm(true, false, T, HD, T, dp, T, q[h*HD:], Q, 1, dk[kvh*HD:], KV)
			}
		}
	})
}
