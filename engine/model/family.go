package model

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
)

// A Family is one architecture (one model_type): what its layer does
// beyond the Llama layer, which every family shares:
//
//	mid  = in  + outNorm(o(attention(scale·rope(qkNorm(q(xn1))), rope(qkNorm(k(xn1))), v(xn1))))
//	next = mid + outNorm(down(act(gate(xn2)) * up(xn2)))
//
// where xn1 = norm(in), xn2 = norm(mid), and qkNorm, outNorm and scale
// are the identity unless the family says otherwise. The layer code
// (layer.go, layerfamily.go) reads these flags; nothing else in the engine
// asks which family a model is.
type Family struct {
	ModelType    string // config.json's model_type
	Architecture string // config.json's architectures[0]

	// QKVBias: q, k and v always have biases (Qwen2), whatever
	// attention_bias says; otherwise attention_bias adds biases to all
	// four projections (Llama, Mistral).
	QKVBias bool
	// QKNorm: q and k are RMS-normed per head (HD wide, weights
	// self_attn.q_norm and k_norm) after the projections, before RoPE
	// (Qwen3, Gemma 3).
	QKNorm bool
	// NormPlusOne: every RMSNorm scales by 1 + weight (Gemma). The offset
	// is folded into the weights at load and taken out at save, which is
	// exact: transformers computes float32(1 + weight) too.
	NormPlusOne bool
	// SandwichNorms: the attention and MLP outputs are RMS-normed before
	// they join the residual stream (Gemma 3). The checkpoint then names
	// the norms input_layernorm, post_attention_layernorm (attention
	// output), pre_feedforward_layernorm (MLP input) and
	// post_feedforward_layernorm (MLP output).
	SandwichNorms bool
	// EmbedScale: the embedding rows are multiplied by √C (Gemma); the
	// tied LM head reads the unscaled matrix.
	EmbedScale bool
	// QueryPreAttnScalar: attention scores are scaled by
	// query_pre_attn_scalar^-½ instead of HD^-½ (Gemma).
	QueryPreAttnScalar bool
	// MoE: layers route each row to a few of many SwiGLU experts
	// (Config.IsMoE, moe.go; Qwen3-MoE).
	MoE bool
	// LocalRope: sliding-window layers rotate with rope_local_base_freq
	// and no rope scaling; full-attention layers with rope_theta and
	// rope_scaling (Gemma 3).
	LocalRope bool
	// sliding reports whether layer l attends over a sliding window of
	// config.sliding_window keys (nil: no layer does).
	sliding func(c *Config, l int) bool
	// defaults fills what config.json leaves out; raw holds its keys.
	defaults func(c *Config, raw map[string]json.RawMessage) error
}

// families are the supported architectures by model_type.
var families = map[string]*Family{}

// aliases are the names `art init-model --arch` accepts besides model_type.
var aliases = map[string]string{"gemma3": "gemma3_text"}

func register(f *Family) {
	if _, dup := families[f.ModelType]; dup {
		panic("model: family " + f.ModelType + " registered twice")
	}
	families[f.ModelType] = f
}

func init() {
	register(&Family{ModelType: "llama", Architecture: "LlamaForCausalLM"})
	register(&Family{ModelType: "qwen2", Architecture: "Qwen2ForCausalLM", QKVBias: true, defaults: noQwenWindow})
	register(&Family{ModelType: "qwen3", Architecture: "Qwen3ForCausalLM", QKNorm: true, defaults: noQwenWindow})
	register(&Family{ModelType: "qwen3_moe", Architecture: "Qwen3MoeForCausalLM", QKNorm: true, MoE: true, defaults: qwenMoEDefaults})
	register(&Family{ModelType: "mistral", Architecture: "MistralForCausalLM",
		// Mistral 7B v0.1 slides a 4096-key window on every layer;
		// later versions set sliding_window to null.
		sliding: func(c *Config, _ int) bool { return c.SlidingWindow != nil },
	})
	register(&Family{ModelType: "gemma3_text", Architecture: "Gemma3ForCausalLM",
		QKNorm: true, NormPlusOne: true, SandwichNorms: true, EmbedScale: true, QueryPreAttnScalar: true, LocalRope: true,
		sliding:  func(c *Config, l int) bool { return c.LayerTypes[l] == slidingAttention },
		defaults: gemma3Defaults,
	})
}

