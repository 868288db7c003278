package model

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/artgo/art/engine/kernels"
	"github.com/artgo/art/engine/safetensors"
	"github.com/artgo/art/internal/atomicfile"
)

// presets are the named shapes `art init-model --shape` offers. A zero
// VocabSize means "the tokenizer's size, rounded up to a multiple of 64".
var presets = map[string]Config{
	"tiny": {HiddenSize: 64, IntermediateSize: 128, NumLayers: 2, NumHeads: 4, NumKVHeads: 2, HeadDim: 16,
		MaxPositions: 4096, RMSNormEps: 1e-6},
	"small": {HiddenSize: 256, IntermediateSize: 704, NumLayers: 4, NumHeads: 8, NumKVHeads: 2, HeadDim: 32,
		MaxPositions: 4096, RMSNormEps: 1e-6},
	"qwen2.5-0.5b": {ModelType: "qwen2", HiddenSize: 896, IntermediateSize: 4864, NumLayers: 24, NumHeads: 14,
		NumKVHeads: 2, HeadDim: 64, VocabSize: 151936, MaxPositions: 32768, RMSNormEps: 1e-6, RopeTheta: 1e6,
		TieWordEmbeddings: true},
	"smollm2-135m": {ModelType: "llama", HiddenSize: 576, IntermediateSize: 1536, NumLayers: 30, NumHeads: 9,
		NumKVHeads: 3, HeadDim: 64, VocabSize: 49152, MaxPositions: 8192, RMSNormEps: 1e-5, RopeTheta: 100000,
		TieWordEmbeddings: true},
	"qwen3-0.6b": {ModelType: "qwen3", HiddenSize: 1024, IntermediateSize: 3072, NumLayers: 28, NumHeads: 16,
		NumKVHeads: 8, HeadDim: 128, VocabSize: 151936, MaxPositions: 40960, RMSNormEps: 1e-6, RopeTheta: 1e6,
		TieWordEmbeddings: true},
	// Qwen3-30B-A3B: 128 experts, 8 of them per token, ~3B parameters active.
	"qwen3-30b-a3b": {ModelType: "qwen3_moe", HiddenSize: 2048, IntermediateSize: 6144, NumLayers: 48, NumHeads: 32,
		NumKVHeads: 4, HeadDim: 128, VocabSize: 151936, MaxPositions: 40960, RMSNormEps: 1e-6, RopeTheta: 1e6,
		NumExperts: 128, NumExpertsPerTok: 8, MoEIntermediateSize: 768, NormTopKProb: true, DecoderSparseStep: 1},
	// Mistral 7B v0.1: the Llama 2 tokenizer and a 4096-key sliding window.
	"mistral-7b": {ModelType: "mistral", HiddenSize: 4096, IntermediateSize: 14336, NumLayers: 32, NumHeads: 32,
		NumKVHeads: 8, HeadDim: 128, VocabSize: 32000, MaxPositions: 32768, RMSNormEps: 1e-5, RopeTheta: 10000,
		SlidingWindow: ptr(4096)},
	"gemma-3-270m": {ModelType: "gemma3_text", HiddenSize: 640, IntermediateSize: 2048, NumLayers: 18, NumHeads: 4,
		NumKVHeads: 1, HeadDim: 256, VocabSize: 262144, MaxPositions: 32768, RMSNormEps: 1e-6, RopeTheta: 1e6,
		TieWordEmbeddings: true, SlidingWindow: ptr(512), QueryPreAttnScalar: 256, RopeLocalBaseFreq: 10000},
}

func ptr[T any](v T) *T { return &v }

