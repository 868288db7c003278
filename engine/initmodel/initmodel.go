// Package initmodel writes complete Hugging Face model folders with random
// weights in real architectures (config.json, generation_config.json,
// model.safetensors, tokenizer.json, tokenizer_config.json with a chat
// template). No pretrained weights can be downloaded here, so the tests,
// benchmarks and the demo start from these.
package initmodel

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/artgo/art/engine/chat"
	"github.com/artgo/art/engine/kernels"
	"github.com/artgo/art/engine/model"
	"github.com/artgo/art/engine/tokenizer"
	"github.com/artgo/art/internal/atomicfile"
)

// ByteTokenizer selects the built-in byte-level vocabulary (256 bytes plus
// ChatML specials) instead of a tokenizer folder.
const ByteTokenizer = "bytes"

// Options say what to write.
type Options struct {
	Arch  string // a model_type (model.SupportedModelTypes) or "gemma3"
	Shape string // a model.Preset name
	// Tokenizer is a folder holding tokenizer.json and tokenizer_config.json,
	// or ByteTokenizer.
	Tokenizer string
	DType     kernels.DType
	Seed      uint64
	Std       float64 // weight init std; 0 means 0.02
	RopeTheta float64 // overrides the preset's rope_theta when > 0
	// Layers overrides the preset's layer count when > 0: a slice of a
	// real shape (every layer as the full model's) that fits a smaller
	// machine, as the benchmarks use it.
	Layers int
	// ChatTemplate replaces the tokenizer's template; "" picks the official
	// Qwen2.5 (qwen2) or Llama 3.1 (llama) template, and for the other
	// architectures the tokenizer folder's own template (Qwen3's, Mistral's,
	// Gemma 3's), or Qwen2.5's ChatML one with the byte tokenizer.
	ChatTemplate string
}

// Write creates dir (which must not exist or be empty) with a random model.
func Write(dir string, opt Options) (*model.Model, error) {
	if entries, err := os.ReadDir(dir); err == nil && len(entries) > 0 {
		return nil, fmt.Errorf("initmodel: %s is not empty", dir)
	}
	tokJSON, tokCfg, err := tokenizerFiles(opt)
	if err != nil {
		return nil, err
	}
	tok, err := tokenizer.Parse(tokJSON)
	if err != nil {
		return nil, fmt.Errorf("initmodel: %w", err)
	}
	cfg, err := model.Preset(opt.Arch, opt.Shape, tok.VocabSize())
	if err != nil {
		return nil, err
	}
	if opt.RopeTheta > 0 {
		cfg.RopeTheta = opt.RopeTheta
	}
	if opt.Layers < 0 {
		return nil, fmt.Errorf("initmodel: layers %d: want a positive count, or 0 for the preset's", opt.Layers)
	}
	if opt.Layers > 0 {
		cfg.NumLayers = opt.Layers
	}
	var eos model.TokenIDs
	for _, s := range []string{"<|im_end|>", "<|eot_id|>", "<|endoftext|>", "<|end_of_text|>", "</s>", "<eos>", "<end_of_turn>"} {
		if id, ok := tok.ID(s); ok {
			eos = append(eos, id)
		}
	}
	cfg.EOSTokenID = eos
	for _, s := range []string{"<|begin_of_text|>", "<s>", "<bos>"} {
		if id, ok := tok.ID(s); ok {
			cfg.BOSTokenID = &id
		}
	}
	m, err := model.New(cfg, model.RandomWeights(cfg, model.InitOptions{Seed: opt.Seed, DType: opt.DType, Std: opt.Std}))
	if err != nil {
		return nil, err
	}
	m.Generation = model.GenerationConfig{EOSTokenID: eos, BOSTokenID: cfg.BOSTokenID}
	if err := m.Save(dir); err != nil {
		return nil, err
	}
	if err := atomicfile.WriteFile(filepath.Join(dir, "tokenizer.json"), tokJSON, 0o644); err != nil {
		return nil, fmt.Errorf("initmodel: %w", err)
	}
	if err := atomicfile.WriteFile(filepath.Join(dir, "tokenizer_config.json"), tokCfg, 0o644); err != nil {
		return nil, fmt.Errorf("initmodel: %w", err)
	}
	return m, nil
}

// tokenizerFiles returns tokenizer.json and tokenizer_config.json with the
// chat template set.
func tokenizerFiles(opt Options) (tokJSON, cfgJSON []byte, err error) {
	tmpl := opt.ChatTemplate
	ownTemplate := tmpl == "" && opt.Arch != "qwen2" && opt.Arch != "llama" && opt.Tokenizer != ByteTokenizer
	if tmpl == "" {
		tmpl = chat.Qwen25Template
		if opt.Arch == "llama" {
			tmpl = chat.Llama31Template
		}
	}
	var cfg map[string]any
	if opt.Tokenizer == ByteTokenizer {
		specials := []string{"<|endoftext|>", "<|im_start|>", "<|im_end|>"}
		if opt.Arch == "llama" {
			specials = []string{"<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>", "<|eom_id|>", "<|python_tag|>"}
			if opt.ChatTemplate == "" {
				return nil, nil, fmt.Errorf("initmodel: the byte tokenizer with llama needs an explicit chat template")
			}
		}
		if tokJSON, err = tokenizer.ByteVocabJSON(specials); err != nil {
			return nil, nil, err
		}
		cfg = map[string]any{"eos_token": "<|im_end|>", "pad_token": "<|endoftext|>", "bos_token": nil,
			"add_bos_token": false, "model_max_length": 4096, "tokenizer_class": "PreTrainedTokenizerFast"}
	} else {
		if tokJSON, err = os.ReadFile(filepath.Join(opt.Tokenizer, "tokenizer.json")); err != nil {
			return nil, nil, fmt.Errorf("initmodel: tokenizer: %w", err)
		}
		b, err := os.ReadFile(filepath.Join(opt.Tokenizer, "tokenizer_config.json"))
		if err != nil {
			return nil, nil, fmt.Errorf("initmodel: tokenizer: %w", err)
		}
		if err := json.Unmarshal(b, &cfg); err != nil {
			return nil, nil, fmt.Errorf("initmodel: %s: %w", filepath.Join(opt.Tokenizer, "tokenizer_config.json"), err)
		}
	}
	if _, ok := cfg["chat_template"]; !ok || !ownTemplate {
		cfg["chat_template"] = tmpl
	}
	if cfgJSON, err = json.MarshalIndent(cfg, "", "  "); err != nil {
		return nil, nil, err
	}
	return tokJSON, cfgJSON, nil
}
