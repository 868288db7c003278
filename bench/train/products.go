package main

import (
	"math/rand/v2"
	"time"

	"github.com/artgo/art/engine/kernels"
	"github.com/artgo/art/engine/model"
)

// productsReplay times a training step's weight products by themselves,
// the same calls the step makes on m's packed weights and the current
// unit: per layer the q, k, v and gate, up products as the forward pass
// groups them, o and down, and the input gradient of each; then the LM
// head's forward product and input gradient in the step's row chunks.
// Attention, norms, the LoRA deltas, the loss and the optimizer are left
// out, so the rate it gives is the products' own, the thing issue 23's
// "≥ 70 % of the unit's peak on the weight products" is about, where the
// whole step's rate also charges them with everything else.
//
// Its buffers are made once and written by an untimed first replay, as
// the step's activations are reused from step to step: a replay into
// fresh buffers was charged the first touch of ~200 MB (the LM head's
// logits alone are 155 MB), 0.3-0.5 s of page faults a replay.
type productsReplay struct {
	m                        *model.Model
	T                        int
	xc, xq, xf               []float32
	q, k, v, c, gate, up     []float32
	dq, dk, dv, dc, dg, du   []float32
	dinC, dinQ, dinF, logits []float32
	warm                     bool
}

func newProductsReplay(m *model.Model, T int) *productsReplay {
	cfg := m.Config
	C, Q, KV, F, V := cfg.HiddenSize, cfg.QDim(), cfg.KVDim(), cfg.IntermediateSize, cfg.VocabSize
	rng := rand.New(rand.NewPCG(5, 7))
	vec := func(n int) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(0.1 * rng.NormFloat64())
		}
		return v
	}
	return &productsReplay{
		m: m, T: T,
		xc: vec(T * C), xq: vec(T * Q), xf: vec(T * F),
		q: make([]float32, T*Q), k: make([]float32, T*KV), v: make([]float32, T*KV),
		c: make([]float32, T*C), gate: make([]float32, T*F), up: make([]float32, T*F),
		dq: vec(T * Q), dk: vec(T * KV), dv: vec(T * KV), dc: vec(T * C), dg: vec(T * F), du: vec(T * F),
		dinC: make([]float32, T*C), dinQ: make([]float32, T*Q), dinF: make([]float32, T*F),
		logits: make([]float32, min(model.HeadChunk, T-1)*V),
	}
}

// seconds replays the products once (after an untimed first replay) and
// returns the time it took.
func (r *productsReplay) seconds() float64 {
	if !r.warm {
		r.replay()
		r.warm = true
	}
	t0 := time.Now()
	r.replay()
	return time.Since(t0).Seconds()
}

func (r *productsReplay) replay() {
	m, T := r.m, r.T
	C, V := m.Config.HiddenSize, m.Config.VocabSize
	for l := range m.W.Layers {
		w := &m.W.Layers[l]
		kernels.LinearMulti(r.xc, T,
			kernels.LinearOp{Out: r.q, W: w.Q},
			kernels.LinearOp{Out: r.k, W: w.K},
			kernels.LinearOp{Out: r.v, W: w.V})
		kernels.Linear(r.c, r.xq, w.O, nil, T)
		kernels.LinearMulti(r.xc, T,
			kernels.LinearOp{Out: r.gate, W: w.Gate},
			kernels.LinearOp{Out: r.up, W: w.Up})
		kernels.Linear(r.c, r.xf, w.Down, nil, T)
	}
	for l := len(m.W.Layers) - 1; l >= 0; l-- {
		w := &m.W.Layers[l]
		kernels.LinearBackwardInput(r.dinF, r.dc, w.Down, T)
		kernels.LinearBackwardInput(r.dinC, r.dg, w.Gate, T)
		kernels.LinearBackwardInput(r.dinC, r.du, w.Up, T)
		kernels.LinearBackwardInput(r.dinQ, r.dc, w.O, T)
		kernels.LinearBackwardInput(r.dinC, r.dq, w.Q, T)
		kernels.LinearBackwardInput(r.dinC, r.dk, w.K, T)
		kernels.LinearBackwardInput(r.dinC, r.dv, w.V, T)
	}
	head := min(model.HeadChunk, T-1)
	for i0 := 0; i0 < T-1; i0 += head {
		n := min(head, T-1-i0)
		kernels.Linear(r.logits[:n*V], r.xc[:n*C], m.W.LMHead, nil, n)
		kernels.LinearBackwardInput(r.dinC[:n*C], r.logits[:n*V], m.W.LMHead, n)
	}
}

// replayFlops is what productsReplay computes: weightProductFlops with the
// LM head over T-1 rows, as the step scores them.
func replayFlops(cfg model.Config, T int) float64 {
	return weightProductFlops(cfg, T) - 4*float64(cfg.VocabSize)*float64(cfg.HiddenSize)
}
