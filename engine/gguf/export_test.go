package gguf

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/artgo/art/engine/kernels"
	"github.com/artgo/art/engine/model"
	"github.com/artgo/art/internal/testassets"
)

// Synthetic tokenizer used when the real ones are not needed: testVocab
// normal tokens "w0".."w199", then added tokens.
const testVocab = 200

var testAdded = []struct {
	content string
	special bool
	typ     int32 // expected token_type
}{
	{"<|endoftext|>", true, tokenControl},
	{"<|im_start|>", true, tokenControl},
	{"<|im_end|>", true, tokenControl},
	{"<tool_call>", false, tokenUserDefined},
	{"<|fim_prefix|>", false, tokenControl}, // not marked special, but a control marker
}

const testTemplate = "{% for m in messages %}<|im_start|>{{ m.content }}<|im_end|>{% endfor %}"

// writeTestTokenizer writes a small byte-level BPE tokenizer.json and
// tokenizer_config.json into dir. pairMerges writes merges as ["a", "b"]
// lists (newer tokenizers) instead of "a b" strings.
func writeTestTokenizer(tb testing.TB, dir string, pairMerges bool) {
	tb.Helper()
	vocab := map[string]int{}
	for i := 0; i < testVocab; i++ {
		vocab[fmt.Sprintf("w%d", i)] = i
	}
	var merges []any
	for i := 1; i < 20; i++ {
		if pairMerges {
			merges = append(merges, []string{"w", fmt.Sprint(i)})
		} else {
			merges = append(merges, "w "+fmt.Sprint(i))
		}
	}
	var added []map[string]any
	for i, a := range testAdded {
		added = append(added, map[string]any{"id": testVocab + i, "content": a.content, "special": a.special,
			"single_word": false, "lstrip": false, "rstrip": false, "normalized": false})
	}
	var qwenRegex string
	for re, name := range preTokenizers {
		if name == "qwen2" {
			qwenRegex = re
		}
	}
	tok := map[string]any{
		"version":      "1.0",
		"added_tokens": added,
		"pre_tokenizer": map[string]any{"type": "Sequence", "pretokenizers": []any{
			map[string]any{"type": "Split", "pattern": map[string]any{"Regex": qwenRegex}, "behavior": "Isolated"},
			map[string]any{"type": "ByteLevel", "add_prefix_space": false},
		}},
		"post_processor": map[string]any{"type": "ByteLevel"},
		"model":          map[string]any{"type": "BPE", "vocab": vocab, "merges": merges},
	}
	cfg := map[string]any{
		"add_bos_token":    false,
		"bos_token":        nil,
		"eos_token":        "<|im_end|>",
		"pad_token":        map[string]any{"content": "<|endoftext|>", "special": true},
		"chat_template":    testTemplate,
		"model_max_length": 1e30, // real files hold numbers no int type fits
	}
	writeJSONFile(tb, filepath.Join(dir, TokenizerJSON), tok)
	writeJSONFile(tb, filepath.Join(dir, TokenizerConfigJSON), cfg)
}

func writeJSONFile(tb testing.TB, path string, v any) {
	tb.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		tb.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		tb.Fatal(err)
	}
}

// testModel builds a random tiny model of arch sized for the test
// tokenizer (Gemma 3 in the shape llama.cpp runs).
func testModel(tb testing.TB, arch string, dt kernels.DType, biases bool) *model.Model {
	tb.Helper()
	cfg, err := model.Preset(arch, "tiny", testVocab+len(testAdded))
	if err != nil {
		tb.Fatal(err)
	}
	if biases {
		cfg.AttentionBias, cfg.MLPBias = true, true
	}
	if arch == "gemma3" {
		gemma3LlamaCppShape(&cfg)
	}
	m, err := model.New(cfg, model.RandomWeights(cfg, model.InitOptions{Seed: 1, DType: dt, NormJitter: 0.1}))
	if err != nil {
		tb.Fatal(err)
	}
	return m
}

// wantTensor is what an exported tensor must hold: PyTorch layout values
// (rows of cols) and the HF row each GGUF row comes from.
type wantTensor struct {
	rows, cols int
	typ        Type
	at         func(r, c int) float32
	order      []int // nil: identity
}

