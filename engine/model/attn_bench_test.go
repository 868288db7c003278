package model

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"syscall"
	"testing"
	"time"
)

func cpuSecs() float64 {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
}

// BenchmarkTrainAttention compares the block-causal training attention with
// the full-matrix references on the Qwen2.5-0.5B shape (14 query heads, 2
// kv heads of 64), forward and backward.
func BenchmarkTrainAttention(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 2))
	NH, KVH, HD := 14, 2, 64
	Q, KV := NH*HD, KVH*HD
	for _, T := range []int{128, 512} {
		q, k, v := randVec(rng, T*Q, 1), randVec(rng, T*KV, 1), randVec(rng, T*KV, 1)
		dout, out := randVec(rng, T*Q, 1), make([]float32, T*Q)
		dq, dk, dv := make([]float32, T*Q), make([]float32, T*KV), make([]float32, T*KV)
		var w attnWork
		b.Run(fmt.Sprintf("T=%d/forward/blocks", T), func(b *testing.B) {
			c0 := cpuSecs()
			defer func() { b.ReportMetric((cpuSecs()-c0)*1e3/float64(b.N), "cpu-ms/op") }()
			for b.Loop() {
				trainAttentionForward(&w, out, q, k, v, T, NH, KVH, HD, 0, -1)
			}
		})
		b.Run(fmt.Sprintf("T=%d/forward/full", T), func(b *testing.B) {
			c0 := cpuSecs()
			defer func() { b.ReportMetric((cpuSecs()-c0)*1e3/float64(b.N), "cpu-ms/op") }()
			for b.Loop() {
				attentionForwardRef(out, q, k, v, T, NH, KVH, HD)
			}
		})
		b.Run(fmt.Sprintf("T=%d/backward/blocks", T), func(b *testing.B) {
			c0 := cpuSecs()
			defer func() { b.ReportMetric((cpuSecs()-c0)*1e3/float64(b.N), "cpu-ms/op") }()
			for b.Loop() {
				trainAttentionBackward(&w, dq, dk, dv, dout, q, k, v, T, NH, KVH, HD, 0, -1)
			}
		})
		b.Run(fmt.Sprintf("T=%d/backward/full", T), func(b *testing.B) {
			c0 := cpuSecs()
			defer func() { b.ReportMetric((cpuSecs()-c0)*1e3/float64(b.N), "cpu-ms/op") }()
			for b.Loop() {
				attentionBackwardRef(dq, dk, dv, dout, q, k, v, T, NH, KVH, HD)
			}
		})
	}
}

// BenchmarkDecodeAttention is one decoding step's attention over all 24
// layers of the Qwen2.5-0.5B shape for one sequence whose cache holds tk
// positions (each layer's keys and values distinct, cold as in a model):
// ms a step and the cached bytes it reads per second.
func BenchmarkDecodeAttention(b *testing.B) {
	cfg := presets["qwen2.5-0.5b"]
	cfg.HeadDim = cfg.HiddenSize / cfg.NumHeads
	m := &Model{Config: cfg}
	rng := rand.New(rand.NewPCG(3, 4))
	NH, KVH, HD, L := cfg.NumHeads, cfg.NumKVHeads, cfg.HeadDim, cfg.NumLayers
	for _, tk := range []int{512, 2048} {
		b.Run(fmt.Sprint("tk=", tk), func(b *testing.B) {
			c := m.NewKVCache(tk + 64)
			for l := range L {
				c.put(l, randVec(rng, tk*KVH*HD, 1), randVec(rng, tk*KVH*HD, 1), tk)
			}
			c.Len = tk - 1 // the last position is the new token's
			q, out := randVec(rng, NH*HD, 1), make([]float32, NH*HD)
			segs, offs := []Segment{{Cache: c, N: 1}}, []int{0}
			var times []float64
			for b.Loop() {
				t := time.Now()
				for l := range L {
					attentionSegments(out, q, segs, offs, l, NH, KVH, HD, 0)
				}
				times = append(times, time.Since(t).Seconds())
			}
			slices.Sort(times)
			med := times[len(times)/2]
			b.ReportMetric(med*1e3, "ms/step")
			b.ReportMetric(float64(2*L*tk*KVH*HD*4)/med/1e9, "GB/s")
		})
	}
}

// BenchmarkDecodeGroupAttention is one decoding step's attention over all
// 24 layers of the Qwen2.5-0.5B shape for a group of 8 samples of one
// prompt of tk positions, as the Batcher makes them: the prompt's cache
// and 7 forks of it (KVCache.Fork: the prompt's keys and values shared),
// each with its new token. The group's rows over the shared prefix in one
// product (attentionShared) against one unit per sample, interleaved in one
// process, ms a step.
func BenchmarkDecodeGroupAttention(b *testing.B) {
	defer func(v bool) { shareDecodeRows = v }(shareDecodeRows)
	cfg := presets["qwen2.5-0.5b"]
	cfg.HeadDim = cfg.HiddenSize / cfg.NumHeads
	m := &Model{Config: cfg}
	rng := rand.New(rand.NewPCG(3, 5))
	NH, KVH, HD, L := cfg.NumHeads, cfg.NumKVHeads, cfg.HeadDim, cfg.NumLayers
	const n = 8
	for _, tk := range []int{512, 2048} {
		b.Run(fmt.Sprint("tk=", tk), func(b *testing.B) {
			prompt := m.NewKVCache(tk + 64)
			for l := range L {
				prompt.put(l, randVec(rng, tk*KVH*HD, 1), randVec(rng, tk*KVH*HD, 1), tk)
			}
			prompt.Len = tk
			caches := []*KVCache{prompt}
			for range n - 1 {
				f, err := prompt.Fork(tk, prompt.Cap)
				if err != nil {
					b.Fatal(err)
				}
				caches = append(caches, f)
			}
			segs, offs := make([]Segment, n), make([]int, n)
			for i, c := range caches {
				for l := range L {
					c.put(l, randVec(rng, KVH*HD, 1), randVec(rng, KVH*HD, 1), 1)
				}
				segs[i], offs[i] = Segment{Cache: c, N: 1}, i
			}
			q, out := randVec(rng, n*NH*HD, 1), make([]float32, n*NH*HD)
			times := map[bool][]float64{}
			for b.Loop() {
				for _, shared := range []bool{true, false} {
					shareDecodeRows = shared
					t := time.Now()
					for l := range L {
						attentionSegments(out, q, segs, offs, l, NH, KVH, HD, 0)
					}
					times[shared] = append(times[shared], time.Since(t).Seconds())
				}
			}
			for _, shared := range []bool{true, false} {
				v := times[shared]
				slices.Sort(v)
				b.ReportMetric(v[len(v)/2]*1e3, fmt.Sprintf("shared=%v_ms/step", shared))
			}
		})
	}
}
