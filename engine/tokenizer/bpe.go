package tokenizer

import (
	"hash/maphash"
	"slices"
	"strings"
	"sync"
)

// BPE merging. A piece starts as one token per byte; then, repeatedly, the
// adjacent pair with the lowest merge rank is merged, the leftmost one when
// several pairs have that rank, until no adjacent pair has a merge. Short
// pieces (almost all of them) use a linear scan over a compact array; long
// ones (runs of one character, long words) a heap ordered by (rank,
// position). Both give the same result; bpe_test.go checks one against the
// other.

// smallWord is the longest piece merged by linear scan.
const smallWord = 64

// noMerge marks a pair that has no merge; it sorts after every real one.
const noMerge = ^uint64(0)

// pairRank returns rank<<32 | merged id for the pair (a, b), or noMerge.
func (t *Tokenizer) pairRank(a, b int32) uint64 {
	return t.merges.get(pairKey(a, b))
}

func pairKey(a, b int32) uint64 { return uint64(uint32(a))<<32 | uint64(uint32(b)) }

// pairTable maps merge pairs (left<<32 | right) to rank<<32 | merged id. It
// is an open-addressing hash table with linear probing, at most 3/4 full:
// the merge lookups are most of the cost of BPE, and this is about twice as
// fast as a Go map here (one cache line per probe, no tombstones, no
// resizing).
type pairTable struct {
	slots []pairSlot
	shift uint // 64 - log2(len(slots))
	n     int
}

type pairSlot struct{ key, val uint64 }

// emptyKey marks a free slot; no pair has it as ids are below 1<<31.
const emptyKey = ^uint64(0)

func newPairTable(n int) *pairTable {
	size, bits := 16, uint(4)
	for size*3 < n*4 {
		size, bits = size*2, bits+1
	}
	t := &pairTable{slots: make([]pairSlot, size), shift: 64 - bits}
	for i := range t.slots {
		t.slots[i].key = emptyKey
	}
	return t
}

func (t *pairTable) index(key uint64) uint64 { return (key * 0x9E3779B97F4A7C15) >> t.shift }

// get returns the value of key, or noMerge.
func (t *pairTable) get(key uint64) uint64 {
	mask := uint64(len(t.slots) - 1)
	for i := t.index(key); ; i = (i + 1) & mask {
		s := &t.slots[i]
		if s.key == key {
			return s.val
		}
		if s.key == emptyKey {
			return noMerge
		}
	}
}

// put sets the value of key. The table must have been made for at least as
// many keys as are put.
func (t *pairTable) put(key, val uint64) {
	mask := uint64(len(t.slots) - 1)
	for i := t.index(key); ; i = (i + 1) & mask {
		s := &t.slots[i]
		if s.key == key {
			s.val = val
			return
		}
		if s.key == emptyKey {
			s.key, s.val = key, val
			t.n++
			return
		}
	}
}

// bpe appends the token ids of piece w (len(w) >= 2) to out.
func (t *Tokenizer) bpe(w string, out []int32) []int32 {
	if len(w) <= smallWord {
		return t.bpeLinear(w, out)
	}
	return t.bpeHeap(w, out)
}

// bpeLinear merges by scanning all pairs for the best one at each step:
// O(n²) comparisons but only about 3n merge lookups, and no allocation.
func (t *Tokenizer) bpeLinear(w string, out []int32) []int32 {
	var symBuf [smallWord]int32
	var pairBuf [smallWord]uint64
	syms := symBuf[:len(w)]
	for i := range len(w) {
		syms[i] = t.byteID[w[i]]
	}
	// pairs[i] is the merge of syms[i] and syms[i+1].
	pairs := pairBuf[:len(w)-1]
	for i := range pairs {
		pairs[i] = t.pairRank(syms[i], syms[i+1])
	}
	for {
		best, at := noMerge, -1
		for i, p := range pairs {
			if p < best { // strict: the leftmost of equal ranks wins
				best, at = p, i
			}
		}
		if at < 0 {
			break
		}
		syms[at] = int32(uint32(best))
		syms = slices.Delete(syms, at+1, at+2)
		pairs = slices.Delete(pairs, at, at+1)
		if at > 0 {
			pairs[at-1] = t.pairRank(syms[at-1], syms[at])
		}
		if at < len(pairs) {
			pairs[at] = t.pairRank(syms[at], syms[at+1])
		}
	}
	return append(out, syms...)
}

// heapSym is a symbol of bpeHeap's linked list, kept at the index of the
// first symbol it covers; dead symbols have been merged into their left
// neighbour.
type heapSym struct {
	id         int32
	prev, next int32 // offsets, -1 at the ends
	dead       bool
}

