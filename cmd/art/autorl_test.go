package main

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/artgo/art"
	"github.com/artgo/art/arttest"
	"github.com/artgo/art/backend/local"
)

// Ensure `art autorl` trains end to end and prints the before → after
// table, with a generator and judge served by our own server (a random
// tiny model under grammar-constrained decoding), and that missing flags
// are a clear error.
func TestAutoRLCmd(t *testing.T) {
	if code, _, errOut := runArgs(t, "autorl", "task"); code == 0 || !strings.Contains(errOut, "--base-model and --judge are required") {
		t.Fatalf("no flags: code %d, %q", code, errOut)
	}
	base := arttest.TinyModel(t)
	b := local.New(local.Options{Path: t.TempDir(), Quiet: true})
	defer b.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	jm := &art.TrainableModel{Model: art.Model{Name: "judge", Project: "cli"}, BaseModel: base}
	if err := jm.Register(ctx, b); err != nil {
		t.Fatal(err)
	}
	ep, err := b.InferenceEndpoint(ctx, jm, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("AUTORL_TEST_KEY", ep.APIKey)
	t.Setenv("XDG_CACHE_HOME", t.TempDir()) // the judge's answer cache
	code, out, errOut := runArgs(t, "autorl", "Greet the user", "--base-model", base, "--path", filepath.Join(t.TempDir(), "art"),
		"--judge", ep.Model, "--judge-base-url", ep.BaseURL, "--judge-api-key-env", "AUTORL_TEST_KEY", "--judge-max-tokens", "300",
		"--train-inputs", "1", "--test-inputs", "1", "--groups-per-step", "1", "--group-size", "2", "--epochs", "1",
		"--max-tokens", "8", "--max-input-length", "16", "--max-explanation", "8", "--quiet")
	if code != 0 || !strings.Contains(out, "step 0 → step 1") || !strings.Contains(out, "mean") {
		t.Fatalf("code %d\nstdout %s\nstderr %s", code, out, errOut)
	}
}
