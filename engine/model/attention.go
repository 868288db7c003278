package model

import (
	"math"

	"github.com/artgo/art/internal/parallel"
)

// attentionForward computes causal grouped-query attention for n new tokens
// of one sequence whose keys and values (post-RoPE) are already in the cache
// at positions [0, start+n). q is (n, NH*HD) for the new tokens, kc and vc are
// the cache rows (≥ start+n, KVH*HD), out is (n, NH*HD). Token i (absolute
// position start+i) attends to cache positions 0..start+i.
func attentionForward(out, q, kc, vc []float32, start, n, NH, KVH, HD int) {
	Q, KV := NH*HD, KVH*HD
	group := NH / KVH
	scale := float32(1 / math.Sqrt(float64(HD)))
	parallel.For(NH*n, 8, func(lo, hi int) {
		scores := make([]float32, start+n)
		for w := lo; w < hi; w++ {
			h, i := w/n, w%n
			kvh := h / group
			qi := q[i*Q+h*HD : i*Q+(h+1)*HD]
			tk := start + i + 1
			maxv := float32(math.Inf(-1))
			for j := 0; j < tk; j++ {
				s := dot(qi, kc[j*KV+kvh*HD:j*KV+(kvh+1)*HD]) * scale
				scores[j] = s
				maxv = max(maxv, s)
			}
			var sum float32
			for j := 0; j < tk; j++ {
				e := float32(math.Exp(float64(scores[j] - maxv)))
				scores[j] = e
				sum += e
			}
			o := out[i*Q+h*HD : i*Q+(h+1)*HD]
			clear(o)
			inv := 1 / sum
			for j := 0; j < tk; j++ {
				axpy(scores[j]*inv, vc[j*KV+kvh*HD:j*KV+(kvh+1)*HD], o)
			}
		}
	})
}

// dot and axpy are placeholders until engine/kernels exports its vector
// kernels; TODO(kernels): switch to kernels.Dot / kernels.Axpy.
func dot(a, b []float32) float32 {
	var s float32
	for i, v := range a {
		s += v * b[i]
	}
	return s
}

func axpy(alpha float32, x, y []float32) {
	for i, v := range x {
		y[i] += alpha * v
	}
}

// attentionBackward is the gradient of attentionForward over a whole
// sequence (start 0, T tokens, keys k and values v are the sequence's own
// (T, KV) rows). Given dout (T, Q) it accumulates dq (T, Q), dk and dv
// (T, KV). The attention probabilities are recomputed row by row instead of
// being stored, so memory stays O(T) per head.
func attentionBackward(dq, dk, dv, dout, q, k, v []float32, T, NH, KVH, HD int) {
	Q, KV := NH*HD, KVH*HD
	group := NH / KVH
	scale := float32(1 / math.Sqrt(float64(HD)))
	// Each kv head (and the query heads sharing it) is independent.
	parallel.For(KVH, 1, func(lo, hi int) {
		p := make([]float32, T)
		dp := make([]float32, T)
		for kvh := lo; kvh < hi; kvh++ {
			for h := kvh * group; h < (kvh+1)*group; h++ {
				for i := 0; i < T; i++ {
					qi := q[i*Q+h*HD : i*Q+(h+1)*HD]
					doi := dout[i*Q+h*HD : i*Q+(h+1)*HD]
					n := i + 1
					maxv := float32(math.Inf(-1))
					for j := 0; j < n; j++ {
						s := dot(qi, k[j*KV+kvh*HD:j*KV+(kvh+1)*HD]) * scale
						p[j] = s
						maxv = max(maxv, s)
					}
					var sum float32
					for j := 0; j < n; j++ {
						p[j] = float32(math.Exp(float64(p[j] - maxv)))
						sum += p[j]
					}
					var pdp float32 // Σ p·dp
					for j := 0; j < n; j++ {
						p[j] /= sum
						vj := v[j*KV+kvh*HD : j*KV+(kvh+1)*HD]
						axpy(p[j], doi, dv[j*KV+kvh*HD:j*KV+(kvh+1)*HD])
						dp[j] = dot(doi, vj)
						pdp += p[j] * dp[j]
					}
					dqi := dq[i*Q+h*HD : i*Q+(h+1)*HD]
					for j := 0; j < n; j++ {
						ds := p[j] * (dp[j] - pdp) * scale
						if ds == 0 {
							continue
						}
						axpy(ds, k[j*KV+kvh*HD:j*KV+(kvh+1)*HD], dqi)
						axpy(ds, qi, dk[j*KV+kvh*HD:j*KV+(kvh+1)*HD])
					}
				}
			}
		}
	})
}
