package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"time"
)

// A native llama.cpp: node-llama-cpp's prebuilt binaries are what the
// registries here hold, and on some CPUs they run far below llama.cpp
// built for the CPU (BENCHMARKS.md, "Against a native build"). With
// -llama-bench a user points the benchmark at the llama-bench of their own
// build (mainline llama.cpp or a fork with the same tool), and each round
// also times it on the same GGUF: the peer at its best, side by side.

// nativeRates is one llama-bench run: prompt processing and generation,
// tokens a second.
type nativeRates struct {
	Prefill, Decode float64
	// DecodeAfterPrompt is generation after the prompt (0: this llama-bench
	// cannot measure it): the context our decode row runs at. From an
	// empty context, as llama-bench's plain generation test runs, attention
	// costs less.
	DecodeAfterPrompt float64
	// CPU is the process's user+system time.
	CPU time.Duration
}

// depthFlag is how a llama-bench generates after a prompt: "-gp" (the
// ik_llama.cpp fork: -gp P,N times N tokens after P), "-d" (mainline:
// --n-depth P puts every test of the run after P tokens) or "" (neither).
func depthFlag(ctx context.Context, path string) string {
	out, _ := exec.CommandContext(ctx, path, "--help").CombinedOutput()
	switch help := string(out); {
	case strings.Contains(help, "-gp <pp,tg>"):
		return "-gp"
	case strings.Contains(help, "--n-depth"):
		return "-d"
	}
	return ""
}

// runLlamaBench runs path (a llama-bench binary) on gguf with threads, a
// prompt test of prompt tokens and generation tests of decode tokens from
// an empty context and, where the tool can, after the prompt; plus the
// user's extra flags, bounded by timeout.
func runLlamaBench(ctx context.Context, path, gguf string, threads, prompt, decode int, extra []string, timeout time.Duration) (nativeRates, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	args := []string{"-m", gguf, "-t", strconv.Itoa(threads), "-r", "1", "-o", "json"}
	p, n := strconv.Itoa(prompt), strconv.Itoa(decode)
	runs := [][]string{{"-p", p, "-n", n}}
	switch depthFlag(ctx, path) {
	case "-gp":
		runs[0] = append(runs[0], "-gp", p+","+n)
	case "-d":
		runs = append(runs, []string{"-p", "0", "-n", n, "-d", p})
	}
	var r nativeRates
	for _, run := range runs {
		cmd := exec.CommandContext(ctx, path, slices.Concat(args, run, extra)...)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil {
			if ctx.Err() != nil {
				return nativeRates{}, fmt.Errorf("llama-bench %s: no result within %v", path, timeout)
			}
			return nativeRates{}, fmt.Errorf("llama-bench %s: %w: %s", path, err, lastLine(stderr.String()))
		}
		if err := parseLlamaBench(stdout.Bytes(), &r); err != nil {
			return nativeRates{}, fmt.Errorf("llama-bench %s: %w", path, err)
		}
		if st := cmd.ProcessState; st != nil {
			r.CPU += st.UserTime() + st.SystemTime()
		}
	}
	if err := r.complete(); err != nil {
		return nativeRates{}, fmt.Errorf("llama-bench %s: %w", path, err)
	}
	return r, nil
}

// complete refuses rates without a prompt test and a generation test.
func (r nativeRates) complete() error {
	if r.Prefill <= 0 || r.Decode <= 0 {
		return errors.New("its report has no prompt test and generation test with a rate (was -p or -n set to 0 by the extra flags?)")
	}
	return nil
}

// parseLlamaBench reads llama-bench's JSON report (-o json: one object per
// test, n_prompt, n_gen and n_depth saying which, avg_ts its tokens a
// second) into r: a test generating after a prompt (ik_llama.cpp's -gp
// gives both counts; mainline's -d gives n_depth) is DecodeAfterPrompt.
func parseLlamaBench(data []byte, r *nativeRates) error {
	var tests []struct {
		NPrompt int     `json:"n_prompt"`
		NGen    int     `json:"n_gen"`
		NDepth  int     `json:"n_depth"`
		AvgTS   float64 `json:"avg_ts"`
	}
	if err := json.Unmarshal(data, &tests); err != nil {
		return fmt.Errorf("reading its JSON report: %w", err)
	}
	for _, t := range tests {
		switch {
		case t.NGen > 0 && (t.NPrompt > 0 || t.NDepth > 0):
			r.DecodeAfterPrompt = t.AvgTS
		case t.NPrompt > 0:
			r.Prefill = t.AvgTS
		case t.NGen > 0:
			r.Decode = t.AvgTS
		}
	}
	return nil
}

func lastLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		return s[i+1:]
	}
	return s
}
