package autorl

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"

	"github.com/artgo/art"
	"github.com/artgo/art/arttest"
	"github.com/artgo/art/backend/local"
	"github.com/artgo/art/ruler"
)

// Ensure the whole AutoRL flow runs against real parts: our own server
// with a random tiny model as generator and judge (grammar-constrained
// JSON, so the answers always parse) and a tiny model trained by the
// in-process backend: a plan of exactly N inputs, training steps saved,
// and a before → after table over fresh inputs.
func TestRun_OwnServer(t *testing.T) {
	b := local.New(local.Options{Path: t.TempDir(), Quiet: true})
	defer b.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	base := arttest.TinyModel(t)
	judgeModel := &art.TrainableModel{Model: art.Model{Name: "judge", Project: "autorl"}, BaseModel: base}
	model := &art.TrainableModel{Model: art.Model{Name: "agent", Project: "autorl"}, BaseModel: base}
	for _, m := range []*art.TrainableModel{judgeModel, model} {
		if err := m.Register(ctx, b); err != nil {
			t.Fatal(err)
		}
	}
	ep, err := b.InferenceEndpoint(ctx, judgeModel, 0)
	if err != nil {
		t.Fatal(err)
	}
	judge := ruler.FromEndpoint(ep)
	judge.MaxTokens = 300
	var progress bytes.Buffer
	res, err := Run(ctx, model, Config{
		Task: "Greet the user politely", Generator: judge, Judge: judge,
		TrainInputs: 2, TestInputs: 2, GroupsPerStep: 1, GroupSize: 2, Epochs: 1,
		Params:   openai.ChatCompletionNewParams{MaxTokens: openai.Int(8)},
		Plan:     PlanOptions{MaxLength: 20, MaxRetries: -1},
		Ruler:    ruler.Options{NoCache: true, MaxExplanation: 8, MaxRetries: -1},
		Progress: &progress,
	})
	if err != nil {
		t.Fatalf("%v\n%s", err, progress.String())
	}
	if len(res.Plan.Inputs) != 2 || res.BeforeStep != 0 || res.AfterStep != 2 || len(res.Tests) != 2 {
		t.Fatalf("result %+v", res)
	}
	for _, c := range res.Tests {
		if c.Before < 0 || c.Before > 1 || c.After < 0 || c.After > 1 {
			t.Errorf("scores %+v", c)
		}
		if strings.TrimSpace(c.Input) == "" { // taken from its answers, not its position
			t.Errorf("a comparison without its input: %+v", c)
		}
	}
	var table bytes.Buffer
	res.WriteTable(&table)
	if !strings.Contains(table.String(), "step 0 → step 2") || !strings.Contains(table.String(), "mean") {
		t.Errorf("table:\n%s", table.String())
	}
	t.Logf("%s\n%s", progress.String(), table.String())
}

func TestGeneratePlan_BadInput(t *testing.T) {
	if _, err := GeneratePlan(context.Background(), ruler.Judge{}, " ", 3, PlanOptions{}); err == nil {
		t.Error("an empty task was accepted")
	}
	if _, err := GeneratePlan(context.Background(), ruler.Judge{}, "x", 0, PlanOptions{}); err == nil {
		t.Error("0 inputs were accepted")
	}
}

// Ensure Run rejects a Config it cannot use with an error naming the
// field, before it asks the model or the generator anything; negative
// values used to run silently as the defaults. Zero values keep meaning
// the defaults.
func TestRun_BadConfig(t *testing.T) {
	judge := ruler.Judge{Model: "j", BaseURL: "http://127.0.0.1:1/v1"}
	model := &art.TrainableModel{Model: art.Model{Name: "agent", Project: "autorl"}} // not registered: Run must not get that far
	for _, tt := range []struct {
		name string
		set  func(*Config)
		want string
	}{
		{"task", func(c *Config) { c.Task = " " }, "autorl: the task description is empty"},
		{"group size", func(c *Config) { c.GroupSize = -1 }, "autorl: GroupSize = -1: must be >= 2"},
		{"group of one", func(c *Config) { c.GroupSize = 1 }, "autorl: GroupSize = 1: must be >= 2"},
		{"epochs", func(c *Config) { c.Epochs = -1 }, "autorl: Epochs = -1: must be >= 0 (0 means 3)"},
		{"learning rate", func(c *Config) { c.LearningRate = -1 }, "autorl: LearningRate = -1: must be > 0 (0 means 1e-5)"},
		{"train inputs", func(c *Config) { c.TrainInputs = -1 }, "autorl: TrainInputs = -1"},
		{"test inputs", func(c *Config) { c.TestInputs = -1 }, "autorl: TestInputs = -1"},
		{"groups per step", func(c *Config) { c.GroupsPerStep = -2 }, "autorl: GroupsPerStep = -2"},
		{"no generator", func(c *Config) { c.Generator = ruler.Judge{} }, "autorl: Generator: ruler: judge \"\" has no model"},
		{"judge without a URL", func(c *Config) { c.Judge.BaseURL = "" }, "autorl: Judge: ruler: judge \"j\": base URL"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg := Config{Task: "Greet the user", Quiet: true, Generator: judge, Judge: judge}
			tt.set(&cfg)
			if _, err := Run(context.Background(), model, cfg); err == nil || !strings.HasPrefix(err.Error(), tt.want) {
				t.Fatalf("Run: %v; want %q", err, tt.want)
			}
		})
	}
	if err := (Config{Task: "x", Generator: judge, Judge: judge}).validate(); err != nil {
		t.Fatalf("the zero values (the defaults) were rejected: %v", err)
	}
	if _, err := Run(context.Background(), nil, Config{Task: "x", Generator: judge, Judge: judge}); err == nil || !strings.Contains(err.Error(), "nil model") {
		t.Fatalf("Run with a nil model: %v; want an error saying so", err)
	}
}
