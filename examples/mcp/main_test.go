package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/artgo/art"
	"github.com/artgo/art/arttest"
	"github.com/artgo/art/experiment"
	"github.com/artgo/art/internal/testassets"
)

// Ensure the example trains end to end on the real memory server from npm
// with a tiny random model (offered one tool: the tiny model's context
// holds 4096 bytes): a held-out evaluation (one task, twice, with two
// seeds), one training step with the server started per rollout, the
// before → after line and the report.
func TestTrain_Smoke(t *testing.T) {
	servers := testassets.Dir(t, testassets.MCPServers)
	base, root := arttest.TinyModel(t), t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cfg, err := parseFlags([]string{"--base-model", base, "--path", root, "--server-dir", servers, "--steps", "1", "--groups", "1",
		"--group-size", "2", "--eval", "1", "--eval-repeats", "2", "--max-turns", "2", "--max-tokens", "16", "--tools", "create_entities", "--quiet",
		"--report", filepath.Join(root, "report.json")}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := train(ctx, cfg, &out); err != nil {
		t.Fatalf("train: %v\n%s", err, out.String())
	}
	t.Log(out.String())
	if !strings.Contains(out.String(), "step 1: reward") || !strings.Contains(out.String(), "held-out reward") {
		t.Errorf("output:\n%s", out.String())
	}
	if _, err := os.Stat(filepath.Join(root, "examples", "models", "mcp-example", "checkpoints", "0001")); err != nil {
		t.Error(err)
	}
	b, err := os.ReadFile(filepath.Join(root, "report.json"))
	if err != nil {
		t.Fatal(err)
	}
	var rep experiment.Report
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatal(err)
	}
	if rep.EvalScenarios != 1 || rep.EvalRepeats != 2 {
		t.Errorf("report: %d held-out tasks × %d, want 1 × 2", rep.EvalScenarios, rep.EvalRepeats)
	}
}

