package model

import (
	"fmt"

	"github.com/artgo/art/engine/kernels"
)

// KVCache holds one sequence's keys and values (after RoPE) for every layer.
// Positions [0, Len) are filled; Cap is the most positions it takes.
//
// A full-attention layer keeps every position: row i of K[l] and V[l] is
// position i. A sliding-window layer keeps only what its next queries can
// see: row i is position base[l]+i, where base[l] is a multiple of
// attnBlock that advances, a block at a time, as the window slides past
// it. Such a layer decodes in window+attnBlock rows; a prefill chunk
// widens it, and after a pass it keeps at most twice that (so chunked
// prefills do not reallocate it chunk after chunk). A sliding layer's
// memory is thus bounded by its window, not by the context. Attention
// over the kept rows sums exactly the products it summed over all rows,
// in the same blocks (the dropped keys had probability zero), so logits do
// not change by a bit.
//
// Each kv head of a layer has arrays of its own, a lane (lane l·KVH + h
// for kv head h of layer l): a decoding step reads each head's keys and
// values on its own goroutine, and a head's bytes in one stretch stream
// from memory ~1.4× faster than the same bytes every other stretch of a
// layer's (BenchmarkDecodeAttention). Values are stored as rows: row i of
// V[lane] holds the head's HeadDim values. Keys are stored in blocks of
// keyBlock rows laid out as the panel kernels.GemmPanels reads (putKeys),
// so attention multiplies by them in place instead of transposing them on
// every query: block b of K[lane] is K[lane][b·keyBlock·HeadDim:], and in
// it, value e of the block's row j is at e·keyBlock + j. K[lane] thus
// holds rows(lane) rounded up to keyBlock. The positions, windows and
// bases below are per lane; a layer's lanes always agree on them.
//
// A fork (Fork) reads the first pre positions of its full-attention layers
// from the cache it was forked from, in place: preK[lane] and preV[lane] are
// that cache's key blocks and value rows (nil on sliding layers, which
// copy theirs), pre is a whole number of attention blocks, and base[l] =
// pre, so row 0 of K[lane] is position pre. A cache forks read from keeps
// those positions as they are: frozen is how many, and Truncate and
// CopyPrefix refuse to overwrite them.
type KVCache struct {
	K, V [][]float32 // per lane: key blocks, value rows
	Len  int
	Cap  int

	base   []int // per lane: the position of row 0 (of K[lane], V[lane])
	window []int // per lane: its layer's Config.Window (0: full attention)
	heads  int   // kv heads, lanes per layer
	kv     int   // values per row: the head dimension

	preK, preV [][]float32 // per lane: a shared prefix's key blocks and value rows (Fork)
	pre        int         // positions in the shared prefix
	frozen     int         // positions forks read from this cache's full layers
}

// NewKVCache allocates a cache for up to capacity tokens of m.
func (m *Model) NewKVCache(capacity int) *KVCache {
	H := m.Config.NumKVHeads
	n := m.Config.NumLayers * H
	c := &KVCache{K: make([][]float32, n), V: make([][]float32, n), Cap: capacity,
		base: make([]int, n), window: make([]int, n), heads: H, kv: m.Config.HeadDim}
	for ln := range n {
		c.window[ln] = m.Config.Window(ln / H)
		c.K[ln], c.V[ln] = c.alloc(c.boundRows(ln))
	}
	return c
}

// lanes returns layer l's first lane and the one after its last.
func (c *KVCache) lanes(l int) (int, int) { return l * c.heads, (l + 1) * c.heads }

// boundRows is the number of rows lane l keeps between forward passes:
// every position for a full layer; for a sliding one, the window plus the
// block a decoding step may straddle.
func (c *KVCache) boundRows(l int) int {
	if w := c.window[l]; w > 0 {
		return min(c.Cap, w+attnBlock)
	}
	return c.Cap
}

// rows is the number of positions lane l has room for.
func (c *KVCache) rows(l int) int { return len(c.V[l]) / c.kv }

// alloc makes a layer's key blocks and value rows for n positions.
func (c *KVCache) alloc(n int) (k, v []float32) {
	return make([]float32, keyRows(n)*c.kv), make([]float32, n*c.kv)
}

// keyBlock is the number of positions in one block of keys: one panel of
// kernels.GemmPanels. Sliding layers drop whole attention blocks, which
// are whole key blocks.
const keyBlock = kernels.PanelWidth

