package art

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

var quiet = GatherOptions{Quiet: true}

// rewardRollout returns a rollout whose trajectory has the given reward,
// after sleeping d.
func rewardRollout(reward float64, d time.Duration) Rollout {
	return func(ctx context.Context) (Trajectory, error) {
		select {
		case <-time.After(d):
		case <-ctx.Done():
			return Trajectory{}, ctx.Err()
		}
		return Trajectory{Reward: reward}, nil
	}
}

func failing(err error) Rollout {
	return func(context.Context) (Trajectory, error) { return Trajectory{}, err }
}

func rewards(g TrajectoryGroup) []float64 {
	var r []float64
	for _, t := range g.Trajectories {
		r = append(r, t.Reward)
	}
	return r
}

// Ensure results come back in input order whatever the completion order.
func TestGather_Order(t *testing.T) {
	const groups, size = 4, 3
	var specs []GroupSpec
	for g := range groups {
		var rs []Rollout
		for r := range size {
			// Later groups and later rollouts finish first.
			d := time.Duration((groups-g)*size-r) * time.Millisecond
			rs = append(rs, rewardRollout(float64(10*g+r), d))
		}
		specs = append(specs, newGroup(rs...))
	}
	got, err := GatherTrajectoryGroups(context.Background(), specs, quiet)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != groups {
		t.Fatalf("got %d groups; want %d", len(got), groups)
	}
	for g := range groups {
		want := []float64{float64(10 * g), float64(10*g + 1), float64(10*g + 2)}
		if r := rewards(got[g]); fmt.Sprint(r) != fmt.Sprint(want) {
			t.Errorf("group %d rewards %v; want %v", g, r, want)
		}
	}
}

// Ensure Concurrency caps the rollouts in flight exactly, and 0 means none.
func TestGather_Concurrency(t *testing.T) {
	const total = 24
	tests := []struct {
		limit, wantMax int
	}{
		{1, 1},
		{3, 3},
		{7, 7},
		{0, total},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("limit%d", tt.limit), func(t *testing.T) {
			var inflight, maxSeen atomic.Int64
			all := make(chan struct{}) // closed once every rollout has started, for limit 0
			var started atomic.Int64
			r := func(ctx context.Context) (Trajectory, error) {
				n := inflight.Add(1)
				defer inflight.Add(-1)
				for m := maxSeen.Load(); n > m && !maxSeen.CompareAndSwap(m, n); m = maxSeen.Load() {
				}
				if started.Add(1) == total {
					close(all)
				}
				if tt.limit == 0 {
					<-all // only returns if all run at once
				} else {
					time.Sleep(3 * time.Millisecond)
				}
				return Trajectory{Reward: 1}, nil
			}
			var specs []GroupSpec
			for range total / 4 {
				specs = append(specs, newGroup(r, r, r, r))
			}
			got, err := GatherTrajectoryGroups(context.Background(), specs, GatherOptions{Concurrency: tt.limit, Quiet: true})
			if err != nil {
				t.Fatal(err)
			}
			if n := len(got); n != total/4 {
				t.Fatalf("got %d groups; want %d", n, total/4)
			}
			if m := maxSeen.Load(); m != int64(tt.wantMax) {
				t.Fatalf("max rollouts in flight %d; want %d", m, tt.wantMax)
			}
		})
	}
}