// heapPair is a candidate merge: key is rank<<32 | offset of the left symbol,
// so the heap pops the lowest rank, then the leftmost; left and right are
// the ids the pair had when pushed, to detect stale entries.
type heapPair struct {
	key         uint64
	left, right int32
	merged      int32
}

// bpeHeap merges with a priority queue of candidate pairs: O(n log n).
func (t *Tokenizer) bpeHeap(w string, out []int32) []int32 {
	ids := make([]int32, len(w))
	for i := range ids {
		ids[i] = t.byteID[w[i]]
	}
	return t.mergeHeap(ids, out)
}

// mergeHeap merges the symbols ids (at least one) as bpeHeap does and
// appends the result to out.
func (t *Tokenizer) mergeHeap(ids []int32, out []int32) []int32 {
	n := len(ids)
	syms := make([]heapSym, n)
	for i, id := range ids {
		syms[i] = heapSym{id: id, prev: int32(i - 1), next: int32(i + 1)}
	}
	syms[n-1].next = -1
	h := make(pairHeap, 0, n)
	push := func(pos int32) {
		s := &syms[pos]
		if s.next < 0 {
			return
		}
		right := syms[s.next].id
		if v := t.pairRank(s.id, right); v != noMerge {
			h.push(heapPair{key: v>>32<<32 | uint64(pos), left: s.id, right: right, merged: int32(uint32(v))})
		}
	}
	for i := range n - 1 {
		push(int32(i))
	}
	for len(h) > 0 {
		p := h.pop()
		pos := int32(uint32(p.key))
		s := &syms[pos]
		if s.dead || s.id != p.left || s.next < 0 || syms[s.next].id != p.right {
			continue // stale: a neighbour was merged since this was pushed
		}
		r := &syms[s.next]
		r.dead = true
		s.id = p.merged
		s.next = r.next
		if r.next >= 0 {
			syms[r.next].prev = pos
		}
		if s.prev >= 0 {
			push(s.prev)
		}
		push(pos)
	}
	for i := int32(0); i >= 0; i = syms[i].next {
		out = append(out, syms[i].id)
	}
	return out
}

// pairHeap is a binary min-heap of heapPair by key.
type pairHeap []heapPair

func (h *pairHeap) push(p heapPair) {
	*h = append(*h, p)
	a := *h
	for i := len(a) - 1; i > 0; {
		parent := (i - 1) / 2
		if a[parent].key <= a[i].key {
			break
		}
		a[parent], a[i] = a[i], a[parent]
		i = parent
	}
}

func (h *pairHeap) pop() heapPair {
	a := *h
	top := a[0]
	last := len(a) - 1
	a[0] = a[last]
	a = a[:last]
	for i := 0; ; {
		l := 2*i + 1
		if l >= len(a) {
			break
		}
		m := l
		if r := l + 1; r < len(a) && a[r].key < a[l].key {
			m = r
		}
		if a[i].key <= a[m].key {
			break
		}
		a[i], a[m] = a[m], a[i]
		i = m
	}
	*h = a
	return top
}

// The word cache remembers the BPE result of recent pieces: words repeat a
// lot in real text. It is sharded to keep lock contention low, and bounded:
// a full shard is emptied (cheaper than LRU bookkeeping and good enough, as
// frequent words come back at once).
const (
	cacheShards   = 64
	cacheShardCap = 1024
	maxCachedWord = 256 // longer pieces are rare and not cached
)

type wordCache struct {
	seed   maphash.Seed
	shards [cacheShards]cacheShard
}

type cacheShard struct {
	mu sync.RWMutex
	m  map[string][]int32 // mu guards m; the slices are never modified
	_  [64 - 32]byte      // keep shards on separate cache lines
}

func newWordCache() *wordCache {
	c := &wordCache{seed: maphash.MakeSeed()}
	for i := range c.shards {
		c.shards[i].m = make(map[string][]int32)
	}
	return c
}

func (c *wordCache) shard(w string) *cacheShard {
	return &c.shards[maphash.String(c.seed, w)%cacheShards]
}

func (c *wordCache) get(w string) ([]int32, bool) {
	s := c.shard(w)
	s.mu.RLock()
	ids, ok := s.m[w]
	s.mu.RUnlock()
	return ids, ok
}

func (c *wordCache) put(w string, ids []int32) {
	s := c.shard(w)
	k, v := strings.Clone(w), slices.Clone(ids) // w may point into a large input
	s.mu.Lock()
	if len(s.m) >= cacheShardCap {
		clear(s.m)
	}
	s.m[k] = v
	s.mu.Unlock()
}
