package model

import (
	"math"
	"runtime"
	"slices"
	"sync"

	"github.com/artgo/art/engine/kernels"
	"github.com/artgo/art/internal/parallel"
)

// Causal grouped-query attention. Two loops compute it: attentionHead and
// attentionGroup below, for tokens appended to a KV cache (inference:
// prefill and decode), and the block-causal pass of trainattn.go over one whole
// training sequence, which also has the backward pass. Both use the
// softmax helpers at the end of this file, and both sum every product in
// the same order, so sampler and trainer agree bit for bit.

// kvRows is one kv head's cached keys and values (a cache's lane) from
// its first kept position, as attention reads them: the first pre
// positions (a whole number of attention blocks) from a prefix shared
// with other caches (KVCache.Fork), the rest from the cache's own key
// blocks (panels of HD×keyBlock) and value rows (HD values). Without a
// shared prefix, pre is 0.
type kvRows struct {
	preK, preV []float32
	pre        int
	k, v       []float32
}

// at returns the key blocks and value rows from key j on (a multiple of
// attnBlock): the prefix's before pre, the cache's own after.
func (r kvRows) at(j, HD int) (k, v []float32) {
	if j < r.pre {
		return r.preK[j*HD:], r.preV[j*HD:]
	}
	return r.k[(j-r.pre)*HD:], r.v[(j-r.pre)*HD:]
}

// attentionHead computes, for query head h, causal attention for n new
// tokens of one sequence whose keys and values (post-RoPE) are already in
// the cache at rows [0, start+n) of kv, the lane of h's kv head (rows
// count from the cache's first kept position, see KVCache). q is
// (n, NH*HD) for the new tokens, out is (n, NH*HD). Token i (absolute
// position start+i) attends to cache positions 0..start+i. p
// (≥ n·(start+n) values) is scratch for the scores.
func attentionHead(pr headProducts, out, q []float32, kv kvRows, start, n, h, NH, HD int, p []float32, window int) {
	Q := NH * HD
	attendRows(pr, out[h*HD:], Q, q[h*HD:], Q, kv, n, start+n, start+1, 1, HD, p, window)
}

// attentionGroup is attentionHead for one new token (decoding) and all
// query heads of kv head kvh (whose lane kv is) at once: the heads are
// the rows of the products (q and out rows HD apart), so the keys are
// read once for the group instead of once per head.
func attentionGroup(pr headProducts, out, q []float32, kv kvRows, start, kvh, NH, KVH, HD int, p []float32, window int) {
	G := NH / KVH
	o := kvh * G * HD
	tk := start + 1
	attendRows(pr, out[o:], HD, q[o:], HD, kv, G, tk, tk, 0, HD, p, window)
}

