package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/artgo/art/arttest"
	"github.com/artgo/art/engine/gguf"
	"github.com/artgo/art/engine/lora"
	"github.com/artgo/art/engine/model"
)

// Ensure `art export gguf-lora` writes a checkpoint folder as a GGUF LoRA
// (its base model found from adapter_config.json), and bad input is a
// one-line error. llama.cpp itself runs such files in engine/gguf's tests.
func TestExportGGUFLoRA(t *testing.T) {
	base := arttest.TinyModel(t)
	cfg, err := model.ReadConfig(base)
	if err != nil {
		t.Fatal(err)
	}
	a, err := lora.New(cfg, lora.Config{Rank: 2}, 1)
	if err != nil {
		t.Fatal(err)
	}
	ckpt := filepath.Join(t.TempDir(), "0003")
	if err := a.Save(ckpt, base); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "a.gguf")
	if code, _, errOut := runArgs(t, "export", "gguf-lora", "--adapter", ckpt, "--out", out); code != 0 {
		t.Fatalf("export gguf-lora: %d %s", code, errOut)
	}
	f, err := gguf.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if v, _ := f.Value("adapter.type"); v != "lora" {
		t.Errorf("adapter.type = %v; want lora", v)
	}
	if got, want := len(f.Tensors), 2*len(a.Factors()); got != want {
		t.Errorf("%d tensors; want %d", got, want)
	}
	bad := map[string][]string{
		"no adapter":    {"export", "gguf-lora", "--adapter", filepath.Join(t.TempDir(), "none"), "--out", out},
		"wrong base":    {"export", "gguf-lora", "--adapter", ckpt, "--base-model", t.TempDir(), "--out", out},
		"missing --out": {"export", "gguf-lora", "--adapter", ckpt},
	}
	for name, args := range bad {
		code, _, errOut := runArgs(t, args...)
		if code == 0 || strings.Count(strings.TrimSpace(errOut), "\n") > 0 {
			t.Errorf("%s: exit %d, stderr %q; want a one-line error", name, code, errOut)
		}
	}
}
