package main

import (
	"bytes"
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/artgo/art/arttest"
)

// Ensure each framework's agent trains a step on a tiny random model over
// the real server: its rollouts are recorded through the framework's own
// client (two turns when the model calls the tool) and the step trains
// (a group's rewards differ, so it is not skipped).
func TestTrain_EachFramework(t *testing.T) {
	base := arttest.TinyModel(t)
	for _, fw := range frameworkNames() {
		t.Run(fw, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			cfg, err := parseFlags([]string{"--framework", fw, "--base-model", base, "--path", t.TempDir(), "--steps", "1",
				"--groups", "2", "--group-size", "4", "--max-tokens", "24", "--call-timeout", "1m", "--quiet"}, io.Discard)
			if err != nil {
				t.Fatal(err)
			}
			var out bytes.Buffer
			if err := train(ctx, cfg, &out); err != nil {
				t.Fatalf("train: %v\n%s", err, out.String())
			}
			if !strings.HasPrefix(out.String(), "step 1: reward ") || !strings.Contains(out.String(), "8 rollouts ("+fw+")") {
				t.Fatalf("printed %q", out.String())
			}
		})
	}
}

// Ensure the grade gives a call with the city full marks and a reply a
// share of the city's letters.
func TestGrade(t *testing.T) {
	for _, c := range []struct {
		reply, args string
		want        float64
	}{
		{"", `{"city":"Paris"}`, 1},
		{"", `{"city":"Lima"}`, 0},
		{"pa", "", 0.2},
		{"xyz", "", 0},
	} {
		if got := grade("Paris", c.reply, c.args); got != c.want {
			t.Errorf("grade(Paris, %q, %q) = %v; want %v", c.reply, c.args, got, c.want)
		}
	}
}
