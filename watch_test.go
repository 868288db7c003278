package art

import (
	"bytes"
	"context"
	"log/slog"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

// synthRun is a synthetic run of n steps: grad norms around 7, a train
// reward rising from 0.3 towards 0.7 with noise, and few exceptions;
// collapse, if >= 0, is the step where it starts to collapse.
func synthRun(seed uint64, n, collapse int, kind string) []watchPoint {
	rng := rand.New(rand.NewPCG(seed, 1))
	var pts []watchPoint
	for s := 1; s <= n; s++ {
		p := watchPoint{step: s,
			gradNorm:      7 * math.Exp(0.3*rng.NormFloat64()),
			reward:        0.3 + 0.4*(1-math.Exp(-float64(s)/15)) + 0.04*rng.NormFloat64(),
			exceptionRate: 0.02 * rng.Float64()}
		if collapse >= 0 && s >= collapse {
			switch kind {
			case "grad_norm":
				p.gradNorm = 137
			case "reward": // falls from ~0.69 to ~0.37 over 10 steps
				p.reward -= 0.032 * float64(min(s-collapse+1, 10))
			case "exceptions":
				p.exceptionRate = 0.63
			}
		}
		pts = append(pts, p)
	}
	return pts
}

// firstFlag runs the watch step by step and returns the first flagged step
// (0 if none) and its causes.
func firstFlag(w Watch, pts []watchPoint) (int, []string) {
	w = w.withDefaults()
	for i, p := range pts {
		if _, causes := w.check(pts[:i], p); len(causes) > 0 {
			return p.step, causes
		}
	}
	return 0, nil
}

// Ensure the watch stays quiet on healthy runs and flags each kind of
// collapse soon after it starts, naming its cause.
func TestWatch(t *testing.T) {
	for seed := range uint64(20) {
		if step, causes := firstFlag(Watch{}, synthRun(seed, 60, -1, "")); step != 0 {
			t.Errorf("healthy run %d flagged at step %d: %v", seed, step, causes)
		}
	}
	for _, c := range []struct {
		kind, cause string
		within      int
	}{
		{"grad_norm", "grad norm", 0},
		{"reward", "train reward", 9},
		{"exceptions", "exception rate", 0},
	} {
		t.Run(c.kind, func(t *testing.T) {
			for seed := range uint64(10) {
				step, causes := firstFlag(Watch{}, synthRun(seed, 60, 30, c.kind))
				if step < 30 || step > 30+c.within || !strings.Contains(strings.Join(causes, ";"), c.cause) {
					t.Errorf("run %d collapsing by %s at step 30: flagged at step %d (%v); want by step %d naming %q", seed, c.kind, step, causes, 30+c.within, c.cause)
				}
			}
		})
	}
}

// Ensure Train warns once per streak, records watch/* in history and the
// result, and refuses Recovery on a backend that cannot restore.
func TestWatch_Train(t *testing.T) {
	ctx := context.Background()
	m := newTrainable(t)
	var logs bytes.Buffer
	m.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	if err := m.Register(ctx, newFakeBackend("http://x/v1")); err != nil {
		t.Fatal(err)
	}
	groups := func(exceptions int) []TrajectoryGroup {
		g := TrajectoryGroup{Trajectories: []Trajectory{{Reward: 0}, {Reward: 1}}}
		for range exceptions {
			g.Exceptions = append(g.Exceptions, Exception{Type: "error", Message: "boom"})
		}
		return []TrajectoryGroup{g}
	}
	var warned []int
	for step, exc := range []int{0, 0, 0, 0, 3, 3, 0} {
		res, err := m.Train(ctx, groups(exc), TrainConfig{})
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Warnings) > 0 {
			warned = append(warned, step+1)
		}
		if step >= 3 {
			if _, ok := res.Metrics["watch/exception_rate_jump"]; !ok {
				t.Errorf("step %d: no watch/exception_rate_jump in %v", step+1, res.Metrics)
			}
		}
	}
	if len(warned) != 1 || warned[0] != 5 || strings.Count(logs.String(), "may be collapsing at step 5") != 1 {
		t.Errorf("warnings at steps %v, log:\n%s\nwant one, at step 5", warned, logs.String())
	}
	d, _ := m.Dir()
	rows, err := d.ReadHistory()
	if err != nil {
		t.Fatal(err)
	}
	if rows[4]["watch/collapse"] != 1.0 || rows[5]["watch/collapse"] != 1.0 || rows[6]["watch/collapse"] != 0.0 {
		t.Errorf("watch/collapse in history: %v, %v, %v; want 1, 1, 0", rows[4]["watch/collapse"], rows[5]["watch/collapse"], rows[6]["watch/collapse"])
	}

	m.Watch.Recovery = &Recovery{}
	if _, err := m.Train(ctx, groups(0), TrainConfig{}); err == nil || !strings.Contains(err.Error(), "CheckpointRestorer") {
		t.Errorf("Train with Recovery on a backend that cannot restore: %v; want ErrUnsupported naming CheckpointRestorer", err)
	}
	m.Watch = Watch{RewardSE: -1}
	if _, err := m.Train(ctx, groups(0), TrainConfig{}); err == nil || !strings.Contains(err.Error(), "RewardSE") {
		t.Errorf("Train with a bad Watch: %v; want an error naming RewardSE", err)
	}
}

