package train

import (
	"context"
	"math"
	"slices"
	"strings"
	"testing"
)

// Ensure Restore undoes a step exactly, adapter and optimizer, and that a
// snapshot can be restored more than once.
func TestSnapshot_RestoreUndoesStep(t *testing.T) {
	c := newColorTask(t)
	tr := c.tr
	cfg := DefaultConfig()
	cfg.LearningRate = 1e-3
	groups := optionGroups(c, math.NaN())
	if res, err := tr.Step(context.Background(), groups, cfg, 0, nil, nil); err != nil || !res.Trained {
		t.Fatalf("first step: %+v, %v", res, err)
	}
	params, m, v, steps := slices.Clone(tr.Adapter.Params()), slices.Clone(tr.Opt.M), slices.Clone(tr.Opt.V), tr.Opt.T
	snap := tr.Snapshot()
	for range 2 {
		if res, err := tr.Step(context.Background(), groups, cfg, 1, nil, nil); err != nil || !res.Trained {
			t.Fatalf("second step: %+v, %v", res, err)
		}
		if slices.Equal(params, tr.Adapter.Params()) {
			t.Fatal("the second step changed nothing")
		}
		tr.Restore(snap)
		if !slices.Equal(params, tr.Adapter.Params()) || !slices.Equal(m, tr.Opt.M) || !slices.Equal(v, tr.Opt.V) || tr.Opt.T != steps {
			t.Fatal("Restore did not bring back the adapter and optimizer")
		}
	}
}

// Ensure a training step is deterministic: the same step from the same
// state gives bit-identical parameters, optimizer state and metrics, run
// after run (parallel work is split by fixed ranges, never by which
// goroutine is free).
func TestStep_Deterministic(t *testing.T) {
	c := newColorTask(t)
	tr := c.tr
	cfg := DefaultConfig()
	cfg.LearningRate = 1e-3
	groups := optionGroups(c, math.NaN())
	snap := tr.Snapshot()
	var params, m []float32
	var metrics map[string]float64
	for run := range 6 {
		tr.Restore(snap)
		res, err := tr.Step(context.Background(), groups, cfg, 0, nil, nil)
		if err != nil || !res.Trained {
			t.Fatalf("run %d: %+v, %v", run, res, err)
		}
		delete(res.Metrics, "time/step_trainer_s")
		for k := range res.Metrics {
			if strings.HasPrefix(k, "time/") || strings.HasPrefix(k, "throughput/") {
				delete(res.Metrics, k)
			}
		}
		if run == 0 {
			params, m, metrics = slices.Clone(tr.Adapter.Params()), slices.Clone(tr.Opt.M), res.Metrics
			continue
		}
		if !slices.Equal(params, tr.Adapter.Params()) || !slices.Equal(m, tr.Opt.M) {
			t.Fatalf("run %d: the adapter or optimizer differs from run 0", run)
		}
		for k, v := range metrics {
			if res.Metrics[k] != v && !(math.IsNaN(v) && math.IsNaN(res.Metrics[k])) {
				t.Errorf("run %d: %s = %v, run 0 gave %v", run, k, res.Metrics[k], v)
			}
		}
	}
}
