package demo

import (
	"bytes"
	"context"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/artgo/art/engine/initmodel"
	"github.com/artgo/art/engine/kernels"
	"github.com/artgo/art/games/tictactoe"
	"github.com/artgo/art/store"
)

// Ensure a short demo runs end to end through the SDK (base model built,
// GRPO steps trained through the served endpoint) and leaves checkpoints,
// history and trajectory logs.
func TestRun_Smoke(t *testing.T) {
	dir := t.TempDir()
	var out bytes.Buffer
	rep, err := Run(context.Background(), Options{Path: dir, Base: BaseOptions{SFTSteps: 60, BatchSize: 16}, RLSteps: 2,
		GroupsPerStep: 2, GroupSize: 4, EvalGames: 8, Out: &out, Quiet: true})
	t.Log(out.String())
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"checkpoints/0000", "checkpoints/0002", "history.jsonl", "trajectories/train/0001.parquet", "trajectories/train/0002.parquet", "trajectories/val/0000.parquet", "trajectories/val/0002.parquet", "reward.png"} {
		if _, err := os.Stat(filepath.Join(rep.ModelDir, p)); err != nil {
			t.Errorf("missing %s: %v", p, err)
		}
	}
	if rep.SFTSteps != 60 || rep.Steps != 2 || math.IsNaN(rep.ExpectedBefore) || math.IsNaN(rep.ExpectedAfter) {
		t.Errorf("report %+v", rep)
	}
	if len(rep.Evals) != 2 || rep.Evals[0].Step != 0 || rep.Evals[1].Step != 2 || rep.Evals[1].Reward != rep.After ||
		rep.Evals[1].Elapsed <= rep.Evals[0].Elapsed || rep.Evals[1].Evaluating <= 0 || rep.Evals[1].Evaluating >= rep.Evals[1].Elapsed {
		t.Errorf("evaluations %+v; want steps 0 and 2, in time order, the last one the report's After", rep.Evals)
	}
	checkOnPolicy(t, rep.ModelDir)
	// A second run reuses the cached base model.
	out.Reset()
	rep2, err := Run(context.Background(), Options{Path: dir, Base: BaseOptions{SFTSteps: 60, BatchSize: 16}, RLSteps: 1,
		GroupsPerStep: 1, GroupSize: 2, EvalGames: 2, Out: &out, Quiet: true})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(out.Bytes(), []byte("reusing the base model")) || rep2.ExpectedBefore != rep.ExpectedBefore {
		t.Errorf("the base model was not reused:\n%s", out.String())
	}
	// ... and says that it replaces the first run's checkpoints.
	if !bytes.Contains(out.Bytes(), []byte("replacing the previous run in "+rep.ModelDir)) {
		t.Errorf("the second run did not say it replaces the first:\n%s", out.String())
	}
}

