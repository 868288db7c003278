package model

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// Config is the subset of a Hugging Face config.json the engine needs.
type Config struct {
	ModelType         string       `json:"model_type"`
	Architectures     []string     `json:"architectures,omitempty"`
	HiddenSize        int          `json:"hidden_size"`
	IntermediateSize  int          `json:"intermediate_size"`
	NumLayers         int          `json:"num_hidden_layers"`
	NumHeads          int          `json:"num_attention_heads"`
	NumKVHeads        int          `json:"num_key_value_heads"`
	HeadDim           int          `json:"head_dim,omitempty"`
	VocabSize         int          `json:"vocab_size"`
	MaxPositions      int          `json:"max_position_embeddings"`
	RMSNormEps        float64      `json:"rms_norm_eps"`
	RopeTheta         float64      `json:"rope_theta"`
	RopeScaling       *RopeScaling `json:"rope_scaling,omitempty"`
	TieWordEmbeddings bool         `json:"tie_word_embeddings"`
	AttentionBias     bool         `json:"attention_bias"`
	MLPBias           bool         `json:"mlp_bias,omitempty"`
	HiddenAct         string       `json:"hidden_act"`
	TorchDType        string       `json:"torch_dtype,omitempty"`
	BOSTokenID        *int         `json:"bos_token_id,omitempty"`
	EOSTokenID        TokenIDs     `json:"eos_token_id,omitempty"`

	// Family-specific keys (family.go says which family reads which).
	SlidingWindow         *int     `json:"sliding_window,omitempty"`
	UseSlidingWindow      *bool    `json:"use_sliding_window,omitempty"`
	LayerTypes            []string `json:"layer_types,omitempty"`
	SlidingWindowPattern  int      `json:"sliding_window_pattern,omitempty"`
	RopeLocalBaseFreq     float64  `json:"rope_local_base_freq,omitempty"`
	QueryPreAttnScalar    float64  `json:"query_pre_attn_scalar,omitempty"`
	HiddenActivation      string   `json:"hidden_activation,omitempty"` // Gemma's name for hidden_act
	AttnLogitSoftcapping  *float64 `json:"attn_logit_softcapping,omitempty"`
	FinalLogitSoftcapping *float64 `json:"final_logit_softcapping,omitempty"`

	// Mixture of experts (Family.MoE: qwen3_moe). Layer l routes each
	// row to NumExpertsPerTok of NumExperts SwiGLU experts of width
	// MoEIntermediateSize unless it is in MLPOnlyLayers (a dense MLP of
	// IntermediateSize) or (l+1) is not a multiple of DecoderSparseStep.
	NumExperts          int   `json:"num_experts,omitempty"`
	NumExpertsPerTok    int   `json:"num_experts_per_tok,omitempty"`
	MoEIntermediateSize int   `json:"moe_intermediate_size,omitempty"`
	NormTopKProb        bool  `json:"norm_topk_prob,omitempty"`
	DecoderSparseStep   int   `json:"decoder_sparse_step,omitempty"`
	MLPOnlyLayers       []int `json:"mlp_only_layers,omitempty"`
}

// RopeScaling is config.json's rope_scaling; the "llama3" and "linear"
// types (and no scaling) are supported.
type RopeScaling struct {
	RopeType                      string  `json:"rope_type"`
	Type                          string  `json:"type,omitempty"` // older spelling of rope_type
	Factor                        float64 `json:"factor"`
	LowFreqFactor                 float64 `json:"low_freq_factor"`
	HighFreqFactor                float64 `json:"high_freq_factor"`
	OriginalMaxPositionEmbeddings int     `json:"original_max_position_embeddings"`
}

// TokenIDs is a token id field that config files write either as one int or
// as a list of ints.
type TokenIDs []int

// UnmarshalJSON accepts an int, a list of ints or null.
func (t *TokenIDs) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		*t = nil
		return nil
	}
	var one int
	if err := json.Unmarshal(b, &one); err == nil {
		*t = TokenIDs{one}
		return nil
	}
	var many []int
	if err := json.Unmarshal(b, &many); err != nil {
		return fmt.Errorf("token id: want an int or a list of ints, got %s", b)
	}
	*t = many
	return nil
}

