package model

import (
	"math"
	"sync"

	"github.com/artgo/art/engine/kernels"
	"github.com/artgo/art/internal/parallel"
)

// Causal grouped-query attention. Two loops compute it: attentionHead
// below, for tokens appended to a KV cache (inference: prefill and
// decode), and the block-causal pass of trainattn.go over one whole
// training sequence, which also has the backward pass. Both use the
// softmax helpers at the end of this file.

// attentionHead computes, for query head h, causal attention for n new
// tokens of one sequence whose keys and values (post-RoPE) are already in
// the cache at positions [0, start+n). q is (n, NH*HD) for the new tokens,
// kc and vc are the cache rows (≥ start+n, KVH*HD), out is (n, NH*HD).
// Token i (absolute position start+i) attends to cache positions
// 0..start+i. p (≥ n·(start+n) values) is scratch for the scores.
//
// It forms the (n, start+n) score matrix with one GEMM, applies the causal
// mask and softmax row by row, and multiplies by V with a second GEMM, so
// the inner loops run in the matmul kernels.
func attentionHead(out, q, kc, vc []float32, start, n, h, NH, KVH, HD int, p []float32, window int) {
	Q, KV := NH*HD, KVH*HD
	kvh := h / (NH / KVH)
	tk := start + n
	p = p[:n*tk]
	scale := attnScale(HD)
	kernels.Gemm(false, true, n, tk, HD, q[h*HD:], Q, kc[kvh*HD:], KV, 0, p, tk)
	for i := 0; i < n; i++ {
		softmaxWindow(p[i*tk:(i+1)*tk], firstKey(start+i, window), start+i+1, scale)
	}
	kernels.Gemm(false, false, n, HD, tk, p, tk, vc[kvh*HD:], KV, 0, out[h*HD:], Q)
}

// attentionSegments runs attentionHead at layer l for every segment of
// a batch (whose q rows and outputs start at row offs[i] of q and out), with
// all (segment, head) pairs in one parallel loop: decoding n sequences then
// costs one fork-join per layer instead of n.
func attentionSegments(out, q []float32, segs []Segment, offs []int, l, NH, KVH, HD, window int) {
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
			attentionHead(out[t0*Q:(t0+s.N)*Q], q[t0*Q:(t0+s.N)*Q], s.Cache.K[l], s.Cache.V[l], s.Cache.Len, s.N, h, NH, KVH, HD, (*sp)[:need], window)
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

// attnScale is the factor of the attention scores, 1/√HD.
func attnScale(HD int) float32 { return float32(1 / math.Sqrt(float64(HD))) }

// softmaxCausal turns row (scores of one query) into probabilities over
// its first visible entries after scaling, and zeroes the masked rest. The
// sum runs in float64.
func softmaxCausal(row []float32, visible int, scale float32) {
	v := row[:visible]
	kernels.Scale(scale, v)
	sum, _ := kernels.ExpShift(v, kernels.Max(v))
	kernels.Scale(float32(1/sum), v)
	clear(row[visible:])
}

// softmaxCausalBackward turns dp, the gradient w.r.t. a row p of
// softmaxCausal's output with visible entries, into the gradient w.r.t. its
// scores before scaling, in place: dS = P∘(dP − Σ_j P∘dP)·scale, zero where
// masked.
func softmaxCausalBackward(dp, p []float32, visible int, scale float32) {
	pdp := kernels.Dot(p[:visible], dp[:visible])
	for j := 0; j < visible; j++ {
		dp[j] = p[j] * (dp[j] - pdp) * scale
	}
	clear(dp[visible:])
}