func TestGather_MaxExceptions(t *testing.T) {
	errBoom := errors.New("boom")
	tests := []struct {
		name     string
		max      float64
		failures int // of 8 rollouts in 2 groups of 4
		wantErr  bool
	}{
		{"none tolerated, none failed", 0, 0, false},
		{"none tolerated", 0, 1, true},
		{"count within budget", 2, 2, false},
		{"count exceeded", 2, 3, true},
		{"fraction within budget", 0.25, 2, false}, // 0.25 × 8 = 2
		{"fraction exceeded", 0.25, 3, true},
		{"small fraction", 0.1, 1, true}, // 0.8 allowed
		{"unlimited", math.Inf(1), 8, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var specs []GroupSpec
			n := 0
			for range 2 {
				var rs []Rollout
				for range 4 {
					if n < tt.failures {
						rs = append(rs, failing(fmt.Errorf("rollout %d: %w", n, errBoom)))
					} else {
						rs = append(rs, rewardRollout(1, 0))
					}
					n++
				}
				specs = append(specs, newGroup(rs...))
			}
			got, err := GatherTrajectoryGroups(context.Background(), specs, GatherOptions{MaxExceptions: tt.max, Quiet: true, Concurrency: 1})
			if tt.wantErr {
				if !errors.Is(err, ErrTooManyExceptions) || !errors.Is(err, errBoom) {
					t.Fatalf("got %v; want an error wrapping ErrTooManyExceptions and the rollout error", err)
				}
				if !strings.Contains(err.Error(), "first: group 0 rollout 0: rollout 0: boom") {
					t.Fatalf("error %q does not name the first failure", err)
				}
				if got != nil {
					t.Fatalf("got groups %v with an error; want nil", got)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var excs, trajs int
			for _, g := range got {
				excs += len(g.Exceptions)
				trajs += len(g.Trajectories)
				for _, e := range g.Exceptions {
					if !errors.Is(e.Err, errBoom) || !strings.HasSuffix(e.Message, "boom") || e.Type != "*fmt.wrapError" {
						t.Fatalf("exception %+v; want the wrapped boom", e)
					}
				}
			}
			if excs != tt.failures || trajs != 8-tt.failures {
				t.Fatalf("got %d exceptions and %d trajectories; want %d and %d", excs, trajs, tt.failures, 8-tt.failures)
			}
		})
	}
}

func TestGather_BadOptions(t *testing.T) {
	tests := []struct {
		name string
		opts GatherOptions
		want string
	}{
		{"negative budget", GatherOptions{MaxExceptions: -1}, "MaxExceptions = -1"},
		{"NaN budget", GatherOptions{MaxExceptions: math.NaN()}, "MaxExceptions = NaN"},
		{"fractional count", GatherOptions{MaxExceptions: 2.5}, "must be a whole count"},
		{"negative concurrency", GatherOptions{Concurrency: -2}, "Concurrency = -2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := GatherTrajectoryGroups(context.Background(), []GroupSpec{newGroup(rewardRollout(1, 0))}, tt.opts)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("got %v; want an error containing %q", err, tt.want)
			}
		})
	}
	_, err := GatherTrajectoryGroups(context.Background(), []GroupSpec{newGroup(nil)}, quiet)
	if err == nil || !strings.Contains(err.Error(), "group 0: rollout 0 is nil") {
		t.Fatalf("nil rollout: got %v", err)
	}
}

// Ensure a panic, a Goexit or an invalid trajectory inside a rollout becomes
// an exception of its group, not a crash or a hang.
func TestGather_PanicsAndInvalidResults(t *testing.T) {
	errValue := errors.New("panicked with an error")
	specs := []GroupSpec{newGroup(
		func(context.Context) (Trajectory, error) { panic("boom") },
		func(context.Context) (Trajectory, error) { panic(errValue) },
		func(context.Context) (Trajectory, error) { runtime.Goexit(); return Trajectory{}, nil },
		func(context.Context) (Trajectory, error) { return Trajectory{Reward: math.NaN()}, nil },
		rewardRollout(3, 0),
	)}
	got, err := GatherTrajectoryGroups(context.Background(), specs, GatherOptions{MaxExceptions: 4, Quiet: true})
	if err != nil {
		t.Fatal(err)
	}
	g := got[0]
	if r := rewards(g); len(r) != 1 || r[0] != 3 {
		t.Fatalf("trajectories %v; want only the good one", r)
	}
	if len(g.Exceptions) != 4 {
		t.Fatalf("got %d exceptions; want 4: %+v", len(g.Exceptions), g.Exceptions)
	}
	e := g.Exceptions
	if e[0].Type != "panic" || e[0].Message != "panic: boom" || !strings.Contains(e[0].Stack, "gather_test.go") {
		t.Errorf("exception 0 = %+v; want a panic with its stack", e[0])
	}
	var pe *PanicError
	if !errors.As(e[1].Err, &pe) || !errors.Is(e[1].Err, errValue) {
		t.Errorf("exception 1 error %v; want a *PanicError wrapping the panic value", e[1].Err)
	}
	if !strings.Contains(e[2].Message, "Goexit") {
		t.Errorf("exception 2 = %+v; want the Goexit reported", e[2])
	}
	if !strings.Contains(e[3].Message, "invalid result: art: trajectory reward is NaN") {
		t.Errorf("exception 3 = %+v; want the invalid reward named", e[3])
	}
}

