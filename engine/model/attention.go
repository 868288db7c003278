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
