package model

import (
	"runtime"
	"sync/atomic"

	"github.com/artgo/art/engine/kernels"
	"github.com/artgo/art/internal/parallel"
)

// Causal attention for the training passes, over one whole sequence (T
// tokens at positions 0..T-1). It computes what attentionHead computes for
// a cache holding just the sequence, but skips the masked upper triangle
// block-wise, keeps its scratch in a reusable workspace and has a backward
// pass.
//
// Keys are cut into blocks of attnBlock. Score block jb, S[j0:T, j0:j1] =
// Q[j0:T]·K[j0:j1]ᵀ, holds every query that sees any key of the block; the
// blocks right of the diagonal block of a row are never formed, read or
// written. Every product then runs per key block with B = that block of K
// or V, so B is packed once per block, as in one full product, and about
// (nb+1)/(2nb) of the full work remains (9/16 at T = 512).
//
// The work is split by query head. (Stacking the query heads of a kv head
// into taller products measured 10–25 % slower per CPU second: their
// (G·T, T) probabilities no longer fit in L2.)
const attnBlock = 64

// attnWork is the training attention's scratch, sized for up to cap tokens
// and reused across calls.
type attnWork struct {
	cap int
	// p and dp are per worker (T, T) matrices (row stride T) of the
	// probabilities and their gradient; only the block lower triangle is
	// used.
	p, dp [][]float32
	// dkh and dvh (T, Q) hold each query head's share of dk and dv, which
	// are summed per kv head in a fixed order, so results do not depend on
	// which worker ran which head.
	dkh, dvh []float32
	// kp and vp hold the sequence's keys and values as key blocks (the KV
	// cache's layout, putKeys), so the products with Kᵀ and Vᵀ read them
	// in place (kernels.GemmPanels) instead of transposing a block per
	// query head.
	kp, vp []float32
	// kept[l] holds layer l's probabilities from the forward pass, one
	// (T, T) matrix per query head, so the backward pass reads them
	// instead of recomputing the scores (the same bits: the same
	// products); keptT[l] is the T they were computed for (0: none). Only
	// the first layers whose matrices fit keptBudget are kept.
	kept  [][]float32
	keptT []int
}

// keptBudget bounds the memory of attnWork.kept: all of a tiny model's
// layers at ~1,000 tokens (where recomputing the scores was ~15 % of a
// full-SFT step), a few of a 0.5B model's at 512.
const keptBudget = 64 << 20

// keptProbs returns the buffer for layer's probabilities of nh heads over
// T tokens, or nil when keeping them would exceed keptBudget (or layer is
// negative: a caller that does not run the backward pass).
func (w *attnWork) keptProbs(layer, nh, T int) []float32 {
	n := nh * T * T
	if layer < 0 || (layer+1)*n*4 > keptBudget {
		return nil
	}
	for len(w.kept) <= layer {
		w.kept = append(w.kept, nil)
		w.keptT = append(w.keptT, 0)
	}
	if cap(w.kept[layer]) < n {
		w.kept[layer] = make([]float32, n, min(nh*w.cap*w.cap, keptBudget/4/(layer+1)))
	}
	return w.kept[layer][:n]
}

// ensure sizes w for T tokens, Q query and KV key columns and n workers.
func (w *attnWork) ensure(T, Q, KV, n int) {
	if T > w.cap {
		*w = attnWork{cap: T}
	}
	for len(w.p) < n {
		w.p = append(w.p, make([]float32, w.cap*w.cap))
		w.dp = append(w.dp, make([]float32, w.cap*w.cap))
	}
	if len(w.dkh) < w.cap*Q {
		w.dkh = make([]float32, w.cap*Q)
		w.dvh = make([]float32, w.cap*Q)
	}
	if len(w.kp) < keyRows(w.cap)*KV {
		w.kp = make([]float32, keyRows(w.cap)*KV)
		w.vp = make([]float32, keyRows(w.cap)*KV)
	}
}

// forHeads runs fn(worker, h) for every head h in [0, n) on up to workers
// goroutines (the caller's and the shared pool's, parallel.Run) that take
// heads in turn from a shared counter, so a descheduled goroutine holds up
// one head, not a fixed share. worker < workers identifies the goroutine's
// scratch.
func forHeads(n, workers int, fn func(worker, h int)) {
	var next, joined atomic.Int64
	parallel.Run(min(n, workers), func() {
		w := int(joined.Add(1) - 1) // Run calls this at most min(n, workers) times
		for {
			h := int(next.Add(1) - 1)
			if h >= n {
				return
			}
			fn(w, h)
		}
	})
}

