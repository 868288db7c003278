package model

import (
	"fmt"
	"math"

	"github.com/artgo/art/engine/kernels"
	"github.com/artgo/art/internal/parallel"
)

// Acts holds the activations of a training forward pass over one sequence
// of up to cap tokens, sized once and reused across sequences.
type Acts struct {
	T, cap int
	// layers holds every layer's activations, or, when recompute is set,
	// only each layer's input (in): the rest is recomputed, one layer at a
	// time, into work during the backward pass.
	layers    []layerActs
	recompute bool
	work      layerActs // recompute: one layer's activations
	workNext  []float32 // recompute: the recomputed layer's output, discarded
	out       []float32 // (T, C) residual stream after the last layer
	rstdF     []float32 // (T)
	hidden    []float32 // (T, C) final-normed, input of the LM head
	// gradient scratch
	dres, dmid, dxn, dq, dk, dv, datt []float32
	dgate, dup, dh, dhidden           []float32
	tokens                            []int

	attn      attnWork  // training attention scratch
	rope      ropeTable // cos and sin for positions 0..cap-1
	ropeLocal ropeTable // the same for Family.LocalRope's sliding layers
	// family parts' gradient scratch (layerfamily.go)
	dqpre, dkpre, dy []float32
	head             headWork // LM-head chunk scratch
	moeWork          *moeWork // mixture-of-experts layers' gradient scratch, or nil

	// Base, when set, also receives gradients for every base weight (the
	// embedding and LM head, the RMSNorm weights and the projections):
	// full fine-tuning, used to build small base models from scratch.
	Base *BaseGrads
}

// BaseGrads are gradients of a model's embedding and norm weights, shaped
// like the model's (the embedding F32, V×C).
type BaseGrads struct {
	Embed     []float32   // (V, C); also the LM head's when tied
	LMHead    []float32   // (V, C) when untied
	AttnNorm  [][]float32 // per layer (C)
	MLPNorm   [][]float32 // per layer (C)
	FinalNorm []float32   // (C)
	// Proj holds per layer the gradients of the seven projection matrices,
	// indexed by Module, each shaped like its weight (out, in).
	Proj [][NumModules][]float32
	// The family's extra norms, per layer; nil when it has none.
	QNorm, KNorm            [][]float32 // (HD)
	AttnOutNorm, MLPOutNorm [][]float32 // (C)
	// Mixture-of-experts layers: the router's and each expert's
	// gradients (their Proj entries of gate, up and down are nil); nil
	// for a dense layer.
	Router  [][]float32 // (E, C)
	Experts [][]ExpertGrads
}

// ExpertGrads are one expert's weight gradients, shaped like its weights.
type ExpertGrads struct{ Gate, Up, Down []float32 }

// NewBaseGrads allocates zeroed gradients for every base weight of m.
func (m *Model) NewBaseGrads() *BaseGrads {
	cfg := m.Config
	C, V := cfg.HiddenSize, cfg.VocabSize
	g := &BaseGrads{Embed: make([]float32, V*C), FinalNorm: make([]float32, C)}
	if !cfg.TieWordEmbeddings {
		g.LMHead = make([]float32, V*C)
	}
	for l := range cfg.NumLayers {
		g.AttnNorm = append(g.AttnNorm, make([]float32, C))
		g.MLPNorm = append(g.MLPNorm, make([]float32, C))
		var p [NumModules][]float32
		for mod := range NumModules {
			if *m.W.Layers[l].Proj(mod) != nil {
				out, in := mod.Dims(cfg)
				p[mod] = make([]float32, out*in)
			}
		}
		g.Proj = append(g.Proj, p)
		var router []float32
		var experts []ExpertGrads
		if cfg.IsMoE(l) {
			Fm := cfg.MoEIntermediateSize
			router = make([]float32, cfg.NumExperts*C)
			for range cfg.NumExperts {
				experts = append(experts, ExpertGrads{make([]float32, Fm*C), make([]float32, Fm*C), make([]float32, C*Fm)})
			}
		}
		g.Router = append(g.Router, router)
		g.Experts = append(g.Experts, experts)
	}
	g.addFamilyNorms(cfg)
	return g
}