// expectedTensors lists the tensors Export must write for m.
func expectedTensors(m *model.Model, dt Type) map[string]wantTensor {
	cfg := m.Config
	want := map[string]wantTensor{}
	mat := func(name string, x *kernels.Mat, order []int) {
		want[name] = wantTensor{rows: x.Rows, cols: x.Cols, typ: dt, at: x.At, order: order}
	}
	vec := func(name string, v []float32, order []int) {
		if v != nil {
			want[name] = wantTensor{rows: 1, cols: len(v), typ: F32, at: func(_, c int) float32 { return v[c] }, order: order}
		}
	}
	var qo, ko []int
	if archLayouts[cfg.ModelType].interleave {
		qo, ko = interleaveHeads(cfg.NumHeads, cfg.HeadDim), interleaveHeads(cfg.NumKVHeads, cfg.HeadDim)
	}
	mat("token_embd.weight", m.W.Embed, nil)
	vec("output_norm.weight", m.W.FinalNorm, nil)
	if !cfg.TieWordEmbeddings {
		mat("output.weight", m.W.LMHead, nil)
	}
	if ropeScalingType(cfg) == "llama3" {
		vec("rope_freqs.weight", llama3RopeFactors(cfg), nil)
	}
	for i, l := range m.W.Layers {
		p := fmt.Sprintf("blk.%d.", i)
		vec(p+"attn_norm.weight", l.AttnNorm, nil)
		mat(p+"attn_q.weight", l.Q, qo)
		vec(p+"attn_q.bias", l.QBias, qo)
		mat(p+"attn_k.weight", l.K, ko)
		vec(p+"attn_k.bias", l.KBias, ko)
		mat(p+"attn_v.weight", l.V, nil)
		vec(p+"attn_v.bias", l.VBias, nil)
		mat(p+"attn_output.weight", l.O, nil)
		vec(p+"attn_output.bias", l.OBias, nil)
		vec(p+"attn_q_norm.weight", l.QNorm, nil)
		vec(p+"attn_k_norm.weight", l.KNorm, nil)
		vec(p+"post_attention_norm.weight", l.AttnOutNorm, nil)
		vec(p+"ffn_norm.weight", l.MLPNorm, nil)
		vec(p+"post_ffw_norm.weight", l.MLPOutNorm, nil)
		mat(p+"ffn_gate.weight", l.Gate, nil)
		vec(p+"ffn_gate.bias", l.GateBias, nil)
		mat(p+"ffn_up.weight", l.Up, nil)
		vec(p+"ffn_up.bias", l.UpBias, nil)
		mat(p+"ffn_down.weight", l.Down, nil)
		vec(p+"ffn_down.bias", l.DownBias, nil)
	}
	return want
}

