package local_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/artgo/art"
	"github.com/artgo/art/arttest"
	"github.com/artgo/art/backend/local"
	"github.com/artgo/art/store"
)

// cancelAsItLands is the in-process backend with the caller's context
// cancelled just as each training step returns: a Ctrl-C that arrives
// while the step's checkpoint is being written.
type cancelAsItLands struct {
	*local.Backend
	cancel context.CancelFunc
}

func (b cancelAsItLands) Train(ctx context.Context, m *art.TrainableModel, groups []art.TrajectoryGroup, cfg art.TrainConfig) (art.TrainResult, error) {
	res, err := b.Backend.Train(ctx, m, groups, cfg)
	b.cancel()
	return res, err
}

func (b cancelAsItLands) TrainSFT(ctx context.Context, m *art.TrainableModel, trajs []art.Trajectory, cfg art.TrainSFTConfig) (art.TrainResult, error) {
	res, err := b.Backend.TrainSFT(ctx, m, trajs, cfg)
	b.cancel()
	return res, err
}

// Ensure a step that was saved is logged even when the caller's context
// ends as it lands: its checkpoint is on disk and served, so its
// trajectories and history row must be too (a resumed loop starts after
// it and would never log it).
func TestTrain_CancelledAsItLands_IsLogged(t *testing.T) {
	env := arttest.NewEnv(t)
	inner := local.New(local.Options{Path: env.Path, Quiet: true, Seed: 1})
	defer inner.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	m := env.Model()
	if err := m.Register(ctx, cancelAsItLands{inner, cancel}); err != nil {
		t.Fatal(err)
	}
	client, err := m.OpenAIClient()
	if err != nil {
		t.Fatal(err)
	}
	groups, err := arttest.SampleGroups(ctx, client, m.InferenceName(-1), "hi", 2, 4)
	if err != nil {
		t.Fatal(err)
	}
	res, err := m.Train(ctx, groups, art.TrainConfig{})
	if err != nil {
		t.Errorf("Train of a step that landed as its context ended: %v; want its result", err)
	}
	if step, serr := inner.Step(context.Background(), m); serr != nil || step != 1 {
		t.Fatalf("the step did not land: step %d, %v", step, serr)
	}
	d, err := store.New(env.Path, env.Project, env.Name)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(d.TrajectoriesPath("train", 1)); err != nil {
		t.Errorf("the landed step's trajectories were not logged: %v", err)
	}
	rows := arttest.ReadHistory(t, d.Path())
	if len(rows) != 1 || rows[0]["step"] != 1.0 {
		t.Errorf("history %v; want one row, for step 1 (res %+v)", rows, res)
	}

	// TrainSFT logs its step the same way.
	ctx, cancel = context.WithCancel(context.Background())
	defer cancel()
	m2 := env.Model()
	m2.Name = "sft"
	if err := m2.Register(ctx, cancelAsItLands{inner, cancel}); err != nil {
		t.Fatal(err)
	}
	if _, err := m2.TrainSFT(ctx, []art.Trajectory{groups[0].Trajectories[0]}, art.TrainSFTConfig{}); err != nil {
		t.Errorf("TrainSFT of a step that landed as its context ended: %v; want its result", err)
	}
	rows = arttest.ReadHistory(t, filepath.Join(env.Path, env.Project, "models", "sft"))
	if len(rows) != 1 || rows[0]["step"] != 1.0 {
		t.Errorf("SFT history %v; want one row, for step 1", rows)
	}
}