// Slices returns every gradient buffer, in a fixed order matching
// (*Model).BaseParams.
func (g *BaseGrads) Slices() [][]float32 {
	out := [][]float32{g.Embed, g.FinalNorm}
	if g.LMHead != nil {
		out = append(out, g.LMHead)
	}
	out = append(out, g.AttnNorm...)
	out = append(out, g.MLPNorm...)
	for l, p := range g.Proj {
		for _, d := range p {
			if d != nil {
				out = append(out, d)
			}
		}
		if g.Router[l] != nil {
			out = append(out, g.Router[l])
		}
		for _, e := range g.Experts[l] {
			out = append(out, e.Gate, e.Up, e.Down)
		}
	}
	for _, n := range [][][]float32{g.QNorm, g.KNorm, g.AttnOutNorm, g.MLPOutNorm} {
		out = append(out, n...)
	}
	return out
}

// BaseParams returns the trainable base parameters matching
// BaseGrads.Slices. The matrices must be F32. After changing them call
// RefreshBase: matrices are immutable to the kernels once used.
func (m *Model) BaseParams() ([][]float32, error) {
	if m.W.Embed.DType != kernels.F32 || m.W.LMHead.DType != kernels.F32 {
		return nil, fmt.Errorf("model: full fine-tuning needs F32 weights, have %v", m.W.Embed.DType)
	}
	out := [][]float32{m.W.Embed.F32, m.W.FinalNorm}
	if !m.Config.TieWordEmbeddings {
		out = append(out, m.W.LMHead.F32)
	}
	for l := range m.W.Layers {
		out = append(out, m.W.Layers[l].AttnNorm)
	}
	for l := range m.W.Layers {
		out = append(out, m.W.Layers[l].MLPNorm)
	}
	for l := range m.W.Layers {
		// The order of BaseGrads.Slices: the projections, the router,
		// each expert's gate, up and down.
		for _, lm := range m.W.Layers[l].mats() {
			w := *lm.p
			if w.DType != kernels.F32 {
				return nil, fmt.Errorf("model: full fine-tuning needs F32 weights, layer %d %s is %v", l, lm.name, w.DType)
			}
			out = append(out, w.F32)
		}
	}
	return append(out, m.familyNormParams()...), nil
}

// RefreshBase rebuilds every F32 matrix after its data changed, so the
// kernels do not use stale packed copies. It copies the data into new
// matrices; BaseParams then returns the new slices.
func (m *Model) RefreshBase() {
	C, V := m.Config.HiddenSize, m.Config.VocabSize
	for l := range m.W.Layers {
		for _, lm := range m.W.Layers[l].mats() {
			if p := lm.p; (*p).DType == kernels.F32 {
				*p = kernels.NewMatF32((*p).Rows, (*p).Cols, append([]float32(nil), (*p).F32...))
			}
		}
	}
	m.W.Embed = kernels.NewMatF32(V, C, append([]float32(nil), m.W.Embed.F32...))
	if m.Config.TieWordEmbeddings {
		m.W.LMHead = m.W.Embed
	} else {
		m.W.LMHead = kernels.NewMatF32(V, C, append([]float32(nil), m.W.LMHead.F32...))
	}
}

// NewActs allocates activations for training sequences of up to maxT tokens.
func (m *Model) NewActs(maxT int) *Acts { return m.newActs(maxT, false) }

// NewRecomputeActs is NewActs with activation recomputation: the forward
// pass keeps only each layer's input, and the backward pass recomputes one
// layer's activations at a time from it. Activation memory drops from
// about (5C + 2Q + 2KV + 3F)·T floats per layer to C·T (Qwen2.5-0.5B: 23×
// less) for one more forward pass per step (about a third more compute).
// Gradients are bit-identical to NewActs'.
func (m *Model) NewRecomputeActs(maxT int) *Acts { return m.newActs(maxT, true) }

