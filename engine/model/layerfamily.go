package model

import (
	"math"
	"slices"

	"github.com/artgo/art/internal/parallel"
)

// The parts of a layer only some families have (see Family), forward and
// backward side by side. layerForward and layerBackward call each one at
// its place; for a family without the part it does nothing, or returns
// the buffer it was given.

// familyTensors lists layer l's tensors that only some families have,
// under prefix p ("model.layers.N.").
func familyTensors(f *Family, p string, cfg Config, l *Layer) []tensorRef {
	var refs []tensorRef
	if f.QKNorm {
		HD := cfg.HeadDim
		refs = append(refs,
			tensorRef{name: p + "self_attn.q_norm.weight", shape: []int{HD}, vec: &l.QNorm},
			tensorRef{name: p + "self_attn.k_norm.weight", shape: []int{HD}, vec: &l.KNorm})
	}
	if f.SandwichNorms {
		C := cfg.HiddenSize
		refs = append(refs,
			tensorRef{name: p + "post_attention_layernorm.weight", shape: []int{C}, vec: &l.AttnOutNorm},
			tensorRef{name: p + "post_feedforward_layernorm.weight", shape: []int{C}, vec: &l.MLPOutNorm})
	}
	return refs
}

// mlpNormName is the checkpoint name of the MLP input's norm.
func mlpNormName(f *Family) string {
	if f.SandwichNorms {
		return "pre_feedforward_layernorm.weight"
	}
	return "post_attention_layernorm.weight"
}

// familyActs adds to s the buffers of the family's parts for up to T
// tokens, for training (every activation kept).
func (m *Model) familyActs(s *layerActs, T int) {
	cfg := m.Config
	f := cfg.family()
	if f.QKNorm {
		s.qpre, s.kpre = make([]float32, T*cfg.QDim()), make([]float32, T*cfg.KVDim())
		s.rstdq, s.rstdk = make([]float32, T*cfg.NumHeads), make([]float32, T*cfg.NumKVHeads)
	}
	if f.SandwichNorms {
		C := cfg.HiddenSize
		s.ao, s.mo = make([]float32, T*C), make([]float32, T*C)
		s.rstd3, s.rstd4 = make([]float32, T), make([]float32, T)
	}
}

// or returns buf's first n values, or def when buf is nil (the family
// has no such part: the value lives where def does).
func or(buf []float32, n int, def []float32) []float32 {
	if buf == nil {
		return def
	}
	return buf[:n]
}

// qkNormForward sets q and k (T rows) to the per-head norms of the
// projections qpre and kpre (QKNorm families; they may alias q and k).
func (m *Model) qkNormForward(q, k, qpre, kpre []float32, s *layerActs, T, l int) {
	cfg := m.Config
	if !cfg.family().QKNorm {
		return
	}
	w := &m.W.Layers[l]
	NH, KVH, HD := cfg.NumHeads, cfg.NumKVHeads, cfg.HeadDim
	rmsNormForward(q, or(s.rstdq, T*NH, nil), qpre, w.QNorm, T*NH, HD, cfg.RMSNormEps)
	rmsNormForward(k, or(s.rstdk, T*KVH, nil), kpre, w.KNorm, T*KVH, HD, cfg.RMSNormEps)
}

// qkNormBackward turns dq and dk, gradients w.r.t. the normed q and k,
// into gradients w.r.t. the projections, which it returns (dq and dk
// themselves without QKNorm).
func (m *Model) qkNormBackward(a *Acts, s *layerActs, dq, dk []float32, l int) (dqpre, dkpre []float32) {
	cfg := m.Config
	if !cfg.family().QKNorm {
		return dq, dk
	}
	T, w := a.T, &m.W.Layers[l]
	NH, KVH, HD := cfg.NumHeads, cfg.NumKVHeads, cfg.HeadDim
	var dwq, dwk []float32
	if a.Base != nil {
		dwq, dwk = a.Base.QNorm[l], a.Base.KNorm[l]
	}
	dqpre, dkpre = a.dqpre[:T*NH*HD], a.dkpre[:T*KVH*HD]
	clear(dqpre)
	clear(dkpre)
	rmsNormBackward(dqpre, dwq, dq, s.qpre[:T*NH*HD], w.QNorm, s.rstdq[:T*NH], T*NH, HD)
	rmsNormBackward(dkpre, dwk, dk, s.kpre[:T*KVH*HD], w.KNorm, s.rstdk[:T*KVH], T*KVH, HD)
	return dqpre, dkpre
}

// scaleQuery multiplies q by the family's query scale, which with
// attention's HD^-½ gives the scores query_pre_attn_scalar^-½. Used
// forward and backward (the map is linear).
func (m *Model) scaleQuery(q []float32) {
	if s := m.queryScale; s != 1 {
		for i := range q {
			q[i] *= s
		}
	}
}

// outNormForward sets out to the norm of a block's output y (T rows of
// C), with weight w, for SandwichNorms families; rstd may be nil.
func (m *Model) outNormForward(out, rstd, y, w []float32, T int) {
	cfg := m.Config
	if !cfg.family().SandwichNorms {
		return
	}
	rmsNormForward(out, rstd, y, w, T, cfg.HiddenSize, cfg.RMSNormEps)
}