func TestGather_AfterEach(t *testing.T) {
	specs := []GroupSpec{
		newGroup(rewardRollout(1, 2*time.Millisecond), rewardRollout(2, 0)),
		newGroup(rewardRollout(3, 0), rewardRollout(4, 0)),
		newGroup(rewardRollout(5, 0), rewardRollout(6, 0)),
	}
	// Group 0 is rescored (replaced), group 1 dropped, group 2 split in two.
	after := func(ctx context.Context, g TrajectoryGroup) ([]TrajectoryGroup, error) {
		switch g.Trajectories[0].Reward {
		case 1:
			for i := range g.Trajectories {
				g.Trajectories[i].SetMetric("independent_reward", g.Trajectories[i].Reward)
				g.Trajectories[i].Reward *= 10
			}
			return []TrajectoryGroup{g}, nil
		case 3:
			return nil, nil
		default:
			return []TrajectoryGroup{
				{Trajectories: g.Trajectories[:1]},
				{Trajectories: g.Trajectories[1:]},
			}, nil
		}
	}
	got, err := GatherTrajectoryGroups(context.Background(), specs, GatherOptions{AfterEach: after, Quiet: true})
	if err != nil {
		t.Fatal(err)
	}
	var all [][]float64
	for _, g := range got {
		all = append(all, rewards(g))
	}
	if want := [][]float64{{10, 20}, {5}, {6}}; fmt.Sprint(all) != fmt.Sprint(want) {
		t.Fatalf("groups %v; want %v", all, want)
	}
	if got[0].Trajectories[1].Metrics["independent_reward"] != 2 {
		t.Fatalf("metrics %v; want independent_reward 2", got[0].Trajectories[1].Metrics)
	}

	errJudge := errors.New("judge returned no scores")
	failures := []struct {
		name string
		f    func(context.Context, TrajectoryGroup) ([]TrajectoryGroup, error)
		want string
	}{
		{"error", func(context.Context, TrajectoryGroup) ([]TrajectoryGroup, error) { return nil, errJudge }, "judge returned no scores"},
		{"panic", func(context.Context, TrajectoryGroup) ([]TrajectoryGroup, error) { panic("judge crashed") }, "panic: judge crashed"},
		{"invalid group", func(_ context.Context, g TrajectoryGroup) ([]TrajectoryGroup, error) {
			g.Trajectories[0].Reward = math.Inf(1)
			return []TrajectoryGroup{g}, nil
		}, "returned an invalid group 0"},
	}
	for _, tt := range failures {
		t.Run(tt.name, func(t *testing.T) {
			_, err := GatherTrajectoryGroups(context.Background(), specs[:1], GatherOptions{AfterEach: tt.f, Quiet: true})
			if err == nil || !strings.Contains(err.Error(), "AfterEach on group 0") || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("got %v; want an AfterEach error containing %q", err, tt.want)
			}
		})
	}
}