func (m *Model) newActs(maxT int, recompute bool) *Acts {
	cfg := m.Config
	C, Q, KV, F := cfg.HiddenSize, cfg.QDim(), cfg.KVDim(), cfg.IntermediateSize
	f := func(n int) []float32 { return make([]float32, n) }
	// layerFor allocates a layer's activations: a dense MLP's, a
	// mixture's, or (the recomputing work space) both.
	layerFor := func(dense, experts bool) layerActs {
		s := layerActs{
			in: f(maxT * C), rstd1: f(maxT), xn1: f(maxT * C), q: f(maxT * Q), k: f(maxT * KV), v: f(maxT * KV),
			att: f(maxT * Q), mid: f(maxT * C), rstd2: f(maxT), xn2: f(maxT * C),
		}
		if dense {
			s.gate, s.up, s.h = f(maxT*F), f(maxT*F), f(maxT*F)
		}
		if experts {
			s.moe = newMoEActs(cfg, maxT, false)
		}
		m.familyActs(&s, maxT)
		return s
	}
	a := &Acts{cap: maxT, layers: make([]layerActs, cfg.NumLayers), recompute: recompute}
	for l := range a.layers {
		if recompute {
			a.layers[l] = layerActs{in: f(maxT * C)}
		} else {
			a.layers[l] = layerFor(!cfg.IsMoE(l), cfg.IsMoE(l))
		}
	}
	if recompute {
		a.work = layerFor(true, cfg.NumExperts > 0)
		a.work.in = nil // points at the recomputed layer's stored input
		a.workNext = f(maxT * C)
	}
	a.out, a.rstdF, a.hidden = f(maxT*C), f(maxT), f(maxT*C)
	pos := make([]int, maxT)
	for t := range pos {
		pos[t] = t
	}
	m.setRopes(&a.rope, &a.ropeLocal, pos)
	a.dqpre, a.dkpre, a.dy = f(maxT*Q), f(maxT*KV), f(maxT*C)
	a.dres, a.dmid, a.dxn, a.dhidden = f(maxT*C), f(maxT*C), f(maxT*C), f(maxT*C)
	a.dq, a.datt, a.dk, a.dv = f(maxT*Q), f(maxT*Q), f(maxT*KV), f(maxT*KV)
	a.dgate, a.dup, a.dh = f(maxT*F), f(maxT*F), f(maxT*F)
	if cfg.NumExperts > 0 {
		a.moeWork = newMoEWork(cfg, maxT)
	}
	return a
}

// layer returns the activations of layer l: its own, or, when
// recomputing, the shared work space pointed at its stored input.
func (a *Acts) layer(l int) *layerActs {
	if !a.recompute {
		return &a.layers[l]
	}
	a.work.in = a.layers[l].in
	return &a.work
}

// TrainForward runs one sequence through the model with adapter (may be
// nil), keeping every activation the backward pass needs. It returns the
// final-normed hidden states (T, C), valid until the next call with a.
func (m *Model) TrainForward(a *Acts, tokens []int, adapter Adapter) ([]float32, error) {
	cfg := m.Config
	T := len(tokens)
	if T == 0 || T > a.cap {
		return nil, fmt.Errorf("model: training sequence of %d tokens; activations hold 1..%d", T, a.cap)
	}
	if len(a.layers) != cfg.NumLayers {
		return nil, fmt.Errorf("model: activations were made for another model")
	}
	for i, id := range tokens {
		if id < 0 || id >= cfg.VocabSize {
			return nil, fmt.Errorf("model: token %d at index %d is outside the vocabulary [0, %d)", id, i, cfg.VocabSize)
		}
	}
	a.T = T
	a.tokens = append(a.tokens[:0], tokens...)
	C := cfg.HiddenSize
	embeddingForward(a.layers[0].in[:T*C], tokens, m.W.Embed)
	m.scaleEmbedding(a.layers[0].in[:T*C])
	p := &seqPass{m: m, a: a, adapter: adapter}
	for l := range m.W.Layers {
		next := a.out[:T*C]
		if l+1 < len(a.layers) {
			next = a.layers[l+1].in[:T*C]
		}
		m.layerForward(a.layer(l), T, l, m.layerRope(l, &a.rope, &a.ropeLocal), p, next)
	}
	hidden := a.hidden[:T*C]
	rmsNormForward(hidden, a.rstdF[:T], a.out[:T*C], m.W.FinalNorm, T, C, cfg.RMSNormEps)
	return hidden, nil
}

// seqPass runs the layers over one whole training sequence with one
// adapter (may be nil).
type seqPass struct {
	m       *Model
	a       *Acts
	adapter Adapter
}

func (p *seqPass) addDelta(out, inp []float32, l int, mod Module) {
	if p.adapter != nil {
		p.adapter.AddDelta(out, inp, p.a.T, l, mod)
	}
}

func (p *seqPass) addExpertDelta(out, inp []float32, rows []int32, l, e int, mod Module) {
	if p.adapter != nil {
		p.adapter.AddExpertDelta(out, inp, len(rows), l, e, mod)
	}
}

func (p *seqPass) attend(att, q, k, v []float32, l int) {
	cfg := p.m.Config
	trainAttentionForward(&p.a.attn, att, q, k, v, p.a.T, cfg.NumHeads, cfg.NumKVHeads, cfg.HeadDim, cfg.Window(l), l)
}