// PresetNames lists the shapes Preset accepts.
func PresetNames() []string {
	var out []string
	for k := range presets {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// PresetArch returns the architecture a shape named after a real model
// fixes ("qwen3_moe" for qwen3-30b-a3b); the generic shapes (tiny, small)
// fix none and give an error.
func PresetArch(shape string) (string, error) {
	c, ok := presets[shape]
	if !ok {
		return "", fmt.Errorf("model: unknown shape %q (known: %s)", shape, strings.Join(PresetNames(), ", "))
	}
	if c.ModelType == "" {
		return "", fmt.Errorf("model: shape %s fits several architectures: name one", shape)
	}
	return c.ModelType, nil
}

// Preset returns the config of a named shape for an architecture ("qwen2" or
// "llama"), sized for a tokenizer of tokenizerVocab ids (0 if none).
// Presets named after a real model fix their own architecture.
func Preset(arch, shape string, tokenizerVocab int) (Config, error) {
	c, ok := presets[shape]
	if !ok {
		return Config{}, fmt.Errorf("model: unknown shape %q (known: %s)", shape, strings.Join(PresetNames(), ", "))
	}
	if t, ok := aliases[arch]; ok {
		arch = t
	}
	fam, ok := families[arch]
	if !ok {
		return Config{}, fmt.Errorf("model: unknown architecture %q (known: %s)", arch, strings.Join(SupportedModelTypes(), ", "))
	}
	if c.ModelType != "" && c.ModelType != arch {
		return Config{}, fmt.Errorf("model: shape %s is a %s model, not %s", shape, c.ModelType, arch)
	}
	c.ModelType = arch
	c.HiddenAct = "silu"
	c.Architectures = []string{fam.Architecture}
	switch arch {
	case "qwen2":
		c.AttentionBias = true
		if c.RopeTheta == 0 {
			c.RopeTheta = 1e6
		}
		if c.VocabSize == 0 {
			c.TieWordEmbeddings = true
		}
	case "qwen3", "qwen3_moe":
		if c.RopeTheta == 0 {
			c.RopeTheta = 1e6
			c.TieWordEmbeddings = true
		}
		if arch == "qwen3_moe" && c.NumExperts == 0 {
			moeTestShape(&c)
		}
	case "mistral":
		testShapeDefaults(&c)
	case "gemma3_text":
		testShapeDefaults(&c)
		c.HiddenAct = geluTanh
		if c.LayerTypes == nil {
			c.LayerTypes = layerTypes(c.NumLayers, 6)
		}
	case "llama":
		if c.RopeTheta == 0 {
			// Llama 3.x: long-context rope scaling exercised even by the small shapes.
			c.RopeTheta = 500000
			c.RopeScaling = &RopeScaling{RopeType: "llama3", Factor: 8, LowFreqFactor: 1, HighFreqFactor: 4,
				OriginalMaxPositionEmbeddings: 8192}
		}
	}
	if tokenizerVocab > c.VocabSize {
		c.VocabSize = (tokenizerVocab + 63) / 64 * 64
	}
	if c.VocabSize == 0 {
		return Config{}, fmt.Errorf("model: shape %s needs a tokenizer to size its vocabulary", shape)
	}
	c.TorchDType = "float32"
	return c, c.Validate()
}

// moeTestShape gives the tiny and small shapes experts at sizes a test
// reaches: tiny has 4 experts, 2 a token, renormalised, on every layer;
// small 8 experts, 3 a token, not renormalised, on every second layer
// (the others dense), so the tests see both kinds of layer.
func moeTestShape(c *Config) {
	c.NumExperts, c.NumExpertsPerTok, c.MoEIntermediateSize, c.NormTopKProb, c.DecoderSparseStep = 4, 2, c.HiddenSize/2, true, 1
	if c.NumLayers > 2 {
		c.NumExperts, c.NumExpertsPerTok, c.NormTopKProb, c.DecoderSparseStep = 8, 3, false, 2
	}
}

// InitOptions controls RandomWeights.
type InitOptions struct {
	Seed uint64
	// DType is the storage of the matrices. Q8 and Q4 quantize each row
	// as it is drawn (a matrix whose rows are not whole blocks of 32
	// stays F32), so a large random model never exists in fp32.
	DType kernels.DType
	Std   float64 // matrix init std; 0 means 0.02 (transformers' initializer_range)
	// NormJitter perturbs the RMSNorm weights around 1 (and makes biases
	// non-zero) so numerical checks exercise every parameter.
	NormJitter float64
}

// RandomWeights draws weights for cfg from a seeded normal distribution, the
// way transformers initialises a fresh model.
func RandomWeights(cfg Config, opt InitOptions) Weights {
	std := opt.Std
	if std == 0 {
		std = 0.02
	}
	rng := rand.New(rand.NewPCG(opt.Seed, 0x617274676f)) // "artgo"
	var w Weights
	for _, r := range tensorTable(cfg, &w) {
		n := 1
		for _, d := range r.shape {
			n *= d
		}
		if r.vec != nil {
			v := make([]float32, n)
			isNorm := strings.HasSuffix(r.name, "norm.weight")
			for i := range v {
				if isNorm {
					v[i] = 1 + float32(opt.NormJitter*rng.NormFloat64())
				} else {
					v[i] = float32(opt.NormJitter * std * 10 * rng.NormFloat64())
				}
			}
			*r.vec = v
			continue
		}
		*r.mat = randomMat(rng, r.shape[0], r.shape[1], std, opt.DType)
	}
	if cfg.TieWordEmbeddings {
		w.LMHead = w.Embed
	}
	return w
}

func randomMat(rng *rand.Rand, rows, cols int, std float64, dt kernels.DType) *kernels.Mat {
	n := rows * cols
	switch dt {
	case kernels.F32:
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(std * rng.NormFloat64())
		}
		return kernels.NewMatF32(rows, cols, v)
	case kernels.BF16, kernels.F16:
		v := make([]uint16, n)
		conv := kernels.F32ToBF16
		if dt == kernels.F16 {
			conv = kernels.F32ToF16
		}
		for i := range v {
			v[i] = conv(float32(std * rng.NormFloat64()))
		}
		return &kernels.Mat{Rows: rows, Cols: cols, DType: dt, U16: v}
	case kernels.Q8, kernels.Q4:
		if !kernels.CanQuantize(cols, dt) {
			return randomMat(rng, rows, cols, std, kernels.F32)
		}
		row := make([]float32, cols)
		scales := make([]uint16, rows*cols/32)
		var q8 []int8
		var q4 []byte
		if dt == kernels.Q8 {
			q8 = make([]int8, n)
		} else {
			q4 = make([]byte, n/2)
		}
		for r := range rows {
			for i := range row {
				row[i] = float32(std * rng.NormFloat64())
			}
			s := scales[r*cols/32 : (r+1)*cols/32]
			var err error
			if dt == kernels.Q8 {
				err = kernels.QuantizeRowQ8(q8[r*cols:(r+1)*cols], s, row)
			} else {
				err = kernels.QuantizeRowQ4(q4[r*cols/2:(r+1)*cols/2], s, row)
			}
			if err != nil { // finite draws of whole blocks: cannot fail
				panic("model: " + err.Error())
			}
		}
		if dt == kernels.Q8 {
			return kernels.NewMatQ8(rows, cols, q8, scales)
		}
		return kernels.NewMatQ4(rows, cols, q4, scales)
	}
	panic("model: unknown dtype " + dt.String())
}

// Save writes m as a Hugging Face folder: config.json, generation_config.json
// and model.safetensors (matrices in their dtype, vectors in F32). Each file
// is written atomically.
func (m *Model) Save(dir string) error {
	var tensors []safetensors.Tensor
	w := m.W // shares m's layers: the table reads through it
	for _, r := range tensorTable(m.Config, &w) {
		if r.vec != nil {
			v := *r.vec
			if r.offset != 0 {
				v = make([]float32, len(v))
				for i, x := range *r.vec {
					v[i] = x - r.offset
				}
			}
			tensors = append(tensors, safetensors.FromF32(r.name, safetensors.F32, r.shape, v))
			continue
		}
		switch mat := *r.mat; mat.DType {
		case kernels.F32:
			tensors = append(tensors, safetensors.FromF32(r.name, safetensors.F32, r.shape, mat.F32))
		case kernels.BF16, kernels.F16: // read as written: one weight's bits at a time, nothing packed
			dt := safetensors.BF16
			if mat.DType == kernels.F16 {
				dt = safetensors.F16
			}
			tensors = append(tensors, safetensors.FromU16Func(r.name, dt, r.shape, mat.Bits16))
		default: // Q8, Q4: safetensors has no such type, and bf16 cannot hold d·q
			return fmt.Errorf("model: save: %s is stored as %v; save the model loaded without quantization (GGUF export keeps Q8 as Q8_0, Q4 as Q4_0)", r.name, mat.DType)
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("model: save: %w", err)
	}
	if err := safetensors.WriteFile(filepath.Join(dir, "model.safetensors"), tensors, map[string]string{"format": "pt"}); err != nil {
		return fmt.Errorf("model: save: %w", err)
	}
	if err := writeJSON(filepath.Join(dir, "config.json"), m.Config); err != nil {
		return err
	}
	return writeJSON(filepath.Join(dir, "generation_config.json"), m.Generation)
}

func writeJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("model: encode %s: %w", path, err)
	}
	if err := atomicfile.WriteFile(path, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("model: %w", err)
	}
	return nil
}
