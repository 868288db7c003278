package model

import (
	"fmt"
	"runtime/debug"
	"strings"

	"github.com/artgo/art/engine/kernels"
)

// Layer holds one transformer block's weights. Matrices are nn.Linear
// weights [out, in]; vectors are fp32.
type Layer struct {
	AttnNorm            []float32    // (C)
	Q                   *kernels.Mat // (Q, C)
	K, V                *kernels.Mat // (KV, C)
	O                   *kernels.Mat // (C, Q)
	QBias, KBias, VBias []float32    // (Q), (KV), (KV); nil without attention bias
	OBias               []float32    // (C); Llama with attention_bias only
	MLPNorm             []float32    // (C)
	Gate, Up            *kernels.Mat // (F, C)
	Down                *kernels.Mat // (C, F)
	GateBias, UpBias    []float32    // (F); nil without mlp bias
	DownBias            []float32    // (C)
	// QKNorm families: per-head norm weights of q and k.
	QNorm, KNorm []float32 // (HD)
	// SandwichNorms families: norm weights of the attention and MLP outputs.
	AttnOutNorm, MLPOutNorm []float32 // (C)
	// Mixture-of-experts layers (Config.IsMoE) have a router and experts
	// instead of Gate, Up and Down (which are then nil).
	Router  *kernels.Mat // (E, C): mlp.gate
	Experts []Expert
}

// Expert is one SwiGLU expert of a mixture-of-experts layer.
type Expert struct {
	Gate, Up *kernels.Mat // (Fm, C)
	Down     *kernels.Mat // (C, Fm)
}

// layerMat is one weight matrix field of a layer and its module's name;
// unquantized as in tensorRef.
type layerMat struct {
	name        string
	p           **kernels.Mat
	unquantized bool
}

// Proj returns the field holding a projection matrix of the layer (the
// field is nil for a mixture-of-experts layer's gate, up and down).
func (l *Layer) Proj(m Module) **kernels.Mat {
	switch m {
	case ModQ:
		return &l.Q
	case ModK:
		return &l.K
	case ModV:
		return &l.V
	case ModO:
		return &l.O
	case ModGate:
		return &l.Gate
	case ModUp:
		return &l.Up
	}
	return &l.Down
}

// Proj returns the field holding one of the expert's projections (ModGate,
// ModUp or ModDown).
func (e *Expert) Proj(m Module) **kernels.Mat {
	switch m {
	case ModGate:
		return &e.Gate
	case ModUp:
		return &e.Up
	case ModDown:
		return &e.Down
	}
	panic("model: an expert has no " + m.String())
}

// mats returns every weight matrix field of the layer that is set: the
// projections, the router and the experts'.
func (l *Layer) mats() []layerMat {
	var out []layerMat
	for mod := range NumModules {
		if p := l.Proj(mod); *p != nil {
			out = append(out, layerMat{name: mod.String(), p: p})
		}
	}
	if l.Router != nil {
		out = append(out, layerMat{"router", &l.Router, true})
	}
	for e := range l.Experts {
		x := &l.Experts[e]
		for i, p := range []**kernels.Mat{&x.Gate, &x.Up, &x.Down} {
			out = append(out, layerMat{name: fmt.Sprintf("expert %d %s", e, Module(int(ModGate)+i)), p: p})
		}
	}
	return out
}

// Norm weights hold the factor that multiplies the normalised row: with
// Family.NormPlusOne, 1 + the checkpoint's weight.

// Weights are a model's parameters. LMHead is Embed when embeddings are tied.
type Weights struct {
	Embed     *kernels.Mat // (V, C)
	Layers    []Layer
	FinalNorm []float32    // (C)
	LMHead    *kernels.Mat // (V, C)
}

// tensorRef names one checkpoint tensor and where it goes.
type tensorRef struct {
	name  string
	shape []int
	mat   **kernels.Mat // set for matrices kept in checkpoint dtype
	vec   *[]float32    // set for fp32 vectors
	// offset is added to a vector at load and taken off at save (Gemma's
	// norms: the checkpoint holds weight, the engine 1 + weight).
	offset float32
	// unquantized: the matrix keeps its checkpoint dtype when the model
	// is loaded quantized (a router: small, and its top-k choice is
	// discontinuous in its logits; llama.cpp keeps it unquantized too).
	unquantized bool
}

