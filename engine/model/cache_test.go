package model

import (
	"math"
	"testing"
)

// fullCache is a cache that keeps every position of every layer, as the
// cache did before sliding layers dropped theirs: the reference the
// bounded cache must equal bit for bit.
func fullCache(m *Model, capacity int) *KVCache {
	c := m.NewKVCache(capacity)
	for l := range c.K {
		c.window[l] = 0
		c.K[l], c.V[l] = c.alloc(capacity)
	}
	return c
}

// slidingModel is a random tiny model of arch (mistral: every layer
// slides; gemma3: local and global layers) with an 11-key window.
func slidingModel(t *testing.T, arch string) *Model {
	t.Helper()
	cfg, err := Preset(arch, "tiny", 300)
	if err != nil {
		t.Fatal(err)
	}
	if *cfg.SlidingWindow != 11 {
		t.Fatalf("the tiny %s shape slides %d keys; the test wants 11", arch, *cfg.SlidingWindow)
	}
	m, err := New(cfg, RandomWeights(cfg, InitOptions{Seed: 9, Std: 0.1, NormJitter: 0.1}))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// sameBits fails unless got and want are equal bit for bit.
func sameBits(t *testing.T, what string, got, want [][]float32) {
	t.Helper()
	for i := range want {
		for j := range want[i] {
			if math.Float32bits(got[i][j]) != math.Float32bits(want[i][j]) {
				t.Fatalf("%s: row %d logit %d: %v; the full cache gives %v", what, i, j, got[i][j], want[i][j])
			}
		}
	}
}

// Ensure a sliding layer's cache keeps only its window (plus a block) while
// decoding goes on for many windows, and the logits stay bit for bit those
// of a cache that keeps every position: decoding one token at a time, a
// long prefill in the middle (which widens the cache for that pass only),
// two sequences batched in one pass, and a sequence forked with
// CopyPrefix. The logits also match a full recompute (to summation order).
func TestKVCache_SlidingLayersBounded(t *testing.T) {
	for _, arch := range []string{"mistral", "gemma3"} {
		t.Run(arch, func(t *testing.T) {
			m := slidingModel(t, arch)
			const T = 430 // 39 windows, 6 attention blocks
			tokens := randomTokens(T, 300, 21)
			other := randomTokens(T, 300, 22)
			bounded, full := m.NewKVCache(T), fullCache(m, T)
			bOther, fOther := m.NewKVCache(T), fullCache(m, T)
			var ws Workspace
			step := func(what string, caches [2][]*KVCache, seqs [][]int, from, n int) {
				t.Helper()
				var rows [2][][]float32
				for k, cs := range caches {
					var batch []int
					var segs []Segment
					for i, c := range cs {
						batch = append(batch, seqs[i][from:from+n]...)
						segs = append(segs, Segment{Cache: c, N: n})
					}
					h, err := m.Forward(&ws, batch, segs)
					if err != nil {
						t.Fatal(err)
					}
					rows[k] = rowsLogits(m, h, len(batch))
				}
				sameBits(t, what, rows[0], rows[1])
			}
			one := [2][]*KVCache{{bounded}, {full}}
			both := [2][]*KVCache{{bounded, bOther}, {full, fOther}}
			step("prefill", one, [][]int{tokens}, 0, 5)
			maxRows := 0
			for i := 5; i < 150; i++ {
				step("decode", one, [][]int{tokens}, i, 1)
				for l := range bounded.K {
					w := m.Config.Window(l)
					if w > 0 {
						maxRows = max(maxRows, bounded.rows(l))
					}
					if w > 0 && bounded.rows(l) > w+attnBlock {
						t.Fatalf("after %d tokens layer %d holds %d rows; window %d + block %d", i+1, l, bounded.rows(l), w, attnBlock)
					}
				}
			}
			if slides := bounded.base[0]; slides == 0 {
				t.Fatalf("layer 0's window never slid (base 0 after 150 tokens)")
			}
			step("long prefill", one, [][]int{tokens}, 150, 190)
			if got, bound := bounded.rows(0), 2*(11+attnBlock); got > bound {
				t.Fatalf("after the long prefill layer 0 holds %d rows; want at most %d", got, bound)
			}
			// A second sequence joins; both decode in one batch.
			step("other prefill", [2][]*KVCache{{bOther}, {fOther}}, [][]int{other}, 0, 340)
			for i := 340; i < 400; i++ {
				step("batched decode", both, [][]int{tokens, other}, i, 1)
			}
			// Fork: a copy goes on as the original would.
			fork, fullFork := m.NewKVCache(T), fullCache(m, T)
			if err := fork.CopyPrefix(bounded, bounded.Len); err != nil {
				t.Fatal(err)
			}
			if err := fullFork.CopyPrefix(full, full.Len); err != nil {
				t.Fatal(err)
			}
			for i := 400; i < T; i++ {
				step("forked decode", [2][]*KVCache{{fork}, {fullFork}}, [][]int{tokens}, i, 1)
			}
			if err := bounded.Truncate(100); err == nil {
				t.Error("truncating past the window's dropped keys should fail")
			}
			if err := fork.CopyPrefix(bounded, 100); err == nil {
				t.Error("copying a prefix the window dropped should fail")
			}
			if err := bounded.Truncate(0); err != nil {
				t.Fatal(err)
			}
			step("reuse after truncate", [2][]*KVCache{{bounded}, {fullCache(m, T)}}, [][]int{tokens}, 0, 20)

			// The whole sequence in one pass, against decoding it.
			recompute := lastLogitsEach(t, m, tokens)
			c := m.NewKVCache(T)
			var inc [][]float32
			for i := range T {
				h, err := m.Forward(&ws, tokens[i:i+1], []Segment{{Cache: c, N: 1}})
				if err != nil {
					t.Fatal(err)
				}
				inc = append(inc, rowsLogits(m, h, 1)...)
			}
			compareRows(t, "decode vs full recompute", inc, recompute, m.Config.VocabSize)
			t.Logf("%s: sliding layers held at most %d rows over %d tokens (full layers %d)", arch, maxRows, T, T)
		})
	}
}