// Ensure an exported model reads back with every tensor present under its
// GGUF name, with GGUF dims (ne0 = input features), the requested dtype and
// the model's values (F32 exact, F16 the correctly rounded half), Llama's
// q/k rows interleaved per head, and the hyperparameter and tokenizer
// metadata llama.cpp reads.
func TestExport_RoundTrip(t *testing.T) {
	tests := []struct {
		name   string
		arch   string
		src    kernels.DType // storage of the model's matrices
		out    Type
		biases bool
		pairs  bool
		// quantized quantizes the model (model.Q8 for Q8_0, model.Q4
		// for Q4_0) before exporting it.
		quantized bool
	}{
		{"qwen2_f32", "qwen2", kernels.F32, F32, false, true, false},
		{"qwen2_f16", "qwen2", kernels.F32, F16, false, false, false},
		{"llama_f32", "llama", kernels.BF16, F32, true, false, false},
		{"llama_f16_from_bf16", "llama", kernels.BF16, F16, true, true, false},
		{"llama_f16_from_f16", "llama", kernels.F16, F16, false, false, false},
		{"qwen2_q8_from_q8", "qwen2", kernels.F32, Q8_0, false, false, true},
		{"llama_q8_from_q8", "llama", kernels.BF16, Q8_0, true, false, true},
		{"llama_q8_from_bf16", "llama", kernels.BF16, Q8_0, true, false, false},
		{"qwen3_f32", "qwen3", kernels.BF16, F32, false, false, false},
		{"mistral_f16", "mistral", kernels.BF16, F16, true, false, false},
		{"gemma3_f32", "gemma3", kernels.F32, F32, false, true, false},
		{"gemma3_q8_from_q8", "gemma3", kernels.BF16, Q8_0, false, false, true},
		{"qwen2_q4_from_q4", "qwen2", kernels.F32, Q4_0, false, false, true},
		{"llama_q4_from_q4", "llama", kernels.BF16, Q4_0, true, false, true},
		{"llama_q4_from_bf16", "llama", kernels.BF16, Q4_0, true, false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			writeTestTokenizer(t, dir, tt.pairs)
			m := testModel(t, tt.arch, tt.src, tt.biases)
			// A Q8_0 (Q4_0) export holds the values of the engine's Q8
			// (Q4) model: its own blocks, or the same blocks quantized on
			// the way.
			wantModel := m
			if q, ok := map[Type]model.Quantization{Q8_0: model.Q8, Q4_0: model.Q4}[tt.out]; ok {
				wantModel = testModel(t, tt.arch, tt.src, tt.biases)
				if err := wantModel.W.Quantize(q); err != nil {
					t.Fatal(err)
				}
				if tt.quantized {
					m = wantModel
				}
			}
			cfg := m.Config
			var buf bytes.Buffer
			if err := Export(&buf, m, dir, Options{DType: tt.out}); err != nil {
				t.Fatal(err)
			}
			f, err := Read(bytes.NewReader(buf.Bytes()), int64(buf.Len()))
			if err != nil {
				t.Fatal(err)
			}

			want := expectedTensors(wantModel, tt.out)
			if len(f.Tensors) != len(want) {
				var names []string
				for _, ti := range f.Tensors {
					names = append(names, ti.Name)
				}
				t.Errorf("got %d tensors %v; want %d", len(f.Tensors), names, len(want))
			}
			for name, w := range want {
				ti, ok := f.Tensor(name)
				if !ok {
					t.Errorf("tensor %s missing", name)
					continue
				}
				wantDims := []uint64{uint64(w.cols), uint64(w.rows)}
				if w.rows == 1 {
					wantDims = wantDims[:1]
				}
				if !slices.Equal(ti.Dims, wantDims) || ti.Type != w.typ {
					t.Errorf("%s: got %v %v; want %v %v", name, ti.Type, ti.Dims, w.typ, wantDims)
					continue
				}
				if ti.Offset%DefaultAlignment != 0 {
					t.Errorf("%s: offset %d not aligned", name, ti.Offset)
				}
				got, err := f.TensorF32(name)
				if err != nil {
					t.Fatal(err)
				}
				bad := 0
				for r := 0; r < w.rows; r++ {
					src := r
					if w.order != nil && w.rows > 1 {
						src = w.order[r]
					}
					for c := 0; c < w.cols; c++ {
						var v float32
						if w.rows == 1 && w.order != nil {
							v = w.at(0, w.order[c])
						} else {
							v = w.at(src, c)
						}
						if w.typ == F16 {
							v = kernels.F16ToF32(kernels.F32ToF16(v))
						}
						if g := got[r*w.cols+c]; g != v && bad < 3 {
							bad++
							t.Errorf("%s[%d][%d] = %v; want %v (HF row %d)", name, r, c, g, v, src)
						}
					}
				}
			}

			arch := archLayouts[cfg.ModelType].arch
			a := func(k string) string { return arch + "." + k }
			fileType := map[Type]uint32{F32: 0, F16: 1, Q4_0: 2, Q8_0: 7}[tt.out]
			ctxLen := cfg.MaxPositions
			if cfg.ModelType == "mistral" { // the tiny shape's window (11) is its context
				ctxLen = *cfg.SlidingWindow
			}
			wantKV := map[string]any{
				"general.architecture":                arch,
				"general.alignment":                   uint32(32),
				"general.file_type":                   fileType,
				a("context_length"):                   uint32(ctxLen),
				a("embedding_length"):                 uint32(cfg.HiddenSize),
				a("block_count"):                      uint32(cfg.NumLayers),
				a("feed_forward_length"):              uint32(cfg.IntermediateSize),
				a("attention.head_count"):             uint32(cfg.NumHeads),
				a("attention.head_count_kv"):          uint32(cfg.NumKVHeads),
				a("attention.layer_norm_rms_epsilon"): float32(cfg.RMSNormEps),
				a("rope.freq_base"):                   float32(cfg.RopeTheta),
				a("rope.dimension_count"):             uint32(cfg.HeadDim),
				"tokenizer.ggml.model":                "gpt2",
				"tokenizer.ggml.pre":                  "qwen2",
				"tokenizer.ggml.eos_token_id":         uint32(testVocab + 2),
				"tokenizer.ggml.padding_token_id":     uint32(testVocab),
				"tokenizer.ggml.add_bos_token":        false,
				"tokenizer.chat_template":             testTemplate,
				"tokenizer.ggml.merges":               []string{"w 1", "w 2", "w 3", "w 4", "w 5", "w 6", "w 7", "w 8", "w 9", "w 10", "w 11", "w 12", "w 13", "w 14", "w 15", "w 16", "w 17", "w 18", "w 19"},
			}
			if arch == "gemma3" {
				wantKV[a("attention.sliding_window")] = uint32(*cfg.SlidingWindow)
				wantKV[a("rope.freq_base_swa")] = float32(10000)
				wantKV[a("rope.scaling.type")] = "linear"
				wantKV[a("rope.scaling.factor")] = float32(cfg.RopeScaling.Factor)
			}
			for k, v := range wantKV {
				if got, ok := f.Value(k); !ok || !reflect.DeepEqual(got, v) {
					t.Errorf("%s = %#v; want %#v", k, got, v)
				}
			}
			if _, ok := f.Value("tokenizer.ggml.bos_token_id"); ok {
				t.Errorf("tokenizer.ggml.bos_token_id set; the tokenizer has no BOS")
			}
			checkTestVocab(t, f, cfg.VocabSize)
		})
	}
}