// Ensure cancelling ctx returns promptly, even with rollouts that ignore it.
func TestGather_Cancel(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	var sawCancel atomic.Int64
	honours := func(ctx context.Context) (Trajectory, error) {
		<-ctx.Done()
		sawCancel.Add(1)
		return Trajectory{}, ctx.Err()
	}
	ignores := func(context.Context) (Trajectory, error) {
		<-release
		return Trajectory{}, nil
	}
	specs := []GroupSpec{newGroup(honours, ignores), newGroup(honours, honours)}
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(20*time.Millisecond, cancel)
	start := time.Now()
	got, err := GatherTrajectoryGroups(ctx, specs, GatherOptions{MaxExceptions: math.Inf(1), Quiet: true})
	elapsed := time.Since(start)
	if !errors.Is(err, context.Canceled) || got != nil {
		t.Fatalf("got %v, %v; want nil and an error wrapping context.Canceled", got, err)
	}
	if elapsed > 500*time.Millisecond {
		t.Fatalf("returned %v after the start; want well under 1s", elapsed)
	}
	waitFor(t, func() bool { return sawCancel.Load() == 3 }, "rollouts to see the cancellation")

	// A context already done fails at once, before any rollout starts.
	var ran atomic.Bool
	_, err = GatherTrajectoryGroups(ctx, []GroupSpec{newGroup(func(context.Context) (Trajectory, error) {
		ran.Store(true)
		return Trajectory{}, nil
	})}, quiet)
	if !errors.Is(err, context.Canceled) || ran.Load() {
		t.Fatalf("with a done context: got %v, rollout ran %v; want context.Canceled and no rollout", err, ran.Load())
	}
}

// Ensure exceeding the budget stops the gather at once and cancels the rest.
func TestGather_BudgetCancelsTheRest(t *testing.T) {
	var canceled atomic.Int64
	waits := func(ctx context.Context) (Trajectory, error) {
		<-ctx.Done()
		canceled.Add(1)
		return Trajectory{}, ctx.Err()
	}
	var launched atomic.Int64
	late := func(context.Context) (Trajectory, error) {
		launched.Add(1)
		time.Sleep(5 * time.Millisecond)
		return Trajectory{}, nil
	}
	rs := []Rollout{waits, waits, failing(errors.New("bad"))}
	for range 10 {
		rs = append(rs, late)
	}
	specs := []GroupSpec{newGroup(rs...)}
	start := time.Now()
	_, err := GatherTrajectoryGroups(context.Background(), specs, GatherOptions{Concurrency: 3, Quiet: true})
	if !errors.Is(err, ErrTooManyExceptions) {
		t.Fatalf("got %v; want ErrTooManyExceptions", err)
	}
	if d := time.Since(start); d > 500*time.Millisecond {
		t.Fatalf("took %v; want an immediate return", d)
	}
	waitFor(t, func() bool { return canceled.Load() == 2 }, "waiting rollouts to be cancelled")
	// The failure's slot is not given back, so nothing queued starts.
	if n := launched.Load(); n != 0 {
		t.Fatalf("%d of 10 queued rollouts started after the failure; want 0", n)
	}
}

func waitFor(t *testing.T, cond func() bool, what string) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

func choiceWithTokens(n int) Choice {
	c := Choice{Message: AssistantMsg("x"), Logprobs: make([]TokenLogprob, n)}
	return c
}

func TestGather_CompletionTokens(t *testing.T) {
	r := func(context.Context) (Trajectory, error) {
		var tr Trajectory
		tr.AddMessage(UserMsg("go"))
		tr.AddChoice(choiceWithTokens(3))
		tr.AddChoice(choiceWithTokens(6))
		tr.AddChoice(Choice{Message: AssistantMsg("no logprobs")}) // not counted
		tr.Reward = 1
		return tr, nil
	}
	plain := func(context.Context) (Trajectory, error) { return Trajectory{Reward: 0}, nil }
	got, err := GatherTrajectoryGroups(context.Background(), []GroupSpec{newGroup(r, plain)}, quiet)
	if err != nil {
		t.Fatal(err)
	}
	if v, ok := got[0].Trajectories[0].Metrics["completion_tokens"]; !ok || v != 4.5 {
		t.Fatalf("completion_tokens = %v (set %v); want 4.5", v, ok)
	}
	if _, ok := got[0].Trajectories[1].Metrics["completion_tokens"]; ok {
		t.Fatal("completion_tokens set on a trajectory without choices")
	}
}

