package model

import (
	"math"

	"github.com/artgo/art/engine/kernels"
)

// A mixture-of-experts MLP (Qwen3-MoE), forward and backward side by side.
// For each row x (the MLP-normed residual stream):
//
//	p = softmax(router · x)                       over the E experts
//	e₁…e_k = the k most probable experts          (ties: the lower index)
//	w_j = p[e_j], divided by Σ_j p[e_j] when norm_topk_prob
//	out = Σ_j w_j · down_{e_j}(silu(gate_{e_j}(x)) * up_{e_j}(x))
//
// Rows are grouped by expert so that each expert runs its products once
// over all its rows; a row's output then sums its experts' outputs in rank
// order. Every product is a Linear (its bits do not depend on the other
// rows) and the routing reads only the row's own logits, so a row's output
// is the same alone, in any batch, and in the trainer: the sampler and the
// trainer route every token to the same experts with no routing replay.
//
// The router's softmax, top-k and renormalisation run in float64.

// moeActs are one mixture-of-experts layer's activations over T rows, in
// slots: slot s is one (row, choice) pair, slots grouped by expert.
type moeActs struct {
	logits []float32 // (T, E) router logits
	weight []float32 // (T, k) each row's expert weights, in rank order
	expert []int32   // (T, k) each row's experts, in rank order
	slot   []int32   // (T, k) the slot of each row's j-th choice
	row    []int32   // (T·k) the row of each slot
	start  []int     // (E+1) each expert's first slot
	x      []float32 // (T·k, C) each slot's input row
	gate   []float32 // (T·k, Fm)
	up     []float32 // (T·k, Fm)
	h      []float32 // (T·k, Fm) silu(gate)·up; may alias gate (inference)
	y      []float32 // (T·k, C) each slot's expert output
}

// newMoEActs allocates the activations of a layer over up to maxT rows;
// with shareH, h aliases gate (inference keeps nothing for a backward pass).
func newMoEActs(cfg Config, maxT int, shareH bool) *moeActs {
	E, k, C, Fm := cfg.NumExperts, cfg.NumExpertsPerTok, cfg.HiddenSize, cfg.MoEIntermediateSize
	f := func(n int) []float32 { return make([]float32, n) }
	a := &moeActs{
		logits: f(maxT * E), weight: f(maxT * k), expert: make([]int32, maxT*k), slot: make([]int32, maxT*k),
		row: make([]int32, maxT*k), start: make([]int, E+1),
		x: f(maxT * k * C), gate: f(maxT * k * Fm), up: f(maxT * k * Fm), y: f(maxT * k * C),
	}
	a.h = a.gate
	if !shareH {
		a.h = f(maxT * k * Fm)
	}
	return a
}

// route computes the router logits of the T rows of x and, per row, its k
// experts and their weights; then it groups the slots by expert.
func (m *Model) route(a *moeActs, x []float32, T, l int) {
	cfg := m.Config
	E, k := cfg.NumExperts, cfg.NumExpertsPerTok
	kernels.Linear(a.logits[:T*E], x, m.W.Layers[l].Router, nil, T)
	p := make([]float64, E)
	for t := range T {
		softmax64(p, a.logits[t*E:(t+1)*E])
		experts, weights := a.expert[t*k:(t+1)*k], a.weight[t*k:(t+1)*k]
		var sum float64
		for j := range k {
			best := -1
			for e, v := range p {
				if (best < 0 || v > p[best]) && !chosen(experts[:j], e) {
					best = e
				}
			}
			experts[j] = int32(best)
			sum += p[best]
		}
		for j, e := range experts {
			w := p[e]
			if cfg.NormTopKProb {
				w /= sum
			}
			weights[j] = float32(w)
		}
	}
	// Group the slots by expert, rows in order within each.
	clear(a.start)
	for _, e := range a.expert[:T*k] {
		a.start[e+1]++
	}
	for e := range E {
		a.start[e+1] += a.start[e]
	}
	next := append([]int(nil), a.start[:E]...)
	for i, e := range a.expert[:T*k] {
		s := next[e]
		next[e]++
		a.slot[i] = int32(s)
		a.row[s] = int32(i / k)
	}
}

func chosen(experts []int32, e int) bool {
	for _, x := range experts {
		if int(x) == e {
			return true
		}
	}
	return false
}

