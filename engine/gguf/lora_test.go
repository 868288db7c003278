package gguf

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/artgo/art/engine/generate"
	"github.com/artgo/art/engine/internal/exactunit"
	"github.com/artgo/art/engine/lora"
	"github.com/artgo/art/engine/model"
	"github.com/artgo/art/internal/testassets"
)

// trainedAdapter returns an adapter over cfg whose A and B are both random
// (a fresh adapter's B is zero and would change nothing), large enough to
// move greedy decoding away from the base model's.
func trainedAdapter(tb testing.TB, cfg model.Config, c lora.Config) *lora.Adapter {
	tb.Helper()
	a, err := lora.New(cfg, c, 3)
	if err != nil {
		tb.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(5, 9))
	for i := range a.Params() {
		a.Params()[i] = float32(rng.NormFloat64() * 0.15)
	}
	return a
}

// Ensure the GGUF LoRA file holds what llama.cpp's loader reads: the
// adapter metadata, alpha giving the adapter's own scale, and one lora_a /
// lora_b pair per adapted projection in ggml's dims, with q/k rows of B
// reordered for the llama architecture.
func TestExportLoRA_RoundTrip(t *testing.T) {
	for _, arch := range []string{"qwen2", "llama", "qwen3_moe"} {
		t.Run(arch, func(t *testing.T) {
			cfg, err := model.Preset(arch, "tiny", testVocab)
			if err != nil {
				t.Fatal(err)
			}
			a := trainedAdapter(t, cfg, lora.Config{Rank: 4, Alpha: 8, UseRSLoRA: arch == "llama"})
			path := filepath.Join(t.TempDir(), "a.gguf")
			if err := ExportLoRAFile(path, a, cfg); err != nil {
				t.Fatal(err)
			}
			f, err := Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			for key, want := range map[string]any{"general.architecture": archLayouts[arch].arch, "general.type": "adapter", "adapter.type": "lora", "adapter.lora.alpha": a.Config.Scale() * 4} {
				if got, _ := f.Value(key); got != want {
					t.Errorf("%s = %v (%T); want %v (%T)", key, got, got, want, want)
				}
			}
			var factors []lora.Factor
			stacks := 0 // (layer, projection) pairs of expert factors
			for _, fc := range a.Factors() {
				if fc.Expert < 0 {
					factors = append(factors, fc)
					continue
				}
				if fc.Expert == 0 {
					stacks++
				}
				// One expert's factors sit at its place in the stack.
				name := fmt.Sprintf("blk.%d.%s_exps.weight", fc.Layer, loraTensorNames[fc.Module])
				A, err := f.TensorF32(name + ".lora_a")
				if err != nil {
					t.Fatal(err)
				}
				B, err := f.TensorF32(name + ".lora_b")
				if err != nil {
					t.Fatal(err)
				}
				na, nb := len(fc.A), len(fc.B)
				if !slices.Equal(A[fc.Expert*na:(fc.Expert+1)*na], fc.A) || !slices.Equal(B[fc.Expert*nb:(fc.Expert+1)*nb], fc.B) {
					t.Errorf("%s: expert %d's factors are not at its place in the stack", name, fc.Expert)
				}
				ti, _ := f.Tensor(name + ".lora_b")
				if !slices.Equal(ti.Dims, []uint64{4, uint64(fc.Out), uint64(cfg.NumExperts)}) {
					t.Errorf("%s.lora_b dims %v; want [4 %d %d]", name, ti.Dims, fc.Out, cfg.NumExperts)
				}
			}
			if arch == "qwen3_moe" && stacks == 0 {
				t.Fatal("the mixture's adapter has no expert factors")
			}
			if got, want := len(f.Tensors), 2*(len(factors)+stacks); got != want {
				t.Fatalf("%d tensors; want %d", got, want)
			}
			for _, fc := range factors {
				name := fmt.Sprintf("blk.%d.%s.weight", fc.Layer, loraTensorNames[fc.Module])
				A, err := f.TensorF32(name + ".lora_a")
				if err != nil {
					t.Fatal(err)
				}
				if !slices.Equal(A, fc.A) {
					t.Errorf("%s.lora_a differs from the adapter's A", name)
				}
				ti, _ := f.Tensor(name + ".lora_b")
				if !slices.Equal(ti.Dims, []uint64{4, uint64(fc.Out)}) {
					t.Errorf("%s.lora_b dims %v; want [4 %d]", name, ti.Dims, fc.Out)
				}
				B, err := f.TensorF32(name + ".lora_b")
				if err != nil {
					t.Fatal(err)
				}
				reordered := arch == "llama" && (fc.Module == model.ModQ || fc.Module == model.ModK)
				if got := slices.Equal(B, fc.B); got == reordered {
					t.Errorf("%s.lora_b equals B: %v; want %v (rows reordered only for llama q/k)", name, got, !reordered)
				}
			}
		})
	}
}

