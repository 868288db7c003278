package model

import "github.com/artgo/art/engine/kernels"

// One transformer layer, forward and backward side by side, shared by
// inference (Forward) and training (TrainForward, TrainBackward):
//
//	mid  = in  + o(attention(rope(q(xn1)), rope(k(xn1)), v(xn1))), xn1 = norm(in)
//	next = mid + down(silu(gate(xn2)) * up(xn2)),                   xn2 = norm(mid)
//
// with each projection's LoRA delta added to its output.

// layerActs are one layer's activations over T rows. Training keeps them
// all for the backward pass; inference, which needs none afterwards,
// aliases them onto a few buffers (see Workspace.layer).
type layerActs struct {
	in       []float32 // (T, C) residual stream entering the layer
	rstd1    []float32 // (T), or nil when not needed
	xn1      []float32 // (T, C) attention-normed input of q, k, v
	q        []float32 // (T, Q) after RoPE
	k, v     []float32 // (T, KV), k after RoPE
	att      []float32 // (T, Q) attention output, input of o_proj
	mid      []float32 // (T, C) residual stream after attention
	rstd2    []float32 // (T), or nil when not needed
	xn2      []float32 // (T, C) mlp-normed input of gate and up
	gate, up []float32 // (T, F) before the activation
	h        []float32 // (T, F) silu(gate)*up, input of down_proj
}

// layerPass is what differs between the passes through a layer: where the
// LoRA deltas come from (one adapter for a training sequence, one per
// segment of an inference batch) and where attention finds the keys and
// values (the sequence's own rows, or each segment's KV cache).
type layerPass interface {
	// addDelta adds the adapters' output of module mod of layer l, for
	// the module's input rows inp, to its output rows out.
	addDelta(out, inp []float32, l int, mod Module)
	// attend writes into att the causal attention of layer l's post-RoPE
	// q over its k and v (and whatever keys and values precede them).
	attend(att, q, k, v []float32, l int)
}

// layerForward runs layer l over the T rows of s.in, filling s, and writes
// the layer's output, the next residual stream, into next. next may alias
// s.in: the input is last read before next is written.
func (m *Model) layerForward(s *layerActs, T, l int, rope *ropeTable, p layerPass, next []float32) {
	cfg := m.Config
	C, Q, KV, F := cfg.HiddenSize, cfg.QDim(), cfg.KVDim(), cfg.IntermediateSize
	NH, KVH, HD := cfg.NumHeads, cfg.NumKVHeads, cfg.HeadDim
	w := &m.W.Layers[l]
	in, xn1, q, k, v := s.in[:T*C], s.xn1[:T*C], s.q[:T*Q], s.k[:T*KV], s.v[:T*KV]
	att, mid, xn2 := s.att[:T*Q], s.mid[:T*C], s.xn2[:T*C]
	gate, up, h := s.gate[:T*F], s.up[:T*F], s.h[:T*F]

	rmsNormForward(xn1, s.rstd1, in, w.AttnNorm, T, C, cfg.RMSNormEps)
	kernels.LinearMulti(xn1, T,
		kernels.LinearOp{Out: q, W: w.Q, Bias: w.QBias},
		kernels.LinearOp{Out: k, W: w.K, Bias: w.KBias},
		kernels.LinearOp{Out: v, W: w.V, Bias: w.VBias})
	p.addDelta(q, xn1, l, ModQ)
	p.addDelta(k, xn1, l, ModK)
	p.addDelta(v, xn1, l, ModV)
	rope.forward(q, T, NH, HD)
	rope.forward(k, T, KVH, HD)
	p.attend(att, q, k, v, l)
	kernels.Linear(mid, att, w.O, w.OBias, T)
	p.addDelta(mid, att, l, ModO)
	addInPlace(mid, in)

	rmsNormForward(xn2, s.rstd2, mid, w.MLPNorm, T, C, cfg.RMSNormEps)
	kernels.LinearMulti(xn2, T,
		kernels.LinearOp{Out: gate, W: w.Gate, Bias: w.GateBias},
		kernels.LinearOp{Out: up, W: w.Up, Bias: w.UpBias})
	p.addDelta(gate, xn2, l, ModGate)
	p.addDelta(up, xn2, l, ModUp)
	swigluForward(h, gate, up, T, F)
	kernels.Linear(next, h, w.Down, w.DownBias, T)
	p.addDelta(next, h, l, ModDown)
	addInPlace(next, mid)
}