// softmax64 writes softmax(z) into p in float64.
func softmax64(p []float64, z []float32) {
	mx := math.Inf(-1)
	for _, v := range z {
		mx = math.Max(mx, float64(v))
	}
	var sum float64
	for i, v := range z {
		p[i] = math.Exp(float64(v) - mx)
		sum += p[i]
	}
	for i := range p {
		p[i] /= sum
	}
}

// moeForward writes into out (T, C) the mixture-of-experts MLP of layer l
// over the T rows of x (T, C), keeping its activations in a; p adds the
// adapters' deltas to each expert's projections.
func (m *Model) moeForward(a *moeActs, out, x []float32, T, l int, p layerPass) {
	cfg := m.Config
	C, Fm, k := cfg.HiddenSize, cfg.MoEIntermediateSize, cfg.NumExpertsPerTok
	m.route(a, x, T, l)
	for s, t := range a.row[:T*k] {
		copy(a.x[s*C:(s+1)*C], x[int(t)*C:(int(t)+1)*C])
	}
	// Every chosen expert's products in one parallel region each (gate
	// and up, then down): a decoding token has k experts of one row.
	var gateUp, down []kernels.LinearOp
	m.eachExpert(a, l, func(e, s0, s1 int) {
		ex, x := m.W.Layers[l].Experts[e], a.x[s0*C:s1*C]
		gateUp = append(gateUp,
			kernels.LinearOp{Out: a.gate[s0*Fm : s1*Fm], W: ex.Gate, In: x, M: s1 - s0},
			kernels.LinearOp{Out: a.up[s0*Fm : s1*Fm], W: ex.Up, In: x, M: s1 - s0})
		down = append(down, kernels.LinearOp{Out: a.y[s0*C : s1*C], W: ex.Down, In: a.h[s0*Fm : s1*Fm], M: s1 - s0})
	})
	slots := T * k
	kernels.LinearMulti(nil, 0, gateUp...)
	m.eachExpert(a, l, func(e, s0, s1 int) {
		x, rows := a.x[s0*C:s1*C], a.row[s0:s1]
		p.addExpertDelta(a.gate[s0*Fm:s1*Fm], x, rows, l, e, ModGate)
		p.addExpertDelta(a.up[s0*Fm:s1*Fm], x, rows, l, e, ModUp)
	})
	m.gluForward(a.h[:slots*Fm], a.gate[:slots*Fm], a.up[:slots*Fm], slots, Fm)
	kernels.LinearMulti(nil, 0, down...)
	m.eachExpert(a, l, func(e, s0, s1 int) {
		p.addExpertDelta(a.y[s0*C:s1*C], a.h[s0*Fm:s1*Fm], a.row[s0:s1], l, e, ModDown)
	})
	for t := range T {
		o := out[t*C : (t+1)*C]
		for j := range k {
			w, y := a.weight[t*k+j], a.y[int(a.slot[t*k+j])*C:][:C]
			if j == 0 {
				for c := range o {
					o[c] = w * y[c]
				}
				continue
			}
			for c := range o {
				o[c] += w * y[c]
			}
		}
	}
}

// eachExpert calls f for each expert of layer l that a's rows reached,
// with the expert's slots [s0, s1).
func (m *Model) eachExpert(a *moeActs, l int, f func(e, s0, s1 int)) {
	for e := range m.W.Layers[l].Experts {
		if s0, s1 := a.start[e], a.start[e+1]; s0 < s1 {
			f(e, s0, s1)
		}
	}
}

// moeWork is the backward pass's scratch of a mixture-of-experts layer.
type moeWork struct {
	dy, dx          []float32 // (T·k, C)
	dh, dgate, dup  []float32 // (T·k, Fm)
	dweight, dlogit []float32 // (T, k), (T, E)
}

func newMoEWork(cfg Config, maxT int) *moeWork {
	k, C, Fm, E := cfg.NumExpertsPerTok, cfg.HiddenSize, cfg.MoEIntermediateSize, cfg.NumExperts
	f := func(n int) []float32 { return make([]float32, n) }
	return &moeWork{dy: f(maxT * k * C), dx: f(maxT * k * C), dh: f(maxT * k * Fm), dgate: f(maxT * k * Fm),
		dup: f(maxT * k * Fm), dweight: f(maxT * k), dlogit: f(maxT * E)}
}