// Ensure bad input fails before anything is written.
func TestExportLoRA_BadInput(t *testing.T) {
	cfg, err := model.Preset("qwen2", "tiny", testVocab)
	if err != nil {
		t.Fatal(err)
	}
	a := trainedAdapter(t, cfg, lora.Config{Rank: 2})
	other := cfg
	other.IntermediateSize *= 2
	unsupported := cfg
	unsupported.ModelType = "gemma"
	for name, tc := range map[string]struct {
		a    *lora.Adapter
		cfg  model.Config
		want string
	}{
		"nil adapter": {nil, cfg, "nil adapter"},
		"wrong shape": {a, other, "the model's is"},
		"unsupported": {a, unsupported, "not \"gemma\""},
	} {
		t.Run(name, func(t *testing.T) {
			var sb strings.Builder
			err := ExportLoRA(&sb, tc.a, tc.cfg)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v; want one containing %q", err, tc.want)
			}
			if sb.Len() != 0 {
				t.Errorf("%d bytes written before the error", sb.Len())
			}
		})
	}
}

// Ensure llama.cpp (node-llama-cpp 3.22.1) runs our GGUF base model with our
// GGUF LoRA adapter and produces the same 32 greedy tokens as the engine
// with the same adapter, logits within fp32 rounding, and that the adapter
// matters (the base model alone decodes differently). Llama exercises the
// q/k row reordering and an RSLoRA scale.
func TestExportLoRA_MatchesLlamaCpp(t *testing.T) {
	exactunit.Use(t) // an fp32 reference
	node, module := llamaCppModule(t)
	for _, tc := range []struct {
		arch, asset string
		lora        lora.Config
	}{
		{"qwen2", testassets.Qwen3Tokenizer, lora.Config{Rank: 4, Alpha: 8}},
		{"llama", testassets.Llama31Tokenizer, lora.Config{Rank: 4, Alpha: 8, UseRSLoRA: true}},
		{"qwen3", testassets.Qwen3Tokenizer, lora.Config{Rank: 4, Alpha: 8}},
		// Every expert's gate, up and down adapted: llama.cpp applies the
		// stacked factors per routed expert.
		{"qwen3_moe", testassets.Qwen3Tokenizer, lora.Config{Rank: 4, Alpha: 8}},
	} {
		t.Run(tc.arch, func(t *testing.T) {
			tokDir := testassets.Dir(t, tc.asset)
			cfg, err := model.Preset(tc.arch, "tiny", tokenizerSize(t, tokDir))
			if err != nil {
				t.Fatal(err)
			}
			m, err := model.New(cfg, model.RandomWeights(cfg, model.InitOptions{Seed: 7, Std: 0.15, NormJitter: 0.1}))
			if err != nil {
				t.Fatal(err)
			}
			a := trainedAdapter(t, cfg, tc.lora)
			dir := t.TempDir()
			base, adapter := filepath.Join(dir, "base.gguf"), filepath.Join(dir, "lora.gguf")
			if err := ExportFile(base, m, tokDir, Options{}); err != nil {
				t.Fatal(err)
			}
			if err := ExportLoRAFile(adapter, a, cfg); err != nil {
				t.Fatal(err)
			}
			prompt := make([]int, 16)
			for i := range prompt {
				prompt[i] = (i*7919 + 104729) % (cfg.VocabSize - 1024)
			}
			greedy := func(ad model.Adapter) []int {
				res, err := generate.Generate(context.Background(), m, generate.Request{
					Prompt: prompt, MaxTokens: parityTokens, Sampling: generate.SamplingParams{Temperature: 0}, Adapter: ad,
				})
				if err != nil {
					t.Fatal(err)
				}
				return res.IDs()
			}
			ours, baseOnly := greedy(a), greedy(nil)
			if slices.Equal(ours, baseOnly) {
				t.Fatalf("the adapter does not change greedy decoding (%v): the test could not tell it was applied", ours)
			}
			theirs := runLlamaCppLoRA(t, node, module, base, adapter, prompt, parityTokens, nil)
			checkParity(t, tc.arch+"+lora", m, a, prompt, ours, theirs, logitAtolF32, logitRtolF32, true)
		})
	}
}
