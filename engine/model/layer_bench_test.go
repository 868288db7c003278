package model

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

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

// BenchmarkGroupDecodeSharedPrefix decodes a group of 8 samples of one
// 512- or 2048-token prompt on the Qwen2.5-0.5B shape (24 layers, a small
// vocabulary), their caches forked (sharing the prompt's keys and values)
// and copied in turn, 32 steps each per iteration, so that the host's
// bandwidth, which drifts by the minute, is the same for both: the median
// ms a step of each, bf16 weights and q4 ones (under ART_MATMUL_UNIT=int8
// the int8 unit's products).
func BenchmarkGroupDecodeSharedPrefix(b *testing.B) {
	for _, c := range []struct {
		q Quantization
		P int
	}{{NoQuantization, 512}, {Q4, 512}, {NoQuantization, 2048}, {Q4, 2048}} {
		q, P := c.q, c.P
		b.Run(fmt.Sprintf("weights=%s/prompt=%d", cmp.Or(string(q), "bf16"), P), func(b *testing.B) {
			cfg, err := Preset("qwen2", "qwen2.5-0.5b", 0)
			if err != nil {
				b.Fatal(err)
			}
			cfg.VocabSize = 1024
			w := RandomWeights(cfg, InitOptions{Seed: 1, DType: kernels.BF16})
			if err := w.Quantize(q); err != nil {
				b.Fatal(err)
			}
			m, err := New(cfg, w)
			if err != nil {
				b.Fatal(err)
			}
			const steps, n = 32, 8
			var ws Workspace
			prompt := m.NewKVCache(P + steps)
			if _, err := m.Forward(&ws, randomTokens(P, cfg.VocabSize, 4), []Segment{{Cache: prompt, N: P}}); err != nil {
				b.Fatal(err)
			}
			forked, copied := []*KVCache{prompt}, []*KVCache{}
			for range n - 1 {
				f, err := prompt.Fork(P, prompt.Cap)
				if err != nil {
					b.Fatal(err)
				}
				forked = append(forked, f)
			}
			for range n {
				c := m.NewKVCache(P + steps)
				if err := c.CopyPrefix(prompt, P); err != nil {
					b.Fatal(err)
				}
				copied = append(copied, c)
			}
			toks, segs := make([]int, n), make([]Segment, n)
			decode := func(caches []*KVCache) float64 {
				for _, c := range caches {
					if err := c.Truncate(P); err != nil {
						b.Fatal(err)
					}
				}
				t := time.Now()
				for s := range steps {
					for i, c := range caches {
						toks[i], segs[i] = (i*31+s*7)%cfg.VocabSize, Segment{Cache: c, N: 1}
					}
					if _, err := m.Forward(&ws, toks, segs); err != nil {
						b.Fatal(err)
					}
				}
				return time.Since(t).Seconds() * 1e3 / steps
			}
			var fms, cms []float64
			for b.Loop() {
				fms = append(fms, decode(forked))
				cms = append(cms, decode(copied))
			}
			slices.Sort(fms)
			slices.Sort(cms)
			b.ReportMetric(fms[len(fms)/2], "forked-ms/step")
			b.ReportMetric(cms[len(cms)/2], "copied-ms/step")
		})
	}
}
