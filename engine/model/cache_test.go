package model

import (
	"fmt"
	"math"
	"runtime"
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

// sameLogits feeds each cache of both sets its sequence's next tokens
// (tokens(i) for the i-th cache of a set), each set in one pass, and fails
// unless the two sets' logits are equal bit for bit.
func sameLogits(t *testing.T, m *Model, ws *Workspace, what string, caches [2][]*KVCache, tokens func(i int) []int) {
	t.Helper()
	var rows [2][][]float32
	for k, cs := range caches {
		var batch []int
		var segs []Segment
		for i, c := range cs {
			toks := tokens(i)
			batch = append(batch, toks...)
			segs = append(segs, Segment{Cache: c, N: len(toks)})
		}
		h, err := m.Forward(ws, batch, segs)
		if err != nil {
			t.Fatal(err)
		}
		rows[k] = rowsLogits(m, h, len(batch))
	}
	sameBits(t, what, rows[0], rows[1])
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
				sameLogits(t, m, &ws, what, caches, func(i int) []int { return seqs[i][from : from+n] })
			}
			one := [2][]*KVCache{{bounded}, {full}}
			both := [2][]*KVCache{{bounded, bOther}, {full, fOther}}
			step("prefill", one, [][]int{tokens}, 0, 5)
			maxRows := 0
			for i := 5; i < 150; i++ {
				step("decode", one, [][]int{tokens}, i, 1)
				for ln := range bounded.K {
					w := bounded.window[ln]
					if w > 0 {
						maxRows = max(maxRows, bounded.rows(ln))
					}
					if w > 0 && bounded.rows(ln) > w+attnBlock {
						t.Fatalf("after %d tokens lane %d holds %d rows; window %d + block %d", i+1, ln, bounded.rows(ln), w, attnBlock)
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

// Ensure a decoding group whose samples are split into several runs
// (attentionShared's units: as many as give each of 6 goroutines one,
// here runs of 2, 2 and 3 samples per kv head) decodes to the bits of
// samples with copies.
func TestKVCache_ForkSharesPrefixInRuns(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(6))
	cfg, err := Preset("qwen2", "tiny", 300)
	if err != nil {
		t.Fatal(err)
	}
	m, err := New(cfg, RandomWeights(cfg, InitOptions{Seed: 6, Std: 0.1, NormJitter: 0.1}))
	if err != nil {
		t.Fatal(err)
	}
	const P, T = 130, 200
	prompt := randomTokens(P, 300, 41)
	var ws Workspace
	root, copied := m.NewKVCache(T), m.NewKVCache(T)
	for _, c := range []*KVCache{root, copied} {
		if _, err := m.Forward(&ws, prompt, []Segment{{Cache: c, N: P}}); err != nil {
			t.Fatal(err)
		}
	}
	forks, copies := []*KVCache{root}, []*KVCache{copied}
	for range 6 {
		f, err := root.Fork(P, T)
		if err != nil {
			t.Fatal(err)
		}
		c := m.NewKVCache(T)
		if err := c.CopyPrefix(copied, P); err != nil {
			t.Fatal(err)
		}
		forks, copies = append(forks, f), append(copies, c)
	}
	if g := sharedDecodes([]Segment{{Cache: forks[0], N: 1}, {Cache: forks[1], N: 1}}, 0, 0); len(g) != 1 || len(g[0].members) != 2 {
		t.Fatalf("a cache and its fork share no prefix: %+v", g)
	}
	for pos := P; pos < P+10; pos++ {
		sameLogits(t, m, &ws, fmt.Sprintf("decode at %d in runs", pos), [2][]*KVCache{forks, copies},
			func(i int) []int { return randomTokens(1, 300, uint64(100*i+pos)) })
	}
}

// Ensure forks that share their prompt's keys and values (Fork) decode to
// the bits of forks that copy them (CopyPrefix): four samples of one
// prompt, batched, one token each per pass, a multi-token segment, then
// one token each again with one sample ahead of the others, a fork of a fork, a fork of a prompt shorter than one
// attention block, and a fork truncated into its shared prefix; on
// full-attention layers (qwen2) and local + global ones (gemma3). The
// cache forks read from refuses to be overwritten below what it shares.
func TestKVCache_ForkSharesPrefix(t *testing.T) {
	for _, arch := range []string{"qwen2", "gemma3"} {
		t.Run(arch, func(t *testing.T) {
			cfg, err := Preset(arch, "tiny", 300)
			if err != nil {
				t.Fatal(err)
			}
			m, err := New(cfg, RandomWeights(cfg, InitOptions{Seed: 5, Std: 0.1, NormJitter: 0.1}))
			if err != nil {
				t.Fatal(err)
			}
			const P, T = 150, 260 // the prompt: two whole attention blocks and 22 positions
			prompt := randomTokens(P, 300, 31)
			var ws Workspace
			prefill := func() *KVCache {
				c := m.NewKVCache(T)
				if _, err := m.Forward(&ws, prompt, []Segment{{Cache: c, N: P}}); err != nil {
					t.Fatal(err)
				}
				return c
			}
			shared, copied := prefill(), prefill()
			var forks, copies []*KVCache
			for range 3 {
				f, err := shared.Fork(P, shared.Cap)
				if err != nil {
					t.Fatal(err)
				}
				if f.pre != 128 {
					t.Fatalf("fork shares %d positions; want 128", f.pre)
				}
				c := m.NewKVCache(T)
				if err := c.CopyPrefix(copied, P); err != nil {
					t.Fatal(err)
				}
				forks, copies = append(forks, f), append(copies, c)
			}
			forks, copies = append(forks, shared), append(copies, copied)
			if all, one := kvBytes(forks...), kvBytes(forks[0]); all >= 4*one || all != kvBytes(append(forks, forks[1:]...)...) {
				t.Fatalf("four forks of a prompt hold %d bytes, one holds %d: the shared prefix is not counted once", all, one)
			}
			var set KVSet
			for _, f := range forks {
				set.Add(f)
			}
			set.Remove(forks[1])
			set.Remove(forks[2])
			if set.Bytes() != kvBytes(forks[0], forks[3]) {
				t.Fatalf("a set of two forks after removing two holds %d bytes; the two hold %d", set.Bytes(), kvBytes(forks[0], forks[3]))
			}
			set.Remove(forks[0])
			set.Remove(forks[3])
			if set.Bytes() != 0 || len(set.refs) != 0 {
				t.Fatalf("an empty set holds %d bytes in %d arrays", set.Bytes(), len(set.refs))
			}
			// step feeds n tokens to each cache of both sets in one pass
			// and compares the logits.
			step := func(what string, caches [2][]*KVCache, pos, n int) {
				t.Helper()
				sameLogits(t, m, &ws, what, caches, func(i int) []int { return randomTokens(n, 300, uint64(1000*i+pos)) })
			}
			both := [2][]*KVCache{forks, copies}
			for pos := P; pos < P+60; pos++ {
				step(fmt.Sprintf("decode at %d", pos), both, pos, 1)
			}
			step("a 7-token segment", both, P+60, 7)
			// One sample runs 3 tokens ahead, then all decode together:
			// the samples sharing the prefix meet it at different lengths
			// (attentionShared).
			sameLogits(t, m, &ws, "one fork runs ahead", [2][]*KVCache{{forks[1]}, {copies[1]}},
				func(int) []int { return randomTokens(3, 300, 77) })
			for pos := P + 67; pos < P+70; pos++ {
				step(fmt.Sprintf("decode at %d, one fork 3 ahead", pos), both, pos, 1)
			}

			// A fork of a fork shares the same prefix and copies the rest.
			ff, err := forks[0].Fork(forks[0].Len, forks[0].Cap)
			if err != nil {
				t.Fatal(err)
			}
			fc := m.NewKVCache(T)
			if err := fc.CopyPrefix(copies[0], copies[0].Len); err != nil {
				t.Fatal(err)
			}
			if ff.pre != 128 {
				t.Fatalf("a fork of a fork shares %d positions, not 128", ff.pre)
			}
			for l := range ff.K {
				if ff.window[l] == 0 && &ff.preK[l][0] != &shared.K[l][0] {
					t.Fatalf("a fork of a fork reads lane %d's prefix from elsewhere than the first cache", l)
				}
			}
			for pos := P + 70; pos < P+78; pos++ {
				step("fork of a fork", [2][]*KVCache{{ff, forks[1]}, {fc, copies[1]}}, pos, 1)
			}

			// A prompt shorter than an attention block shares nothing.
			short := m.NewKVCache(T)
			if _, err := m.Forward(&ws, prompt[:40], []Segment{{Cache: short, N: 40}}); err != nil {
				t.Fatal(err)
			}
			sf, err := short.Fork(40, short.Cap)
			if err != nil {
				t.Fatal(err)
			}
			sc := m.NewKVCache(T)
			if err := sc.CopyPrefix(short, 40); err != nil {
				t.Fatal(err)
			}
			if sf.pre != 0 {
				t.Fatalf("a 40-token fork shares %d positions", sf.pre)
			}
			step("short prompt", [2][]*KVCache{{sf}, {sc}}, 40, 1)

			// A cache compacted to what it holds (a root, then a fork of
			// it) forks into one with more room than it had, which
			// decodes past the first cache's capacity to the bits of a
			// copy.
			for _, kept := range []*KVCache{sf, ff} {
				before := kvBytes(kept)
				kept.Compact()
				if kept.Cap != kept.Len || kvBytes(kept) >= before {
					t.Fatalf("compacted to capacity %d of %d positions, %d bytes from %d", kept.Cap, kept.Len, kvBytes(kept), before)
				}
				long, err := kept.Fork(kept.Len, T+80)
				if err != nil {
					t.Fatal(err)
				}
				c := m.NewKVCache(T + 80)
				if err := c.CopyPrefix(kept, kept.Len); err != nil {
					t.Fatal(err)
				}
				for pos := kept.Len; pos < T+80; pos += 20 {
					step("a compacted cache forked longer", [2][]*KVCache{{long}, {c}}, pos, min(20, T+80-pos))
				}
			}

			// The shared positions stay as they are.
			if err := shared.Truncate(100); err == nil {
				t.Error("truncating a cache below the positions its forks share should fail")
			}
			if err := shared.CopyPrefix(copied, 10); err == nil {
				t.Error("copying into a cache whose positions its forks share should fail")
			}
			if err := shared.Truncate(140); arch == "qwen2" && err != nil { // (gemma3's windows have slid past 140)
				t.Fatalf("truncating above the shared positions: %v", err)
			}
			// A fork truncated into its prefix gets its own rows back
			// (gemma3's sliding windows have moved past 100).
			if arch != "qwen2" {
				return
			}
			if err := forks[2].Truncate(100); err != nil {
				t.Fatal(err)
			}
			if err := copies[2].Truncate(100); err != nil {
				t.Fatal(err)
			}
			if forks[2].pre != 0 {
				t.Fatalf("a fork truncated to 100 tokens still shares %d", forks[2].pre)
			}
			for pos := 100; pos < 110; pos++ {
				step("after truncating into the prefix", [2][]*KVCache{{forks[2]}, {copies[2]}}, pos, 1)
			}
		})
	}
}

// kvBytes is the memory of the caches' keys and values, counting once what
// several of them share.
func kvBytes(caches ...*KVCache) int64 {
	var set KVSet
	for _, c := range caches {
		set.Add(c)
	}
	return set.Bytes()
}
