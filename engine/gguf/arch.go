package gguf

import (
	"fmt"
	"math"

	"github.com/artgo/art/engine/model"
)

// archLayout is how llama.cpp's converter (convert_hf_to_gguf.py) writes one
// of the engine's model_types, and what llama.cpp's loader for that
// architecture (src/llama-model.cpp) can represent. Everything the export
// does differently per family is here; the rest of the file is shared.
type archLayout struct {
	// arch is general.architecture and the prefix of the hyperparameter
	// keys. Mistral has no architecture of its own: the converter writes
	// it as "llama".
	arch string
	// interleave: llama.cpp's architecture rotates adjacent pairs (2i,
	// 2i+1), so q and k rows are reordered inside each head (see the
	// package doc). The NeoX architectures (qwen2, qwen3, gemma3) rotate
	// the Hugging Face pairs (i, i+HD/2) and take the rows as they are.
	interleave bool
	// act is config.json's hidden_act for the gated MLP llama.cpp's graph
	// builds (SwiGLU, or GeGLU with tanh-approximated GELU).
	act string
	// check reports what of cfg and the layer weights the architecture
	// cannot hold (nil: nothing beyond the shared checks).
	check func(cfg model.Config, layers []model.Layer, bad func(string, ...any))
	// kvs returns the architecture's own hyperparameters; key prefixes a
	// name with the architecture.
	kvs func(cfg model.Config, key func(string) string) []KV
}

// archLayouts are the exportable model_types.
var archLayouts = map[string]archLayout{
	"llama":       {arch: "llama", interleave: true, act: "silu", check: checkLlamaRope},
	"mistral":     {arch: "llama", interleave: true, act: "silu", check: checkLlamaRope},
	"qwen2":       {arch: "qwen2", act: "silu", check: checkQwen2},
	"qwen3":       {arch: "qwen3", act: "silu", check: checkQwen3},
	"qwen3_moe":   {arch: "qwen3moe", act: "silu", check: checkQwen3MoE, kvs: expertKVs},
	"gemma3_text": {arch: "gemma3", act: "gelu_pytorch_tanh", check: checkGemma3, kvs: gemma3KVs},
}

// exportableTypes lists archLayouts' keys for error messages.
const exportableTypes = "llama, mistral, qwen2, qwen3, qwen3_moe, gemma3_text"

// checkLlamaRope: llama.cpp's llama architecture holds Llama 3's rope
// scaling (as the rope_freqs tensor) and no other.
func checkLlamaRope(cfg model.Config, _ []model.Layer, bad func(string, ...any)) {
	if t := ropeScalingType(cfg); t != "" && t != "llama3" {
		bad("rope_scaling %q cannot be exported for %s (only llama3)", t, cfg.ModelType)
	}
}

func checkQwen2(cfg model.Config, layers []model.Layer, bad func(string, ...any)) {
	if t := ropeScalingType(cfg); t != "" {
		bad("llama.cpp's qwen2 has no rope scaling %q", t)
	}
	if cfg.QDim() != cfg.HiddenSize {
		bad("llama.cpp's qwen2 needs num_attention_heads*head_dim (%d) = hidden_size (%d)", cfg.QDim(), cfg.HiddenSize)
	}
	if cfg.MLPBias {
		bad("llama.cpp's qwen2 has no MLP biases")
	}
	for i, l := range layers {
		if l.OBias != nil || l.GateBias != nil || l.UpBias != nil || l.DownBias != nil {
			bad("layer %d has o_proj or MLP biases, which llama.cpp's qwen2 does not load", i)
		}
	}
}

func checkQwen3(cfg model.Config, layers []model.Layer, bad func(string, ...any)) {
	if t := ropeScalingType(cfg); t != "" {
		bad("rope_scaling %q cannot be exported for qwen3", t)
	}
	noBiases("qwen3", layers, bad)
}

// checkQwen3MoE holds Qwen3-MoE to what llama.cpp's qwen3moe hard-codes:
// every layer a mixture of experts, their weights renormalised.
func checkQwen3MoE(cfg model.Config, layers []model.Layer, bad func(string, ...any)) {
	checkQwen3(cfg, layers, bad)
	if !cfg.NormTopKProb {
		bad("llama.cpp's qwen3moe renormalises the chosen experts' weights; norm_topk_prob is false")
	}
	for l := range cfg.NumLayers {
		if !cfg.IsMoE(l) {
			bad("llama.cpp's qwen3moe makes every layer a mixture of experts; layer %d is dense (decoder_sparse_step %d, mlp_only_layers %v)", l, cfg.DecoderSparseStep, cfg.MLPOnlyLayers)
			break
		}
	}
}

// expertKVs: how many experts, how many a token, and their width.
func expertKVs(cfg model.Config, key func(string) string) []KV {
	return []KV{
		{key("expert_count"), uint32(cfg.NumExperts)},
		{key("expert_used_count"), uint32(cfg.NumExpertsPerTok)},
		{key("expert_feed_forward_length"), uint32(cfg.MoEIntermediateSize)},
	}
}