// Layer types of config.json's layer_types.
const (
	slidingAttention = "sliding_attention"
	fullAttention    = "full_attention"
)

// noQwenWindow refuses Qwen's use_sliding_window (its configs carry a
// sliding_window that is off unless use_sliding_window is true).
func noQwenWindow(c *Config, _ map[string]json.RawMessage) error {
	if c.UseSlidingWindow != nil && *c.UseSlidingWindow {
		return fmt.Errorf("use_sliding_window is not supported for %s", c.ModelType)
	}
	return nil
}

// qwenMoEDefaults are Qwen3MoeConfig's defaults for the MoE keys a
// config.json may leave out.
func qwenMoEDefaults(c *Config, raw map[string]json.RawMessage) error {
	if c.DecoderSparseStep == 0 {
		c.DecoderSparseStep = 1
	}
	return noQwenWindow(c, raw)
}

// IsMoE reports whether layer l is a mixture of experts.
func (c *Config) IsMoE(l int) bool {
	return c.family().MoE && c.NumExperts > 0 && c.DecoderSparseStep > 0 &&
		(l+1)%c.DecoderSparseStep == 0 && !slices.Contains(c.MLPOnlyLayers, l)
}

// gemma3Defaults are Gemma3TextConfig's defaults for the keys a
// config.json may leave out, and its layer_types from the older
// sliding_window_pattern (every pattern-th layer is global).
func gemma3Defaults(c *Config, raw map[string]json.RawMessage) error {
	if _, ok := raw["tie_word_embeddings"]; !ok {
		c.TieWordEmbeddings = true
	}
	if c.HiddenAct == "" {
		c.HiddenAct = c.HiddenActivation
	}
	if c.HiddenAct == "" {
		c.HiddenAct = "gelu_pytorch_tanh"
	}
	if c.RopeTheta == 0 {
		c.RopeTheta = 1e6
	}
	if c.RopeLocalBaseFreq == 0 {
		c.RopeLocalBaseFreq = 10000
	}
	if c.QueryPreAttnScalar == 0 {
		c.QueryPreAttnScalar = 256
	}
	if c.SlidingWindow == nil {
		w := 4096
		c.SlidingWindow = &w
	}
	if len(c.LayerTypes) == 0 {
		pattern := c.SlidingWindowPattern
		if pattern == 0 {
			pattern = 6
		}
		c.LayerTypes = layerTypes(c.NumLayers, pattern)
	}
	return nil
}

// layerTypes makes every pattern-th of n layers global, the rest sliding.
func layerTypes(n, pattern int) []string {
	out := make([]string, n)
	for l := range out {
		out[l] = slidingAttention
		if (l+1)%pattern == 0 {
			out[l] = fullAttention
		}
	}
	return out
}

// family returns c's architecture, or an empty Family (the Llama layer)
// for a model_type Validate would refuse.
func (c *Config) family() *Family {
	if f, ok := families[c.ModelType]; ok {
		return f
	}
	return &Family{}
}

// Window returns the number of keys layer l attends to, the query's own
// included, or 0 when it sees every earlier key.
func (c *Config) Window(l int) int {
	f := c.family()
	if f.sliding == nil || !f.sliding(c, l) {
		return 0
	}
	return *c.SlidingWindow
}

// localRope reports whether layer l rotates with the local base frequency.
func (c *Config) localRope(l int) bool { return c.family().LocalRope && c.Window(l) > 0 }

