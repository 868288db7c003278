package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Ensure a real llama-bench JSON report (ik_llama.cpp's, built natively on
// an AMD EPYC Zen 5: testdata/llama-bench.json) gives its two rates, and a
// report without both tests is refused.
func TestParseLlamaBench(t *testing.T) {
	data, err := os.ReadFile("testdata/llama-bench.json")
	if err != nil {
		t.Fatal(err)
	}
	r, err := parseLlamaBench(data)
	if err != nil {
		t.Fatal(err)
	}
	if r.Prefill < 590.39 || r.Prefill > 590.40 || r.Decode <= 0 || r.Decode == r.Prefill {
		t.Errorf("rates %+v; want prefill 590.39 and the generation test's own rate", r)
	}
	for _, bad := range []string{``, `{}`, `[{"n_prompt": 64, "n_gen": 0, "avg_ts": 100}]`, `[{"n_prompt": 0, "n_gen": 16, "avg_ts": 0}]`} {
		if _, err := parseLlamaBench([]byte(bad)); err == nil {
			t.Errorf("parseLlamaBench(%q) accepted it", bad)
		}
	}
}

// Ensure runLlamaBench passes the model, threads and test sizes, reads the
// report, and gives up on a run that outlives its bound. A native
// llama-bench cannot be built in CI, so a shell script stands in for it.
func TestRunLlamaBench(t *testing.T) {
	dir := t.TempDir()
	argsFile := filepath.Join(dir, "args")
	report, err := filepath.Abs("testdata/llama-bench.json")
	if err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(dir, "llama-bench")
	body := "#!/bin/sh\necho \"$@\" > " + argsFile + "\ncat " + report + "\n"
	if err := os.WriteFile(script, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	r, err := runLlamaBench(context.Background(), script, "model.gguf", 2, 512, 128, []string{"-fa", "1"}, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if r.Prefill <= 0 || r.Decode <= 0 {
		t.Errorf("rates %+v", r)
	}
	args, _ := os.ReadFile(argsFile)
	if got, want := strings.TrimSpace(string(args)), "-m model.gguf -t 2 -p 512 -n 128 -r 1 -o json -fa 1"; got != want {
		t.Errorf("llama-bench ran with %q; want %q", got, want)
	}

	hang := filepath.Join(dir, "hang")
	if err := os.WriteFile(hang, []byte("#!/bin/sh\nexec sleep 30\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if _, err := runLlamaBench(context.Background(), hang, "model.gguf", 2, 512, 128, nil, 200*time.Millisecond); err == nil || !strings.Contains(err.Error(), "no result within") {
		t.Errorf("a hanging llama-bench: err %v; want the time bound", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("the bound of 200ms took %v", d)
	}
	if _, err := runLlamaBench(context.Background(), filepath.Join(dir, "missing"), "m", 2, 1, 1, nil, time.Second); err == nil {
		t.Error("a missing binary gave no error")
	}
}