// checkGemma3 holds Gemma 3 to what llama.cpp's gemma3 hard-codes rather
// than reads from the file: every sixth layer global (the rest sliding),
// local layers at rope base 10000 without scaling, and attention scaled by
// head_dim^-½ (hidden_size/num_attention_heads for the 62-layer 27B).
func checkGemma3(cfg model.Config, layers []model.Layer, bad func(string, ...any)) {
	if t := ropeScalingType(cfg); t != "" && t != "linear" {
		bad("rope_scaling %q cannot be exported for gemma3 (only linear)", t)
	}
	for l := range cfg.NumLayers {
		if global := (l+1)%6 == 0; (cfg.Window(l) == 0) != global {
			bad("llama.cpp's gemma3 makes every 6th layer global and the others sliding; layer %d is not so (layer_types %v)", l, cfg.LayerTypes)
			break
		}
	}
	if cfg.RopeLocalBaseFreq != 10000 {
		bad("llama.cpp's gemma3 rotates sliding layers with base 10000, not rope_local_base_freq %v", cfg.RopeLocalBaseFreq)
	}
	want := float64(cfg.HeadDim)
	if cfg.NumLayers == 62 { // llama.cpp takes a 62-layer Gemma 3 for the 27B
		want = float64(cfg.HiddenSize / cfg.NumHeads)
	}
	if cfg.QueryPreAttnScalar != want {
		bad("llama.cpp's gemma3 scales attention by %v^-½, not query_pre_attn_scalar %v", want, cfg.QueryPreAttnScalar)
	}
	noBiases("gemma3", layers, bad)
}

// gemma3KVs: the sliding window, the local layers' rope base (read by
// newer llama.cpp, the value older ones assume) and the global layers'
// linear rope scaling.
func gemma3KVs(cfg model.Config, key func(string) string) []KV {
	kvs := []KV{
		{key("attention.sliding_window"), uint32(*cfg.SlidingWindow)},
		{key("rope.freq_base_swa"), float32(cfg.RopeLocalBaseFreq)},
	}
	if ropeScalingType(cfg) == "linear" {
		kvs = append(kvs,
			KV{key("rope.scaling.type"), "linear"},
			KV{key("rope.scaling.factor"), float32(cfg.RopeScaling.Factor)})
	}
	return kvs
}

// noBiases reports projection biases, which arch's llama.cpp graph does
// not add.
func noBiases(arch string, layers []model.Layer, bad func(string, ...any)) {
	for i, l := range layers {
		for _, b := range [][]float32{l.QBias, l.KBias, l.VBias, l.OBias, l.GateBias, l.UpBias, l.DownBias} {
			if b != nil {
				bad("layer %d has projection biases, which llama.cpp's %s does not load", i, arch)
				return
			}
		}
	}
}

// contextLength is GGUF's context_length for cfg. llama.cpp's llama
// architecture has no sliding window, so a Mistral model whose window is
// shorter than its context is written with the window as its context:
// within it, full attention and the window see the same keys.
func contextLength(cfg model.Config) int {
	if cfg.ModelType == "mistral" && cfg.SlidingWindow != nil && *cfg.SlidingWindow < cfg.MaxPositions {
		return *cfg.SlidingWindow
	}
	return cfg.MaxPositions
}

// checkLayout reports how cfg and layers differ from what layout holds
// beyond the shared shapes: the MLP activation, the family's extra norms
// and the architecture's own limits.
func checkLayout(layout archLayout, cfg model.Config, layers []model.Layer, bad func(string, ...any)) {
	if cfg.HiddenAct != layout.act {
		bad("hidden_act %q: llama.cpp's %s applies %s", cfg.HiddenAct, layout.arch, layout.act)
	}
	C, HD := cfg.HiddenSize, cfg.HeadDim
	for i := range layers {
		l := &layers[i]
		for _, v := range []struct {
			name string
			x    []float32
			n    int
		}{{"q_norm", l.QNorm, HD}, {"k_norm", l.KNorm, HD}, {"post-attention norm", l.AttnOutNorm, C}, {"post-MLP norm", l.MLPOutNorm, C}} {
			if v.x != nil && len(v.x) != v.n {
				bad("layer %d %s has %d values, want %d", i, v.name, len(v.x), v.n)
			}
		}
	}
	if cfg.SlidingWindow != nil && *cfg.SlidingWindow > math.MaxUint32 {
		bad("sliding_window %d does not fit GGUF's uint32", *cfg.SlidingWindow)
	}
	if layout.check != nil {
		layout.check(cfg, layers, bad)
	}
}

// layoutOf returns the layout of cfg's model_type.
func layoutOf(cfg model.Config) (archLayout, error) {
	layout, ok := archLayouts[cfg.ModelType]
	if !ok {
		return archLayout{}, fmt.Errorf("gguf: model_type %q cannot be exported (supported: %s)", cfg.ModelType, exportableTypes)
	}
	return layout, nil
}

// familyTensors lays out layer l's norms that only some families have
// (q/k norms, Gemma 3's sandwich norms) under llama.cpp's names, with
// blk.N. prefix p; vector skips the nil ones.
func familyTensors(vector func(name string, x []float32, order []int), p string, l *model.Layer) {
	vector(p+"attn_q_norm.weight", l.QNorm, nil)
	vector(p+"attn_k_norm.weight", l.KNorm, nil)
	vector(p+"post_attention_norm.weight", l.AttnOutNorm, nil)
	vector(p+"post_ffw_norm.weight", l.MLPOutNorm, nil)
}