// Ensure a rollback cuts the lineage, is counted, and picks the best
// checkpoint by the metric (train metrics point at the step before).
func TestLineageAndBest(t *testing.T) {
	row := func(step int, kv ...any) map[string]any {
		r := map[string]any{"step": float64(step)}
		for i := 0; i < len(kv); i += 2 {
			r[kv[i].(string)] = kv[i+1]
		}
		return r
	}
	rows := []map[string]any{
		row(1, "train/reward", 0.2), row(2, "train/reward", 0.6), row(3, "train/reward", 0.5),
		row(4, "train/reward", 0.1), row(5, restoredFrom, 1.0), row(6, "train/reward", 0.4),
	}
	kept, n := lineage(rows)
	if n != 1 || len(kept) != 2 || stepOf(kept[0]) != 1 || stepOf(kept[1]) != 6 {
		t.Errorf("lineage = %v, %d rollbacks; want steps 1 and 6, 1 rollback", kept, n)
	}
	if best, metric, ok := bestCheckpoint(rows[:4], ""); !ok || best != 1 || metric != "train/reward" {
		t.Errorf("best by train reward = %d %q %v; want checkpoint 1 (sampled the rollouts of step 2)", best, metric, ok)
	}
	withVal := append(rows[:4:4], row(3, "val/reward", 0.9))
	if best, metric, _ := bestCheckpoint(withVal, ""); best != 3 || metric != "val/reward" {
		t.Errorf("best with val rows = %d %q; want 3 by val/reward", best, metric)
	}
	if s := (Watch{Recovery: &Recovery{LRFactor: 0.25}}).learningRateScale(rows); s != 0.25 {
		t.Errorf("learning rate scale after one rollback = %v; want 0.25", s)
	}
}

// Ensure the watch flags a run stuck where nothing trains below its best
// reward — the train rewards and trainable steps of examples/calculator at
// lr 5e-3, seed 11 (BENCHMARKS.md), whose reward check never fired — but
// not a run that converged: every group right, nothing left to train.
func TestWatch_Stuck(t *testing.T) {
	rewards := []float64{0.2094, 0.125, 0.1, 0.09375, 0.09688, 0.1, 0.1, 0.1, 0.1, 0.09375, 0.1, 0.1, 0.09688,
		0.1, 0.1, 0.1, 0.1, 0.09688, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1}
	trained := "ttsttsssstsstsssstsssssss" // s: no trainable group
	var collapsed, converged []watchPoint
	for i, r := range rewards {
		collapsed = append(collapsed, watchPoint{step: i + 1, gradNorm: math.NaN(), reward: r, exceptionRate: 0, stuck: trained[i] == 's'})
		c := watchPoint{step: i + 1, gradNorm: 7, reward: min(1, 0.5+0.05*float64(i)), stuck: i >= 10}
		if c.stuck {
			c.gradNorm = math.NaN()
		}
		converged = append(converged, c)
	}
	step, causes := firstFlag(Watch{}, collapsed)
	if step != 23 || !strings.Contains(strings.Join(causes, ";"), "nothing trains") {
		t.Errorf("collapsed run flagged at step %d (%v); want step 23, the fifth step in a row without a trainable group, naming it", step, causes)
	}
	if step, causes := firstFlag(Watch{}, converged); step != 0 {
		t.Errorf("converged run flagged at step %d: %v", step, causes)
	}
}
