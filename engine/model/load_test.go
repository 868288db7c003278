package model

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/artgo/art/engine/safetensors"
)

// Ensure broken model folders fail to load with a one-line error that names
// the problem.
func TestLoad_BadFolders(t *testing.T) {
	good := writeRandomModel(t, parityCases[0], 300, 1)
	// rewriteTensors rewrites model.safetensors of a copy of good after edit.
	rewriteTensors := func(t *testing.T, dir string, edit func([]safetensors.Tensor) []safetensors.Tensor) {
		f, err := safetensors.Open(filepath.Join(good, "model.safetensors"))
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		var ts []safetensors.Tensor
		for _, name := range f.Names() {
			info, _ := f.Info(name)
			raw, err := f.ReadRaw(name)
			if err != nil {
				t.Fatal(err)
			}
			ts = append(ts, safetensors.Tensor{Name: name, DType: info.DType, Shape: info.Shape, Data: raw})
		}
		if err := safetensors.WriteFile(filepath.Join(dir, "model.safetensors"), edit(ts), nil); err != nil {
			t.Fatal(err)
		}
	}
	cases := []struct {
		name  string
		setup func(t *testing.T, dir string)
		want  string
	}{
		{"missing config", func(t *testing.T, dir string) { os.Remove(filepath.Join(dir, "config.json")) }, "config.json"},
		{"unknown model_type", func(t *testing.T, dir string) {
			b, _ := os.ReadFile(filepath.Join(dir, "config.json"))
			os.WriteFile(filepath.Join(dir, "config.json"), []byte(strings.Replace(string(b), `"qwen2"`, `"mamba"`, 1)), 0o644)
		}, `model_type "mamba" is not supported`},
		{"missing weights", func(t *testing.T, dir string) { os.Remove(filepath.Join(dir, "model.safetensors")) }, "model.safetensors"},
		{"truncated weights", func(t *testing.T, dir string) {
			p := filepath.Join(dir, "model.safetensors")
			st, _ := os.Stat(p)
			os.Truncate(p, st.Size()-100)
		}, "model.safetensors"},
		{"wrong shape", func(t *testing.T, dir string) {
			rewriteTensors(t, dir, func(ts []safetensors.Tensor) []safetensors.Tensor {
				for i := range ts {
					if ts[i].Name == "model.layers.1.mlp.up_proj.weight" {
						ts[i].Shape = []int{ts[i].Shape[1], ts[i].Shape[0]}
					}
				}
				return ts
			})
		}, "model.layers.1.mlp.up_proj.weight has shape"},
		{"missing tensor", func(t *testing.T, dir string) {
			rewriteTensors(t, dir, func(ts []safetensors.Tensor) []safetensors.Tensor {
				var out []safetensors.Tensor
				for _, x := range ts {
					if x.Name != "model.norm.weight" {
						out = append(out, x)
					}
				}
				return out
			})
		}, "missing tensor model.norm.weight"},
		{"unsupported dtype", func(t *testing.T, dir string) {
			rewriteTensors(t, dir, func(ts []safetensors.Tensor) []safetensors.Tensor {
				for i := range ts {
					if ts[i].Name == "model.layers.0.self_attn.o_proj.weight" {
						ts[i].DType = safetensors.I32
					}
				}
				return ts
			})
		}, "o_proj.weight"},
		{"unexpected tensor", func(t *testing.T, dir string) {
			rewriteTensors(t, dir, func(ts []safetensors.Tensor) []safetensors.Tensor {
				return append(ts, safetensors.FromF32("model.extra.weight", safetensors.F32, []int{2}, []float32{1, 2}))
			})
		}, "unexpected tensor model.extra.weight"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			for _, f := range []string{"config.json", "generation_config.json", "model.safetensors"} {
				b, err := os.ReadFile(filepath.Join(good, f))
				if err != nil {
					t.Fatal(err)
				}
				os.WriteFile(filepath.Join(dir, f), b, 0o644)
			}
			c.setup(t, dir)
			_, err := Load(dir)
			if err == nil {
				t.Fatal("got nil error")
			}
			msg := err.Error()
			if strings.Contains(msg, "\n") {
				t.Errorf("error spans several lines: %q", msg)
			}
			if !strings.Contains(msg, c.want) {
				t.Errorf("error %q does not mention %q", msg, c.want)
			}
		})
	}
}

// Ensure LoadWith stops once its context ends: a cancelled context returns
// its error and no model, and one that ends partway (after the first
// tensors were read) stops before the rest.
func TestLoadWith_Cancelled(t *testing.T) {
	dir := writeRandomModel(t, parityCases[0], 300, 1)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if m, err := LoadWith(ctx, dir, LoadOptions{}); !errors.Is(err, context.Canceled) || m != nil {
		t.Fatalf("LoadWith(cancelled) = %v, %v; want no model and context.Canceled", m, err)
	}
	if _, err := LoadWith(context.Background(), dir, LoadOptions{}); err != nil {
		t.Fatal(err)
	}
}

// A path that is not a model folder gets an error that says what a model
// folder is and how to make one, for a missing folder and for a folder
// without config.json alike, and still matches fs.ErrNotExist.
func TestReadConfig_NotAModelFolder(t *testing.T) {
	empty := t.TempDir()
	for _, dir := range []string{filepath.Join(empty, "missing"), empty} {
		_, err := ReadConfig(dir)
		if err == nil {
			t.Fatalf("ReadConfig(%s): no error", dir)
		}
		if !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("ReadConfig(%s): %v does not match fs.ErrNotExist", dir, err)
		}
		for _, want := range []string{dir, "config.json", "art init-model"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("ReadConfig(%s): %q does not say %q", dir, err, want)
			}
		}
	}
}