// backDelta is addDelta's backward pass: it accumulates the input
// gradient dinp and the adapter's parameter gradients, and with a.Base
// the projection's weight gradient, given dout and the forward input inp.
func (p *seqPass) backDelta(dinp, dout, inp []float32, l int, mod Module) {
	T := p.a.T
	if p.adapter != nil {
		p.adapter.BackwardDelta(dinp, dout, inp, T, l, mod)
	}
	if base := p.a.Base; base != nil { // dW (out, in) += doutᵀ · inp
		out, in := mod.Dims(p.m.Config)
		kernels.Gemm(true, false, out, in, T, dout, out, inp, in, 1, base.Proj[l][mod], in)
	}
}

// TrainBackward backpropagates dhidden (T, C), the loss gradient w.r.t. the
// hidden states TrainForward returned, through the frozen model into the
// adapter's parameter gradients (via Adapter.BackwardDelta). Base weights
// get no gradient.
func (m *Model) TrainBackward(a *Acts, dhidden []float32, adapter Adapter) {
	cfg := m.Config
	T, C := a.T, cfg.HiddenSize
	base := a.Base
	dres := a.dres[:T*C] // gradient w.r.t. the residual stream
	clear(dres)
	var dFinal []float32
	if base != nil {
		dFinal = base.FinalNorm
	}
	rmsNormBackward(dres, dFinal, dhidden[:T*C], a.out[:T*C], m.W.FinalNorm, a.rstdF[:T], T, C)
	p := &seqPass{m: m, a: a, adapter: adapter}
	for l := len(m.W.Layers) - 1; l >= 0; l-- {
		s := a.layer(l)
		if a.recompute {
			m.layerForward(s, T, l, m.layerRope(l, &a.rope, &a.ropeLocal), p, a.workNext[:T*C])
		}
		m.layerBackward(s, l, p, dres)
	}
	if base != nil {
		// The embedding lookup's gradient: each token's row gets its input's.
		m.scaleEmbedding(dres)
		for t, id := range a.tokens[:T] {
			addInPlace(base.Embed[id*C:(id+1)*C], dres[t*C:(t+1)*C])
		}
	}
}

// TokenLoss gives, for the i-th scored token, the loss's derivatives with
// respect to that token's log probability and to the entropy of its
// predictive distribution (an entropy bonus; 0 when the loss has none),
// given both.
type TokenLoss func(i int, logprob, entropy float64) (dlogprob, dentropy float64)

// HeadStats reports what LMHeadBackward computed for each scored token.
type HeadStats struct {
	Logprobs []float64
	Entropy  []float64
}

// HeadChunk is the number of scored rows LMHeadBackward takes at once (a
// benchmark replaying a step's products makes the same calls): the
// chunk's logits take HeadChunk·V floats (155 MB for a 151936-token
// vocabulary). Chunks this tall run the blocked GEMM, which on the fp32
// unit packs (widens) the head once per call in each direction (the bf16
// unit reads its forward panels in place and packs the input gradient's);
// per CPU second both products measured 10–15 % faster than in chunks of
// 128 or fewer rows, which stream the 16-bit weights instead, and about 40
// % faster than the 32-row chunks of the first version for the input
// gradient (kernels.BenchmarkLMHead).
const HeadChunk = 256

// headWork is LMHeadBackward's scratch for chunks of up to rows rows,
// reused across calls.
type headWork struct {
	rows    int
	in, din []float32 // (rows, C)
	logits  []float32 // (rows, V)
	sum     []float64 // (rows) Σ exp(z - max) per row
	g       []float64 // (rows) dL/dlogprob per row
	gH      []float64 // (rows) dL/dentropy per row
}

func (w *headWork) ensure(rows, C, V int) {
	if w.rows < rows || len(w.in) < rows*C || len(w.logits) < rows*V {
		*w = headWork{
			rows: rows, in: make([]float32, rows*C), din: make([]float32, rows*C),
			logits: make([]float32, rows*V), sum: make([]float64, rows), g: make([]float64, rows),
			gH: make([]float64, rows),
		}
	}
}