func TestGather_RunGroups(t *testing.T) {
	specs := []GroupSpec{
		{Run: func(context.Context) (TrajectoryGroup, error) {
			return TrajectoryGroup{Trajectories: []Trajectory{{Reward: 1}, {Reward: 0}}}, nil
		}, Metadata: map[string]any{"game": "self-play"}},
		{Run: func(context.Context) (TrajectoryGroup, error) { return TrajectoryGroup{}, errors.New("engine crashed") }},
		newGroup(), // an empty group completes at once
	}
	got, err := GatherTrajectoryGroups(context.Background(), specs, GatherOptions{MaxExceptions: 1, Quiet: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 {
		t.Fatalf("got %d groups; want 3", len(got))
	}
	if r := rewards(got[0]); fmt.Sprint(r) != "[1 0]" || got[0].Metadata["game"] != "self-play" {
		t.Fatalf("group 0 = %+v; want rewards [1 0] and the spec's metadata", got[0])
	}
	if len(got[1].Trajectories) != 0 || len(got[1].Exceptions) != 1 || got[1].Exceptions[0].Message != "engine crashed" {
		t.Fatalf("group 1 = %+v; want only the exception", got[1])
	}
	if len(got[2].Trajectories)+len(got[2].Exceptions) != 0 {
		t.Fatalf("group 2 = %+v; want empty", got[2])
	}
}

func TestGatherGroups(t *testing.T) {
	var mu sync.Mutex
	calls := map[string]int{}
	rollout := func(_ context.Context, s string) (Trajectory, error) {
		mu.Lock()
		calls[s]++
		mu.Unlock()
		return Trajectory{Reward: float64(len(s)), Metadata: map[string]any{"scenario_id": s}}, nil
	}
	got, err := GatherGroups(context.Background(), []string{"a", "bb", "ccc"}, 4, rollout, GatherOptions{Concurrency: 2, Quiet: true})
	if err != nil {
		t.Fatal(err)
	}
	for i, s := range []string{"a", "bb", "ccc"} {
		g := got[i]
		if len(g.Trajectories) != 4 || g.Trajectories[3].Metadata["scenario_id"] != s || calls[s] != 4 {
			t.Fatalf("group %d = %+v after %d calls; want 4 trajectories of scenario %q", i, g, calls[s], s)
		}
	}
	for _, n := range []int{0, -1, MaxGroupSize + 1, math.MaxInt} {
		if _, err := GatherGroups(context.Background(), []string{"a"}, n, rollout, quiet); err == nil || !strings.Contains(err.Error(), "group size") {
			t.Fatalf("group size %d: error %v; want one naming the group size", n, err)
		}
	}
	//lint:ignore SA1012 a nil context is the mistake under test
	if _, err := GatherGroups(nil, []string{"a"}, 2, rollout, quiet); err == nil || !strings.Contains(err.Error(), "nil context") { //nolint:staticcheck
		t.Fatalf("a nil context: error %v; want one saying so", err)
	}
}

func TestProgress(t *testing.T) {
	// Not a terminal: no bar at all.
	var buf bytes.Buffer
	if p := newProgress(GatherOptions{ProgressWriter: &buf}, 3); p.bar != nil {
		t.Fatal("progress bar on a non-terminal writer")
	}

	p := newProgressBar(&buf, "gather", 3)
	for i, tr := range []Trajectory{
		{Reward: 1, Metrics: map[string]float64{"win": 1, "completion_tokens": 10}},
		{Reward: 0, Metrics: map[string]float64{"win": 0, "completion_tokens": 20}},
	} {
		p.trajectory(&tr)
		p.advance()
		if i == 0 {
			p.exception()
			p.advance()
		}
	}
	p.finish()
	if got, want := p.postfix(), " reward=0.5 win=0.5 exceptions=1 completion_tokens=15"; got != want {
		t.Fatalf("postfix %q; want %q", got, want)
	}
	out := buf.String()
	for _, want := range []string{"gather reward=0.5 win=0.5 exceptions=1 completion_tokens=15", "3/3", "100%"} {
		if !strings.Contains(out, want) {
			t.Fatalf("bar output %q lacks %q", out, want)
		}
	}
}

func newGroup(rollouts ...Rollout) GroupSpec { return GroupSpec{Rollouts: rollouts} }