// moeBackward accumulates into dx (T, C) the gradient w.r.t. the MLP's
// input x given dout, the gradient w.r.t. its output, the adapter's
// gradients of its experts' deltas (ad may be nil), and with base the
// router's and experts' weight gradients.
func (m *Model) moeBackward(a *moeActs, w *moeWork, base *BaseGrads, ad Adapter, dx, dout, x []float32, T, l int) {
	cfg := m.Config
	C, Fm, k, E := cfg.HiddenSize, cfg.MoEIntermediateSize, cfg.NumExpertsPerTok, cfg.NumExperts
	layer := &m.W.Layers[l]
	// out = Σ_j w_j y_j: dy_j = w_j·dout, dw_j = dout·y_j.
	for t := range T {
		d := dout[t*C : (t+1)*C]
		for j := range k {
			s := int(a.slot[t*k+j])
			y, dy := a.y[s*C:(s+1)*C], w.dy[s*C:(s+1)*C]
			wt := a.weight[t*k+j]
			var dw float64
			for c, v := range d {
				dy[c] = wt * v
				dw += float64(v) * float64(y[c])
			}
			w.dweight[t*k+j] = float32(dw)
		}
	}
	clear(w.dh[:T*k*Fm])
	clear(w.dx[:T*k*C])
	m.eachExpert(a, l, func(e, s0, s1 int) {
		ex, n := layer.Experts[e], s1-s0
		rc, rf := func(b []float32) []float32 { return b[s0*C : s1*C] }, func(b []float32) []float32 { return b[s0*Fm : s1*Fm] }
		kernels.LinearBackwardInput(rf(w.dh), rc(w.dy), ex.Down, n)
		if ad != nil {
			ad.BackwardExpertDelta(rf(w.dh), rc(w.dy), rf(a.h), n, l, e, ModDown)
		}
		m.gluBackward(rf(w.dgate), rf(w.dup), rf(w.dh), rf(a.gate), rf(a.up), n, Fm)
		kernels.LinearBackwardInput(rc(w.dx), rf(w.dgate), ex.Gate, n)
		kernels.LinearBackwardInput(rc(w.dx), rf(w.dup), ex.Up, n)
		if ad != nil {
			ad.BackwardExpertDelta(rc(w.dx), rf(w.dgate), rc(a.x), n, l, e, ModGate)
			ad.BackwardExpertDelta(rc(w.dx), rf(w.dup), rc(a.x), n, l, e, ModUp)
		}
		if base != nil { // dW (out, in) += doutᵀ · in
			g := &base.Experts[l][e]
			kernels.Gemm(true, false, C, Fm, n, rc(w.dy), C, rf(a.h), Fm, 1, g.Down, Fm)
			kernels.Gemm(true, false, Fm, C, n, rf(w.dgate), Fm, rc(a.x), C, 1, g.Gate, C)
			kernels.Gemm(true, false, Fm, C, n, rf(w.dup), Fm, rc(a.x), C, 1, g.Up, C)
		}
	})
	for t := range T {
		d := dx[t*C : (t+1)*C]
		for j := range k {
			s := int(a.slot[t*k+j])
			for c, v := range w.dx[s*C : (s+1)*C] {
				d[c] += v
			}
		}
	}
	// Through the weights, the top-k and the softmax to the logits.
	p, dp := make([]float64, E), make([]float64, E)
	for t := range T {
		softmax64(p, a.logits[t*E:(t+1)*E])
		experts, dweight := a.expert[t*k:(t+1)*k], w.dweight[t*k:(t+1)*k]
		clear(dp)
		if cfg.NormTopKProb {
			// w_j = p_j / S, S = Σ p_i: ∂L/∂p_j = (dw_j − Σ_i dw_i w_i) / S.
			var sum, dot float64
			for _, e := range experts {
				sum += p[e]
			}
			for j, e := range experts {
				dot += float64(dweight[j]) * p[e] / sum
			}
			for j, e := range experts {
				dp[e] = (float64(dweight[j]) - dot) / sum
			}
		} else {
			for j, e := range experts {
				dp[e] = float64(dweight[j])
			}
		}
		var dot float64
		for e := range p {
			dot += dp[e] * p[e]
		}
		dz := w.dlogit[t*E : (t+1)*E]
		for e := range p {
			dz[e] = float32(p[e] * (dp[e] - dot))
		}
	}
	kernels.LinearBackwardInput(dx, w.dlogit[:T*E], layer.Router, T)
	if base != nil {
		kernels.Gemm(true, false, E, C, T, w.dlogit[:T*E], E, x, C, 1, base.Router[l], C)
	}
}