// attendRows computes M rows of attention over the first tk cached keys
// and values of one kv head (kv: key blocks of stride HD·keyBlock, value
// rows of stride HD). q row i (stride ldq) sees the first
// first+i·step keys (of which only the last window when window > 0), and
// its output goes to out row i (stride ldo). p is scratch for the scores:
// M·tk values when decoding (step 0), min(M, attendTile)·tk for a prompt.
//
// It forms the (M, tk) score matrix (a prompt's a tile of rows at a time),
// applies the causal mask and softmax row by row, and multiplies by V per
// key block of attnBlock, as the
// trainer does (trainAttentionForward): every product sums in the same
// order as there, so a token's logprobs equal the trainer's bit for bit
// (the keys a token does not see have probability 0 and leave the sums
// alone). A shared prefix's keys are whole blocks, summed as the cache's
// own would be. With step 1 (a prompt's tokens) each key block's products
// take only the rows that see a key of it, as the trainer's do: of a
// 512-token prompt's products about 9/16 remain. With step 0 (decoding:
// every row sees every key) each product is one call per source of keys.
func attendRows(pr headProducts, out []float32, ldo int, q []float32, ldq int, kv kvRows, M, tk, first, step, HD int, p []float32, window int) {
	scale := attnScale(HD)
	ps := HD * keyBlock // panel stride of the key blocks
	if step == 0 {
		p = p[:M*tk]
		if kv.pre > 0 {
			pr.gemmPanels(M, kv.pre, HD, q, ldq, kv.preK, ps, p, tk)
		}
		pr.gemmPanels(M, tk-kv.pre, HD, q, ldq, kv.k, ps, p[kv.pre:], tk)
		for i := range M {
			softmaxWindow(p[i*tk:(i+1)*tk], firstKey(first-1, window), first, scale)
		}
		// In the same key blocks as below.
		if kv.pre > 0 {
			pr.gemmKBlocks(M, HD, kv.pre, attnBlock, p, tk, kv.preV, HD, out, ldo)
			pr.gemmKBlocksAdd(M, HD, tk-kv.pre, attnBlock, p[kv.pre:], tk, kv.v, HD, out, ldo)
			return
		}
		pr.gemmKBlocks(M, HD, tk, attnBlock, p, tk, kv.v, HD, out, ldo)
		return
	}
	// A prompt's rows go in tiles of attendTile: a tile's scores (its rows
	// by the keys its last row sees) stay in the core's L2 from the
	// products through the softmax to the product with V, where the whole
	// M×tk matrix of a 2048-token prompt (16 MB a head) went to memory and
	// back between the passes. Each score and each block's sum is the same
	// product as over all rows at once (the kernels' sums do not depend on
	// the rows beside them), so the bits are too.
	// rowsFrom is the first row that sees key j.
	rowsFrom := func(j int) int { return max(0, (j-first+step)/step) }
	for r0 := 0; r0 < M; r0 += attendTile {
		r1 := min(M, r0+attendTile)
		ldp := blockEnd(first+(r1-1)*step-1, tk) // the keys of row r1-1's blocks
		pt := p[:(r1-r0)*ldp]
		for j0 := 0; j0 < ldp; j0 += attnBlock {
			i0 := max(r0, rowsFrom(j0))
			k, _ := kv.at(j0, HD)
			pr.gemmPanels(r1-i0, min(ldp, j0+attnBlock)-j0, HD, q[i0*ldq:], ldq, k, ps, pt[(i0-r0)*ldp+j0:], ldp)
		}
		for i := r0; i < r1; i++ {
			visible := first + i*step
			softmaxWindow(pt[(i-r0)*ldp:(i-r0)*ldp+blockEnd(visible-1, tk)], firstKey(visible-1, window), visible, scale)
		}
		for j0 := 0; j0 < ldp; j0 += attnBlock {
			i0 := max(r0, rowsFrom(j0))
			beta := float32(1)
			if j0 == 0 {
				beta = 0
			}
			_, v := kv.at(j0, HD)
			pr.gemm(false, false, r1-i0, HD, min(ldp, j0+attnBlock)-j0, pt[(i0-r0)*ldp+j0:], ldp, v, HD, beta, out[i0*ldo:], ldo)
		}
	}
}

// attendTile is the rows of a prompt's attention computed together
// (attendRows): 64 rows by 2048 keys of scores are 512 KiB.
const attendTile = 64

