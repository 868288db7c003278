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

	"github.com/artgo/art"
	"github.com/artgo/art/arttest"
	"github.com/artgo/art/experiment"
)

// Ensure the program trains for two steps on a tiny random model, logs the
// train and held-out splits and checkpoints every step, and a second run
// resumes at the stored step. The random model never calls the tool, but
// its replies hold a digit often enough that groups differ (reward 0 or
// 0.1), so the steps train for real.
func TestTrain_Smoke(t *testing.T) {
	base, root := arttest.TinyModel(t), t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	args := []string{"--base-model", base, "--path", root, "--groups", "2", "--group-size", "4", "--max-tokens", "24",
		"--train-size", "20", "--val-size", "2", "--eval-every", "2", "--call-timeout", "1m", "--quiet"}
	cfg, err := parseFlags(append(args, "--steps", "2"), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := train(ctx, cfg, &out); err != nil {
		t.Fatalf("train: %v\n%s", err, out.String())
	}
	t.Log(out.String())
	dir := filepath.Join(root, "examples", "models", "calculator-example")
	for _, p := range []string{"checkpoints/0000", "checkpoints/0001", "checkpoints/0002",
		"trajectories/train/0001.parquet", "trajectories/train/0002.parquet",
		"trajectories/val/0000.parquet", "trajectories/val/0002.parquet"} {
		if _, err := os.Stat(filepath.Join(dir, p)); err != nil {
			t.Errorf("missing %s: %v", p, err)
		}
	}
	rows := arttest.ReadHistory(t, dir)
	var trainRows, valRows int
	for _, r := range rows {
		if _, ok := r["train/reward"]; ok {
			trainRows++
			for _, k := range []string{"train/correct", "train/tool_calls", "train/turns"} {
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
		t.Fatalf("history.jsonl has %d train and %d val rows; want 2 and 2:\n%v", trainRows, valRows, rows)
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

// Ensure the benchmark flags work together on a tiny model: an SFT warm-up
// on teacher transcripts (tool calls included) becomes checkpoint 1, the
// held-out problems run before and after GRPO, and the report is written.
func TestTrain_WarmupEvalReport(t *testing.T) {
	base, root := arttest.TinyModel(t), t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	report := filepath.Join(root, "report.json")
	cfg, err := parseFlags([]string{"--base-model", base, "--path", root, "--problems", "products", "--system", "Use the calculator.",
		"--compact-tool", "--groups", "4", "--group-size", "4", "--max-turns", "2", "--max-tokens", "16", "--train-size", "20",
		"--steps", "2", "--sft-warmup", "8", "--sft-noise", "0.5", "--sft-batch", "4", "--eval", "3", "--eval-every", "0",
		"--report", report, "--quiet"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := train(ctx, cfg, &out); err != nil {
		t.Fatalf("train: %v\n%s", err, out.String())
	}
	t.Log(out.String())
	for _, want := range []string{"sft warm-up: 8 teacher transcripts", "val step 1:", "step 2:", "val step 2:", "held-out reward", "paired by problem, 3 problems"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q", want)
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
	if rep.Example != "calculator" || rep.Steps != 1 || rep.FinalStep != 2 || rep.SFTTrajectories != 8 || rep.EvalScenarios != 3 ||
		rep.AfterMetrics == nil {
		t.Errorf("report: %+v", rep)
	}
	if err := rep.CheckOnPolicy(); err != nil {
		t.Error(err)
	}
}

// Ensure the teacher's transcripts are episodes Rollout could have
// recorded: the right tool call and its result as the answer, or (noise)
// a wrong number without the tool.
func TestTeacherTranscripts(t *testing.T) {
	problems := ProductProblems(1, 40)
	ts := TeacherTranscripts(problems, 60, 0.5, 1, SystemPrompt, CalculatorTool(true))
	if len(ts) != 60 {
		t.Fatalf("%d transcripts", len(ts))
	}
	byQ := map[string]Problem{}
	for _, p := range problems {
		byQ[p.Question] = p
	}
	var tool, noise int
	for _, tr := range ts {
		ms := tr.Messages()
		p, ok := byQ[ms[1].Content.String()]
		if !ok || ms[0].Role != "system" || len(tr.Tools) != 1 {
			t.Fatalf("transcript: %+v", ms)
		}
		final := ms[len(ms)-1].Content.String()
		reward, correct, _ := Grade(final, p.Answer)
		switch len(ms) {
		case 5:
			tool++
			if !correct || ms[2].ToolCalls[0].ID != ms[3].ToolCallID {
				t.Errorf("tool transcript for %q: %+v", p.Question, ms)
			}
		case 3:
			noise++
			if reward != 0.1 {
				t.Errorf("noisy answer %q to %q scores %v; want 0.1", final, p.Question, reward)
			}
		default:
			t.Fatalf("transcript of %d messages", len(ms))
		}
	}
	if tool < 15 || noise < 15 {
		t.Errorf("%d tool and %d noisy transcripts at noise 0.5", tool, noise)
	}
	for _, p := range ProductProblems(2, 100) {
		if len(p.Question) != len("Compute 32 * 99.") || p.Answer < 1000 || p.Answer > 9999 {
			t.Errorf("problem %+v is not fixed-width", p)
		}
	}
}

// Ensure --write-teacher writes the teacher's transcripts as JSONL that
// decodes back to the same trajectories, needs no model, and refuses a bad
// count.
func TestWriteTeacher(t *testing.T) {
	path := filepath.Join(t.TempDir(), "teacher.jsonl")
	args := []string{"--write-teacher", path, "--teacher", "7", "--problems", "products", "--system", "Use the calculator.",
		"--compact-tool", "--train-size", "30", "--seed", "3"}
	cfg, err := parseFlags(args, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := writeTeacher(cfg, &out); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	trainSet, _ := splitProblems(cfg)
	want := TeacherTranscripts(trainSet, 7, 0, 3, "Use the calculator.", CalculatorTool(true))
	if len(lines) != 7 {
		t.Fatalf("%d lines; want 7", len(lines))
	}
	for i, line := range lines {
		var got art.Trajectory
		if err := json.Unmarshal([]byte(line), &got); err != nil {
			t.Fatalf("line %d: %v", i+1, err)
		}
		if g, w := got.Messages(), want[i].Messages(); len(g) != len(w) || g[1].Content.String() != w[1].Content.String() ||
			g[len(g)-1].Content.String() != w[len(w)-1].Content.String() || len(got.Tools) != 1 {
			t.Fatalf("line %d decodes to %+v; want %+v", i+1, g, w)
		}
	}
	if _, err := parseFlags([]string{"--write-teacher", path, "--teacher", "0"}, io.Discard); err == nil {
		t.Fatal("--teacher 0 accepted")
	}
}
