package train

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/artgo/art/engine/lora"
)

// Ensure 3 steps, a checkpoint, a reload and 2 more steps give exactly the
// adapter (and optimizer state) of 5 steps straight.
func TestResume_BitIdentical(t *testing.T) {
	c := newColorTask(t)
	ctx := context.Background()
	// Fixed data, sampled once, so every run trains on the same groups.
	var groups []Group
	seed := uint64(1)
	for g := 0; g < 2; g++ {
		var grp Group
		for i := 0; i < 4; i++ {
			ans, s := c.sample(seed)
			seed++
			r := float64(i % 2)
			grp.Trajectories = append(grp.Trajectories, Trajectory{Reward: r, Histories: []History{c.history(ans, s)}})
		}
		groups = append(groups, grp)
	}
	cfg := DefaultConfig()
	cfg.LearningRate = 1e-3
	start := c.tr.Adapter.Clone()
	dir := t.TempDir()

	run := func(tr *Trainer, from, to int) {
		for step := from; step < to; step++ {
			res, err := tr.Step(ctx, groups, cfg, step, nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			if !res.Trained {
				t.Fatalf("step %d did not train: %s", step, res.Reason)
			}
		}
	}
	// Straight: 5 steps.
	straight := &Trainer{Model: c.tr.Model, Adapter: start.Clone(), Opt: NewAdamW(len(start.Params())), Tokenizer: c.z}
	run(straight, 0, 5)
	if err := SaveCheckpoint(filepath.Join(dir, "straight"), straight.Adapter, straight.Opt, CheckpointInfo{BaseModel: "base"}); err != nil {
		t.Fatal(err)
	}
	// Interrupted: 3 steps, checkpoint, fresh trainer from disk, 2 steps.
	first := &Trainer{Model: c.tr.Model, Adapter: start.Clone(), Opt: NewAdamW(len(start.Params())), Tokenizer: c.z}
	run(first, 0, 3)
	if err := SaveCheckpoint(filepath.Join(dir, "0003"), first.Adapter, first.Opt, CheckpointInfo{BaseModel: "base"}); err != nil {
		t.Fatal(err)
	}
	a, o, err := LoadCheckpoint(filepath.Join(dir, "0003"), c.tr.Model.Config)
	if err != nil {
		t.Fatal(err)
	}
	resumed := &Trainer{Model: c.tr.Model, Adapter: a, Opt: o, Tokenizer: c.z}
	run(resumed, 3, 5)
	if err := SaveCheckpoint(filepath.Join(dir, "resumed"), resumed.Adapter, resumed.Opt, CheckpointInfo{BaseModel: "base"}); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{lora.WeightsFile, lora.ConfigFile, OptimizerFile} {
		x, err1 := os.ReadFile(filepath.Join(dir, "straight", f))
		y, err2 := os.ReadFile(filepath.Join(dir, "resumed", f))
		if err1 != nil || err2 != nil {
			t.Fatal(err1, err2)
		}
		if !bytes.Equal(x, y) {
			t.Errorf("%s differs between straight and resumed training", f)
		}
	}
	if bytes.Equal(mustRead(t, filepath.Join(dir, "straight", lora.WeightsFile)), mustRead(t, filepath.Join(dir, "0003", lora.WeightsFile))) {
		t.Fatal("steps 4-5 did not change the adapter")
	}
	if err := SaveCheckpoint(filepath.Join(dir, "0003"), first.Adapter, first.Opt, CheckpointInfo{BaseModel: "base"}); err == nil {
		t.Fatal("overwriting an existing checkpoint: got nil error")
	}
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Ensure a step whose groups all have equal rewards trains nothing and says
// so instead of failing or passing silently.
func TestStep_NothingToTrain(t *testing.T) {
	c := newColorTask(t)
	ans, s := c.sample(1)
	g := Group{Trajectories: []Trajectory{
		{Reward: 1, Histories: []History{c.history(ans, s)}},
		{Reward: 1, Histories: []History{c.history(ans, s)}},
	}}
	before := append([]float32(nil), c.tr.Adapter.Params()...)
	res, err := c.tr.Step(context.Background(), []Group{g}, DefaultConfig(), 0, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Trained || res.Reason == "" {
		t.Fatalf("got Trained=%v Reason=%q; want an untrained step with a reason", res.Trained, res.Reason)
	}
	if res.Metrics["data/step_num_groups_trainable"] != 0 {
		t.Fatalf("trainable groups = %v; want 0", res.Metrics["data/step_num_groups_trainable"])
	}
	for i, v := range c.tr.Adapter.Params() {
		if v != before[i] {
			t.Fatal("adapter changed on an untrained step")
		}
	}
}
