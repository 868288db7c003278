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
	// Parts of some families (layerfamily.go); nil when the family has
	// none, or when they live in the buffers above (inference).
	qpre, kpre   []float32 // (T, Q), (T, KV) QKNorm: q and k before their norms
	rstdq, rstdk []float32 // (T*NH), (T*KVH)
	ao, mo       []float32 // (T, C) SandwichNorms: o_proj and down_proj outputs before their norms
	rstd3, rstd4 []float32 // (T)
	// moe holds a mixture-of-experts layer's activations (moe.go) in place
	// of gate, up and h; nil for a dense layer.
	moe *moeActs
}

// layerPass is what differs between the passes through a layer: where the
// LoRA deltas come from (one adapter for a training sequence, one per
// segment of an inference batch) and where attention finds the keys and
// values (the sequence's own rows, or each segment's KV cache).
type layerPass interface {
	// addDelta adds the adapters' output of module mod of layer l, for
	// the module's input rows inp, to its output rows out.
	addDelta(out, inp []float32, l int, mod Module)
	// addExpertDelta does the same for expert e's projection mod, whose
	// rows are the layer's rows rows (ascending).
	addExpertDelta(out, inp []float32, rows []int32, l, e int, mod Module)
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
	qpre, kpre := or(s.qpre, T*Q, q), or(s.kpre, T*KV, k)
	ao, mo := or(s.ao, T*C, mid), or(s.mo, T*C, next[:T*C])

	rmsNormForward(xn1, s.rstd1, in, w.AttnNorm, T, C, cfg.RMSNormEps)
	kernels.LinearMulti(xn1, T,
		kernels.LinearOp{Out: qpre, W: w.Q, Bias: w.QBias},
		kernels.LinearOp{Out: kpre, W: w.K, Bias: w.KBias},
		kernels.LinearOp{Out: v, W: w.V, Bias: w.VBias})
	p.addDelta(qpre, xn1, l, ModQ)
	p.addDelta(kpre, xn1, l, ModK)
	p.addDelta(v, xn1, l, ModV)
	m.qkNormForward(q, k, qpre, kpre, s, T, l)
	rope.forward(q, T, NH, HD)
	rope.forward(k, T, KVH, HD)
	m.scaleQuery(q)
	p.attend(att, q, k, v, l)
	kernels.Linear(ao, att, w.O, w.OBias, T)
	p.addDelta(ao, att, l, ModO)
	m.outNormForward(mid, s.rstd3, ao, w.AttnOutNorm, T)
	addInPlace(mid, in)

	rmsNormForward(xn2, s.rstd2, mid, w.MLPNorm, T, C, cfg.RMSNormEps)
	if cfg.IsMoE(l) {
		m.moeForward(s.moe, mo, xn2, T, l, p)
	} else {
		gate, up, h := s.gate[:T*F], s.up[:T*F], s.h[:T*F]
		kernels.LinearMulti(xn2, T,
			kernels.LinearOp{Out: gate, W: w.Gate, Bias: w.GateBias},
			kernels.LinearOp{Out: up, W: w.Up, Bias: w.UpBias})
		p.addDelta(gate, xn2, l, ModGate)
		p.addDelta(up, xn2, l, ModUp)
		m.gluForward(h, gate, up, T, F)
		kernels.Linear(mo, h, w.Down, w.DownBias, T)
		p.addDelta(mo, h, l, ModDown)
	}
	m.outNormForward(next, s.rstd4, mo, w.MLPOutNorm, T)
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
	dAttnOutNorm, dMLPOutNorm := a.sandwichGrads(l)
	rope := m.layerRope(l, &a.rope, &a.ropeLocal)

	// MLP block, backwards.
	dmo := m.outNormBackward(a, dres, s.mo, s.rstd4, w.MLPOutNorm, dMLPOutNorm)
	clear(dxn)
	if cfg.IsMoE(l) {
		m.moeBackward(s.moe, a.moeWork, a.Base, p.adapter, dxn, dmo, s.xn2[:T*C], T, l)
	} else {
		clear(dh)
		kernels.LinearBackwardInput(dh, dmo, w.Down, T)
		p.backDelta(dh, dmo, s.h[:T*F], l, ModDown)
		m.gluBackward(dgate, dup, dh, s.gate[:T*F], s.up[:T*F], T, F)
		kernels.LinearBackwardInput(dxn, dgate, w.Gate, T)
		kernels.LinearBackwardInput(dxn, dup, w.Up, T)
		p.backDelta(dxn, dgate, s.xn2[:T*C], l, ModGate)
		p.backDelta(dxn, dup, s.xn2[:T*C], l, ModUp)
	}
	copy(dmid, dres)
	rmsNormBackward(dmid, dMLPNorm, dxn, s.mid[:T*C], w.MLPNorm, s.rstd2[:T], T, C)

	// Attention block, backwards.
	dao := m.outNormBackward(a, dmid, s.ao, s.rstd3, w.AttnOutNorm, dAttnOutNorm)
	clear(datt)
	kernels.LinearBackwardInput(datt, dao, w.O, T)
	p.backDelta(datt, dao, s.att[:T*Q], l, ModO)
	clear(dq)
	clear(dk)
	clear(dv)
	trainAttentionBackward(&a.attn, dq, dk, dv, datt, s.q[:T*Q], s.k[:T*KV], s.v[:T*KV], T, NH, KVH, HD, cfg.Window(l), l)
	m.scaleQuery(dq)
	rope.backward(dq, T, NH, HD)
	rope.backward(dk, T, KVH, HD)
	dqpre, dkpre := m.qkNormBackward(a, s, dq, dk, l)
	clear(dxn)
	kernels.LinearBackwardInput(dxn, dqpre, w.Q, T)
	kernels.LinearBackwardInput(dxn, dkpre, w.K, T)
	kernels.LinearBackwardInput(dxn, dv, w.V, T)
	p.backDelta(dxn, dqpre, s.xn1[:T*C], l, ModQ)
	p.backDelta(dxn, dkpre, s.xn1[:T*C], l, ModK)
	p.backDelta(dxn, dv, s.xn1[:T*C], l, ModV)
	copy(dres, dmid)
	rmsNormBackward(dres, dAttnNorm, dxn, s.in[:T*C], w.AttnNorm, s.rstd1[:T], T, C)
}

// addInPlace adds src to dst (Axpy with 1: the same sums, rounded once).
func addInPlace(dst, src []float32) { kernels.Axpy(1, src, dst) }
