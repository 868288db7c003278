package main

import (
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/artgo/art/store"
)

// Ensure `art plot` draws a metric of several models as PNG lines, SVG and
// PNG bars, and refuses a bad extension, an unknown model and a metric no
// model logged, with clear messages.
func TestPlot(t *testing.T) {
	data := t.TempDir()
	for i, name := range []string{"a", "b"} {
		d, _ := store.New(data, "p", name)
		for step := 1; step <= 5; step++ {
			d.AppendHistory(map[string]any{"step": float64(step), "val/reward": float64(step+i) / 10})
		}
	}
	dir := t.TempDir()
	for _, c := range []struct {
		args  []string
		check func(path string) error
	}{
		{[]string{"--out", filepath.Join(dir, "lines.png")}, func(p string) error {
			f, err := os.Open(p)
			if err != nil {
				return err
			}
			defer f.Close()
			img, err := png.Decode(f)
			if err == nil && (img.Bounds().Dx() != 800 || img.Bounds().Dy() != 480) {
				t.Errorf("PNG is %v, want 800×480", img.Bounds())
			}
			return err
		}},
		{[]string{"--out", filepath.Join(dir, "lines.svg"), "--models", "p/b,p/a"}, func(p string) error {
			b, err := os.ReadFile(p)
			if err == nil && !strings.Contains(string(b), "<svg") {
				t.Errorf("%s is not SVG", p)
			}
			return err
		}},
		{[]string{"--out", filepath.Join(dir, "bars.png"), "--bar"}, func(p string) error {
			_, err := os.Stat(p)
			return err
		}},
	} {
		args := append([]string{"plot", "--data", data, "--metric", "val/reward"}, c.args...)
		code, out, errOut := runArgs(t, args...)
		if code != 0 {
			t.Fatalf("%v: exit %d: %s", c.args, code, errOut)
		}
		if err := c.check(strings.TrimSpace(out)); err != nil {
			t.Errorf("%v: %v", c.args, err)
		}
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--metric", "val/reward", "--out", filepath.Join(dir, "x.jpg")}, "want a .png or .svg file"},
		{[]string{"--metric", "val/reward", "--out", filepath.Join(dir, "x.png"), "--models", "p/zz"}, `no model "p/zz" (models: p/a, p/b)`},
		{[]string{"--metric", "loss/nothing", "--out", filepath.Join(dir, "x.png")}, "no model has logged loss/nothing"},
		{[]string{"--out", filepath.Join(dir, "x.png")}, "--metric and --out are required"},
	} {
		code, _, errOut := runArgs(t, append([]string{"plot", "--data", data}, c.args...)...)
		if code != 1 || !strings.Contains(errOut, c.want) {
			t.Errorf("%v: exit %d, %q; want an error containing %q", c.args, code, errOut, c.want)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "x.png")); err == nil {
		t.Error("a failed plot left a file behind")
	}
	if _, _, errOut := runArgs(t, "plot", "--data", data, "--metric", "loss/nothing", "--out", filepath.Join(dir, "x.png")); strings.Contains(errOut, "atomicfile") {
		t.Errorf("an unlogged metric's error names the file write: %q", errOut)
	}
}

// Ensure `art chart` refuses an --out it would not write as named (it
// draws PNG only) before reading anything, and leaves no file.
func TestChart_RefusesNonPNG(t *testing.T) {
	data := t.TempDir()
	d, _ := store.New(data, "p", "a")
	d.AppendHistory(map[string]any{"step": float64(1), "train/reward": 0.5})
	out := filepath.Join(t.TempDir(), "curve.svg")
	code, _, errOut := runArgs(t, "chart", filepath.Join(data, "p", "models", "a"), "--out", out)
	if code != 1 || !strings.Contains(errOut, "name the file .png") {
		t.Errorf("chart --out curve.svg: exit %d, %q; want a refusal naming .png", code, errOut)
	}
	if _, err := os.Stat(out); err == nil {
		t.Error("a refused chart left a file behind")
	}
	png := filepath.Join(t.TempDir(), "curve.PNG")
	if code, _, errOut := runArgs(t, "chart", filepath.Join(data, "p", "models", "a"), "--out", png); code != 0 {
		t.Errorf("chart --out curve.PNG: exit %d, %s", code, errOut)
	}
}
