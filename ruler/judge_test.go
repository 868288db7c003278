package ruler_test

import (
	"context"
	"fmt"
	"path/filepath"
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
