package main

import (
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/artgo/art/arttest"
	"github.com/artgo/art/engine/gguf"
	"github.com/artgo/art/engine/kernels"
)

// Ensure --quantize q8 loads the base quantized in `art logprobs` (close
// to, but not the same as, the unquantized scores), `art export gguf
// --dtype q8_0` writes Q8_0 matrices, and an unknown value is a one-line
// error in logprobs and serve.
func TestQuantizeFlag(t *testing.T) {
	base := arttest.TinyModel(t)
	scores := func(extra ...string) []tokenScore {
		t.Helper()
		args := append([]string{"logprobs", "--model", base, "--text", "Hello, quantized world", "--json"}, extra...)
		code, out, errOut := runArgs(t, args...)
		if code != 0 {
			t.Fatalf("logprobs %v: exit %d: %s", extra, code, errOut)
		}
		var rows []tokenScore
		if err := json.Unmarshal([]byte(out), &rows); err != nil {
			t.Fatal(err)
		}
		return rows
	}
	plain, q8 := scores(), scores("--quantize", "q8")
	if len(plain) != len(q8) || len(plain) < 3 {
		t.Fatalf("%d and %d rows", len(plain), len(q8))
	}
	same := true
	for i := 1; i < len(plain); i++ {
		d := *plain[i].Logprob - *q8[i].Logprob
		same = same && d == 0
		if d > 0.5 || d < -0.5 {
			t.Errorf("token %d: logprob %v unquantized, %v q8", i, *plain[i].Logprob, *q8[i].Logprob)
		}
	}
	if same {
		t.Error("--quantize q8 scored exactly as the unquantized model: was it applied?")
	}

	out := filepath.Join(t.TempDir(), "q8.gguf")
	if code, _, errOut := runArgs(t, "export", "gguf", "--model", base, "--out", out, "--dtype", "q8_0"); code != 0 {
		t.Fatalf("export gguf --dtype q8_0: exit %d: %s", code, errOut)
	}
	f, err := gguf.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if ti, ok := f.Tensor("blk.0.attn_q.weight"); !ok || ti.Type != gguf.Q8_0 {
		t.Errorf("blk.0.attn_q.weight: %v %v; want Q8_0", ti.Type, ok)
	}

	bad := map[string][]string{
		"logprobs": {"logprobs", "--model", base, "--text", "hi there", "--quantize", "q5"},
		"serve":    {"serve", "--base-model", base, "--name", "m", "--data", t.TempDir(), "--addr", "127.0.0.1:0", "--quantize", "q5"},
		"export":   {"export", "gguf", "--model", base, "--out", out, "--dtype", "q5"},
	}
	for name, args := range bad {
		code, _, errOut := runArgs(t, args...)
		if code == 0 || !strings.Contains(errOut, "q5") || strings.Count(strings.TrimSpace(errOut), "\n") > 0 {
			t.Errorf("%s: exit %d, stderr %q; want a one-line error naming q5", name, code, errOut)
		}
	}
}

// Ensure --matmul-unit int8 scores a q8 base with 8-bit activations where
// the CPU has AVX512_VNNI (close to, not the same as, the exact products),
// refuses with one line where it has not, and an unknown unit is a
// one-line error naming the units.
func TestMatmulUnitInt8Flag(t *testing.T) {
	prev, _ := kernels.ActiveUnit()
	t.Cleanup(func() { kernels.SetUnit(prev) })
	base := arttest.TinyModel(t)
	args := func(unit string) []string {
		return []string{"--matmul-unit", unit, "logprobs", "--model", base, "--text", "Hello, quantized world", "--json", "--quantize", "q8"}
	}
	code, exactOut, errOut := runArgs(t, args("fp32")...)
	if code != 0 {
		t.Fatalf("--matmul-unit fp32: exit %d: %s", code, errOut)
	}
	code, int8Out, errOut := runArgs(t, args("int8")...)
	if !slices.Contains(kernels.Units(), kernels.UnitInt8) {
		if code == 0 || !strings.Contains(errOut, "AVX512_VNNI") {
			t.Fatalf("--matmul-unit int8 without AVX512_VNNI: exit %d, stderr %q", code, errOut)
		}
		return
	}
	if code != 0 {
		t.Fatalf("--matmul-unit int8: exit %d: %s", code, errOut)
	}
	var exact, rounded []tokenScore
	if err := json.Unmarshal([]byte(exactOut), &exact); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(int8Out), &rounded); err != nil {
		t.Fatal(err)
	}
	same := true
	for i := 1; i < len(exact); i++ {
		d := *exact[i].Logprob - *rounded[i].Logprob
		same = same && d == 0
		if d > 0.5 || d < -0.5 {
			t.Errorf("token %d: logprob %v exact, %v on the int8 unit", i, *exact[i].Logprob, *rounded[i].Logprob)
		}
	}
	if same {
		t.Error("--matmul-unit int8 scored the q8 base exactly as fp32: did it run?")
	}
	code, _, errOut = runArgs(t, args("int9")...)
	if code == 0 || !strings.Contains(errOut, "int9") || !strings.Contains(errOut, "int8") || strings.Count(strings.TrimSpace(errOut), "\n") > 0 {
		t.Errorf("--matmul-unit int9: exit %d, stderr %q; want a one-line error naming int9 and the units", code, errOut)
	}
}
