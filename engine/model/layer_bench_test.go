package model

import (
	"math/rand/v2"
	"testing"

	"github.com/artgo/art/engine/kernels"
)

// benchModel is two layers of the Qwen2.5-0.5B shape with a small
// vocabulary: the layer composition dominates, not the LM head.
func benchModel(b *testing.B) *Model {
	b.Helper()
	cfg, err := Preset("qwen2", "qwen2.5-0.5b", 0)
	if err != nil {
		b.Fatal(err)
	}
	cfg.NumLayers, cfg.VocabSize = 2, 1024
	m, err := New(cfg, RandomWeights(cfg, InitOptions{Seed: 1, DType: kernels.BF16}))
	if err != nil {
		b.Fatal(err)
	}
	return m
}

// BenchmarkLayers times the three users of the layer composition:
// inference prefill and batched decode with a KV cache, and the training
// forward and backward passes (with and without recomputation). On a
// shared machine cpu-ms/op is the steadier figure.
func BenchmarkLayers(b *testing.B) {
	m := benchModel(b)
	const T = 256
	tokens := randomTokens(T, m.Config.VocabSize, 3)
	b.Run("prefill", func(b *testing.B) {
		defer reportCPU(b)()
		var ws Workspace
		c := m.NewKVCache(T)
		for b.Loop() {
			c.Len = 0
			if _, err := m.Forward(&ws, tokens, []Segment{{Cache: c, N: T}}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("decode4x16", func(b *testing.B) {
		// Four sequences with T-16 cached tokens decode 16 tokens each.
		var ws Workspace
		caches := make([]*KVCache, 4)
		for i := range caches {
			caches[i] = m.NewKVCache(T)
			if _, err := m.Forward(&ws, tokens[:T-16], []Segment{{Cache: caches[i], N: T - 16}}); err != nil {
				b.Fatal(err)
			}
		}
		segs := make([]Segment, len(caches))
		defer reportCPU(b)()
		for b.Loop() {
			for i, c := range caches {
				c.Len = T - 16
				segs[i] = Segment{Cache: c, N: 1}
			}
			for s := range 16 {
				step := tokens[T-16+s : T-16+s+1]
				batch := []int{step[0], step[0], step[0], step[0]}
				if _, err := m.Forward(&ws, batch, segs); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
	for _, recompute := range []bool{false, true} {
		name := "train"
		if recompute {
			name = "train-recompute"
		}
		b.Run(name, func(b *testing.B) {
			a := m.newActs(T, recompute)
			dh := randVec(rand.New(rand.NewPCG(4, 5)), T*m.Config.HiddenSize, 1)
			defer reportCPU(b)()
			for b.Loop() {
				if _, err := m.TrainForward(a, tokens, nil); err != nil {
					b.Fatal(err)
				}
				m.TrainBackward(a, dh, nil)
			}
		})
	}
}

// reportCPU returns a function that reports the process CPU time per
// iteration since reportCPU was called.
func reportCPU(b *testing.B) func() {
	c0 := cpuSecs()
	return func() { b.ReportMetric((cpuSecs()-c0)*1e3/float64(b.N), "cpu-ms/op") }
}