// tensorTable lists every tensor a checkpoint of cfg must contain, with its
// Hugging Face name and shape, pointing at the field of w it fills (or, when
// w already has its layers, the field it reads).
func tensorTable(cfg Config, w *Weights) []tensorRef {
	C, F, V := cfg.HiddenSize, cfg.IntermediateSize, cfg.VocabSize
	Q, KV := cfg.QDim(), cfg.KVDim()
	fam := cfg.family()
	refs := []tensorRef{
		{name: "model.embed_tokens.weight", shape: []int{V, C}, mat: &w.Embed},
		{name: "model.norm.weight", shape: []int{C}, vec: &w.FinalNorm},
	}
	if !cfg.TieWordEmbeddings {
		refs = append(refs, tensorRef{name: "lm_head.weight", shape: []int{V, C}, mat: &w.LMHead})
	}
	if len(w.Layers) != cfg.NumLayers {
		w.Layers = make([]Layer, cfg.NumLayers)
	}
	for i := range w.Layers {
		l := &w.Layers[i]
		p := fmt.Sprintf("model.layers.%d.", i)
		refs = append(refs,
			tensorRef{name: p + "input_layernorm.weight", shape: []int{C}, vec: &l.AttnNorm},
			tensorRef{name: p + "self_attn.q_proj.weight", shape: []int{Q, C}, mat: &l.Q},
			tensorRef{name: p + "self_attn.k_proj.weight", shape: []int{KV, C}, mat: &l.K},
			tensorRef{name: p + "self_attn.v_proj.weight", shape: []int{KV, C}, mat: &l.V},
			tensorRef{name: p + "self_attn.o_proj.weight", shape: []int{C, Q}, mat: &l.O},
			tensorRef{name: p + mlpNormName(fam), shape: []int{C}, vec: &l.MLPNorm},
		)
		if cfg.IsMoE(i) {
			E, Fm := cfg.NumExperts, cfg.MoEIntermediateSize
			if len(l.Experts) != E {
				l.Experts = make([]Expert, E)
			}
			refs = append(refs, tensorRef{name: p + "mlp.gate.weight", shape: []int{E, C}, mat: &l.Router, unquantized: true})
			for e := range l.Experts {
				x, pe := &l.Experts[e], fmt.Sprintf("%smlp.experts.%d.", p, e)
				refs = append(refs,
					tensorRef{name: pe + "gate_proj.weight", shape: []int{Fm, C}, mat: &x.Gate},
					tensorRef{name: pe + "up_proj.weight", shape: []int{Fm, C}, mat: &x.Up},
					tensorRef{name: pe + "down_proj.weight", shape: []int{C, Fm}, mat: &x.Down},
				)
			}
		} else {
			refs = append(refs,
				tensorRef{name: p + "mlp.gate_proj.weight", shape: []int{F, C}, mat: &l.Gate},
				tensorRef{name: p + "mlp.up_proj.weight", shape: []int{F, C}, mat: &l.Up},
				tensorRef{name: p + "mlp.down_proj.weight", shape: []int{C, F}, mat: &l.Down},
			)
		}
		if cfg.AttentionBias {
			refs = append(refs,
				tensorRef{name: p + "self_attn.q_proj.bias", shape: []int{Q}, vec: &l.QBias},
				tensorRef{name: p + "self_attn.k_proj.bias", shape: []int{KV}, vec: &l.KBias},
				tensorRef{name: p + "self_attn.v_proj.bias", shape: []int{KV}, vec: &l.VBias},
			)
		}
		if cfg.hasOBias() {
			refs = append(refs, tensorRef{name: p + "self_attn.o_proj.bias", shape: []int{C}, vec: &l.OBias})
		}
		refs = append(refs, familyTensors(fam, p, cfg, l)...)
		if cfg.MLPBias {
			refs = append(refs,
				tensorRef{name: p + "mlp.gate_proj.bias", shape: []int{F}, vec: &l.GateBias},
				tensorRef{name: p + "mlp.up_proj.bias", shape: []int{F}, vec: &l.UpBias},
				tensorRef{name: p + "mlp.down_proj.bias", shape: []int{C}, vec: &l.DownBias},
			)
		}
	}
	if fam.NormPlusOne {
		for i := range refs {
			if strings.HasSuffix(refs[i].name, "norm.weight") {
				refs[i].offset = 1
			}
		}
	}
	return refs
}

// ignorableTensors are checkpoint entries that carry no parameters we use.
func ignorableTensor(name string) bool {
	const suffix = "rotary_emb.inv_freq"
	return len(name) >= len(suffix) && name[len(name)-len(suffix):] == suffix
}

// Prepack builds the packed copies of every weight matrix now instead of at
// first use, then returns the memory the stored 16-bit copies held (packing
// releases them) to the operating system, layer by layer. Call it once after loading, before
// allocating activations or KV caches: otherwise the stored copies, the
// packed ones and the first step's buffers are all live at once, which sets
// the process's peak memory.
func (w *Weights) Prepack() {
	for l := range w.Layers {
		for _, m := range w.Layers[l].mats() {
			(*m.p).Prepack()
		}
		// Give each layer's stored copies back as we go, so the peak is
		// the packed weights plus one layer, not both copies of all.
		debug.FreeOSMemory()
	}
	w.LMHead.Prepack()
	debug.FreeOSMemory()
}