// keyRows rounds n positions up to whole key blocks.
func keyRows(n int) int { return (n + keyBlock - 1) / keyBlock * keyBlock }

// putKeys writes key rows (kv values each) into the key blocks dst as
// positions row, row+1, …
func putKeys(dst []float32, row int, rows []float32, kv int) {
	putKeysStrided(dst, row, rows, len(rows)/kv, kv, kv)
}

// putKeysStrided is putKeys for n rows of kv values ld apart in src.
func putKeysStrided(dst []float32, row int, src []float32, n, ld, kv int) {
	for i := range n {
		r := row + i
		blk, j := dst[r/keyBlock*keyBlock*kv:], r%keyBlock
		for e, x := range src[i*ld : i*ld+kv] {
			blk[e*keyBlock+j] = x
		}
	}
}

// put appends n positions to layer l: k and v hold n rows of every kv
// head's values (Config.KVDim() a row), which go to the heads' lanes.
func (c *KVCache) put(l int, k, v []float32, n int) {
	lo, hi := c.lanes(l)
	start := c.Len
	ld := c.heads * c.kv
	for ln := lo; ln < hi; ln++ {
		r, off := c.prepare(ln, start, start+n), (ln-lo)*c.kv
		putLane(c.K[ln], c.V[ln], r, k[off:], v[off:], n, ld, c.kv)
	}
}

// putLane writes n rows of one kv head's keys and values (hd values each,
// ld apart in k and v) into a lane's key blocks and value rows from row on.
func putLane(keys, vals []float32, row int, k, v []float32, n, ld, hd int) {
	putKeysStrided(keys, row, k, n, ld, hd)
	for i := range n {
		copy(vals[(row+i)*hd:(row+i+1)*hd], v[i*ld:])
	}
}

// prepare makes room in lane l for the positions [start, end) about to
// be appended, filled the positions before start: a sliding layer first
// drops the blocks of positions no query from start on sees. It returns
// the row of position start.
func (c *KVCache) prepare(l, start, end int) int {
	if w := c.window[l]; w > 0 {
		c.slide(l, start, start)
	}
	if need := end - c.base[l]; need > c.rows(l) {
		c.resize(l, need, start)
	}
	return start - c.base[l]
}

// release shrinks layer l's lanes back to their bound, if it slides,
// after a pass that widened them past twice that, filled up to position
// end.
func (c *KVCache) release(l, end int) {
	lo, hi := c.lanes(l)
	for ln := lo; ln < hi; ln++ {
		if c.window[ln] == 0 || c.rows(ln) <= 2*c.boundRows(ln) {
			continue
		}
		c.slide(ln, end, end)
		c.resize(ln, c.boundRows(ln), end)
	}
}

// slide drops lane l's positions before the block holding the first key
// a query at position pos sees; positions up to filled are held.
func (c *KVCache) slide(l, pos, filled int) {
	nb := firstKey(pos, c.window[l]) / attnBlock * attnBlock
	drop := nb - c.base[l]
	if drop <= 0 {
		return
	}
	held := filled - c.base[l]
	copy(c.K[l], c.K[l][drop*c.kv:keyRows(held)*c.kv])
	copy(c.V[l], c.V[l][drop*c.kv:held*c.kv])
	c.base[l] = nb
}

// resize gives lane l room for n rows, keeping its positions up to
// filled.
func (c *KVCache) resize(l, n, filled int) {
	held := filled - c.base[l]
	k, v := c.alloc(n)
	copy(k, c.K[l][:min(len(k), keyRows(held)*c.kv)])
	copy(v, c.V[l][:held*c.kv])
	c.K[l], c.V[l] = k, v
}

// holds reports whether lane l still has every key a query at position
// n sees, so the sequence can go on from n (a full layer keeps all).
func (c *KVCache) holds(l, n int) bool {
	return n == 0 || c.window[l] == 0 || firstKey(n, c.window[l]) >= c.base[l]
}

// first is the position of lane l's first kept key: 0 on a full layer
// (its shared prefix, if any, then its own rows), base[l] on a sliding one.
func (c *KVCache) first(l int) int {
	if c.preK != nil && c.preK[l] != nil {
		return 0
	}
	return c.base[l]
}

// layerFirst is first of layer l (whose lanes agree).
func (c *KVCache) layerFirst(l int) int { return c.first(l * c.heads) }

// head is the keys and values of kv head h of layer l from its first kept
// position, as attention reads them.
func (c *KVCache) head(l, h int) kvRows { return c.lane(l*c.heads + h) }

