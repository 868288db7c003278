package art

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/artgo/art/store"
)

// rewardsOf returns the rewards of groups, group by group.
func rewardsOf(groups []TrajectoryGroup) [][]float64 {
	out := make([][]float64, len(groups))
	for i, g := range groups {
		for _, t := range g.Trajectories {
			out[i] = append(out[i], t.Reward)
		}
	}
	return out
}

func equalRewards(a, b [][]float64) bool {
	return slices.EqualFunc(a, b, slices.Equal)
}

// Ensure a second Log at the same split and step adds its groups to the
// parquet file instead of replacing it: the groups of both calls read back,
// in order, the second's group indexes continuing after the first's, and
// each call has its own history row with its own aggregates.
func TestLog_SameStepAppends(t *testing.T) {
	ctx := context.Background()
	m := &Model{Name: "m", Project: "p", BasePath: t.TempDir()}
	step := 3
	first := []TrajectoryGroup{
		{Trajectories: []Trajectory{{Reward: 1}, {Reward: 0}}, Metadata: map[string]any{"scenario_id": "a"}},
		{Exceptions: []Exception{{Type: "x", Message: "no trajectories: no rows"}}},
		{Trajectories: []Trajectory{{Reward: 0.25}}},
	}
	second := []TrajectoryGroup{{Trajectories: []Trajectory{{Reward: 0.5}, {Reward: 0.75}, {Reward: 1}}, Metadata: map[string]any{"scenario_id": "b"}}}
	if err := m.Log(ctx, first, LogOptions{Split: "val", Step: &step}); err != nil {
		t.Fatal(err)
	}
	if err := m.Log(ctx, second, LogOptions{Split: "val", Step: &step}); err != nil {
		t.Fatal(err)
	}
	d, _ := m.Dir()
	rows, err := d.ReadTrajectories("val", step)
	if err != nil {
		t.Fatal(err)
	}
	var idx []int64
	for _, r := range rows {
		idx = append(idx, r.GroupIndex)
	}
	// The first call's indexes are its groups' (group 1 had no
	// trajectories); the second's continue after the file's highest.
	if want := []int64{0, 0, 2, 3, 3, 3}; !slices.Equal(idx, want) {
		t.Fatalf("group indexes %v; want %v", idx, want)
	}
	groups, err := ReadTrajectoryGroups(d.TrajectoriesPath("val", step))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := rewardsOf(groups), [][]float64{{1, 0}, {0.25}, {0.5, 0.75, 1}}; !equalRewards(got, want) {
		t.Fatalf("read back groups with rewards %v; want %v", got, want)
	}
	if groups[2].Metadata["scenario_id"] != "b" {
		t.Fatalf("the appended group's metadata = %v; want scenario_id b", groups[2].Metadata)
	}
	hist, err := d.ReadHistory()
	if err != nil || len(hist) != 2 {
		t.Fatalf("history = %v, %v; want a row per Log call", hist, err)
	}
	if hist[0]["val/reward"] != 1.25/3 || hist[1]["val/reward"] != 0.75 || hist[0]["step"] != 3.0 || hist[1]["step"] != 3.0 {
		t.Fatalf("history = %v; want val/reward %v then 0.75, both at step 3", hist, 1.25/3)
	}

	// Another split, or another step, is another file.
	if err := m.Log(ctx, second, LogOptions{Split: "test", Step: &step}); err != nil {
		t.Fatal(err)
	}
	if rows, err := d.ReadTrajectories("test", step); err != nil || len(rows) != 3 || rows[0].GroupIndex != 0 {
		t.Fatalf("test split: %d rows (%v); want its own file of 3 rows from group 0", len(rows), err)
	}
	// A Log without trajectories leaves the file as it is.
	if err := m.Log(ctx, []TrajectoryGroup{{Exceptions: []Exception{{Type: "x"}}}}, LogOptions{Split: "val", Step: &step}); err != nil {
		t.Fatal(err)
	}
	if again, err := d.ReadTrajectories("val", step); err != nil || len(again) != len(rows) {
		t.Fatalf("after a Log of exceptions only: %d rows (%v); want %d", len(again), err, len(rows))
	}
}