// checkTestVocab checks the tokens and token types written for the
// synthetic tokenizer, padded to V.
func checkTestVocab(t *testing.T, f *File, V int) {
	t.Helper()
	tv, _ := f.Value("tokenizer.ggml.tokens")
	tokens, _ := tv.([]string)
	yv, _ := f.Value("tokenizer.ggml.token_type")
	types, _ := yv.([]int32)
	if len(tokens) != V || len(types) != V {
		t.Fatalf("%d tokens and %d types; want %d (the model's vocabulary)", len(tokens), len(types), V)
	}
	for i := 0; i < V; i++ {
		wantTok, wantType := fmt.Sprintf("[PAD%d]", i), tokenUnused
		switch {
		case i < testVocab:
			wantTok, wantType = fmt.Sprintf("w%d", i), tokenNormal
		case i < testVocab+len(testAdded):
			a := testAdded[i-testVocab]
			wantTok, wantType = a.content, a.typ
		}
		if tokens[i] != wantTok || types[i] != wantType {
			t.Errorf("token %d = %q type %d; want %q type %d", i, tokens[i], types[i], wantTok, wantType)
		}
	}
}

// Ensure the row order written for Llama makes llama.cpp's rotation of
// adjacent pairs equal the Hugging Face rotate_half rotation: rotating the
// interleaved vector gives the interleaved rotated vector, bit for bit.
func TestInterleaveHeads_MatchesRopeConventions(t *testing.T) {
	const nh, hd, theta = 3, 8, 10000.0
	order := interleaveHeads(nh, hd)
	if want := []int{0, 4, 1, 5, 2, 6, 3, 7}; !slices.Equal(order[:hd], want) {
		t.Fatalf("head 0 order %v; want %v", order[:hd], want)
	}
	if order[hd] != hd {
		t.Fatalf("head 1 starts at HF row %d; want %d", order[hd], hd)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	x := make([]float32, nh*hd)
	for i := range x {
		x[i] = float32(rng.NormFloat64())
	}
	permute := func(v []float32) []float32 {
		out := make([]float32, len(v))
		for i, src := range order {
			out[i] = v[src]
		}
		return out
	}
	for _, pos := range []float64{0, 1, 7, 300} {
		// HF: pairs (i, i+hd/2).
		neox := slices.Clone(x)
		// llama.cpp "llama": pairs (2i, 2i+1) of the permuted vector.
		norm := permute(x)
		for h := 0; h < nh; h++ {
			for i := 0; i < hd/2; i++ {
				s, c := math.Sincos(pos / math.Pow(theta, float64(2*i)/hd))
				cs, sn := float32(c), float32(s)
				a, b := &neox[h*hd+i], &neox[h*hd+i+hd/2]
				*a, *b = *a*cs-*b*sn, *b*cs+*a*sn
				a, b = &norm[h*hd+2*i], &norm[h*hd+2*i+1]
				*a, *b = *a*cs-*b*sn, *b*cs+*a*sn
			}
		}
		if got, want := norm, permute(neox); !slices.Equal(got, want) {
			t.Errorf("pos %v: rope(permuted) = %v; want permuted(rope) = %v", pos, got, want)
		}
	}
}

// Ensure the Llama 3 rope factors keep high frequencies, divide low ones by
// the scaling factor and blend in between, for Llama-3.1-8B's settings.
func TestLlama3RopeFactors(t *testing.T) {
	cfg := model.Config{HeadDim: 128, RopeTheta: 500000, RopeScaling: &model.RopeScaling{
		RopeType: "llama3", Factor: 8, LowFreqFactor: 1, HighFreqFactor: 4, OriginalMaxPositionEmbeddings: 8192}}
	f := llama3RopeFactors(cfg)
	if len(f) != 64 {
		t.Fatalf("got %d factors; want 64", len(f))
	}
	if f[0] != 1 || f[63] != 8 {
		t.Errorf("factors[0] = %v, factors[63] = %v; want 1 and 8", f[0], f[63])
	}
	blended := 0
	for i := 1; i < len(f); i++ {
		if f[i] < f[i-1] {
			t.Errorf("factors decrease at %d: %v < %v", i, f[i], f[i-1])
		}
		if f[i] > 1 && f[i] < 8 {
			blended++
		}
	}
	if blended == 0 {
		t.Errorf("no blended factors between 1 and 8: %v", f)
	}
}

// Ensure the real Qwen3 and Llama 3.1 tokenizers give the metadata llama.cpp
// expects for them.
func TestReadVocabulary_RealTokenizers(t *testing.T) {
	tests := []struct {
		asset, pre      string
		size            int
		bos, eos, pad   int
		addBOS          bool
		types           map[int]int32 // spot checks
		tokens          map[int]string
		templateContain string
		// SentencePiece-style tokenizers: a space prefix, and scores
		// (spot checks) in place of merges.
		addSpacePrefix bool
		scores         map[int]float32
	}{
		{testassets.Qwen3Tokenizer, "qwen2", 151680, -1, 151645, 151643, false,
			map[int]int32{0: tokenNormal, 151643: tokenControl, 151644: tokenControl, 151657: tokenUserDefined,
				151659: tokenControl, 151667: tokenUserDefined, 151669: tokenUnused, 151679: tokenUnused},
			map[int]string{151645: "<|im_end|>", 151657: "<tool_call>", 151667: "<think>", 151679: "[PAD151679]", 220: "Ġ"},
			"<|im_start|>", false, nil},
		{testassets.Llama31Tokenizer, "llama-bpe", 128256, 128000, 128009, -1, true,
			map[int]int32{0: tokenNormal, 128000: tokenControl, 128009: tokenControl, 128255: tokenControl},
			map[int]string{128000: "<|begin_of_text|>", 128009: "<|eot_id|>", 220: "Ġ"},
			"<|start_header_id|>", false, nil},
		// Llama 2 / Mistral: the first merges are "▁ t" (making 261) and
		// "i n" (262); characters and bytes score below every merge.
		{testassets.Llama2Tokenizer, "", 32000, 1, 2, -1, true,
			map[int]int32{0: tokenUnknown, 1: tokenControl, 2: tokenControl, 3: tokenByte, 13: tokenByte, 258: tokenByte, 261: tokenNormal},
			map[int]string{13: "<0x0A>", 261: "▁t", 28705: "▁"},
			"", true, map[int]float32{261: 0, 262: -1, 13: -58981}},
		{testassets.Gemma3Tokenizer, "", 262144, 2, 106, 0, true,
			map[int]int32{0: tokenControl, 2: tokenControl, 3: tokenUnknown, 106: tokenControl, 248: tokenByte, 9259: tokenNormal},
			map[int]string{106: "<end_of_turn>", 248: "<0x0A>", 236743: "▁"},
			"<start_of_turn>", false, nil},
	}
	for _, tt := range tests {
		t.Run(tt.asset, func(t *testing.T) {
			dir := testassets.Dir(t, tt.asset)
			v, err := readVocabulary(dir, tt.size, "", -1, -1)
			if err != nil {
				t.Fatal(err)
			}
			if v.pre != tt.pre || v.bos != tt.bos || v.eos != tt.eos || v.pad != tt.pad || v.addBOS != tt.addBOS || v.addEOS {
				t.Errorf("pre %q bos %d eos %d pad %d add_bos %v add_eos %v; want %q %d %d %d %v false",
					v.pre, v.bos, v.eos, v.pad, v.addBOS, v.addEOS, tt.pre, tt.bos, tt.eos, tt.pad, tt.addBOS)
			}
			if len(v.tokens) != tt.size || len(v.types) != tt.size {
				t.Fatalf("%d tokens, %d types; want %d", len(v.tokens), len(v.types), tt.size)
			}
			for id, want := range tt.types {
				if v.types[id] != want {
					t.Errorf("type of %d (%q) = %d; want %d", id, v.tokens[id], v.types[id], want)
				}
			}
			for id, want := range tt.tokens {
				if v.tokens[id] != want {
					t.Errorf("token %d = %q; want %q", id, v.tokens[id], want)
				}
			}
			switch {
			case v.sentencePiece != (tt.pre == ""):
				t.Errorf("SentencePiece vocabulary %v; want %v", v.sentencePiece, tt.pre == "")
			case v.sentencePiece:
				if v.addSpacePrefix != tt.addSpacePrefix || len(v.scores) != tt.size || len(v.merges) != 0 {
					t.Errorf("add_space_prefix %v, %d scores, %d merges; want %v, %d, 0", v.addSpacePrefix, len(v.scores), len(v.merges), tt.addSpacePrefix, tt.size)
					break
				}
				for id, want := range tt.scores {
					if v.scores[id] != want {
						t.Errorf("score of %d (%q) = %v; want %v", id, v.tokens[id], v.scores[id], want)
					}
				}
			case len(v.merges) < 100000 || !strings.Contains(v.merges[0], " "):
				t.Errorf("%d merges, first %q; want > 100000 \"a b\" merges", len(v.merges), v.merges[0])
			}
			if !strings.Contains(v.chatTemplates[""], tt.templateContain) {
				t.Errorf("chat template lacks %q", tt.templateContain)
			}
		})
	}
}

// Ensure bad inputs are refused with a clear error before anything is
// written, and ExportFile leaves no file behind.
func TestExport_BadInput(t *testing.T) {
	tokDir := t.TempDir()
	writeTestTokenizer(t, tokDir, false)
	qwen := testModel(t, "qwen2", kernels.F32, false)
	withConfig := func(base *model.Model, edit func(*model.Config)) *model.Model {
		m := *base
		edit(&m.Config)
		return &m
	}
	gemma := testModel(t, "gemma3", kernels.F32, false)
	alternating := []string{"sliding_attention", "full_attention", "sliding_attention", "full_attention", "sliding_attention", "full_attention"}
	huge := testModel(t, "qwen2", kernels.F32, false)
	huge.W.Layers[1].Up.F32[3*huge.Config.HiddenSize+5] = 1e6
	bigVocabDir := t.TempDir()
	writeTestTokenizer(t, bigVocabDir, false)
	var tok map[string]any
	b, _ := os.ReadFile(filepath.Join(bigVocabDir, TokenizerJSON))
	json.Unmarshal(b, &tok)
	tok["model"].(map[string]any)["vocab"].(map[string]any)["far"] = 5000
	writeJSONFile(t, filepath.Join(bigVocabDir, TokenizerJSON), tok)
	oddPreDir := t.TempDir()
	writeTestTokenizer(t, oddPreDir, false)
	b, _ = os.ReadFile(filepath.Join(oddPreDir, TokenizerJSON))
	json.Unmarshal(b, &tok)
	tok["pre_tokenizer"] = map[string]any{"type": "Split", "pattern": map[string]any{"Regex": `\w+`}}
	writeJSONFile(t, filepath.Join(oddPreDir, TokenizerJSON), tok)

	tests := []struct {
		name string
		m    *model.Model
		dir  string
		opts Options
		want string
	}{
		{"I16Option", qwen, tokDir, Options{DType: I16}, "export dtype I16 is not supported (want F32, F16, BF16, Q8_0 or Q4_0)"},
		{"UnknownDType", qwen, tokDir, Options{DType: Type(99)}, "export dtype Type(99) is not supported"},
		{"NoTokenizerDir", qwen, "", Options{}, "tokenizer.json and tokenizer_config.json are needed"},
		{"NoTokenizerFiles", qwen, t.TempDir(), Options{}, "tokenizer.json not found"},
		{"VocabTooBig", qwen, bigVocabDir, Options{}, "ids up to 5000 but the model's vocabulary has only 256 rows"},
		{"UnknownPreTokenizer", qwen, oddPreDir, Options{}, "unrecognised pre-tokenizer"},
		{"NilModel", nil, tokDir, Options{}, "nil model"},
		{"QwenRopeScaling", withConfig(qwen, func(c *model.Config) {
			c.RopeScaling = &model.RopeScaling{RopeType: "llama3", Factor: 8, LowFreqFactor: 1, HighFreqFactor: 4, OriginalMaxPositionEmbeddings: 8192}
		}), tokDir, Options{}, "qwen2 has no rope scaling"},
		{"Gemma3LayerPattern", withConfig(gemma, func(c *model.Config) { c.LayerTypes = alternating }), tokDir, Options{},
			"llama.cpp's gemma3 makes every 6th layer global and the others sliding; layer 1 is not so"},
		{"Gemma3QueryScale", withConfig(gemma, func(c *model.Config) { c.QueryPreAttnScalar = 24 }), tokDir, Options{},
			"llama.cpp's gemma3 scales attention by 16^-½, not query_pre_attn_scalar 24"},
		{"Gemma3LocalBase", withConfig(gemma, func(c *model.Config) { c.RopeLocalBaseFreq = 20000 }), tokDir, Options{},
			"rotates sliding layers with base 10000, not rope_local_base_freq 20000"},
		{"Gemma3RopeScaling", withConfig(gemma, func(c *model.Config) {
			c.RopeScaling = &model.RopeScaling{RopeType: "llama3", Factor: 8, LowFreqFactor: 1, HighFreqFactor: 4, OriginalMaxPositionEmbeddings: 8192}
		}), tokDir, Options{}, `rope_scaling "llama3" cannot be exported for gemma3 (only linear)`},
		{"Qwen3Biases", testModel(t, "qwen3", kernels.F32, true), tokDir, Options{},
			"layer 0 has projection biases, which llama.cpp's qwen3 does not load"},
		{"NoContextLength", withConfig(qwen, func(c *model.Config) { c.MaxPositions = 0 }), tokDir, Options{}, "max_position_embeddings must be > 0"},
		{"WrongShape", withConfig(qwen, func(c *model.Config) { c.IntermediateSize = 96 }), tokDir, Options{}, "gate_proj is 128x64, want 96x64"},
		{"F16Overflow", huge, tokDir, Options{DType: F16}, "blk.1.ffn_up.weight[3][5] = 1e+06 overflows F16 (max 65504); export as F32"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "out.gguf")
			err := ExportFile(path, tt.m, tt.dir, tt.opts)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("got %v; want an error containing %q", err, tt.want)
			}
			if entries, _ := os.ReadDir(filepath.Dir(path)); len(entries) != 0 {
				t.Errorf("ExportFile left %d files behind", len(entries))
			}
		})
	}
	// Pre overrides detection for tokenizers the table does not know.
	if err := Export(&bytes.Buffer{}, qwen, oddPreDir, Options{Pre: "gpt-2"}); err != nil {
		t.Errorf("with Options.Pre: %v", err)
	}
}