// lane is lane l's keys and values from its first kept position.
func (c *KVCache) lane(l int) kvRows {
	r := kvRows{k: c.K[l], v: c.V[l]}
	if c.preK != nil && c.preK[l] != nil {
		r.preK, r.preV, r.pre = c.preK[l], c.preV[l], c.pre
	}
	return r
}

// copyPositions copies lane l's positions [from, to) (from a multiple of
// keyBlock, and from ≥ c.first(l)) into rows 0.. of dstK and dstV.
func (c *KVCache) copyPositions(l int, dstK, dstV []float32, from, to int) {
	row := 0
	if r := c.lane(l); from < r.pre {
		end := min(to, r.pre)
		copyRows(dstK, dstV, 0, r.preK, r.preV, from, end-from, c.kv)
		row, from = end-from, end
	}
	if from < to {
		copyRows(dstK, dstV, row, c.K[l], c.V[l], from-c.base[l], to-from, c.kv)
	}
}

// copyRows copies n rows of key blocks and value rows (kv values a row)
// from row sr of srcK, srcV to row dr of dstK, dstV; dr and sr are
// multiples of keyBlock, so the keys copy as whole blocks.
func copyRows(dstK, dstV []float32, dr int, srcK, srcV []float32, sr, n, kv int) {
	copy(dstK[dr*kv:], srcK[sr*kv:(sr+keyRows(n))*kv])
	copy(dstV[dr*kv:], srcV[sr*kv:(sr+n)*kv])
}

// ForkBlock is the granularity of what forks share: the whole blocks of
// ForkBlock positions of a fork's first n (Fork).
const ForkBlock = attnBlock

// Fork returns a new cache with room for capacity positions holding c's
// first n, for another sample of the same prompt or a prompt that starts
// with the same tokens. On the full-attention layers the
// whole attention blocks of them are not copied but read in place from c
// (or from the cache c was forked from): a group of samples keeps one copy
// of its prompt's keys and values, and a decoding step reads it once per
// layer rather than once per sample. Attention sums the shared keys in the
// same blocks as its own, so the logits are the bits of a copy
// (CopyPrefix). c's shared positions are fixed from then on: Truncate
// below them and CopyPrefix into c fail.
func (c *KVCache) Fork(n, capacity int) (*KVCache, error) {
	if n < 0 || n > c.Len || capacity < n {
		return nil, fmt.Errorf("model: fork %d cached tokens from a cache of %d into a capacity of %d", n, c.Len, capacity)
	}
	for l := range c.K {
		if !c.holds(l, n) {
			return nil, fmt.Errorf("model: cannot fork %d cached tokens: layer %d's sliding window has moved past them", n, l/c.heads)
		}
	}
	L := len(c.K)
	f := &KVCache{K: make([][]float32, L), V: make([][]float32, L), Cap: capacity, Len: n,
		base: make([]int, L), window: c.window, heads: c.heads, kv: c.kv,
		preK: make([][]float32, L), preV: make([][]float32, L)}
	f.pre = n / ForkBlock * ForkBlock
	if c.pre > 0 {
		f.pre = min(f.pre, c.pre)
	}
	for l := range c.K {
		if c.window[l] > 0 {
			b := c.base[l]
			if n == 0 {
				b = 0
			}
			f.K[l], f.V[l] = f.alloc(max(f.boundRows(l), n-b))
			c.copyPositions(l, f.K[l], f.V[l], b, n)
			f.base[l] = b
			continue
		}
		switch {
		case f.pre == 0:
		case c.pre > 0:
			f.preK[l], f.preV[l] = c.preK[l], c.preV[l]
		default:
			f.preK[l], f.preV[l] = c.K[l], c.V[l]
		}
		f.K[l], f.V[l] = f.alloc(capacity - f.pre)
		c.copyPositions(l, f.K[l], f.V[l], f.pre, n)
		f.base[l] = f.pre
	}
	if c.pre == 0 {
		c.frozen = max(c.frozen, f.pre)
	}
	return f, nil
}

// Compact gives up the room beyond Len, for a cache kept only to be forked
// from: its full layers' lanes are reallocated to what they hold and Cap
// becomes Len. A cache forks already read from is left as it is (they
// share its rows).
func (c *KVCache) Compact() {
	if c.frozen > 0 {
		return
	}
	for l := range c.K {
		if c.window[l] > 0 {
			continue
		}
		held := c.Len - c.base[l]
		if held >= c.rows(l) {
			continue
		}
		k, v := c.alloc(held)
		copyRows(k, v, 0, c.K[l], c.V[l], 0, held, c.kv)
		c.K[l], c.V[l] = k, v
	}
	c.Cap = c.Len
}