// layerBackward backpropagates through layer l of a training sequence:
// given dres, the loss gradient w.r.t. the layer's output, it overwrites
// dres with the gradient w.r.t. the layer's input, and accumulates the
// parameter gradients on the way (p.backDelta). s holds the forward
// activations.
func (m *Model) layerBackward(s *layerActs, l int, p *seqPass, dres []float32) {
	cfg, a := m.Config, p.a
	T := a.T
	C, Q, KV, F := cfg.HiddenSize, cfg.QDim(), cfg.KVDim(), cfg.IntermediateSize
	NH, KVH, HD := cfg.NumHeads, cfg.NumKVHeads, cfg.HeadDim
	w := &m.W.Layers[l]
	dmid, dxn := a.dmid[:T*C], a.dxn[:T*C]
	dq, datt, dk, dv := a.dq[:T*Q], a.datt[:T*Q], a.dk[:T*KV], a.dv[:T*KV]
	dgate, dup, dh := a.dgate[:T*F], a.dup[:T*F], a.dh[:T*F]
	var dAttnNorm, dMLPNorm []float32 // nil: the norms are frozen
	if a.Base != nil {
		dAttnNorm, dMLPNorm = a.Base.AttnNorm[l], a.Base.MLPNorm[l]
	}

	// MLP block, backwards.
	clear(dh)
	kernels.LinearBackwardInput(dh, dres, w.Down, T)
	p.backDelta(dh, dres, s.h[:T*F], l, ModDown)
	swigluBackward(dgate, dup, dh, s.gate[:T*F], s.up[:T*F], T, F)
	clear(dxn)
	kernels.LinearBackwardInput(dxn, dgate, w.Gate, T)
	kernels.LinearBackwardInput(dxn, dup, w.Up, T)
	p.backDelta(dxn, dgate, s.xn2[:T*C], l, ModGate)
	p.backDelta(dxn, dup, s.xn2[:T*C], l, ModUp)
	copy(dmid, dres)
	rmsNormBackward(dmid, dMLPNorm, dxn, s.mid[:T*C], w.MLPNorm, s.rstd2[:T], T, C)

	// Attention block, backwards.
	clear(datt)
	kernels.LinearBackwardInput(datt, dmid, w.O, T)
	p.backDelta(datt, dmid, s.att[:T*Q], l, ModO)
	clear(dq)
	clear(dk)
	clear(dv)
	trainAttentionBackward(&a.attn, dq, dk, dv, datt, s.q[:T*Q], s.k[:T*KV], s.v[:T*KV], T, NH, KVH, HD)
	a.rope.backward(dq, T, NH, HD)
	a.rope.backward(dk, T, KVH, HD)
	clear(dxn)
	kernels.LinearBackwardInput(dxn, dq, w.Q, T)
	kernels.LinearBackwardInput(dxn, dk, w.K, T)
	kernels.LinearBackwardInput(dxn, dv, w.V, T)
	p.backDelta(dxn, dq, s.xn1[:T*C], l, ModQ)
	p.backDelta(dxn, dk, s.xn1[:T*C], l, ModK)
	p.backDelta(dxn, dv, s.xn1[:T*C], l, ModV)
	copy(dres, dmid)
	rmsNormBackward(dres, dAttnNorm, dxn, s.in[:T*C], w.AttnNorm, s.rstd1[:T], T, C)
}

// addInPlace adds src to dst.
func addInPlace(dst, src []float32) {
	for i, v := range src {
		dst[i] += v
	}
}
