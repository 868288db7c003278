package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Ensure real llama-bench JSON reports (ik_llama.cpp's, built natively on
// an AMD EPYC Zen 5: testdata/llama-bench.json, and with -gp 64,16:
// testdata/llama-bench-gp.json) give their rates, the generation after a
// prompt apart from the one from an empty context, that mainline's
// n_depth counts as such too, and that a report without both plain tests
// is refused.
func TestParseLlamaBench(t *testing.T) {
	read := func(file string) nativeRates {
		t.Helper()
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		var r nativeRates
		if err := parseLlamaBench(data, &r); err != nil {
			t.Fatal(err)
		}
		if err := r.complete(); err != nil {
			t.Fatal(err)
		}
		return r
	}
	r := read("testdata/llama-bench.json")
	if r.Prefill < 590.39 || r.Prefill > 590.40 || r.Decode <= 0 || r.Decode == r.Prefill || r.DecodeAfterPrompt != 0 {
		t.Errorf("rates %+v; want prefill 590.39, the generation test's own rate and none after a prompt", r)
	}
	r = read("testdata/llama-bench-gp.json")
	if r.Prefill < 215.39 || r.Prefill > 215.40 || r.Decode < 16.35 || r.Decode > 16.36 || r.DecodeAfterPrompt < 21.94 || r.DecodeAfterPrompt > 21.95 {
		t.Errorf("rates %+v; want prefill 215.40, decode 16.35 and 21.95 after the prompt", r)
	}
	var d nativeRates
	if err := parseLlamaBench([]byte(`[{"n_prompt": 0, "n_gen": 16, "n_depth": 512, "avg_ts": 70}]`), &d); err != nil || d.DecodeAfterPrompt != 70 || d.Decode != 0 {
		t.Errorf("a mainline depth test: %+v, %v; want 70 after the prompt", d, err)
	}
	for _, bad := range []string{``, `{}`, `[{"n_prompt": 64, "n_gen": 0, "avg_ts": 100}]`, `[{"n_prompt": 0, "n_gen": 16, "avg_ts": 0}]`} {
		var r nativeRates
		if err := parseLlamaBench([]byte(bad), &r); err == nil && r.complete() == nil {
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
	body := "#!/bin/sh\necho \"$@\" >> " + argsFile + "\ncat " + report + "\n"
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
	if got, want := strings.TrimSpace(string(args)), "--help\n-m model.gguf -t 2 -r 1 -o json -p 512 -n 128 -fa 1"; got != want {
		t.Errorf("llama-bench ran with %q; want %q", got, want)
	}

	// A llama-bench whose help offers -gp (ik_llama.cpp) or --n-depth
	// (mainline) also generates after the prompt: in the same run, or in a
	// second one.
	for _, c := range []struct{ help, want string }{
		{"  -gp <pp,tg>   (default: )", "-m model.gguf -t 2 -r 1 -o json -p 512 -n 128 -gp 512,128 -fa 1"},
		{"  -d, --n-depth <n>   (default: 0)", "-m model.gguf -t 2 -r 1 -o json -p 512 -n 128 -fa 1\n-m model.gguf -t 2 -r 1 -o json -p 0 -n 128 -d 512 -fa 1"},
	} {
		os.Remove(argsFile)
		body := "#!/bin/sh\nif [ \"$1\" = --help ]; then echo '" + c.help + "'; exit 0; fi\necho \"$@\" >> " + argsFile + "\ncat " + report + "\n"
		if err := os.WriteFile(script, []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
		if _, err := runLlamaBench(context.Background(), script, "model.gguf", 2, 512, 128, []string{"-fa", "1"}, 10*time.Second); err != nil {
			t.Fatal(err)
		}
		args, _ := os.ReadFile(argsFile)
		if got := strings.TrimSpace(string(args)); got != c.want {
			t.Errorf("help %q: llama-bench ran with %q; want %q", c.help, got, c.want)
		}
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