// Ensure --base-model runs the same loop on a given model folder and tells
// a model that did not learn the format the rules in a system message.
func TestRun_GivenBaseModel(t *testing.T) {
	dir := t.TempDir()
	base := filepath.Join(dir, "base")
	if _, err := initmodel.Write(base, initmodel.Options{Arch: "qwen2", Shape: "tiny", Tokenizer: initmodel.ByteTokenizer,
		DType: kernels.F32, Seed: 3, ChatTemplate: chatTemplate}); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	rep, err := Run(context.Background(), Options{Path: dir, BaseModel: base, RLSteps: 1, GroupsPerStep: 1, GroupSize: 2,
		EvalGames: 2, Out: &out, Quiet: true})
	if err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	if rep.SFTSteps != 0 || !math.IsNaN(rep.ExpectedBefore) {
		t.Errorf("report %+v", rep)
	}
	d, err := store.Open(rep.ModelDir)
	if err != nil {
		t.Fatal(err)
	}
	rows, err := d.ReadTrajectories("val", 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 2 || len(rows[0].Messages) < 2 || rows[0].Messages[0].Role != "system" ||
		rows[0].Messages[0].Content != tictactoe.Instructions || rows[0].Messages[1].Role != "user" {
		t.Errorf("held-out games do not start with the instructions: %+v", rows)
	}
}

// checkOnPolicy fails unless every trained step in the model's history
// logged loss/rollout_logprob_abs_diff as exactly 0: the trainer's
// logprobs of the sampled moves equal the sampler's bit for bit (true
// on-policy, issue #22).
func checkOnPolicy(t *testing.T, modelDir string) {
	t.Helper()
	d, err := store.Open(modelDir)
	if err != nil {
		t.Fatal(err)
	}
	rows, err := d.ReadHistory()
	if err != nil {
		t.Fatal(err)
	}
	trained := 0
	for _, row := range rows {
		if _, ok := row["loss/train"]; !ok {
			continue // an evaluation, or a step with nothing to train
		}
		trained++
		v, ok := row["loss/rollout_logprob_abs_diff"]
		if !ok || v != 0.0 {
			t.Errorf("step %v: loss/rollout_logprob_abs_diff = %v (logged %v); want exactly 0", row["step"], v, ok)
		}
	}
	if trained == 0 {
		t.Errorf("no trained step in the history")
	}
}

// Ensure the entropy bonus reaches the training config: the default when
// unset, none when negative, the given value otherwise.
func TestOptions_EntropyBonus(t *testing.T) {
	for _, tt := range []struct{ set, want float64 }{{0, DefaultOptions().EntropyBonus}, {-1, 0}, {0.01, 0.01}} {
		o := Options{EntropyBonus: tt.set}
		o.defaults()
		cfg := o.trainConfig()
		if cfg.EntropyCoef != tt.want {
			t.Errorf("EntropyBonus %v: EntropyCoef %v; want %v", tt.set, cfg.EntropyCoef, tt.want)
		}
		if err := cfg.Validate(); err != nil {
			t.Errorf("EntropyBonus %v: %v", tt.set, err)
		}
	}
	if DefaultOptions().EntropyBonus <= 0 {
		t.Errorf("the default has no entropy bonus")
	}
}

// Ensure options Run cannot use are an error naming the field, returned
// before anything is built or written: EvalGames -5 used to build the base
// model and then panic in make, RLSteps -1 to build it and train nothing.
// The context is cancelled, so a check that came after work started would
// return a different error.
func TestRun_BadOptions(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for _, tt := range []struct {
		name string
		set  func(*Options)
		want string
	}{
		{"eval games", func(o *Options) { o.EvalGames = -5 }, "demo: EvalGames = -5: must be >= 0 (0 means 400)"},
		{"steps", func(o *Options) { o.RLSteps = -1 }, "demo: RLSteps = -1: must be >= 0 (0 means 500)"},
		{"groups", func(o *Options) { o.GroupsPerStep = -1 }, "demo: GroupsPerStep = -1"},
		{"group size", func(o *Options) { o.GroupSize = -3 }, "demo: GroupSize = -3"},
		{"group of one", func(o *Options) { o.GroupSize = 1 }, "demo: GroupSize = 1"},
		{"eval every", func(o *Options) { o.EvalEvery = -1 }, "demo: EvalEvery = -1"},
		{"learning rate", func(o *Options) { o.LearningRate = -1e-3 }, "demo: LearningRate = -0.001: must be > 0"},
		{"learning rate NaN", func(o *Options) { o.LearningRate = math.NaN() }, "demo: LearningRate = NaN"},
		{"penalty NaN", func(o *Options) { o.InvalidPenalty = math.NaN() }, "demo: InvalidPenalty = NaN"},
		{"sft steps", func(o *Options) { o.Base.SFTSteps = -1 }, "demo: base model: SFTSteps = -1"},
		{"batch size", func(o *Options) { o.Base.BatchSize = -16 }, "demo: base model: BatchSize = -16"},
		{"sft lr", func(o *Options) { o.Base.LR = -1 }, "demo: base model: LR = -1"},
		{"base model", func(o *Options) { o.BaseModel = "nope" }, "demo: base model nope: want a Hugging Face model folder"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "art")
			opt := Options{Path: dir, Out: io.Discard, Quiet: true}
			tt.set(&opt)
			_, err := Run(ctx, opt)
			if err == nil || !strings.HasPrefix(err.Error(), tt.want) {
				t.Fatalf("Run: %v; want %q", err, tt.want)
			}
			if _, err := os.Stat(dir); !os.IsNotExist(err) {
				t.Fatalf("%s was written (%v)", dir, err)
			}
		})
	}
	dir := filepath.Join(t.TempDir(), "base")
	if err := BuildBase(ctx, dir, BaseOptions{BatchSize: -1}); err == nil || !strings.Contains(err.Error(), "BatchSize = -1") {
		t.Fatalf("BuildBase: %v", err)
	}
	if _, err := os.Stat(dir + ".building"); !os.IsNotExist(err) {
		t.Fatalf("BuildBase wrote %s (%v)", dir+".building", err)
	}
}
