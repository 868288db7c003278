package model

import (
	"math"

	"github.com/artgo/art/engine/kernels"
	"github.com/artgo/art/internal/parallel"
)

// Reference implementations the tests compare the production layers with.

// ropeRef is ropeTable.forward (or, with inverse, backward) computing each
// row's angles from its position pos[t] directly.
func ropeRef(x []float32, pos []int, freqs []float64, T, nh, HD int, inverse bool) {
	half := HD / 2
	cos := make([]float32, half)
	sin := make([]float32, half)
	for t := 0; t < T; t++ {
		p := float64(pos[t])
		for i, f := range freqs {
			s, c := math.Sincos(p * f)
			cos[i], sin[i] = float32(c), float32(s)
		}
		row := x[t*nh*HD : (t+1)*nh*HD]
		for h := 0; h < nh; h++ {
			v := row[h*HD : (h+1)*HD]
			for i := 0; i < half; i++ {
				x1, x2 := v[i], v[i+half]
				if inverse {
					v[i] = x1*cos[i] + x2*sin[i]
					v[i+half] = x2*cos[i] - x1*sin[i]
				} else {
					v[i] = x1*cos[i] - x2*sin[i]
					v[i+half] = x2*cos[i] + x1*sin[i]
				}
			}
		}
	}
}

// attentionForwardRef is causal attention over one whole sequence (T
// tokens, keys k and values v its own (T, KV) rows) computed by the
// inference attention, as if the sequence were prefilled into an empty
// cache.
func attentionForwardRef(out, q, k, v []float32, T, NH, KVH, HD int) {
	attentionWindowRef(out, q, k, v, T, NH, KVH, HD, 0)
}

// attentionWindowRef is attentionForwardRef with a sliding window of window keys (0: none).
func attentionWindowRef(out, q, k, v []float32, T, NH, KVH, HD, window int) {
	lanes := lanesOf(k, v, T, KVH, HD)
	parallel.For(NH, 1, func(lo, hi int) {
		p := make([]float32, T*T)
		for h := lo; h < hi; h++ {
			attentionHead(productsFor(1, 1), out, q, lanes[h/(NH/KVH)], 0, T, h, NH, HD, p, window)
		}
	})
}

// lanesOf lays a sequence's keys and values (T rows of KVH·HD) out as a
// KV cache's lanes hold them, one kv head each.
func lanesOf(k, v []float32, T, KVH, HD int) []kvRows {
	KV := KVH * HD
	lanes := make([]kvRows, KVH)
	for h := range lanes {
		lanes[h].k, lanes[h].v = make([]float32, keyRows(T)*HD), make([]float32, T*HD)
		putLane(lanes[h].k, lanes[h].v, 0, k[h*HD:], v[h*HD:], T, KV, HD)
	}
	return lanes
}

// softmaxCausalRef is softmaxCausal with a float32 scalar loop.
func softmaxCausalRef(row []float32, visible int, scale float32) {
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

// attentionBackwardRef is the gradient of attentionForwardRef, with full
// (T, T) matrices and scalar softmax loops: given dout (T, Q) it
// accumulates dq (T, Q), dk and dv (T, KV).
func attentionBackwardRef(dq, dk, dv, dout, q, k, v []float32, T, NH, KVH, HD int) {
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
					softmaxCausalRef(p[i*T:(i+1)*T], i+1, scale)
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
