package ruler_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/artgo/art"
	"github.com/artgo/art/backend/local"
	"github.com/artgo/art/engine/initmodel"
	"github.com/artgo/art/engine/kernels"
	"github.com/artgo/art/ruler"
)

// Ensure RULER works against a real judge: a random-weight model served by
// our own OpenAI-compatible server (the in-process backend), whose answers
// grammar-constrained decoding keeps schema-valid, so every group is
// scored on the first try and the scores land on the trajectories.
func TestScoreGroup_OwnServerJudge(t *testing.T) {
	base := filepath.Join(t.TempDir(), "judge")
	if _, err := initmodel.Write(base, initmodel.Options{Arch: "qwen2", Shape: "tiny", Tokenizer: initmodel.ByteTokenizer,
		DType: kernels.F32, Seed: 3, Std: 0.2}); err != nil {
		t.Fatal(err)
	}
	b := local.New(local.Options{Path: t.TempDir(), Quiet: true})
	defer b.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	jm := &art.TrainableModel{Model: art.Model{Name: "judge", Project: "ruler"}, BaseModel: base}
	if err := jm.Register(ctx, b); err != nil {
		t.Fatal(err)
	}
	ep, err := b.InferenceEndpoint(ctx, jm, 0)
	if err != nil {
		t.Fatal(err)
	}
	judge := ruler.FromEndpoint(ep)
	judge.MaxTokens = 1500
	st := &ruler.Stats{}
	opts := ruler.Options{NoCache: true, MaxExplanation: 16, MaxRetries: -1, Stats: st}
	var groups []art.TrajectoryGroup
	for g := range 4 {
		var grp art.TrajectoryGroup
		for i := range 4 {
			tr := art.Trajectory{Reward: float64(i)}
			tr.AddMessage(art.SystemMsg("Play tic-tac-toe as X; answer with a cell."))
			tr.AddMessage(art.UserMsg(fmt.Sprintf("board %d", g)))
			tr.AddChoice(art.Choice{FinishReason: "stop", Message: art.AssistantMsg(fmt.Sprint(i + 1))})
			grp.Trajectories = append(grp.Trajectories, tr)
		}
		groups = append(groups, grp)
	}
	scored, err := ruler.ScoreGroups(ctx, groups, judge, opts)
	if err != nil {
		t.Fatal(err)
	}
	if len(scored) != len(groups) {
		t.Fatalf("%d of %d groups scored", len(scored), len(groups))
	}
	for g, grp := range scored {
		for i, tr := range grp.Trajectories {
			if s := tr.Metrics["ruler_score"]; s < 0 || s > 1 || tr.Reward != s || tr.Metrics["independent_reward"] != float64(i) {
				t.Errorf("group %d trajectory %d: reward %v metrics %v", g, i, tr.Reward, tr.Metrics)
			}
		}
		t.Logf("group %d: %s", g, grp.Trajectories[0].Logs)
	}
	m := st.Take("train")
	if m["ruler/judge_calls"] != 4 || m["ruler/judge_retries"] != 0 || m["ruler/judge_completion_tokens"] == 0 {
		t.Errorf("stats %v", m)
	}
}

// Ensure a judge or options no call can use fail at once with what is
// wrong, even under SwallowErrors, instead of a transport error per group
// or a default in place of a negative value.
func TestScore_BadJudgeOrOptions(t *testing.T) {
	if _, err := ruler.NewJudge("openai/", "", "k"); err == nil || !strings.Contains(err.Error(), "no model") {
		t.Errorf(`NewJudge("openai/"): error %v; want one saying it has no model`, err)
	}
	if _, err := ruler.NewJudge("judge@0", "localhost:7999/v1", ""); err == nil || !strings.Contains(err.Error(), "http(s) URL") {
		t.Errorf("NewJudge with a base URL without a scheme: error %v; want one asking for an http(s) URL", err)
	}
	good := ruler.Judge{Model: "judge@0", BaseURL: "http://127.0.0.1:1/v1"}
	g := art.TrajectoryGroup{Trajectories: []art.Trajectory{{}, {}}}
	g.Trajectories[0].AddMessage(art.UserMsg("hi"), art.AssistantMsg("a"))
	g.Trajectories[1].AddMessage(art.UserMsg("hi"), art.AssistantMsg("b"))
	for _, c := range []struct {
		name  string
		ctx   context.Context
		judge ruler.Judge
		opts  ruler.Options
		want  string
	}{
		{"zero judge", context.Background(), ruler.Judge{}, ruler.Options{}, "no model"},
		{"no base URL", context.Background(), ruler.Judge{Model: "m"}, ruler.Options{}, "base URL"},
		{"negative timeout", context.Background(), good, ruler.Options{Timeout: -time.Second}, "Options.Timeout"},
		{"negative concurrency", context.Background(), good, ruler.Options{Concurrency: -1}, "Options.Concurrency"},
		{"nil context", nil, good, ruler.Options{}, "nil context"},
	} {
		c.opts.SwallowErrors, c.opts.NoCache = true, true
		if _, err := ruler.ScoreGroup(c.ctx, g, c.judge, c.opts); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("ScoreGroup, %s: error %v; want one saying %q", c.name, err, c.want)
		}
		if _, err := ruler.ScoreGroups(c.ctx, []art.TrajectoryGroup{g}, c.judge, c.opts); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("ScoreGroups, %s: error %v; want one saying %q", c.name, err, c.want)
		}
	}
}