// Ensure the reward is what the graph holds for the task and nothing else.
func TestGrade(t *testing.T) {
	file := filepath.Join(t.TempDir(), "g.jsonl")
	tk := task{Person: "Ada", Fact: "likes tea"}
	if g := grade(file, tk); g.reward() != 0 || g != (grading{}) {
		t.Errorf("no file: %+v", g)
	}
	for _, c := range []struct {
		graph  string
		want   grading
		reward float64
	}{
		{`{"type":"entity","name":"Ada","entityType":"person","observations":["Likes tea a lot"]}`, grading{person: true, fact: true}, 1},
		{`{"type":"entity","name":" ada","entityType":"person","observations":[]}`, grading{person: true}, 0.5},
		{`{"type":"entity","name":"Ad","entityType":"person","observations":["likes tea"]}`, grading{others: 1}, 0},
		{`{"type":"entity","name":"Ada","entityType":"person","observations":["likes coffee"]}` + "\n" +
			`{"type":"entity","name":"Bob","entityType":"person","observations":["likes tea"]}`, grading{person: true, others: 1}, 0.5},
		{`{"type":"relation","from":"Ada","to":"tea","relationType":"likes"}`, grading{}, 0},
	} {
		if err := os.WriteFile(file, []byte(c.graph+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		if g := grade(file, tk); g != c.want || g.reward() != c.reward {
			t.Errorf("graph %s: got %+v (reward %v), want %+v (reward %v)", c.graph, g, g.reward(), c.want, c.reward)
		}
	}
}

// Ensure no training task is a held-out pair, that every person and fact
// still appears in training, and that the held-out tasks are distinct.
func TestTasks_HeldOutNeverTrained(t *testing.T) {
	held := heldOutTasks(1000, 7)
	if len(held) != len(heldOutPairs()) || len(held) < 90 {
		t.Fatalf("%d held-out tasks, want all %d (at least 90)", len(held), len(heldOutPairs()))
	}
	seen := map[string]bool{}
	for _, h := range held {
		if seen[h.Text] {
			t.Errorf("held-out task %q twice", h.Text)
		}
		seen[h.Text] = true
	}
	persons, factsSeen := map[string]bool{}, map[string]bool{}
	for _, tk := range makeTasks(5000, 7) {
		if seen[tk.Text] {
			t.Fatalf("training task %q is held out", tk.Text)
		}
		persons[tk.Person], factsSeen[tk.Fact] = true, true
	}
	if len(persons) != len(people) || len(factsSeen) != len(facts) {
		t.Errorf("training covers %d of %d people and %d of %d facts", len(persons), len(people), len(factsSeen), len(facts))
	}
	if _, err := parseFlags([]string{"--base-model", "x", "--eval", "1000"}, io.Discard); err == nil || !strings.Contains(err.Error(), "held-out") {
		t.Errorf("--eval beyond the held-out tasks: %v", err)
	}
}

// Ensure --write-teacher writes transcripts the way the agent records
// episodes, with the real server's answers, and that a transcript without
// noise stores exactly what grade rewards in full.
func TestWriteTeacher(t *testing.T) {
	servers := testassets.Dir(t, testassets.MCPServers)
	file := filepath.Join(t.TempDir(), "teacher.jsonl")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cfg, err := parseFlags([]string{"--write-teacher", file, "--teacher", "4", "--server-dir", servers, "--tools", "create_entities",
		"--system", "Store the fact."}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if err := writeTeacher(ctx, cfg, io.Discard); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) != 4 {
		t.Fatalf("%d transcripts, want 4", len(lines))
	}
	tk := makeTasks(1, cfg.Seed)[0]
	for _, want := range []string{tk.Text, `create_entities`, `complete_task`, `\"name\":\"` + tk.Person + `\"`, tk.Fact, `Task marked complete.`} {
		if !strings.Contains(lines[0], want) {
			t.Errorf("first transcript lacks %s:\n%s", want, lines[0])
		}
	}
	// One assistant turn makes both calls; the server's answers follow.
	var first art.Trajectory
	if err := json.Unmarshal([]byte(lines[0]), &first); err != nil {
		t.Fatal(err)
	}
	ms := first.Messages()
	if len(ms) != 5 || ms[2].Role != art.RoleAssistant || len(ms[2].ToolCalls) != 2 || ms[3].Role != art.RoleTool || ms[4].Role != art.RoleTool {
		t.Errorf("want system, user, one assistant turn with two calls, two tool results; got %+v", ms)
	}
}

// Ensure every held-out episode has its own nonzero sampling seed (one seed
// shared by all would give every episode the same random draws), that the
// seeds depend only on --seed, and that each task runs --eval-repeats
// times, all tasks once before any twice, so that a run with more repeats
// replays the episodes of a run with fewer.
func TestEvalEpisodes(t *testing.T) {
	held := heldOutTasks(96, 3)
	eps := evalEpisodes(held, 3, 3)
	if len(eps) != 3*len(held) {
		t.Fatalf("%d episodes, want %d", len(eps), 3*len(held))
	}
	seeds, runs := map[int64]bool{}, map[string]int{}
	for i, e := range eps {
		if e.Text != held[i%len(held)].Text || e.Person != held[i%len(held)].Person || e.Fact != held[i%len(held)].Fact {
			t.Fatalf("episode %d is %q, want %q", i, e.Text, held[i%len(held)].Text)
		}
		if e.Seed <= 0 || seeds[e.Seed] {
			t.Fatalf("episode %d: seed %d is not positive or repeats", i, e.Seed)
		}
		seeds[e.Seed] = true
		runs[e.Text]++
	}
	for text, n := range runs {
		if n != 3 {
			t.Errorf("task %q runs %d times, want 3", text, n)
		}
	}
	if one := evalEpisodes(held, 1, 3); !slices.Equal(one, eps[:len(held)]) {
		t.Error("the episodes of one repeat differ from the first repeat of three")
	}
	if other := evalEpisodes(held, 1, 4); other[0].Seed == eps[0].Seed {
		t.Error("--seed 4 gives the same sampling seeds as --seed 3")
	}
	if _, err := parseFlags([]string{"--base-model", "x", "--eval-repeats", "0"}, io.Discard); err == nil || !strings.Contains(err.Error(), "--eval-repeats") {
		t.Errorf("--eval-repeats 0: %v", err)
	}
}