// KVSet counts the memory of a changing set of caches, once for what they
// share. A cache must not grow or compact while it is in a set.
type KVSet struct {
	refs  map[*float32]int // the caches holding each array, by its first element
	bytes int64
}

// Add puts c in the set.
func (s *KVSet) Add(c *KVCache) {
	if s.refs == nil {
		s.refs = map[*float32]int{}
	}
	c.arrays(func(x []float32) {
		k := &x[:1][0]
		if s.refs[k]++; s.refs[k] == 1 {
			s.bytes += int64(cap(x)) * 4
		}
	})
}

// Remove takes c, added before, out of the set.
func (s *KVSet) Remove(c *KVCache) {
	c.arrays(func(x []float32) {
		k := &x[:1][0]
		if s.refs[k]--; s.refs[k] == 0 {
			delete(s.refs, k)
			s.bytes -= int64(cap(x)) * 4
		}
	})
}

// Bytes is the memory of the set's caches.
func (s *KVSet) Bytes() int64 { return s.bytes }

// arrays calls f with each array of keys or values c reads.
func (c *KVCache) arrays(f func([]float32)) {
	for l := range c.K {
		for _, x := range [][]float32{c.K[l], c.V[l]} {
			if cap(x) > 0 {
				f(x)
			}
		}
		if c.preK != nil && c.preK[l] != nil {
			f(c.preK[l])
			f(c.preV[l])
		}
	}
}

// unshare gives a fork's full layers their own rows for every position,
// holding its first n (≤ pre) from the shared prefix.
func (c *KVCache) unshare(n int) {
	for l := range c.K {
		if c.preK[l] == nil {
			continue
		}
		k, v := c.alloc(c.Cap)
		copyRows(k, v, 0, c.preK[l], c.preV[l], 0, n, c.kv)
		c.K[l], c.V[l], c.base[l] = k, v, 0
	}
	c.preK, c.preV, c.pre = nil, nil, 0
}

// Truncate drops cached tokens beyond n (to reuse a shared prefix). It
// fails when a sliding layer has already dropped keys position n sees.
func (c *KVCache) Truncate(n int) error {
	if n < 0 || n > c.Len {
		return fmt.Errorf("model: truncate cache of %d tokens to %d", c.Len, n)
	}
	if n < c.frozen {
		return fmt.Errorf("model: cannot truncate cache to %d tokens: its first %d are shared with its forks", n, c.frozen)
	}
	for l := range c.K {
		if !c.holds(l, n) {
			return fmt.Errorf("model: cannot truncate cache to %d tokens: layer %d's sliding window has moved past them", n, l/c.heads)
		}
	}
	if n < c.pre {
		c.unshare(n)
	}
	if n == 0 {
		clear(c.base)
	}
	c.Len = n
	return nil
}

// CopyPrefix copies the first n cached tokens of src into c (replacing its
// content), so several samples of one prompt prefill it only once. Sliding
// layers copy the positions src still holds.
func (c *KVCache) CopyPrefix(src *KVCache, n int) error {
	if n > src.Len || n > c.Cap || len(c.K) != len(src.K) || c.kv != src.kv || c.heads != src.heads {
		return fmt.Errorf("model: copy %d cached tokens from a cache of %d into one of capacity %d", n, src.Len, c.Cap)
	}
	if c.frozen > 0 {
		return fmt.Errorf("model: cannot copy cached tokens into a cache whose first %d are shared with its forks", c.frozen)
	}
	for l := range c.K {
		if !src.holds(l, n) {
			return fmt.Errorf("model: cannot copy %d cached tokens: layer %d's sliding window has moved past them", n, l/src.heads)
		}
	}
	if c.pre > 0 {
		c.unshare(0)
	}
	for l := range c.K {
		b := src.first(l)
		if n == 0 {
			b = 0
		}
		rows := max(0, n-b)
		if rows > c.rows(l) {
			c.K[l], c.V[l] = c.alloc(rows)
		}
		src.copyPositions(l, c.K[l], c.V[l], b, max(b, n))
		c.base[l] = b
	}
	c.Len = n
	return nil
}