// LMHeadBackward scores the tokens targets[i] at hidden rows rows[i] (rows
// ascending, each < T): it computes their log probabilities and entropies
// from the LM head in chunks (never holding (T, V) logits), asks loss for
// dL/dlogprob and dL/dentropy, and writes dL/dhidden into a's gradient
// buffer, which it returns for TrainBackward. loss may be nil to only
// score; it is called from the caller's goroutine, in order.
func (m *Model) LMHeadBackward(a *Acts, rows, targets []int, loss TokenLoss) (HeadStats, []float32) {
	C, V := m.Config.HiddenSize, m.Config.VocabSize
	T := a.T
	dhidden := a.dhidden[:T*C]
	clear(dhidden)
	st := HeadStats{Logprobs: make([]float64, len(rows)), Entropy: make([]float64, len(rows))}
	// Sequences have at most cap rows, so shorter chunks do for them.
	chunk := min(HeadChunk, a.cap)
	w := &a.head
	w.ensure(chunk, C, V)
	in, logits, din, sums, gs, gHs := w.in, w.logits, w.din, w.sum, w.g, w.gH
	for i0 := 0; i0 < len(rows); i0 += chunk {
		n := min(chunk, len(rows)-i0)
		for i := 0; i < n; i++ {
			r := rows[i0+i]
			copy(in[i*C:(i+1)*C], a.hidden[r*C:(r+1)*C])
		}
		m.Logits(logits[:n*V], in[:n*C], n)
		// Row by row in parallel: log-softmax statistics, leaving
		// exp(z - max) in the logits.
		parallel.For(n, 1, func(lo, hi int) {
			for i := lo; i < hi; i++ {
				z := logits[i*V : (i+1)*V]
				tgt := targets[i0+i]
				zt := z[tgt]
				maxv := kernels.Max(z)
				sum, ez := kernels.ExpShift(z, maxv)
				logZ := math.Log(sum)
				// Rounded as the sampler rounds it (generate.Sampler.Next),
				// so that equal logits give equal logprobs, bit for bit.
				st.Logprobs[i0+i] = float64(zt) - (float64(maxv) + logZ)
				st.Entropy[i0+i] = logZ - ez/sum
				sums[i] = sum
			}
		})
		if loss == nil {
			continue
		}
		// d logp[tgt] / d z_j = 1[j = tgt] - p_j, p_j = exp(z_j - max)/sum.
		for i := 0; i < n; i++ {
			gs[i], gHs[i] = loss(i0+i, st.Logprobs[i0+i], st.Entropy[i0+i])
		}
		parallel.For(n, 1, func(lo, hi int) {
			for i := lo; i < hi; i++ {
				z := logits[i*V : (i+1)*V]
				if gHs[i] != 0 {
					entropyGrad(z, sums[i], st.Entropy[i0+i], gs[i], gHs[i])
				} else {
					kernels.Scale(float32(-gs[i]/sums[i]), z)
				}
				z[targets[i0+i]] += float32(gs[i])
			}
		})
		clear(din[:n*C])
		kernels.LinearBackwardInput(din[:n*C], logits[:n*V], m.W.LMHead, n)
		if a.Base != nil { // dW_head += dlogitsᵀ · hidden
			dW := a.Base.LMHead
			if dW == nil {
				dW = a.Base.Embed
			}
			kernels.Gemm(true, false, V, C, n, logits[:n*V], V, in[:n*C], C, 1, dW, C)
		}
		for i := 0; i < n; i++ {
			r := rows[i0+i]
			addInPlace(dhidden[r*C:(r+1)*C], din[i*C:(i+1)*C])
		}
	}
	return st, dhidden
}

// entropyGrad turns e = exp(z - max) of one row (Σe = sum, entropy H)
// into the gradient of g·logp[tgt] + gH·H with respect to z, all but the
// target's g·1[j = tgt]:
//
//	dH/dz_j = -p_j·(log p_j + H), so dz_j = -p_j·(g + gH·(log p_j + H)).
//
// log p_j = log e_j - log sum: taking the log again costs a log per
// vocabulary entry, paid only by a loss with an entropy term, where keeping
// z - max would cost another (rows, V) buffer on every call. A p_j that
// underflowed to 0 contributes 0, the limit of p·log p.
func entropyGrad(e []float32, sum, H, g, gH float64) {
	logSum := math.Log(sum)
	for j, ej := range e {
		if ej == 0 {
			continue
		}
		p := float64(ej) / sum
		e[j] = float32(-p * (g + gH*(math.Log(float64(ej))-logSum+H)))
	}
}

// Cap returns the longest sequence a can hold.
func (a *Acts) Cap() int { return a.cap }
