package train

import (
	"context"
	"math"
	"slices"
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