// attentionSegments runs attention at layer l for every segment of a
// batch (whose q rows and outputs start at row offs[i] of q and out), with
// all units in one parallel loop: a (segment, kv head) pair for a segment
// of one token (attentionGroup), a (segment, query head) pair for longer
// ones (attentionHead), and a (shared prefix, kv head, run of segments)
// triple for one-token segments whose caches share a prefix
// (attentionShared). Decoding n sequences then costs one fork-join per
// layer instead of n.
func attentionSegments(out, q []float32, segs []Segment, offs []int, l, NH, KVH, HD, window int) {
	Q := NH * HD
	type unit struct {
		seg, head int
		group     *sharedGroup // if set, run of its members (seg unused)
		run       []int
	}
	var units []unit
	groups := sharedDecodes(segs, l, window)
	for gi := range groups {
		// A group's rows in as few runs as give every goroutine a unit:
		// the fewer, the more rows each product has, and the fewer times
		// the prefix is read.
		g := &groups[gi]
		n := len(g.members)
		runs := min(n, max(1, ceilDiv(runtime.GOMAXPROCS(0), KVH*len(groups))))
		for r := range runs {
			for h := range KVH {
				units = append(units, unit{head: h, group: g, run: g.members[r*n/runs : (r+1)*n/runs]})
			}
		}
	}
	for i, s := range segs {
		n := NH
		if s.N == 1 {
			if slices.ContainsFunc(groups, func(g sharedGroup) bool { return slices.Contains(g.members, i) }) {
				continue
			}
			n = KVH
		}
		for h := range n {
			units = append(units, unit{seg: i, head: h})
		}
	}
	G := NH / KVH
	pr := productsFor(len(units), attnWorkers())
	parallel.For(len(units), 1, func(lo, hi int) {
		var sp *[]float32
		scratch := func(need int) []float32 {
			if sp == nil || cap(*sp) < need {
				if sp != nil {
					scorePool.Put(sp)
				}
				sp = getScores(need)
			}
			return (*sp)[:need]
		}
		for _, u := range units[lo:hi] {
			if u.group != nil {
				attentionShared(pr, out, q, segs, offs, *u.group, u.run, l, u.head, NH, KVH, HD, scratch)
				continue
			}
			s, t0 := segs[u.seg], offs[u.seg]
			// The cache's first kept key is position first (see KVCache):
			// positions here count from it, and it is a whole number of
			// attnBlock, so attendRows sums in the same blocks as over
			// every position.
			start := s.Cache.Len - s.Cache.layerFirst(l)
			tk := start + s.N
			need := min(s.N, attendTile) * tk // attendRows's scores
			if s.N == 1 {
				need = G * tk
			}
			o, qs := out[t0*Q:(t0+s.N)*Q], q[t0*Q:(t0+s.N)*Q]
			if s.N == 1 {
				attentionGroup(pr, o, qs, s.Cache.head(l, u.head), start, u.head, NH, KVH, HD, scratch(need), window)
			} else {
				attentionHead(pr, o, qs, s.Cache.head(l, u.head/G), start, s.N, u.head, NH, HD, scratch(need), window)
			}
		}
		if sp != nil {
			scorePool.Put(sp)
		}
	})
}

// shareDecodeRows enables attentionShared (benchmarks flip it for an A/B
// against one unit per segment in one process).
var shareDecodeRows = true

func ceilDiv(a, b int) int { return (a + b - 1) / b }

// sharedGroup is the one-token segments of a batch that read one shared
// prefix at a layer: fork is one whose cache reads it from another's
// (KVCache.Fork), members all of them, forks and the cache they were
// forked from alike.
type sharedGroup struct {
	fork    int
	members []int
}

// sharedDecodes returns the groups of at least two one-token segments of a
// batch whose caches share a prefix at layer l: a decoding group's
// samples. A fork's prefix is another cache's key blocks (KVCache.Fork);
// the cache they were forked from joins its forks, its own keys up to the
// forks' pre being that prefix. Sliding-window layers copy their keys on a
// fork and share nothing.
func sharedDecodes(segs []Segment, l, window int) []sharedGroup {
	if window > 0 || !shareDecodeRows {
		return nil
	}
	type prefix struct {
		k   *float32
		pre int
	}
	var keys []prefix
	var groups []sharedGroup
	for i, s := range segs {
		if s.N != 1 {
			continue
		}
		kv := s.Cache.head(l, 0)
		if kv.pre == 0 {
			continue
		}
		key := prefix{&kv.preK[0], kv.pre}
		j := slices.Index(keys, key)
		if j < 0 {
			keys, groups = append(keys, key), append(groups, sharedGroup{fork: i})
			j = len(keys) - 1
		}
		groups[j].members = append(groups[j].members, i)
	}
	// Then the caches forked from: their own lane 0 is a group's prefix.
	for i, s := range segs {
		if kv := s.Cache.head(l, 0); s.N != 1 || kv.pre > 0 || len(kv.k) == 0 || s.Cache.layerFirst(l) != 0 {
			continue
		}
		for j, key := range keys {
			if &s.Cache.head(l, 0).k[0] == key.k && s.Cache.Len >= key.pre {
				groups[j].members = append(groups[j].members, i)
				break
			}
		}
	}
	return slices.DeleteFunc(groups, func(g sharedGroup) bool { return len(g.members) < 2 })
}

