package local_test

import (
	"context"
	"io"
	"log/slog"
	"math"
	"path/filepath"
	"testing"

	goopenai "github.com/sashabaranov/go-openai"

	"github.com/artgo/art"
	"github.com/artgo/art/backend/local"
	"github.com/artgo/art/engine/initmodel"
	"github.com/artgo/art/engine/kernels"
	"github.com/artgo/art/engine/lora"
	"github.com/artgo/art/engine/model"
)

// Ensure a mixture-of-experts base model (qwen3_moe) trains end to end
// through the local backend with the default LoRA targets: rollouts from
// its OpenAI endpoint, GRPO steps trained exactly on-policy, and a
// checkpoint whose experts' factors moved, served as name@1.
func TestMixtureOfExperts_TrainsExperts(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	base := filepath.Join(dir, "moe")
	if _, err := initmodel.Write(base, initmodel.Options{Arch: "qwen3_moe", Shape: "tiny", Tokenizer: initmodel.ByteTokenizer, DType: kernels.F32, Seed: 1, Std: 0.2}); err != nil {
		t.Fatal(err)
	}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	b := local.New(local.Options{Quiet: true, Logger: quiet, Seed: 1})
	defer b.Close()
	m := &art.TrainableModel{Model: art.Model{Name: "agent", Project: "moe", BasePath: filepath.Join(dir, ".art"), Logger: quiet}, BaseModel: base}
	if err := m.Register(ctx, b); err != nil {
		t.Fatal(err)
	}
	// rollout runs the agent against the model served as name and
	// returns its recorded trajectory.
	rollout := func(name string) art.Trajectory {
		rec := art.NewRecorder(nil)
		cfg := goopenai.DefaultConfig(m.InferenceAPIKey)
		cfg.BaseURL, cfg.HTTPClient = m.InferenceBaseURL, rec.Client()
		if err := agent(ctx, goopenai.NewClientWithConfig(cfg), name, "hello"); err != nil {
			t.Fatalf("chat with %s: %v", name, err)
		}
		return rec.Trajectory()
	}
	// Two steps: the second's rollouts come from step 1, whose experts'
	// factors are no longer zero, so its on-policy check covers them.
	for step := 1; step <= 2; step++ {
		var group art.TrajectoryGroup
		for i := range 4 {
			traj := rollout(m.InferenceName(-1))
			traj.Reward = float64(i % 2)
			group.Trajectories = append(group.Trajectories, traj)
		}
		res, err := m.Train(ctx, []art.TrajectoryGroup{group}, art.TrainConfig{LearningRate: 1e-3})
		if err != nil {
			t.Fatal(err)
		}
		if res.Skipped || res.Step != step {
			t.Fatalf("Train = step %d, skipped %v (%s); want step %d trained", res.Step, res.Skipped, res.SkipReason, step)
		}
		if d, ok := res.Metrics["loss/rollout_logprob_abs_diff"]; !ok || d != 0 {
			t.Errorf("step %d: loss/rollout_logprob_abs_diff = %v (logged: %v); want exactly 0: the trainer must route and compute every token as the sampler did", step, d, ok)
		}
	}

	d, err := m.Dir()
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := model.ReadConfig(base)
	if err != nil {
		t.Fatal(err)
	}
	a, err := lora.Load(d.CheckpointDir(1), cfg)
	if err != nil {
		t.Fatal(err)
	}
	moved := map[bool]int{} // expert factor or not → factors whose B left zero
	for _, f := range a.Factors() {
		for _, v := range f.B {
			if v != 0 && !math.IsNaN(float64(v)) {
				moved[f.Expert >= 0]++
				break
			}
		}
	}
	if moved[true] == 0 || moved[false] == 0 {
		t.Fatalf("after one step %d expert and %d other factors have a non-zero B; want both > 0", moved[true], moved[false])
	}
	rollout(m.InferenceName(1))
}
