package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/artgo/art/arttest"
	"github.com/artgo/art/experiment"
)

// Ensure the program trains for two steps on a tiny random model (whose
// replies are never moves), logs and checkpoints every step, and a second
// run resumes at the stored step.
func TestTrain_Smoke(t *testing.T) {
	base, root := arttest.TinyModel(t), t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	args := []string{"--base-model", base, "--path", root, "--groups", "2", "--group-size", "2", "--max-tokens", "4",
		"--call-timeout", "1m", "--quiet"}
	cfg, err := parseFlags(append(args, "--steps", "2"), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := train(ctx, cfg, &out); err != nil {
		t.Fatalf("train: %v\n%s", err, out.String())
	}
	t.Log(out.String())
	dir := filepath.Join(root, "examples", "models", "2048-example")
	for _, p := range []string{"checkpoints/0000", "checkpoints/0001", "checkpoints/0002",
		"trajectories/train/0001.parquet", "trajectories/train/0002.parquet"} {
		if _, err := os.Stat(filepath.Join(dir, p)); err != nil {
			t.Errorf("missing %s: %v", p, err)
		}
	}
	rows := arttest.ReadHistory(t, dir)
	if len(rows) != 2 {
		t.Fatalf("history.jsonl has %d rows; want 2", len(rows))
	}
	for _, k := range []string{"train/reward", "train/max_tile", "train/num_moves", "train/invalid_move"} {
		if _, ok := rows[1][k]; !ok {
			t.Errorf("history row lacks %s: %v", k, rows[1])
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

func TestParseFlags(t *testing.T) {
	for _, args := range [][]string{
		{},                                       // no base model
		{"--base-model", "m", "--target", "100"}, // not a power of two
		{"--base-model", "m", "--groups", "0"},   // no groups
		{"--base-model", "m", "--call-timeout", "0"}, // unbounded calls
		{"--base-model", "m", "extra"},
		{"--base-model", "m", "--prompt", "short"},
		{"--base-model", "m", "--sft-warmup", "-1"},
		{"--base-model", "m", "--sft-batch", "0"},
	} {
		if _, err := parseFlags(args, io.Discard); err == nil {
			t.Errorf("parseFlags(%q) accepted", args)
		}
	}
}

// Ensure the benchmark flags work together on a tiny model: an SFT warm-up
// on teacher moves becomes checkpoint 1, the held-out games are played
// before and after GRPO and logged as the val split, the report is
// written, and the GRPO step trains with the trainer's logprobs equal to
// the sampler's. The warm-up is large and fast enough (lr 2e-2) that some
// replies are legal moves: a random model loses every game at once, and a
// step whose rewards are all equal is skipped and proves nothing. About
// 80 % of the games are still lost at once; with 8 groups of 4, the chance
// that every group is uniform (and the step skipped) is below 0.1 %.
func TestTrain_WarmupEvalReport(t *testing.T) {
	base, root := arttest.TinyModel(t), t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	report := filepath.Join(root, "report.json")
	cfg, err := parseFlags([]string{"--base-model", base, "--path", root, "--prompt", "board", "--system", "2048",
		"--groups", "8", "--group-size", "4", "--max-moves", "4", "--target", "16", "--steps", "2",
		"--sft-warmup", "256", "--sft-batch", "8", "--sft-lr", "2e-2", "--eval", "3", "--grad-accum", "4", "--report", report, "--quiet"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := train(ctx, cfg, &out); err != nil {
		t.Fatalf("train: %v\n%s", err, out.String())
	}
	t.Log(out.String())
	for _, want := range []string{"sft warm-up: 256 teacher moves", "val step 1:", "step 2:", "val step 2:", "held-out reward", "paired by game, 3 games"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q", want)
		}
	}
	dir := filepath.Join(root, "examples", "models", "2048-example")
	for _, p := range []string{"checkpoints/0001", "checkpoints/0002", "trajectories/val/0001.parquet", "trajectories/val/0002.parquet"} {
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
	if rep.Example != "2048" || rep.Steps != 1 || rep.StartStep != 1 || rep.FinalStep != 2 || rep.SFTTrajectories != 256 ||
		rep.EvalScenarios != 3 || rep.TotalSeconds <= 0 || rep.AfterMetrics == nil {
		t.Errorf("report: %+v", rep)
	}
	if err := rep.CheckOnPolicy(); err != nil {
		t.Error(err)
	}
}

// Ensure the teacher plays only moves that change the board, in the
// rollout's message shape.
func TestTeacherTranscripts(t *testing.T) {
	rules := Rules{Target: 64, MaxMoves: 30, Prompt: BoardPrompt}
	ts := TeacherTranscripts(1, 50, rules, "2048")
	if len(ts) != 50 {
		t.Fatalf("%d transcripts; want 50", len(ts))
	}
	for _, tr := range ts {
		ms := tr.Messages()
		if len(ms) != 3 || ms[0].Role != "system" || ms[1].Role != "user" || ms[2].Role != "assistant" {
			t.Fatalf("transcript shape: %+v", ms)
		}
		d, err := ParseMove(ms[2].Content.String())
		if err != nil {
			t.Fatal(err)
		}
		var b Board
		for r, line := range strings.Split(ms[1].Content.String(), "\n") {
			for c, f := range strings.Fields(line) {
				if f != "." {
					b[r][c] = atoi(t, f)
				}
			}
		}
		if _, _, changed := b.Move(d); !changed {
			t.Fatalf("teacher played the no-op %v on\n%v", d, b)
		}
	}
}

func atoi(t *testing.T, s string) int {
	t.Helper()
	var v int
	if _, err := fmt.Sscan(s, &v); err != nil {
		t.Fatal(err)
	}
	return v
}