// Ensure Log at the step Train just logged keeps Train's groups: Train's
// two groups and Log's one all read back from the train file.
func TestLog_AfterTrainKeepsTrainGroups(t *testing.T) {
	ctx := context.Background()
	m := newTrainable(t)
	b := newFakeBackend("http://127.0.0.1:1/v1")
	if err := m.Register(ctx, b); err != nil {
		t.Fatal(err)
	}
	trained := []TrajectoryGroup{
		{Trajectories: []Trajectory{{Reward: 1}, {Reward: 0}}},
		{Trajectories: []Trajectory{{Reward: 0.5}, {Reward: 0}}},
	}
	res, err := m.Train(ctx, trained, TrainConfig{})
	if err != nil || res.Step != 1 {
		t.Fatalf("Train = %+v, %v; want step 1", res, err)
	}
	extra := []TrajectoryGroup{{Trajectories: []Trajectory{{Reward: 0.125}}}}
	if err := m.Log(ctx, extra, LogOptions{Split: "train"}); err != nil {
		t.Fatal(err)
	}
	d, _ := m.Dir()
	groups, err := ReadTrajectoryGroups(d.TrajectoriesPath("train", 1))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := rewardsOf(groups), [][]float64{{1, 0}, {0.5, 0}, {0.125}}; !equalRewards(got, want) {
		t.Fatalf("train file at step 1 holds groups with rewards %v; want Train's two and Log's one %v", got, want)
	}
	hist, _ := d.ReadHistory()
	if len(hist) != 2 || hist[0]["loss/train"] != 0.25 || hist[1]["train/reward"] != 0.125 {
		t.Fatalf("history = %v; want Train's row then Log's", hist)
	}
}

// Ensure a Log at a step whose trajectories file cannot be read fails
// naming the file and leaves it, and the history, as they were.
func TestLog_UnreadableFileLeftAlone(t *testing.T) {
	ctx := context.Background()
	m := &Model{Name: "m", Project: "p", BasePath: t.TempDir()}
	d, _ := m.Dir()
	path := d.TrajectoriesPath("val", 0)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	damaged := []byte("PAR1 not really a parquet file PAR1")
	if err := os.WriteFile(path, damaged, 0o644); err != nil {
		t.Fatal(err)
	}
	err := m.Log(ctx, []TrajectoryGroup{{Trajectories: []Trajectory{{Reward: 1}}}}, LogOptions{})
	if err == nil || !strings.Contains(err.Error(), path) {
		t.Fatalf("Log over a damaged file = %v; want an error naming %s", err, path)
	}
	if got, _ := os.ReadFile(path); !bytes.Equal(got, damaged) {
		t.Fatalf("the damaged file was changed to %q", got)
	}
	if hist, err := d.ReadHistory(); err != nil || len(hist) != 0 {
		t.Fatalf("history = %v, %v; want no row for the failed Log", hist, err)
	}
}

