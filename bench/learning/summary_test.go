package main

import (
	"strings"
	"testing"
)

// Ensure the summary gives each example its min / median / max gain,
// counts as learned only the seeds whose gain reaches 3 paired standard
// errors, and says "exactly 0" for the trainer-vs-sampler logprob gap only
// when every trained step logged it as 0.
func TestWriteSummary(t *testing.T) {
	outs := []outcome{
		{example: "calculator", seed: 1, gain: 0.45, se: 0.04, trained: 40, compared: 40},
		{example: "2048", seed: 1, gain: 0.12, se: 0.03, trained: 40, compared: 39},
		{example: "calculator", seed: 2, gain: -0.20, se: 0.05},
		{example: "calculator", seed: 3, gain: 0.10, se: 0.04}, // 2.5 SE: not learned
		{example: "2048", seed: 2, gain: 0.09, se: 0.03},       // exactly 3 SE
		{example: "2048", seed: 3, gain: 0.30, se: 0},          // no error known
		{example: "2048", seed: 4, gain: 0.20, se: 0.02, trained: 40, compared: 40, maxDiff: 2.5e-7},
	}
	var b strings.Builder
	writeSummary(&b, outs)
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	want := []string{
		"| calculator | 1, 2, 3 | -0.200 / +0.100 / +0.450 | **1 of 3** | exactly 0 on all 40 trained steps |",
		"| 2048 | 1, 2, 3, 4 | +0.090 / +0.160 / +0.300 | **3 of 4** | logged on 79 of 80 trained steps, largest 2.5e-07 |",
	}
	if len(lines) != 2+len(want) {
		t.Fatalf("summary:\n%s\nwant a header and %d rows", b.String(), len(want))
	}
	for i, w := range want {
		if lines[2+i] != w {
			t.Errorf("row %d = %q; want %q", i, lines[2+i], w)
		}
	}
}
