package initmodel

import (
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/artgo/art/engine/hfmodel"
	"github.com/artgo/art/engine/kernels"
	"github.com/artgo/art/engine/lora"
	"github.com/artgo/art/internal/testassets"
)

// Ensure every family's folder opens like a Hugging Face one (weights,
// tokenizer, template, stop ids), scores text and takes a LoRA gradient.
func TestWrite_Families(t *testing.T) {
	cases := []struct{ arch, shape, tokenizer string }{
		{"qwen3", "tiny", ByteTokenizer},
		{"mistral", "tiny", ByteTokenizer},
		{"gemma3", "small", ByteTokenizer},
		{"qwen3", "tiny", "qwen3"},     // the real Qwen3 tokenizer and its thinking template
		{"mistral", "tiny", "llama2"},  // a SentencePiece tokenizer (no template of its own: ChatML)
		{"mistral", "small", "llama2"}, // the small shape with a real tokenizer too
		{"gemma3", "tiny", "gemma3"},   // Gemma 3's tokenizer and its own template (an inline if in parentheses)
	}
	for _, c := range cases {
		t.Run(c.arch+"-"+c.shape+"-"+c.tokenizer, func(t *testing.T) {
			tok := c.tokenizer
			if tok != ByteTokenizer {
				tok = testassets.Dir(t, tok)
			}
			dir := filepath.Join(t.TempDir(), "m")
			m, err := Write(dir, Options{Arch: c.arch, Shape: c.shape, Tokenizer: tok, DType: kernels.F32, Seed: 1, Std: 0.1})
			if err != nil {
				t.Fatal(err)
			}
			f, err := hfmodel.Open(dir)
			if err != nil {
				t.Fatal(err)
			}
			if f.Model.Config.ModelType != m.Config.ModelType || len(f.StopIDs) == 0 {
				t.Fatalf("opened %s with stop ids %v", f.Model.Config.ModelType, f.StopIDs)
			}
			if c.tokenizer == "gemma3" && !strings.Contains(f.Template.Source(), "<start_of_turn>") {
				t.Fatal("the folder does not keep Gemma 3's own chat template")
			}
			ids := f.Tokenizer.Encode("The quick brown fox jumps over the lazy dog, twice: 1, 2.")
			lp, err := f.Model.LogProbs(ids, nil)
			if err != nil {
				t.Fatal(err)
			}
			for i, v := range lp {
				if math.IsNaN(v) || v > 0 {
					t.Fatalf("logprob %d = %v", i, v)
				}
			}
			// One LoRA gradient through every layer of the family.
			ad, err := lora.New(f.Model.Config, lora.Config{Rank: 2, Alpha: 4}, 1)
			if err != nil {
				t.Fatal(err)
			}
			acts := f.Model.NewActs(len(ids))
			if _, err := f.Model.TrainForward(acts, ids, ad); err != nil {
				t.Fatal(err)
			}
			rows, targets := make([]int, len(ids)-1), ids[1:]
			for i := range rows {
				rows[i] = i
			}
			_, dh := f.Model.LMHeadBackward(acts, rows, targets, func(int, float64, float64) (float64, float64) { return 1, 0 })
			f.Model.TrainBackward(acts, dh, ad)
			var norm float64
			for _, g := range ad.Grads() {
				if math.IsNaN(float64(g)) {
					t.Fatal("NaN LoRA gradient")
				}
				norm += float64(g) * float64(g)
			}
			if norm == 0 {
				t.Fatal("zero LoRA gradient")
			}
		})
	}
}

// Ensure Layers keeps the first layers of a shape named after a real model
// (the benchmarks' slice of a mixture), and a negative count is refused.
func TestWrite_Layers(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "m")
	m, err := Write(dir, Options{Arch: "qwen3_moe", Shape: "small", Layers: 2, Tokenizer: ByteTokenizer, DType: kernels.F32, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	f, err := hfmodel.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got := f.Model.Config.NumLayers; got != 2 || m.Config.NumLayers != 2 {
		t.Fatalf("%d layers in the folder; want 2", got)
	}
	if _, err := Write(filepath.Join(t.TempDir(), "n"), Options{Arch: "qwen2", Shape: "tiny", Layers: -1, Tokenizer: ByteTokenizer}); err == nil || !strings.Contains(err.Error(), "layers -1") {
		t.Fatalf("Layers -1: %v; want a refusal", err)
	}
}
