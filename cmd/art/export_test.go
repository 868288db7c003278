package main

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/artgo/art/arttest"
	"github.com/artgo/art/engine/gguf"
	"github.com/artgo/art/engine/lora"
	"github.com/artgo/art/engine/model"
	"github.com/artgo/art/internal/testassets"
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

// Ensure `art export gguf` writes each family init-model makes with its
// real tokenizer under llama.cpp's architecture name (llama.cpp itself runs
// such files in engine/gguf's TestExport_MatchesLlamaCpp), and refuses
// what llama.cpp cannot represent, saying what: the tiny Gemma 3 test shape
// alternates global and local layers, where llama.cpp's gemma3 makes every
// sixth layer global. A Gemma 3 in that layout exports.
func TestExportGGUF_Families(t *testing.T) {
	cases := []struct{ arch, tokenizer, wantArch, wantErr string }{
		{"qwen3", testassets.Qwen3Tokenizer, "qwen3", ""},
		{"mistral", testassets.Llama2Tokenizer, "llama", ""},
		{"gemma3", testassets.Gemma3Tokenizer, "", "every 6th layer global"},
	}
	for _, c := range cases {
		t.Run(c.arch, func(t *testing.T) {
			tokDir := testassets.Dir(t, c.tokenizer)
			dir := filepath.Join(t.TempDir(), "m")
			if code, _, errOut := runArgs(t, "init-model", "--arch", c.arch, "--shape", "tiny", "--tokenizer", tokDir, "--out", dir); code != 0 {
				t.Fatalf("init-model: %d %s", code, errOut)
			}
			out := filepath.Join(t.TempDir(), "m.gguf")
			code, _, errOut := runArgs(t, "export", "gguf", "--model", dir, "--out", out, "--dtype", "f16")
			if c.wantErr != "" {
				if code == 0 || !strings.Contains(errOut, c.wantErr) {
					t.Fatalf("exit %d, stderr %q; want an error containing %q", code, errOut, c.wantErr)
				}
				return
			}
			if code != 0 {
				t.Fatalf("export gguf: %d %s", code, errOut)
			}
			checkGGUFArch(t, out, c.wantArch)
		})
	}
	t.Run("gemma3_llamacpp_layout", func(t *testing.T) {
		tokDir := testassets.Dir(t, testassets.Gemma3Tokenizer)
		cfg, err := model.Preset("gemma3", "tiny", 262144)
		if err != nil {
			t.Fatal(err)
		}
		cfg.NumLayers, cfg.QueryPreAttnScalar = 6, float64(cfg.HeadDim)
		cfg.LayerTypes = []string{"sliding_attention", "sliding_attention", "sliding_attention",
			"sliding_attention", "sliding_attention", "full_attention"}
		m, err := model.New(cfg, model.RandomWeights(cfg, model.InitOptions{Seed: 1}))
		if err != nil {
			t.Fatal(err)
		}
		dir := t.TempDir()
		if err := m.Save(dir); err != nil {
			t.Fatal(err)
		}
		for _, name := range []string{gguf.TokenizerJSON, gguf.TokenizerConfigJSON} {
			if err := os.Symlink(filepath.Join(tokDir, name), filepath.Join(dir, name)); err != nil {
				t.Fatal(err)
			}
		}
		out := filepath.Join(t.TempDir(), "gemma.gguf")
		if code, _, errOut := runArgs(t, "export", "gguf", "--model", dir, "--out", out); code != 0 {
			t.Fatalf("export gguf: %d %s", code, errOut)
		}
		f := checkGGUFArch(t, out, "gemma3")
		if v, _ := f.Value("gemma3.attention.sliding_window"); v != uint32(11) {
			t.Errorf("gemma3.attention.sliding_window = %v; want 11", v)
		}
		if v, _ := f.Value("tokenizer.ggml.model"); v != "llama" {
			t.Errorf("tokenizer.ggml.model = %v; want llama (SentencePiece)", v)
		}
	})
}

// checkGGUFArch opens the GGUF file at path and checks its architecture.
func checkGGUFArch(t *testing.T, path, arch string) *gguf.File {
	t.Helper()
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	if v, _ := f.Value("general.architecture"); v != arch {
		t.Errorf("general.architecture = %v; want %s", v, arch)
	}
	return f
}

// cancelOn is a stderr that cancels a command's context once it has
// printed marker: the stand-in for Ctrl-C at that point.
type cancelOn struct {
	marker string
	cancel context.CancelFunc
	buf    syncBuffer
}

func (c *cancelOn) Write(p []byte) (int, error) {
	n, err := c.buf.Write(p)
	if strings.Contains(c.buf.String(), c.marker) {
		c.cancel()
	}
	return n, err
}

// Ensure `art export gguf` checks --out before it loads the model (a
// folder, or a file in a missing folder, failed only after the whole model
// was loaded and converted), and that an interrupt while it writes stops
// it, says so, exits 1 and leaves neither the file nor its temporary file
// (SIGINT used to be ignored until the export had finished).
func TestExportGGUF_OutAndInterrupt(t *testing.T) {
	base := arttest.TinyModel(t)
	dir := t.TempDir()
	for name, tt := range map[string]struct{ out, want string }{
		"a folder":         {dir, "export gguf: --out " + dir + " is a folder; name the file to write"},
		"a missing folder": {filepath.Join(dir, "none", "m.gguf"), "export gguf: --out " + filepath.Join(dir, "none", "m.gguf") + ": folder " + filepath.Join(dir, "none") + " does not exist"},
	} {
		code, _, errOut := runArgs(t, "export", "gguf", "--model", base, "--out", tt.out)
		if code != 1 || errOut != "art: "+tt.want+"\n" {
			t.Errorf("%s: exit %d, stderr %q; want 1 and only %q (before loading)", name, code, errOut, tt.want)
		}
	}
	code, _, errOut := runArgs(t, "export", "gguf-lora", "--adapter", base, "--out", dir)
	if want := "art: export gguf-lora: --out " + dir + " is a folder; name the file to write\n"; code != 1 || errOut != want {
		t.Errorf("gguf-lora: exit %d, stderr %q; want %q", code, errOut, want)
	}

	out := filepath.Join(dir, "m.gguf")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stderr := &cancelOn{marker: "writing " + out, cancel: cancel}
	code = run(ctx, []string{"export", "gguf", "--model", base, "--out", out}, io.Discard, stderr)
	if code != 1 || !strings.Contains(stderr.buf.String(), "export gguf: interrupted; "+out+" not written") {
		t.Fatalf("interrupted export: exit %d, stderr %q", code, stderr.buf.String())
	}
	if left, _ := os.ReadDir(dir); len(left) > 0 {
		t.Fatalf("the interrupted export left %v", left)
	}
}