// MarshalJSON writes a single id as an int, several as a list.
func (t TokenIDs) MarshalJSON() ([]byte, error) {
	if len(t) == 1 {
		return json.Marshal(t[0])
	}
	return json.Marshal([]int(t))
}

// SupportedModelTypes returns the model_type values Load accepts.
func SupportedModelTypes() []string {
	var out []string
	for k := range families {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// ReadConfig reads and validates dir/config.json.
func ReadConfig(dir string) (Config, error) {
	path := filepath.Join(dir, "config.json")
	b, err := os.ReadFile(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			// Say what was expected, not only what was missing: the path
			// is usually a flag the user typed.
			const want = "a model is a Hugging Face folder: config.json, *.safetensors, tokenizer.json; art init-model makes one"
			if _, serr := os.Stat(dir); serr != nil {
				return Config{}, fmt.Errorf("model: folder %s: %w (%s)", dir, serr, want)
			}
			return Config{}, fmt.Errorf("model: %s is not a model folder: no config.json (%s): %w", dir, want, err)
		}
		return Config{}, fmt.Errorf("model: read config: %w", err)
	}
	c, err := ParseConfig(b)
	if err != nil {
		return Config{}, fmt.Errorf("model: %s: %w", path, err)
	}
	return c, nil
}

// ParseConfig decodes a config.json, applies defaults and validates it.
func ParseConfig(b []byte) (Config, error) {
	var c Config
	if err := json.Unmarshal(b, &c); err != nil {
		return Config{}, fmt.Errorf("invalid JSON: %w", err)
	}
	f, ok := families[c.ModelType]
	if !ok {
		return Config{}, unsupportedType(c.ModelType)
	}
	if f.QKVBias {
		c.AttentionBias = true // Qwen2's configs have no attention_bias key
	}
	if f.defaults != nil {
		var raw map[string]json.RawMessage
		if err := json.Unmarshal(b, &raw); err != nil {
			return Config{}, fmt.Errorf("invalid JSON: %w", err)
		}
		if err := f.defaults(&c, raw); err != nil {
			return Config{}, err
		}
	}
	if c.NumKVHeads == 0 {
		c.NumKVHeads = c.NumHeads
	}
	if c.HeadDim == 0 && c.NumHeads > 0 {
		c.HeadDim = c.HiddenSize / c.NumHeads
	}
	if c.RMSNormEps == 0 {
		c.RMSNormEps = 1e-6
	}
	if c.RopeTheta == 0 {
		c.RopeTheta = 10000
	}
	if c.HiddenAct == "" {
		c.HiddenAct = "silu"
	}
	return c, c.Validate()
}

// Validate reports the first inconsistent field of c.
func (c Config) Validate() error {
	var errs []error
	pos := func(name string, v int) { checkPositive(&errs, name, v) }
	pos("hidden_size", c.HiddenSize)
	pos("intermediate_size", c.IntermediateSize)
	pos("num_hidden_layers", c.NumLayers)
	pos("num_attention_heads", c.NumHeads)
	pos("num_key_value_heads", c.NumKVHeads)
	pos("head_dim", c.HeadDim)
	pos("vocab_size", c.VocabSize)
	if c.NumHeads > 0 && c.NumKVHeads > 0 && c.NumHeads%c.NumKVHeads != 0 {
		errs = append(errs, fmt.Errorf("num_attention_heads %d is not a multiple of num_key_value_heads %d", c.NumHeads, c.NumKVHeads))
	}
	if c.HeadDim%2 != 0 {
		errs = append(errs, fmt.Errorf("head_dim %d must be even for rotary embeddings", c.HeadDim))
	}
	if _, ok := families[c.ModelType]; !ok {
		errs = append(errs, unsupportedType(c.ModelType))
	}
	if c.HiddenAct != "silu" && c.HiddenAct != geluTanh {
		errs = append(errs, fmt.Errorf("hidden_act %q is not supported (only silu and %s)", c.HiddenAct, geluTanh))
	}
	if c.RMSNormEps <= 0 || math.IsNaN(c.RMSNormEps) {
		errs = append(errs, fmt.Errorf("rms_norm_eps must be > 0, got %v", c.RMSNormEps))
	}
	if rs := c.RopeScaling; rs != nil {
		t := rs.RopeType
		if t == "" {
			t = rs.Type
		}
		switch t {
		case "default", "":
		case "linear":
			if rs.Factor <= 0 {
				errs = append(errs, fmt.Errorf("rope_scaling linear needs factor > 0"))
			}
		case "llama3":
			if rs.Factor <= 0 || rs.LowFreqFactor <= 0 || rs.HighFreqFactor <= rs.LowFreqFactor || rs.OriginalMaxPositionEmbeddings <= 0 {
				errs = append(errs, fmt.Errorf("rope_scaling llama3 needs factor > 0, 0 < low_freq_factor < high_freq_factor and original_max_position_embeddings > 0"))
			}
		default:
			errs = append(errs, fmt.Errorf("rope_scaling type %q is not supported (only llama3 and linear)", t))
		}
	}
	errs = append(errs, c.validateFamily()...)
	return errors.Join(errs...)
}

// checkPositive adds to errs that config field name must be > 0 when v is not.
func checkPositive(errs *[]error, name string, v int) {
	if v <= 0 {
		*errs = append(*errs, fmt.Errorf("%s must be > 0, got %d", name, v))
	}
}

// hasOBias reports whether o_proj has a bias: attention_bias covers all
// four projections except in families whose biases are on q, k and v only.
func (c Config) hasOBias() bool { return c.AttentionBias && !c.family().QKVBias }

// unsupportedType is the error for a model_type no family handles.
func unsupportedType(t string) error {
	hint := ""
	if t == "gemma3" {
		hint = "; multimodal Gemma 3 checkpoints are not supported, use a text-only one (model_type gemma3_text, e.g. gemma-3-270m or gemma-3-1b)"
	}
	return fmt.Errorf("model_type %q is not supported (supported: %s)%s", t, strings.Join(SupportedModelTypes(), ", "), hint)
}

// QDim is NH*HD, the width of the query projection.
func (c Config) QDim() int { return c.NumHeads * c.HeadDim }

// KVDim is KVH*HD, the width of the key and value projections.
func (c Config) KVDim() int { return c.NumKVHeads * c.HeadDim }

// NumParams counts the model's parameters (tied embeddings once).
func (c Config) NumParams() int64 {
	C, F, V := int64(c.HiddenSize), int64(c.IntermediateSize), int64(c.VocabSize)
	Q, KV := int64(c.QDim()), int64(c.KVDim())
	layer := C*Q + 2*C*KV + Q*C + 3*C*F + 2*C
	if c.family().QKNorm {
		layer += 2 * int64(c.HeadDim)
	}
	if c.family().SandwichNorms {
		layer += 2 * C
	}
	if c.AttentionBias {
		layer += Q + 2*KV
	}
	if c.hasOBias() {
		layer += C
	}
	if c.MLPBias {
		layer += 2*F + C
	}
	n := V*C + int64(c.NumLayers)*layer + C
	for l := range c.NumLayers {
		if c.IsMoE(l) { // experts and a router instead of the dense MLP
			n += int64(c.NumExperts)*3*C*int64(c.MoEIntermediateSize) + int64(c.NumExperts)*C - 3*C*F
		}
	}
	if !c.TieWordEmbeddings {
		n += V * C
	}
	return n
}

// GenerationConfig holds generation_config.json's sampling defaults.
type GenerationConfig struct {
	Temperature *float64 `json:"temperature,omitempty"`
	TopP        *float64 `json:"top_p,omitempty"`
	TopK        *int     `json:"top_k,omitempty"`
	BOSTokenID  *int     `json:"bos_token_id,omitempty"`
	EOSTokenID  TokenIDs `json:"eos_token_id,omitempty"`
	DoSample    *bool    `json:"do_sample,omitempty"`
}

// ReadGenerationConfig reads dir/generation_config.json; a missing file gives
// the zero value and no error.
func ReadGenerationConfig(dir string) (GenerationConfig, error) {
	var g GenerationConfig
	b, err := os.ReadFile(filepath.Join(dir, "generation_config.json"))
	if errors.Is(err, os.ErrNotExist) {
		return g, nil
	}
	if err != nil {
		return g, fmt.Errorf("model: read generation config: %w", err)
	}
	if err := json.Unmarshal(b, &g); err != nil {
		return g, fmt.Errorf("model: %s: invalid JSON: %w", filepath.Join(dir, "generation_config.json"), err)
	}
	return g, nil
}
