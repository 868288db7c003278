package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/artgo/art/arttest"
	"github.com/artgo/art/engine/initmodel"
	"github.com/artgo/art/engine/kernels"
	"github.com/artgo/art/experiment"
)

// Ensure the program trains two steps on a tiny random model, logs and
// checkpoints each, and a second run resumes at the stored step.
func TestTrain_Smoke(t *testing.T) {
	base := filepath.Join(t.TempDir(), "tiny")
	if _, err := initmodel.Write(base, initmodel.Options{Arch: "qwen2", Shape: "tiny", Tokenizer: initmodel.ByteTokenizer,
		DType: kernels.F32, Seed: 1, Std: 0.5}); err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	args := []string{"--base-model", base, "--path", root, "--groups", "2", "--group-size", "4", "--quiet"}
	cfg, err := parseFlags(append(args, "--steps", "2"), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if !cfg.instructions {
		t.Error("a model other than the demo's is not given the rules")
	}
	var out bytes.Buffer
	if err := train(ctx, cfg, &out); err != nil {
		t.Fatalf("train: %v\n%s", err, out.String())
	}
	dir := filepath.Join(root, "examples", "models", "tictactoe-example")
	for _, p := range []string{"checkpoints/0002", "history.jsonl", "trajectories/train/0001.parquet", "trajectories/train/0002.parquet"} {
		if _, err := os.Stat(filepath.Join(dir, p)); err != nil {
			t.Errorf("missing %s: %v", p, err)
		}
	}
	cfg, err = parseFlags(append(args, "--steps", "3"), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	out.Reset()
	if err := train(ctx, cfg, &out); err != nil {
		t.Fatalf("resume: %v", err)
	}
	if !strings.HasPrefix(out.String(), "step 3:") || strings.Count(out.String(), "step ") != 1 {
		t.Errorf("resumed run printed %q; want only step 3", out.String())
	}
}

// Ensure --eval plays the held-out games before and after training, logs
// them as the val split, and --report writes the summary.
func TestTrain_EvalReport(t *testing.T) {
	base, root := arttest.TinyModel(t), t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	report := filepath.Join(root, "report.json")
	cfg, err := parseFlags([]string{"--base-model", base, "--path", root, "--groups", "2", "--group-size", "2", "--steps", "1",
		"--eval", "3", "--report", report, "--quiet"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := train(ctx, cfg, &out); err != nil {
		t.Fatalf("train: %v\n%s", err, out.String())
	}
	t.Log(out.String())
	for _, want := range []string{"val step 0:", "step 1:", "val step 1:", "paired by game, 3 games"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q", want)
		}
	}
	dir := filepath.Join(root, "examples", "models", "tictactoe-example")
	for _, p := range []string{"trajectories/val/0000.parquet", "trajectories/val/0001.parquet"} {
		if _, err := os.Stat(filepath.Join(dir, p)); err != nil {
			t.Errorf("missing %s: %v", p, err)
		}
	}
	b, err := os.ReadFile(report)
	if err != nil {
		t.Fatal(err)
	}
	var rep experiment.Report
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Example != "tictactoe" || rep.Steps != 1 || rep.FinalStep != 1 || rep.EvalScenarios != 3 || rep.AfterMetrics == nil {
		t.Errorf("report: %+v", rep)
	}
	// A random tiny model almost never replies with a single legal digit,
	// so its one step is usually skipped (every game lost, equal rewards)
	// and there is nothing to compare. The demo's test (demo/demo_test.go)
	// trains the same game on a base that knows the rules and asserts true
	// on-policy on every step.
	if rep.TrainedSteps == 0 {
		t.Log("no step trained: sampler/trainer logprob equality not checked here")
	} else if err := rep.CheckOnPolicy(); err != nil {
		t.Error(err)
	}
}

func TestParseFlags(t *testing.T) {
	for _, args := range [][]string{
		{"--group-size", "1"},
		{"--lr", "0"},
		{"--instructions", "maybe"},
		{"--invalid-penalty", "-1"},
		{"extra"},
	} {
		if _, err := parseFlags(args, io.Discard); err == nil {
			t.Errorf("parseFlags(%q) accepted", args)
		}
	}
	c, err := parseFlags(nil, io.Discard)
	if err != nil || c.instructions || c.BaseModel != demoBase {
		t.Errorf("defaults: %+v, %v; want the demo's base without instructions", c, err)
	}
}