// Ensure a nil context is an error, not a panic inside tracing, and a
// cancelled one registers nothing.
func TestNilOrCancelledContext(t *testing.T) {
	m := Model{Name: "m", Project: "p", BasePath: t.TempDir()}
	//lint:ignore SA1012 a nil context is the mistake under test
	if err := m.Log(nil, nil, LogOptions{}); err == nil || !strings.Contains(err.Error(), "nil context") { //nolint:staticcheck
		t.Errorf("Model.Log(nil, …) = %v; want an error saying so", err)
	}
	tm := &TrainableModel{Model: Model{Name: "m", Project: "p", BasePath: t.TempDir()}, BaseModel: "x"}
	//lint:ignore SA1012 a nil context is the mistake under test
	if err := tm.Log(nil, nil, LogOptions{}); err == nil || !strings.Contains(err.Error(), "nil context") { //nolint:staticcheck
		t.Errorf("TrainableModel.Log(nil, …) = %v; want an error saying so", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	b := newFakeBackend("http://127.0.0.1:1/v1")
	if err := tm.Register(ctx, b); !errors.Is(err, context.Canceled) || len(b.steps) != 0 {
		t.Errorf("Register with a cancelled context = %v; want context.Canceled", err)
	}
}

// Ensure a Log call that fails after some of its effects landed, retried,
// completes the rest and repeats none: the groups are in the parquet file
// once, the running totals count them once and history.jsonl has one row,
// the one the first attempt computed. Two failure points: before the
// history row (history.jsonl is a directory, so the append fails after the
// groups and the totals landed) and just after the groups (the journal
// entry and the parquet append done by hand, as a crash would leave them).
func TestLog_RetryAfterPartialFailure(t *testing.T) {
	ctx := context.Background()
	step := 2
	groups := []TrajectoryGroup{{
		Trajectories: []Trajectory{{Reward: 1}, {Reward: 0}},
		Metadata:     map[string]any{"scenario_id": "a"},
	}}
	opts := LogOptions{Split: "train", Step: &step, Metrics: map[string]float64{"data/step_trainer_tokens": 10}}
	check := func(t *testing.T, m *Model) {
		t.Helper()
		d, _ := m.Dir()
		rows, err := d.ReadTrajectories("train", step)
		if err != nil || len(rows) != 2 {
			t.Fatalf("trajectories: %d rows (%v); want the group's 2 rows once", len(rows), err)
		}
		hist, err := d.ReadHistory()
		if err != nil || len(hist) != 1 {
			t.Fatalf("history = %v (%v); want one row", hist, err)
		}
		if hist[0]["data/cum/trainer_tokens"] != 10.0 || hist[0]["data/cum/num_scenarios"] != 1.0 {
			t.Fatalf("history row %v; want the totals counted once (trainer tokens 10, scenarios 1)", hist[0])
		}
		state, err := d.ReadState()
		if err != nil {
			t.Fatal(err)
		}
		if totals, _ := state["metric_totals"].(map[string]any); totals["data/cum/trainer_tokens"] != 10.0 {
			t.Fatalf("state totals %v; want trainer tokens 10", state["metric_totals"])
		}
		if _, ok := state["log_journal"]; ok {
			t.Fatalf("state keeps a log journal %v after the call completed", state["log_journal"])
		}
	}

	t.Run("history append failed", func(t *testing.T) {
		m := &Model{Name: "m", Project: "p", BasePath: t.TempDir()}
		d, _ := m.Dir()
		hist := filepath.Join(d.Path(), "history.jsonl")
		if err := os.MkdirAll(hist, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := m.Log(ctx, groups, opts); err == nil {
			t.Fatal("Log succeeded with history.jsonl a directory")
		}
		if err := os.Remove(hist); err != nil {
			t.Fatal(err)
		}
		if err := m.Log(ctx, groups, opts); err != nil {
			t.Fatal(err)
		}
		check(t, m)
		// The same call again, now that the first completed, is a second
		// log, as before: its groups follow the first's.
		if err := m.Log(ctx, groups, opts); err != nil {
			t.Fatal(err)
		}
		if rows, err := d.ReadTrajectories("train", step); err != nil || len(rows) != 4 {
			t.Fatalf("after a deliberate repeat: %d rows (%v); want 4", len(rows), err)
		}
	})

	t.Run("stopped after the groups", func(t *testing.T) {
		m := &Model{Name: "m", Project: "p", BasePath: t.TempDir()}
		d, _ := m.Dir()
		rows, err := trajectoryRows(groups)
		if err != nil {
			t.Fatal(err)
		}
		key := logKey("train", step, rows, opts.Metrics)
		call, err := d.BeginLog(key)
		if err != nil {
			t.Fatal(err)
		}
		if ok, err := d.AppendTrajectoriesOnce("train", step, rows, call.ID); !ok || err != nil {
			t.Fatalf("append = %v, %v", ok, err)
		}
		if err := m.Log(ctx, groups, opts); err != nil {
			t.Fatal(err)
		}
		check(t, m)
	})
}

// Ensure concurrent Log calls on one model, some with the same content,
// lose nothing and merge nothing: every call's groups, its history row and
// its share of the running totals land once, and no journal entry is left.
func TestLog_Concurrent(t *testing.T) {
	ctx := context.Background()
	m := &Model{Name: "m", Project: "p", BasePath: t.TempDir()}
	step := 1
	const calls = 8
	var wg sync.WaitGroup
	for i := range calls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Calls i and i+4 log the same content.
			g := TrajectoryGroup{Trajectories: []Trajectory{{Reward: float64(i % 4)}, {Reward: 0}}}
			opts := LogOptions{Split: "train", Step: &step, Metrics: map[string]float64{"data/step_trainer_tokens": 1}}
			if err := m.Log(ctx, []TrajectoryGroup{g}, opts); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	d, _ := m.Dir()
	rows, err := d.ReadTrajectories("train", step)
	if err != nil || len(rows) != 2*calls {
		t.Fatalf("%d rows (%v); want %d", len(rows), err, 2*calls)
	}
	hist, err := d.ReadHistory()
	if err != nil || len(hist) != calls {
		t.Fatalf("%d history rows (%v); want %d", len(hist), err, calls)
	}
	state, err := d.ReadState()
	if err != nil {
		t.Fatal(err)
	}
	if totals, _ := state["metric_totals"].(map[string]any); totals["data/cum/trainer_tokens"] != float64(calls) {
		t.Fatalf("totals %v; want trainer tokens %d", state["metric_totals"], calls)
	}
	if _, ok := state["log_journal"]; ok {
		t.Fatalf("a journal entry is left: %v", state["log_journal"])
	}
}

// Ensure a Log without trajectories (metrics only, or groups of exceptions)
// made twice logs twice and leaves no journal entry: its entry is made with
// its history row (the fuzzer found a second such call refused as damaged).
func TestLog_WithoutTrajectoriesTwice(t *testing.T) {
	ctx := context.Background()
	m := &Model{Name: "m", Project: "p", BasePath: t.TempDir()}
	step := 1
	for _, groups := range [][]TrajectoryGroup{nil, {{Exceptions: []Exception{{Type: "x"}}}}} {
		for range 2 {
			if err := m.Log(ctx, groups, LogOptions{Step: &step, Metrics: map[string]float64{"x": 1}}); err != nil {
				t.Fatal(err)
			}
		}
	}
	d, _ := m.Dir()
	if hist, err := d.ReadHistory(); err != nil || len(hist) != 4 {
		t.Fatalf("history %v (%v); want 4 rows", hist, err)
	}
	if state, err := d.ReadState(); err != nil || state["log_journal"] != nil {
		t.Fatalf("state %v (%v); want no journal left", state, err)
	}
}

// Ensure a Log with the CallID of one that completed logs nothing (its
// groups, totals and history row land once), one that failed part-way and
// is repeated with its id completes, a different id logs again, the model
// remembers only its last 256 ids, and a bad id is refused before anything
// is written.
func TestLog_CallID(t *testing.T) {
	ctx := context.Background()
	m := &Model{Name: "m", Project: "p", BasePath: t.TempDir()}
	d, _ := m.Dir()
	step := 3
	groups := []TrajectoryGroup{{Trajectories: []Trajectory{{Reward: 1}, {Reward: 0}}}}
	count := func() (rows, hist int) {
		t.Helper()
		r, err := d.ReadTrajectories("val", step)
		if err != nil {
			t.Fatal(err)
		}
		h, err := d.ReadHistory()
		if err != nil {
			t.Fatal(err)
		}
		return len(r), len(h)
	}
	for range 3 {
		if err := m.Log(ctx, groups, LogOptions{Step: &step, CallID: "call-1"}); err != nil {
			t.Fatal(err)
		}
	}
	if r, h := count(); r != 2 || h != 1 {
		t.Fatalf("three Logs with one call id: %d trajectories, %d history rows; want 2 and 1", r, h)
	}
	if s, done, err := d.LoggedCall("call-1"); err != nil || !done || s != step {
		t.Fatalf("LoggedCall = %d, %v, %v; want step %d, done", s, done, err, step)
	}
	if err := m.Log(ctx, groups, LogOptions{Step: &step, CallID: "call-2"}); err != nil {
		t.Fatal(err)
	}
	if r, h := count(); r != 4 || h != 2 {
		t.Fatalf("another call id: %d trajectories, %d history rows; want 4 and 2", r, h)
	}

	// Failed after the groups landed (history.jsonl a directory), then
	// repeated with its id: completed once.
	hist := filepath.Join(d.Path(), store.HistoryFile)
	saved, err := os.ReadFile(hist)
	if err != nil {
		t.Fatal(err)
	}
	os.Remove(hist)
	if err := os.Mkdir(hist, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := m.Log(ctx, groups, LogOptions{Step: &step, CallID: "call-3"}); err == nil {
		t.Fatal("Log with history.jsonl a directory succeeded")
	}
	os.Remove(hist)
	if err := os.WriteFile(hist, saved, 0o644); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := m.Log(ctx, groups, LogOptions{Step: &step, CallID: "call-3"}); err != nil {
			t.Fatal(err)
		}
	}
	if r, h := count(); r != 6 || h != 3 {
		t.Fatalf("a failed call repeated with its id: %d trajectories, %d history rows; want 6 and 3", r, h)
	}

	for _, id := range []string{"has space", "a/b", strings.Repeat("x", 129)} {
		err := m.Log(ctx, groups, LogOptions{Step: &step, CallID: id})
		if err == nil || !strings.Contains(err.Error(), "call id") {
			t.Errorf("Log with call id %q: %v; want an error naming the call id", id, err)
		}
	}
	if r, h := count(); r != 6 || h != 3 {
		t.Fatalf("refused calls wrote: %d trajectories, %d history rows", r, h)
	}

	// Only the last 256 ids are kept.
	for i := range 260 {
		if err := m.Log(ctx, nil, LogOptions{Step: &step, CallID: fmt.Sprint("many-", i)}); err != nil {
			t.Fatal(err)
		}
	}
	state, err := d.ReadState()
	if err != nil {
		t.Fatal(err)
	}
	if done, _ := state["log_done"].(map[string]any); len(done) != 256 || done["many-259"] == nil || done["call-1"] != nil {
		t.Fatalf("state keeps %d call ids (many-259 %v, call-1 %v); want the last 256", len(done), done["many-259"], done["call-1"])
	}
}
