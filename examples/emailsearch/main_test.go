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
	"github.com/artgo/art/examples/internal/benchmark"
)

// Ensure the program runs two training steps on the real inbox with a tiny
// random model, logs the train and held-out splits and checkpoints every
// step, and a second run resumes at the stored step and reuses the index.
// The random model never calls a tool, so every episode is a format error
// with the same reward and the steps carry the checkpoint over, saying so.
func TestTrain_Smoke(t *testing.T) {
	_, corpus, index := realInbox(t)
	base, root := arttest.TinyModel(t), t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	args := []string{"--base-model", base, "--path", root, "--corpus", corpus, "--index", index,
		"--groups", "2", "--group-size", "2", "--max-tokens", "16", "--max-turns", "2",
		"--val-size", "2", "--eval-every", "2", "--call-timeout", "1m", "--quiet"}
	cfg, err := parseFlags(append(args, "--steps", "2"), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := train(ctx, cfg, &out); err != nil {
		t.Fatalf("train: %v\n%s", err, out.String())
	}
	t.Log(out.String())
	if strings.Contains(out.String(), "built the search index") {
		t.Error("the cached index was rebuilt")
	}
	dir := filepath.Join(root, "examples", "models", "emailsearch-example")
	for _, p := range []string{"checkpoints/0000", "checkpoints/0001", "checkpoints/0002",
		"trajectories/train/0001.parquet", "trajectories/train/0002.parquet",
		"trajectories/val/0000.parquet", "trajectories/val/0002.parquet"} {
		if _, err := os.Stat(filepath.Join(dir, p)); err != nil {
			t.Errorf("missing %s: %v", p, err)
		}
	}
	var trainRows, valRows int
	for _, r := range arttest.ReadHistory(t, dir) {
		if _, ok := r["train/reward"]; ok {
			trainRows++
			for _, k := range []string{"train/correct", "train/format_error", "train/turns", "train/found_right_email"} {
				if _, ok := r[k]; !ok {
					t.Errorf("train row lacks %s: %v", k, r)
				}
			}
		}
		if _, ok := r["val/reward"]; ok {
			valRows++
		}
	}
	if trainRows != 2 || valRows != 2 {
		t.Fatalf("history.jsonl has %d train and %d val rows; want 2 and 2", trainRows, valRows)
	}

	cfg, err = parseFlags(append(args, "--steps", "3"), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	out.Reset()
	if err := train(ctx, cfg, &out); err != nil {
		t.Fatalf("resume: %v", err)
	}
	if lines := strings.Split(strings.TrimSpace(out.String()), "\n"); len(lines) != 2 || !strings.HasPrefix(lines[1], "step 3:") {
		t.Errorf("resumed run printed %q; want the question counts and step 3 only", out.String())
	}
}

// Ensure a missing corpus is a clear error, not a crash or an empty run.
func TestTrain_NoCorpus(t *testing.T) {
	cfg, err := parseFlags([]string{"--base-model", "unused", "--corpus", filepath.Join(t.TempDir(), "none")}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	err = train(context.Background(), cfg, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "fetch-assets.sh") {
		t.Fatalf("train without a corpus: %v", err)
	}
}

// Ensure the benchmark flags work together on the real inbox: an SFT
// warm-up on scripted episodes becomes checkpoint 1, the held-out questions
// run before and after GRPO, and the report is written.
func TestTrain_WarmupEvalReport(t *testing.T) {
	_, corpus, index := realInbox(t)
	base, root := arttest.TinyModel(t), t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	report := filepath.Join(root, "report.json")
	cfg, err := parseFlags([]string{"--base-model", base, "--path", root, "--corpus", corpus, "--index", index,
		"--system", "Answer from the inbox.", "--groups", "2", "--group-size", "2", "--max-tokens", "16", "--max-turns", "2",
		"--steps", "2", "--sft-warmup", "2", "--sft-batch", "2", "--eval", "2", "--eval-every", "0", "--report", report,
		"--call-timeout", "1m", "--quiet"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := train(ctx, cfg, &out); err != nil {
		t.Fatalf("train: %v\n%s", err, out.String())
	}
	t.Log(out.String())
	for _, want := range []string{"sft warm-up: 2 scripted episodes", "val step 1:", "step 2:", "val step 2:", "held-out reward"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q", want)
		}
	}
	b, err := os.ReadFile(report)
	if err != nil {
		t.Fatal(err)
	}
	var rep benchmark.Report
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Example != "emailsearch" || rep.Steps != 1 || rep.FinalStep != 2 || rep.SFTTrajectories != 2 || rep.EvalScenarios != 2 {
		t.Errorf("report: %+v", rep)
	}
}
