package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
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
	// CPU is the process's user+system time.
	CPU time.Duration
}

// runLlamaBench runs path (a llama-bench binary) once on gguf with
// threads, a prompt test of prompt tokens and a generation test of decode
// tokens, plus the user's extra flags, bounded by timeout.
func runLlamaBench(ctx context.Context, path, gguf string, threads, prompt, decode int, extra []string, timeout time.Duration) (nativeRates, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	args := []string{"-m", gguf, "-t", strconv.Itoa(threads), "-p", strconv.Itoa(prompt), "-n", strconv.Itoa(decode), "-r", "1", "-o", "json"}
	cmd := exec.CommandContext(ctx, path, append(args, extra...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			return nativeRates{}, fmt.Errorf("llama-bench %s: no result within %v", path, timeout)
		}
		return nativeRates{}, fmt.Errorf("llama-bench %s: %w: %s", path, err, lastLine(stderr.String()))
	}
	r, err := parseLlamaBench(stdout.Bytes())
	if err != nil {
		return nativeRates{}, fmt.Errorf("llama-bench %s: %w", path, err)
	}
	if st := cmd.ProcessState; st != nil {
		r.CPU = st.UserTime() + st.SystemTime()
	}
	return r, nil
}

// parseLlamaBench reads llama-bench's JSON report (-o json: one object per
// test, n_prompt and n_gen saying which, avg_ts its tokens a second).
func parseLlamaBench(data []byte) (nativeRates, error) {
	var tests []struct {
		NPrompt int     `json:"n_prompt"`
		NGen    int     `json:"n_gen"`
		AvgTS   float64 `json:"avg_ts"`
	}
	if err := json.Unmarshal(data, &tests); err != nil {
		return nativeRates{}, fmt.Errorf("reading its JSON report: %w", err)
	}
	var r nativeRates
	for _, t := range tests {
		switch {
		case t.NPrompt > 0 && t.NGen == 0:
			r.Prefill = t.AvgTS
		case t.NGen > 0 && t.NPrompt == 0:
			r.Decode = t.AvgTS
		}
	}
	if r.Prefill <= 0 || r.Decode <= 0 {
		return nativeRates{}, errors.New("its report has no prompt test and generation test with a rate (was -p or -n set to 0 by the extra flags?)")
	}
	return r, nil
}

func lastLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		return s[i+1:]
	}
	return s
}
