package native

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/artgo/art"
	"github.com/artgo/art/arttest"
	"github.com/artgo/art/host"
)

// Ensure rollouts that reuse each other's keys and values stay exactly on
// policy: four rollouts of one scenario sent at once as separate requests
// share its long system prompt, each one's second turn reuses its first
// turn's cache, and a training step on the group reads
// loss/rollout_logprob_abs_diff = 0 exactly. Deleting the step's
// checkpoint drops what was kept of its answers.
func TestChat_ReusedPrefixTrainsOnPolicy(t *testing.T) {
	s := openTiny(t)
	ctx := context.Background()
	system := art.SystemMsg(strings.Repeat("Answer in few words, and keep to the point. ", 3))
	first, second := art.UserMsg("Begin."), art.UserMsg("Go on.")
	group := art.TrajectoryGroup{Trajectories: make([]art.Trajectory, 4)}
	cached := make([][2]int, len(group.Trajectories))
	errs := make([]error, len(group.Trajectories))
	var wg sync.WaitGroup
	for i := range group.Trajectories {
		wg.Go(func() {
			tr := &group.Trajectories[i]
			tr.Reward = float64(i)
			tr.AddMessage(system, first)
			seed := int64(10 * i)
			resp, err := s.Chat(ctx, host.ChatRequest{Model: "agent@0", Messages: arttest.RawMessages(t, system, first), MaxTokens: 6, Seed: &seed}, nil)
			if err != nil {
				errs[i] = err
				return
			}
			c := resp.Choices[0]
			tr.AddChoice(withModel(c, "agent@0"))
			tr.AddMessage(second)
			seed++
			again, err := s.Chat(ctx, host.ChatRequest{Model: "agent@0", Messages: arttest.RawMessages(t, system, first, art.AssistantMsg(c.Content), second), MaxTokens: 6, Seed: &seed}, nil)
			if err != nil {
				errs[i] = err
				return
			}
			tr.AddChoice(withModel(again.Choices[0], "agent@0"))
			cached[i] = [2]int{resp.CachedTokens, again.CachedTokens}
		})
	}
	wg.Wait()
	reusedFirst := 0
	for i, err := range errs {
		if err != nil {
			t.Fatalf("rollout %d: %v", i, err)
		}
		if cached[i][0] > 0 {
			reusedFirst++
		}
		if cached[i][1] == 0 {
			t.Errorf("rollout %d: the second turn reused nothing of the first", i)
		}
	}
	if reusedFirst < len(cached)-1 {
		t.Errorf("first turns reused tokens: %v; want all but one to share the system prompt", cached)
	}
	res, err := s.Train(ctx, []art.TrajectoryGroup{group}, art.TrainConfig{LearningRate: 1e-3}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if d, ok := res.Metrics["loss/rollout_logprob_abs_diff"]; !ok || d != 0 {
		t.Fatalf("loss/rollout_logprob_abs_diff = %v (reported %v); want exactly 0", d, ok)
	}

	// Step 0's checkpoint deleted: the batcher lets go of what it kept
	// of step 0's answers (and so of its adapter).
	if s.batcher.KeptPrefixBytes() == 0 {
		t.Fatal("nothing kept of the rollouts' answers")
	}
	if err := s.DeleteCheckpoints([]int{1}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for s.batcher.KeptPrefixBytes() != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d bytes of step 0's answers still kept after its checkpoint was deleted", s.batcher.KeptPrefixBytes())
		}
		time.Sleep(time.Millisecond)
	}
}