// headProducts are the products one head runs: kernels.Gemm, GemmPanels,
// GemmKBlocks and GemmKBlocksAdd, or their serial forms (the same bits).
type headProducts struct {
	gemm           func(transA, transB bool, M, N, K int, A []float32, lda int, B []float32, ldb int, beta float32, C []float32, ldc int)
	gemmPanels     func(M, N, K int, A []float32, lda int, B []float32, pstride int, C []float32, ldc int)
	gemmKBlocks    func(M, N, K, kb int, A []float32, lda int, B []float32, ldb int, C []float32, ldc int)
	gemmKBlocksAdd func(M, N, K, kb int, A []float32, lda int, B []float32, ldb int, C []float32, ldc int)
}

// productsFor returns the products of nh heads (or units of attention)
// shared by workers goroutines. With a head on every core, each head's
// products run on its own goroutine: forked, thousands a step, they found
// no idle core to hand work to, and the pool helper they woke took turns
// with the heads' goroutines on the cores (BenchmarkTrainAttention at
// T = 512 took 10–15 % more CPU time on an idle 2-core machine, 30–40 % on
// a busy one). With fewer heads than workers they fork as usual.
func productsFor(nh, workers int) headProducts {
	if nh >= workers {
		return headProducts{kernels.GemmSerial, kernels.GemmPanelsSerial, kernels.GemmKBlocksSerial, kernels.GemmKBlocksAddSerial}
	}
	return headProducts{kernels.Gemm, kernels.GemmPanels, kernels.GemmKBlocks, kernels.GemmKBlocksAdd}
}

func attnWorkers() int { return runtime.GOMAXPROCS(0) }

// blockEnd is the end of the key block holding key i: the columns of row
// i that the products read.
func blockEnd(i, T int) int { return min(T, (i/attnBlock+1)*attnBlock) }

// scoresCausal sets p (T, T) to the attention probabilities of query head
// h: the block lower triangle of softmax(scale·Q·Kᵀ) with the causal mask,
// zero right of the diagonal within each diagonal block. kp holds the keys
// as key blocks (attnWork.kp).
func scoresCausal(pr headProducts, p, q, kp []float32, h, kvh, T, Q, KV, HD int, scale float32, window int) {
	for j0 := 0; j0 < T; j0 += attnBlock {
		j1 := min(T, j0+attnBlock)
		pr.gemmPanels(T-j0, j1-j0, HD, q[j0*Q+h*HD:], Q, kp[j0*KV+kvh*HD*keyBlock:], KV*keyBlock, p[j0*T+j0:], T)
	}
	for i := 0; i < T; i++ {
		softmaxWindow(p[i*T:i*T+blockEnd(i, T)], firstKey(i, window), i+1, scale)
	}
}

// trainAttentionForward is causal attention over a whole sequence: out
// (T, Q) from q (T, Q) and k, v (T, KV), all post-RoPE. It keeps the
// probabilities of layer (if they fit) for trainAttentionBackward of the
// same layer and inputs; layer < 0 keeps nothing.
func trainAttentionForward(w *attnWork, out, q, k, v []float32, T, NH, KVH, HD, window, layer int) {
	Q, KV := NH*HD, KVH*HD
	group := NH / KVH
	scale := attnScale(HD)
	nw := attnWorkers()
	w.ensure(T, Q, KV, nw)
	putKeys(w.kp, 0, k[:T*KV], KV)
	kept := w.keptProbs(layer, NH, T)
	if kept != nil {
		w.keptT[layer] = 0 // until every head's are in
	}
	pr := productsFor(NH, nw)
	forHeads(NH, nw, func(wk, h int) {
		kvh := h / group
		p := w.p[wk]
		if kept != nil {
			p = kept[h*T*T : (h+1)*T*T]
		}
		scoresCausal(pr, p, q, w.kp, h, kvh, T, Q, KV, HD, scale, window)
		// O[j0:T] (+)= P[j0:T, j0:j1]·V[j0:j1], key block by key block.
		for j0 := 0; j0 < T; j0 += attnBlock {
			j1 := min(T, j0+attnBlock)
			beta := float32(1)
			if j0 == 0 {
				beta = 0
			}
			pr.gemm(false, false, T-j0, HD, j1-j0, p[j0*T+j0:], T, v[j0*KV+kvh*HD:], KV, beta, out[j0*Q+h*HD:], Q)
		}
	})
	if kept != nil {
		w.keptT[layer] = T
	}
}