// attentionShared is attentionGroup for kv head kvh of several one-token
// segments (members, of group g) that share a prefix: the rows of all
// their query heads meet the prefix's keys and values in one product each,
// so the prefix is read once for them all and the products run on the
// kernels' widest tiles, where one segment's G rows ran as 6 + 1. Each
// segment's keys after the prefix are its own products, as in
// attentionGroup; every row sums in the same order and the same blocks as
// there (the kernels' sums do not depend on the rows beside them, and a
// cache's keys sum in attention blocks wherever they are stored), so the
// bits are attentionGroup's. scratch returns a buffer of n values.
func attentionShared(pr headProducts, out, q []float32, segs []Segment, offs []int, g sharedGroup, members []int, l, kvh, NH, KVH, HD int, scratch func(n int) []float32) {
	Q, G := NH*HD, NH/KVH
	M := len(members) * G
	shared := segs[g.fork].Cache.head(l, kvh)
	pre := shared.pre
	ldp := 0
	for _, i := range members {
		ldp = max(ldp, segs[i].Cache.Len+1)
	}
	buf := scratch(M*ldp + 2*M*HD)
	p, qg, og := buf[:M*ldp], buf[M*ldp:M*ldp+M*HD], buf[M*ldp+M*HD:]
	for r, i := range members {
		copy(qg[r*G*HD:(r+1)*G*HD], q[offs[i]*Q+kvh*G*HD:])
	}
	ps := HD * keyBlock
	pr.gemmPanels(M, pre, HD, qg, HD, shared.preK, ps, p, ldp)
	scale := attnScale(HD)
	for r, i := range members {
		tk := segs[i].Cache.Len + 1
		k, _ := segs[i].Cache.head(l, kvh).at(pre, HD)
		pm := p[r*G*ldp:] // the member's scores
		pr.gemmPanels(G, tk-pre, HD, qg[r*G*HD:], HD, k, ps, pm[pre:], ldp)
		for h := range G {
			softmaxWindow(pm[h*ldp:h*ldp+tk], firstKey(tk-1, 0), tk, scale)
		}
	}
	pr.gemmKBlocks(M, HD, pre, attnBlock, p, ldp, shared.preV, HD, og, HD)
	for r, i := range members {
		tk := segs[i].Cache.Len + 1
		_, v := segs[i].Cache.head(l, kvh).at(pre, HD)
		pr.gemmKBlocksAdd(G, HD, tk-pre, attnBlock, p[r*G*ldp+pre:], ldp, v, HD, og[r*G*HD:], HD)
		copy(out[offs[i]*Q+kvh*G*HD:offs[i]*Q+(kvh+1)*G*HD], og[r*G*HD:(r+1)*G*HD])
	}
}

// scorePool recycles the attention score scratch between calls.
var scorePool sync.Pool

func getScores(n int) *[]float32 {
	if p, ok := scorePool.Get().(*[]float32); ok {
		if cap(*p) >= n {
			*p = (*p)[:n]
			return p
		}
	}
	s := make([]float32, n)
	return &s
}

// attnScale is the factor of the attention scores, 1/√HD.
func attnScale(HD int) float32 { return float32(1 / math.Sqrt(float64(HD))) }

// softmaxCausal turns row (scores of one query) into probabilities over
// its first visible entries after scaling, and zeroes the masked rest. The
// sum runs in float64.
func softmaxCausal(row []float32, visible int, scale float32) {
	v := row[:visible]
	kernels.Scale(scale, v)
	sum := kernels.ExpShiftSum(v, kernels.Max(v))
	kernels.Scale(float32(1/sum), v)
	clear(row[visible:])
}

// softmaxCausalBackward turns dp, the gradient w.r.t. a row p of
// softmaxCausal's output with visible entries, into the gradient w.r.t. its
// scores before scaling, in place: dS = P∘(dP − Σ_j P∘dP)·scale, zero where
// masked.
func softmaxCausalBackward(dp, p []float32, visible int, scale float32) {
	kernels.SoftmaxGrad(dp[:visible], p[:visible], kernels.Dot(p[:visible], dp[:visible]), scale)
	clear(dp[visible:])
}
