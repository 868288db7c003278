package local_test

import (
	"context"
	"testing"

	"github.com/openai/openai-go/v3"

	"github.com/artgo/art"
	"github.com/artgo/art/arttest"
	"github.com/artgo/art/backend/local"
	"github.com/artgo/art/internal/otlptest"
)

// TestTraces runs a training step of the in-process backend end to end
// with tracing on, exported over OTLP/HTTP to a loopback receiver: the
// server's span of each chat call belongs to its rollout's trace and names
// its trajectory, and the training step's local.train span sits under the
// SDK's art.train.
func TestTraces(t *testing.T) {
	recv, flush := otlptest.Install(t)
	ctx := context.Background()
	b := local.New(local.Options{Path: t.TempDir(), Seed: 1, Quiet: true})
	defer b.Close()
	m := &art.TrainableModel{Model: art.Model{Name: "agent", Project: "p"}, BaseModel: arttest.TinyModel(t)}
	if err := m.Register(ctx, b); err != nil {
		t.Fatal(err)
	}
	client, err := m.OpenAIClient()
	if err != nil {
		t.Fatal(err)
	}
	rollout := func(ctx context.Context, seed int) (art.Trajectory, error) {
		var tr art.Trajectory
		tr.AddMessage(art.UserMsg("hi"))
		c, err := tr.Chat(ctx, client, openai.ChatCompletionNewParams{Model: m.InferenceName(-1), MaxTokens: openai.Int(4), Seed: openai.Int(int64(seed))})
		tr.Reward = float64(len(c.Message.Content.Text) % 3)
		return tr, err
	}
	groups, err := art.GatherGroups(ctx, []int{1, 2}, 2, rollout, art.GatherOptions{Quiet: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Train(ctx, groups, art.TrainConfig{LearningRate: 1e-3}); err != nil {
		t.Fatal(err)
	}
	flush()

	rollouts := map[string]otlptest.Span{} // by span id
	for _, r := range recv.Named("art.rollout") {
		rollouts[r.SpanID] = r
	}
	chats := map[string]otlptest.Span{}
	for _, c := range recv.Named("art.chat") {
		chats[c.SpanID] = c
	}
	servers := recv.Named("POST /v1/chat/completions")
	if len(rollouts) != 4 || len(chats) != 4 || len(servers) != 4 || len(recv.Named("local.register")) != 1 {
		t.Fatalf("want 4 rollouts, chat calls and server spans, and local.register; got:\n%s", recv)
	}
	for _, s := range servers {
		c, ok := chats[s.ParentSpanID]
		r := rollouts[c.ParentSpanID]
		if !ok || s.TraceID != r.TraceID || s.Attrs["art.trajectory_id"] == "" || s.Attrs["art.trajectory_id"] != r.Attrs["art.trajectory_id"] {
			t.Errorf("server span %+v is not under a rollout with its trajectory id", s)
		}
	}
	trains, steps := recv.Named("art.train"), recv.Named("local.train")
	if len(trains) != 1 || len(steps) != 1 || steps[0].ParentSpanID != trains[0].SpanID || steps[0].Attrs["art.step"] != "1" {
		t.Errorf("want local.train (step 1) under art.train; got:\n%s", recv)
	}
}