// trainAttentionBackward is trainAttentionForward's gradient: given dout
// (T, Q) it accumulates dq (T, Q), dk and dv (T, KV). It must follow the
// forward pass of the same layer and inputs (as Model.TrainBackward
// follows TrainForward): the probabilities that pass kept are read, the
// others are recomputed per head, one (T, T) matrix per worker at a time.
// layer < 0 recomputes them all.
func trainAttentionBackward(w *attnWork, dq, dk, dv, dout, q, k, v []float32, T, NH, KVH, HD, window, layer int) {
	Q, KV := NH*HD, KVH*HD
	group := NH / KVH
	scale := attnScale(HD)
	nw := attnWorkers()
	w.ensure(T, Q, KV, nw)
	var kept []float32
	if layer >= 0 && layer < len(w.keptT) && w.keptT[layer] == T {
		kept = w.kept[layer][:NH*T*T]
		w.keptT[layer] = 0 // read once
	}
	if kept == nil { // the scores are recomputed
		putKeys(w.kp, 0, k[:T*KV], KV)
	}
	putKeys(w.vp, 0, v[:T*KV], KV)
	dkh, dvh := w.dkh[:T*Q], w.dvh[:T*Q]
	pr := productsFor(NH, nw)
	forHeads(NH, nw, func(wk, h int) {
		kvh := h / group
		p, dp := w.p[wk], w.dp[wk]
		if kept != nil {
			p = kept[h*T*T : (h+1)*T*T]
		} else {
			scoresCausal(pr, p, q, w.kp, h, kvh, T, Q, KV, HD, scale, window)
		}
		for j0 := 0; j0 < T; j0 += attnBlock {
			j1 := min(T, j0+attnBlock)
			pb, dpb := p[j0*T+j0:], dp[j0*T+j0:]
			// dV_h[j0:j1] = P[j0:T, j0:j1]ᵀ·dO[j0:T]; dP[j0:T, j0:j1] = dO[j0:T]·V[j0:j1]ᵀ
			pr.gemm(true, false, j1-j0, HD, T-j0, pb, T, dout[j0*Q+h*HD:], Q, 0, dvh[j0*Q+h*HD:], Q)
			pr.gemmPanels(T-j0, j1-j0, HD, dout[j0*Q+h*HD:], Q, w.vp[j0*KV+kvh*HD*keyBlock:], KV*keyBlock, dpb, T)
		}
		// dS = P∘(dP − Σ_j P∘dP)·scale, row by row (masked entries have P = 0).
		for i := 0; i < T; i++ {
			e := blockEnd(i, T)
			softmaxCausalBackward(dp[i*T:i*T+e], p[i*T:i*T+e], i+1, scale)
		}
		for j0 := 0; j0 < T; j0 += attnBlock {
			j1 := min(T, j0+attnBlock)
			dsb := dp[j0*T+j0:]
			// dQ[j0:T] += dS[j0:T, j0:j1]·K[j0:j1]; dK_h[j0:j1] = dS[j0:T, j0:j1]ᵀ·Q[j0:T]
			pr.gemm(false, false, T-j0, HD, j1-j0, dsb, T, k[j0*KV+kvh*HD:], KV, 1, dq[j0*Q+h*HD:], Q)
			pr.gemm(true, false, j1-j0, HD, T-j0, dsb, T, q[j0*Q+h*HD:], Q, 0, dkh[j0*Q+h*HD:], Q)
		}
	})
	// dk, dv (kv head g) += Σ over g's query heads, in head order.
	for t := 0; t < T; t++ {
		for h := 0; h < NH; h++ {
			kvh := h / group
			kernels.Axpy(1, dkh[t*Q+h*HD:t*Q+(h+1)*HD], dk[t*KV+kvh*HD:t*KV+(kvh+1)*HD])
			kernels.Axpy(1, dvh[t*Q+h*HD:t*Q+(h+1)*HD], dv[t*KV+kvh*HD:t*KV+(kvh+1)*HD])
		}
	}
}
