package gguf

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/artgo/art/engine/kernels"
)

// FuzzExportTokenizer exports a tiny model with arbitrary tokenizer.json and
// tokenizer_config.json files: bad files are errors, never panics, and a
// file that is written reads back with one vocabulary entry per row of the
// model's embedding.
func FuzzExportTokenizer(f *testing.F) {
	dir := f.TempDir()
	writeTestTokenizer(f, dir, false)
	tok, err := os.ReadFile(filepath.Join(dir, TokenizerJSON))
	if err != nil {
		f.Fatal(err)
	}
	cfg, err := os.ReadFile(filepath.Join(dir, TokenizerConfigJSON))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(tok, cfg)
	writeTestTokenizer(f, dir, true)
	pairs, _ := os.ReadFile(filepath.Join(dir, TokenizerJSON))
	f.Add(pairs, cfg)
	f.Add(tok, []byte(`{}`))
	f.Add([]byte(`{"model":{"type":"BPE","vocab":{},"merges":[]}}`), []byte(`{"eos_token":{"content":"x"}}`))
	m := testModel(f, "qwen2", kernels.F32, false)
	f.Fuzz(func(t *testing.T, tokJSON, cfgJSON []byte) {
		d := t.TempDir()
		if err := os.WriteFile(filepath.Join(d, TokenizerJSON), tokJSON, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, TokenizerConfigJSON), cfgJSON, 0o644); err != nil {
			t.Fatal(err)
		}
		var out bytes.Buffer
		if err := Export(&out, m, d, Options{}); err != nil {
			return
		}
		gf, err := Read(bytes.NewReader(out.Bytes()), int64(out.Len()))
		if err != nil {
			t.Fatalf("the exported file does not read back: %v", err)
		}
		v, ok := gf.Value("tokenizer.ggml.tokens")
		if !ok {
			t.Fatal("no tokenizer.ggml.tokens")
		}
		if toks, ok := v.([]string); !ok || len(toks) != m.Config.VocabSize {
			t.Fatalf("tokenizer.ggml.tokens is %T of %d entries; the model has %d rows", v, len(toks), m.Config.VocabSize)
		}
	})
}

// FuzzRead parses arbitrary bytes as a GGUF file: a damaged file is an
// error, never a panic or a huge allocation.
func FuzzRead(f *testing.F) {
	dir := f.TempDir()
	writeTestTokenizer(f, dir, false)
	var out bytes.Buffer
	if err := Export(&out, testModel(f, "qwen2", kernels.F32, false), dir, Options{}); err != nil {
		f.Fatal(err)
	}
	f.Add(out.Bytes()[:min(out.Len(), 1<<16)])
	f.Add([]byte("GGUF"))
	f.Fuzz(func(t *testing.T, data []byte) {
		gf, err := Read(bytes.NewReader(data), int64(len(data)))
		if err != nil {
			return
		}
		for _, ti := range gf.Tensors {
			gf.TensorData(ti.Name)
		}
	})
}