// outNormBackward returns the gradient w.r.t. a block's output before its
// norm given dout, the gradient after it: dout itself without sandwich
// norms, else a's scratch dy. dw (may be nil) receives the weight's.
func (m *Model) outNormBackward(a *Acts, dout, y, rstd, w, dw []float32) []float32 {
	cfg := m.Config
	if !cfg.family().SandwichNorms {
		return dout
	}
	T, C := a.T, cfg.HiddenSize
	dy := a.dy[:T*C]
	clear(dy)
	rmsNormBackward(dy, dw, dout, y[:T*C], w, rstd[:T], T, C)
	return dy
}

// sandwichGrads returns the weight gradients of layer l's output norms,
// nil when the norms are frozen.
func (a *Acts) sandwichGrads(l int) (dAttnOut, dMLPOut []float32) {
	if a.Base == nil || a.Base.AttnOutNorm == nil {
		return nil, nil
	}
	return a.Base.AttnOutNorm[l], a.Base.MLPOutNorm[l]
}

// scaleEmbedding multiplies the embedded rows x by the family's √C.
func (m *Model) scaleEmbedding(x []float32) {
	if s := m.embedScale; s != 1 {
		for i := range x {
			x[i] *= s
		}
	}
}

// layerRope returns the rotary table of layer l: local for the sliding
// layers of LocalRope families, global otherwise.
func (m *Model) layerRope(l int, global, local *ropeTable) *ropeTable {
	if m.localFreqs != nil && m.Config.localRope(l) {
		return local
	}
	return global
}

// setRopes fills the global table, and the local one when the family has
// it, for rows at positions pos.
func (m *Model) setRopes(global, local *ropeTable, pos []int) {
	global.set(m.freqs, pos)
	if m.localFreqs != nil {
		local.set(m.localFreqs, pos)
	}
}

// firstKey is the first key position a query at position pos sees with a
// window of window keys (0: no window).
func firstKey(pos, window int) int {
	if window <= 0 {
		return 0
	}
	return max(0, pos-window+1)
}

// softmaxWindow is softmaxCausal for a query that sees keys [first,
// visible) only: the keys before the window get probability zero, so
// softmaxCausalBackward needs no window.
func softmaxWindow(row []float32, first, visible int, scale float32) {
	softmaxCausal(row[first:], visible-first, scale)
	clear(row[:first])
}

// The gated MLP's activation: SwiGLU, h = silu(gate)·up (Llama, Qwen,
// Mistral), or GeGLU, h = gelu_tanh(gate)·up (Gemma).

const geluTanh = "gelu_pytorch_tanh"

// gluForward computes h from gate and up (T rows of F) with cfg's
// activation. h may alias gate.
func (m *Model) gluForward(h, gate, up []float32, T, F int) {
	if m.Config.HiddenAct != geluTanh {
		swigluForward(h, gate, up, T, F)
		return
	}
	parallel.For(T, swigluMinRows, func(lo, hi int) {
		for i := lo * F; i < hi*F; i++ {
			g, _ := geluTanhAt(gate[i])
			h[i] = g * up[i]
		}
	})
}

// gluBackward overwrites dgate and dup with the gradients of h given dh.
func (m *Model) gluBackward(dgate, dup, dh, gate, up []float32, T, F int) {
	if m.Config.HiddenAct != geluTanh {
		swigluBackward(dgate, dup, dh, gate, up, T, F)
		return
	}
	parallel.For(T, swigluMinRows, func(lo, hi int) {
		for i := lo * F; i < hi*F; i++ {
			g, dg := geluTanhAt(gate[i])
			dgate[i] = dh[i] * up[i] * dg
			dup[i] = dh[i] * g
		}
	})
}

// geluTanhAt returns gelu(x) with the tanh approximation
// (0.5·x·(1 + tanh(√(2/π)·(x + 0.044715x³))), PyTorch's
// approximate="tanh") and its derivative, computed in float64.
func geluTanhAt(x32 float32) (y, dy float32) {
	const c = 0.7978845608028654 // √(2/π)
	x := float64(x32)
	u := c * (x + 0.044715*x*x*x)
	t := math.Tanh(u)
	du := c * (1 + 3*0.044715*x*x)
	return float32(0.5 * x * (1 + t)), float32(0.5*(1+t) + 0.5*x*(1-t*t)*du)
}

// addFamilyNorms allocates g's gradients of the family's extra norms.
func (g *BaseGrads) addFamilyNorms(cfg Config) {
	f := cfg.family()
	for range cfg.NumLayers {
		if f.QKNorm {
			g.QNorm = append(g.QNorm, make([]float32, cfg.HeadDim))
			g.KNorm = append(g.KNorm, make([]float32, cfg.HeadDim))
		}
		if f.SandwichNorms {
			g.AttnOutNorm = append(g.AttnOutNorm, make([]float32, cfg.HiddenSize))
			g.MLPOutNorm = append(g.MLPOutNorm, make([]float32, cfg.HiddenSize))
		}
	}
}

// familyNormParams returns the family's extra norm weights in the order
// of BaseGrads.Slices: every layer's QNorm, then KNorm, AttnOutNorm and
// MLPOutNorm.
func (m *Model) familyNormParams() [][]float32 {
	var q, k, ao, mo [][]float32
	for l := range m.W.Layers {
		w := &m.W.Layers[l]
		for _, p := range []struct {
			dst *[][]float32
			v   []float32
		}{{&q, w.QNorm}, {&k, w.KNorm}, {&ao, w.AttnOutNorm}, {&mo, w.MLPOutNorm}} {
			if p.v != nil {
				*p.dst = append(*p.dst, p.v)
			}
		}
	}
	return slices.Concat(q, k, ao, mo)
}