// validateFamily reports what c's family needs and c lacks, and the
// features the engine refuses.
func (c *Config) validateFamily() []error {
	var errs []error
	f := c.family()
	if c.AttnLogitSoftcapping != nil || c.FinalLogitSoftcapping != nil {
		errs = append(errs, fmt.Errorf("attn_logit_softcapping and final_logit_softcapping are not supported (Gemma 2 uses them; Gemma 3 sets both to null)"))
	}
	if f.sliding != nil && c.SlidingWindow != nil && *c.SlidingWindow <= 0 {
		errs = append(errs, fmt.Errorf("sliding_window must be > 0, got %d", *c.SlidingWindow))
	}
	if f.MoE {
		checkPositive(&errs, "num_experts", c.NumExperts)
		checkPositive(&errs, "moe_intermediate_size", c.MoEIntermediateSize)
		checkPositive(&errs, "decoder_sparse_step", c.DecoderSparseStep)
		if c.NumExpertsPerTok < 1 || c.NumExpertsPerTok > c.NumExperts {
			errs = append(errs, fmt.Errorf("num_experts_per_tok must be in [1, num_experts = %d], got %d", c.NumExperts, c.NumExpertsPerTok))
		}
		for _, l := range c.MLPOnlyLayers {
			if l < 0 || l >= c.NumLayers {
				errs = append(errs, fmt.Errorf("mlp_only_layers holds %d; layers are 0..%d", l, c.NumLayers-1))
			}
		}
	} else if c.NumExperts != 0 {
		errs = append(errs, fmt.Errorf("num_experts is set, but %s models have no experts (qwen3_moe has)", c.ModelType))
	}
	if f.ModelType == "gemma3_text" {
		if len(c.LayerTypes) != c.NumLayers {
			errs = append(errs, fmt.Errorf("layer_types has %d entries for %d layers", len(c.LayerTypes), c.NumLayers))
		}
		for i, t := range c.LayerTypes {
			if t != slidingAttention && t != fullAttention {
				errs = append(errs, fmt.Errorf("layer_types[%d] is %q; want %q or %q", i, t, slidingAttention, fullAttention))
			}
		}
		if c.QueryPreAttnScalar <= 0 || math.IsNaN(c.QueryPreAttnScalar) {
			errs = append(errs, fmt.Errorf("query_pre_attn_scalar must be > 0, got %v", c.QueryPreAttnScalar))
		}
		if c.RopeLocalBaseFreq <= 0 {
			errs = append(errs, fmt.Errorf("rope_local_base_freq must be > 0, got %v", c.RopeLocalBaseFreq))
		}
	}
	return errs
}

// derive sets what m computes once from its config: the rotary
// frequencies and the family's constant factors.
func (m *Model) derive() {
	cfg := m.Config
	f := cfg.family()
	m.freqs = ropeFreqs(cfg)
	m.localFreqs = nil
	if f.LocalRope {
		local := cfg
		local.RopeTheta, local.RopeScaling = cfg.RopeLocalBaseFreq, nil
		m.localFreqs = ropeFreqs(local)
	}
	m.embedScale = 1
	if f.EmbedScale {
		m.embedScale = float32(math.Sqrt(float64(cfg.HiddenSize)))
	}
	m.queryScale = 1
	if f.QueryPreAttnScalar {
		// attention scales scores by HD^-½; the query carries the rest.
		m.queryScale = float32(math.Sqrt(float64(cfg.HeadDim) / cfg.QueryPreAttnScalar))
	}
}

// testShapeDefaults gives the tiny and small shapes (those without a
// rope_theta) of Mistral and Gemma 3 the family's features at sizes a
// test reaches: a sliding window shorter than the test sequences and,
// for Gemma 3, local and global layers, a query scale other than HD^-½
// and linear rope scaling on the global layers.
func testShapeDefaults(c *Config) {
	if c.RopeTheta != 0 {
		return
	}
	c.SlidingWindow = ptr(11)
	switch c.ModelType {
	case "mistral":
		c.RopeTheta = 10000
	case "gemma3_text":
		c.RopeTheta, c.RopeLocalBaseFreq = 1e6, 10000
		c.RopeScaling = &RopeScaling{RopeType: "linear", Factor: 8}
		c.QueryPreAttnScalar = float64(c.HeadDim) * 1.5
		c.TieWordEmbeddings = true
		c.LayerTypes = layerTypes(c.NumLayers, 2)
	}
}
