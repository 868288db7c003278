package experiment

import (
	"encoding/json"
	"flag"
	"io"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/artgo/art"
)

func TestSummarize(t *testing.T) {
	groups := []art.TrajectoryGroup{
		{Trajectories: []art.Trajectory{{Reward: 1, Metrics: map[string]float64{"m": 2}}, {Reward: 0, Metrics: map[string]float64{"m": 0}}}},
		{Trajectories: []art.Trajectory{{Reward: 0.5, Metrics: map[string]float64{"m": 1}}, {Reward: 0.5}}},
	}
	mean, se, metrics := Summarize(groups)
	// rewards 1, 0, .5, .5: mean .5, sample variance 1/6, se sqrt(1/6/4)
	if mean != 0.5 || math.Abs(se-math.Sqrt(1.0/24)) > 1e-12 || metrics["m"] != 0.75 {
		t.Errorf("Summarize = %v, %v, %v", mean, se, metrics)
	}
}

func TestWriteReportAndPenalize(t *testing.T) {
	path := filepath.Join(t.TempDir(), "r.json")
	if err := WriteReport(path, Report{Example: "x", Before: 0.25, After: 0.75}); err != nil {
		t.Fatal(err)
	}
	var got Report
	b, _ := os.ReadFile(path)
	if err := json.Unmarshal(b, &got); err != nil || got.Example != "x" || got.After != 0.75 {
		t.Errorf("report %+v, %v", got, err)
	}
	in := []art.TrajectoryGroup{{Trajectories: []art.Trajectory{{Reward: 0, Metrics: map[string]float64{"invalid_move": 1}}, {Reward: 0.3}}}}
	out := PenalizeInvalid(in, 2)
	if out[0].Trajectories[0].Reward != -2 || out[0].Trajectories[1].Reward != 0.3 || in[0].Trajectories[0].Reward != 0 {
		t.Errorf("penalized %+v (input %+v)", out, in)
	}
}

func TestPairedStderr(t *testing.T) {
	traj := func(id string, r float64) art.Trajectory {
		return art.Trajectory{Reward: r, Metadata: map[string]any{"scenario_id": id}}
	}
	before := []art.TrajectoryGroup{
		{Trajectories: []art.Trajectory{traj("s1", 0), traj("s1", 1)}},
		{Trajectories: []art.Trajectory{traj("s2", 1), traj("s3", 0), {Reward: 5}}}, // no scenario_id: ignored
	}
	after := []art.TrajectoryGroup{{Trajectories: []art.Trajectory{traj("s1", 1), traj("s2", 1), traj("s3", 1), traj("s4", 0)}}}
	// Paired differences 0.5, 0, 1: mean 0.5, sample variance 0.25.
	if got, want := PairedStderr(before, after), math.Sqrt(0.25/3); math.Abs(got-want) > 1e-12 {
		t.Errorf("PairedStderr = %v; want %v", got, want)
	}
	if got := PairedStderr(before[:1], after); got != 0 {
		t.Errorf("PairedStderr with one pair = %v; want 0", got)
	}
}

// Ensure Register takes the struct's values as defaults, the command line
// overrides them, and Check refuses what the examples cannot run.
func TestFlags(t *testing.T) {
	f := Defaults("x")
	f.Steps = 7
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	f.Register(fs)
	f.RegisterWarmup(fs)
	if err := fs.Parse([]string{"--base-model", "m", "--eval", "5", "--sft-warmup", "3"}); err != nil {
		t.Fatal(err)
	}
	if f.Steps != 7 || f.Name != "x-example" || f.BaseModel != "m" || f.Eval != 5 || f.SFTWarmup != 3 || f.Check(true) != nil {
		t.Errorf("flags %+v (check: %v)", f, f.Check(true))
	}
	if c := f.TrainConfig(); c.LearningRate != f.LR || c.GradAccumulationSequences != f.GradAccum {
		t.Errorf("TrainConfig %+v", c)
	}
	g := f
	g.TrainJSON = `{"max_grad_norm": 1, "loss_fn": "ppo", "learning_rate": 9}`
	if c := g.TrainConfig(); g.Check(true) != nil || c.MaxGradNorm != 1 || c.Loss != "ppo" || c.LearningRate != f.LR {
		t.Errorf("--train-config %s: TrainConfig %+v (check: %v); want max_grad_norm 1, ppo and --lr's rate", g.TrainJSON, c, g.Check(true))
	}
	for _, bad := range []func(*Flags){
		func(f *Flags) { f.BaseModel = "" },
		func(f *Flags) { f.GroupSize = 0 },
		func(f *Flags) { f.LR = 0 },
		func(f *Flags) { f.CallTimeout = 0 },
		func(f *Flags) { f.Eval = -1 },
		func(f *Flags) { f.SFTBatch = 0 },
		func(f *Flags) { f.TrainJSON = `{"max_grad_norm": 1` },
		func(f *Flags) { f.TrainJSON = `{"no_such_option": 1}` },
		func(f *Flags) { f.TrainJSON = `{"epsilon": 3}` },
	} {
		g := f
		bad(&g)
		if g.Check(true) == nil {
			t.Errorf("Check accepted %+v", g)
		}
	}
	g = f
	g.BaseModel = ""
	if err := g.Check(false); err != nil {
		t.Errorf("Check(false) without a base model: %v", err)
	}
}
