package main

import (
	"math/rand/v2"
	"slices"
	"time"

	"github.com/artgo/art/engine/kernels"
	"github.com/artgo/art/engine/model"
)

// productsAlone times a training step's weight products by themselves,
// the same calls the step makes on m's packed weights and the current
// unit: per layer the q, k, v and gate, up products as the forward pass
// groups them, o and down, and the input gradient of each; then the LM
// head's forward product and input gradient in the step's row chunks.
// Attention, norms, the LoRA deltas, the loss and the optimizer are left
// out, so the rate it gives is the products' own, the thing issue 23's
// "≥ 70 % of the unit's peak on the weight products" is about, where the
// whole step's rate also charges them with everything else. It returns
// the median seconds of rounds replays.
func productsAlone(m *model.Model, T, rounds int) float64 {
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
	head := min(model.HeadChunk, T-1)
	xc, xq, xf := vec(T*C), vec(T*Q), vec(T*F)
	q, k, v, c, gate, up := make([]float32, T*Q), make([]float32, T*KV), make([]float32, T*KV), make([]float32, T*C), make([]float32, T*F), make([]float32, T*F)
	dq, dk, dv, dc, dg, du := vec(T*Q), vec(T*KV), vec(T*KV), vec(T*C), vec(T*F), vec(T*F)
	dinC, dinQ, dinF := make([]float32, T*C), make([]float32, T*Q), make([]float32, T*F)
	logits := make([]float32, head*V)
	var times []float64
	for range rounds {
		t0 := time.Now()
		for l := range m.W.Layers {
			w := &m.W.Layers[l]
			kernels.LinearMulti(xc, T,
				kernels.LinearOp{Out: q, W: w.Q},
				kernels.LinearOp{Out: k, W: w.K},
				kernels.LinearOp{Out: v, W: w.V})
			kernels.Linear(c, xq, w.O, nil, T)
			kernels.LinearMulti(xc, T,
				kernels.LinearOp{Out: gate, W: w.Gate},
				kernels.LinearOp{Out: up, W: w.Up})
			kernels.Linear(c, xf, w.Down, nil, T)
		}
		for l := len(m.W.Layers) - 1; l >= 0; l-- {
			w := &m.W.Layers[l]
			kernels.LinearBackwardInput(dinF, dc, w.Down, T)
			kernels.LinearBackwardInput(dinC, dg, w.Gate, T)
			kernels.LinearBackwardInput(dinC, du, w.Up, T)
			kernels.LinearBackwardInput(dinQ, dc, w.O, T)
			kernels.LinearBackwardInput(dinC, dq, w.Q, T)
			kernels.LinearBackwardInput(dinC, dk, w.K, T)
			kernels.LinearBackwardInput(dinC, dv, w.V, T)
		}
		for i0 := 0; i0 < T-1; i0 += head {
			n := min(head, T-1-i0)
			kernels.Linear(logits[:n*V], xc[:n*C], m.W.LMHead, nil, n)
			kernels.LinearBackwardInput(dinC[:n*C], logits[:n*V], m.W.LMHead, n)
		}
		times = append(times, time.Since(t0).Seconds())
	}
	slices.Sort(times)
	return times[len(times)/2]
}

// replayFlops is what productsAlone computes: weightProductFlops with the
// LM head over T-1 rows, as the step scores them.
func replayFlops(cfg model.Config, T int) float64 {
	return weightProductFlops(cfg, T) - 4*float64(cfg.VocabSize)*float64(cfg.HiddenSize)
}
