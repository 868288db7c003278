package main

import (
	"bufio"
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

	"github.com/artgo/art"
	"github.com/artgo/art/arttest"
	"github.com/artgo/art/experiment"
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
	_, out := runTrain(ctx, t, append(args, "--steps", "2"))
	if strings.Contains(out, "built the search index") {
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

	_, out = runTrain(ctx, t, append(args, "--steps", "3"))
	if lines := strings.Split(strings.TrimSpace(out), "\n"); len(lines) != 2 || !strings.HasPrefix(lines[1], "step 3:") {
		t.Errorf("resumed run printed %q; want the question counts and step 3 only", out)
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
	_, out := runTrain(ctx, t, []string{"--base-model", base, "--path", root, "--corpus", corpus, "--index", index,
		"--system", "Answer from the inbox.", "--groups", "2", "--group-size", "2", "--max-tokens", "16", "--max-turns", "2",
		"--steps", "2", "--sft-warmup", "2", "--sft-batch", "2", "--eval", "2", "--eval-every", "0", "--report", report,
		"--call-timeout", "1m", "--quiet"})
	for _, want := range []string{"sft warm-up: 2 scripted episodes", "val step 1:", "step 2:", "val step 2:", "held-out reward", "paired by question, 2 questions"} {
		if !strings.Contains(out, want) {
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
	if rep.Example != "emailsearch" || rep.Steps != 1 || rep.FinalStep != 2 || rep.SFTTrajectories != 2 || rep.EvalScenarios != 2 {
		t.Errorf("report: %+v", rep)
	}
	// A random tiny model rarely makes a well-formed tool call, so its one
	// GRPO step is usually skipped (every episode a format error) and
	// there is nothing to compare; teaching it the format takes minutes of
	// SFT. The calculator and 2048 smoke tests, which do train, assert
	// true on-policy for the same multi-turn path.
	if rep.TrainedSteps == 0 {
		t.Log("no step trained: sampler/trainer logprob equality not checked here")
	} else if err := rep.CheckOnPolicy(); err != nil {
		t.Error(err)
	}
}

// Ensure --write-teacher writes --teacher scripted episodes of training
// questions as JSONL that parses back into trajectories, each replaying
// against the inbox to the same tool results and a correct, cited answer,
// without a base model; and that compact episodes are a few hundred bytes.
func TestWriteTeacher(t *testing.T) {
	inbox, corpus, index := realInbox(t)
	ctx := context.Background()
	for _, compact := range []bool{false, true} {
		t.Run(fmt.Sprintf("compact=%v", compact), func(t *testing.T) {
			file := filepath.Join(t.TempDir(), "teacher", "t.jsonl")
			args := []string{"--path", t.TempDir(), "--corpus", corpus, "--index", index, "--seed", "3", "--eval", "40",
				"--system", "Answer from the inbox.", "--write-teacher", file, "--teacher", "30"}
			if compact {
				args = append(args, "--compact")
			}
			cfg, _ := runTrain(ctx, t, args)
			headers, err := inbox.headers(ctx)
			if err != nil {
				t.Fatal(err)
			}
			qs := GenerateQuestions(headers)
			if compact {
				qs = CompactQuestions(headers)
			}
			_, val := SplitQuestions(qs, 3, cfg.valSize)
			byID, held := map[string]Question{}, map[string]bool{}
			for _, q := range qs {
				byID[q.ID] = q
			}
			for _, q := range val {
				held[q.ID] = true
			}
			f, err := os.Open(file)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			sc := bufio.NewScanner(f)
			sc.Buffer(nil, 1<<20)
			n, total := 0, 0
			for sc.Scan() {
				var tr art.Trajectory
				if err := json.Unmarshal(sc.Bytes(), &tr); err != nil {
					t.Fatalf("line %d: %v", n+1, err)
				}
				n++
				id, _ := tr.Metadata["scenario_id"].(string)
				q, ok := byID[id]
				if !ok || held[id] {
					t.Fatalf("line %d: scenario %q: known %v, held out %v", n, id, ok, held[id])
				}
				replayTeacher(t, inbox, q, tr, compact)
				total += episodeBytes(tr)
			}
			if err := sc.Err(); err != nil {
				t.Fatal(err)
			}
			if n != 30 {
				t.Fatalf("%d transcripts; want 30", n)
			}
			avg := total / n
			t.Logf("%d transcripts, %d bytes of messages each on average", n, avg)
			if compact && avg > 600 || !compact && avg < 1500 {
				t.Errorf("episodes of %d bytes on average (compact %v)", avg, compact)
			}
		})
	}
}

// replayTeacher runs a teacher transcript's tool calls again and checks
// that each recorded tool message is what the tool returns and that the
// final answer is graded correct with the right source.
func replayTeacher(t *testing.T, inbox *Inbox, q Question, tr art.Trajectory, compact bool) {
	t.Helper()
	ms := tr.Messages()
	var names []string
	var r Rubric
	for i, m := range ms {
		if m.Role != art.RoleAssistant {
			continue
		}
		if len(m.ToolCalls) != 1 {
			t.Fatalf("%s: message %d has %d tool calls", q.ID, i, len(m.ToolCalls))
		}
		tc := m.ToolCalls[0]
		names = append(names, tc.Function.Name)
		res, final, err := toolResult(context.Background(), inbox, q, tc.Function.Name, tc.Function.Arguments, compact, &r)
		if err != nil {
			t.Fatalf("%s: %s(%s): %v", q.ID, tc.Function.Name, tc.Function.Arguments, err)
		}
		if final {
			if i != len(ms)-1 {
				t.Fatalf("%s: the final answer is message %d of %d", q.ID, i, len(ms))
			}
			continue
		}
		if i+1 >= len(ms) || ms[i+1].Role != art.RoleTool || ms[i+1].ToolCallID != tc.ID || ms[i+1].Content.String() != res {
			t.Fatalf("%s: %s(%s) returns %s; the transcript recorded %+v", q.ID, tc.Function.Name, tc.Function.Arguments, res, ms[min(i+1, len(ms)-1)])
		}
	}
	if got := strings.Join(names, ","); got != "search_inbox,read_email,return_final_answer" {
		t.Fatalf("%s: calls %s", q.ID, got)
	}
	if !r.Correct || !r.SourcesCorrect || !r.ReadRightEmail || r.Reward() != 1.1 {
		t.Fatalf("%s: replayed rubric %+v", q.ID, r)
	}
	if tr.Reward != r.Reward() {
		t.Fatalf("%s: recorded reward %v; replayed %v", q.ID, tr.Reward, r.Reward())
	}
}

// Ensure --teacher-retry reaches the teacher (some written episodes are
// recovery episodes, replayed in TestTeacherTranscriptsRetry) and is
// checked.
func TestWriteTeacherRetry(t *testing.T) {
	_, corpus, index := realInbox(t)
	file := filepath.Join(t.TempDir(), "t.jsonl")
	args := []string{"--path", t.TempDir(), "--corpus", corpus, "--index", index, "--seed", "3", "--eval", "40", "--compact",
		"--write-teacher", file, "--teacher", "40"}
	if _, err := parseFlags(append(args, "--teacher-retry", "1.5"), io.Discard); err == nil {
		t.Fatal("--teacher-retry 1.5 accepted")
	}
	runTrain(context.Background(), t, append(args, "--teacher-retry", "0.5"))
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	lines, retries := strings.Count(string(b), "\n"), strings.Count(string(b), `"teacher_retry":true`)
	if lines != 40 || retries < 10 || retries > 30 {
		t.Fatalf("%d transcripts, %d of them retries; want 40, about half", lines, retries)
	}
}

// runTrain parses args as the command line, trains, and returns the
// parsed configuration and what the run printed, failing the test if
// either step fails.
func runTrain(ctx context.Context, t *testing.T, args []string) (config, string) {
	t.Helper()
	cfg, err := parseFlags(args, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := train(ctx, cfg, &out); err != nil {
		t.Fatalf("train: %v\n%s", err, out.String())
	}
	t.Log(out.String())
	return cfg, out.String()
}
