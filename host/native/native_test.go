package native

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/artgo/art"
	"github.com/artgo/art/arttest"
	"github.com/artgo/art/engine/initmodel"
	"github.com/artgo/art/engine/kernels"
	"github.com/artgo/art/host"
)

func openTiny(t *testing.T) *Host {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "base")
	if _, err := initmodel.Write(dir, initmodel.Options{Arch: "qwen2", Shape: "tiny", Tokenizer: initmodel.ByteTokenizer, DType: kernels.F32, Seed: 1, Std: 0.2}); err != nil {
		t.Fatal(err)
	}
	s, err := Open(context.Background(), Options{BaseModel: dir, Name: "agent", Project: "p", Path: filepath.Join(t.TempDir(), ".art"), Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// Ensure a chat request returns n choices with exact token ids and
// logprobs, and that the content is the decoded tokens minus the stop token.
func TestChat_ChoicesCarryTokens(t *testing.T) {
	s := openTiny(t)
	seed := int64(3)
	resp, err := s.Chat(context.Background(), host.ChatRequest{Model: "agent@0", Messages: arttest.RawMessages(t, art.UserMsg("hi")), N: 3, MaxTokens: 6, Seed: &seed, TopLogprobs: 2}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Model != "agent@0" || len(resp.Choices) != 3 {
		t.Fatalf("model %q, %d choices", resp.Model, len(resp.Choices))
	}
	for _, c := range resp.Choices {
		if len(c.Tokens) == 0 || len(c.Tokens) > 6 {
			t.Fatalf("choice %d has %d tokens", c.Index, len(c.Tokens))
		}
		var text []byte
		for i, tok := range c.Tokens {
			if tok.Logprob > 0 || len(tok.Top) != 2 {
				t.Fatalf("token %d: logprob %v, %d top", i, tok.Logprob, len(tok.Top))
			}
			if c.FinishReason == "stop" && i == len(c.Tokens)-1 {
				continue
			}
			text = append(text, tok.Bytes...)
		}
		if string(text) != c.Content {
			t.Fatalf("content %q; tokens spell %q", c.Content, text)
		}
	}
	// The same seed gives the same answers.
	again, err := s.Chat(context.Background(), host.ChatRequest{Model: "agent", Messages: arttest.RawMessages(t, art.UserMsg("hi")), N: 3, MaxTokens: 6, Seed: &seed, TopLogprobs: 2}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := range again.Choices {
		if again.Choices[i].Content != resp.Choices[i].Content {
			t.Fatalf("seeded choice %d differs: %q vs %q", i, again.Choices[i].Content, resp.Choices[i].Content)
		}
	}
}

func TestChat_BadRequests(t *testing.T) {
	s := openTiny(t)
	ctx := context.Background()
	cases := []struct {
		req  host.ChatRequest
		want string
	}{
		{host.ChatRequest{Model: "other@0", Messages: arttest.RawMessages(t, art.UserMsg("x"))}, "unknown model"},
		{host.ChatRequest{Model: "agent@7", Messages: arttest.RawMessages(t, art.UserMsg("x"))}, "served: agent@0"},
		{host.ChatRequest{Model: "agent@0"}, "messages"},
		{host.ChatRequest{Model: "agent@0", Messages: arttest.RawMessages(t, art.UserMsg("x")), N: -1}, "n must be"},
		{host.ChatRequest{Model: "agent@0", Messages: arttest.RawMessages(t, art.UserMsg("x")), MaxTokens: 1 << 20}, "context length"},
	}
	for _, c := range cases {
		_, err := s.Chat(ctx, c.req, nil)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: got %v; want error containing %q", c.req, err, c.want)
		}
	}
	if _, err := s.Chat(ctx, cases[0].req, nil); !errors.Is(err, host.ErrUnknownModel) {
		t.Errorf("got %v; want host.ErrUnknownModel", err)
	}
}

// Ensure a train step writes and serves the next step, and that a step with
// equal rewards advances without training and says so.
func TestTrain_AdvancesAndServes(t *testing.T) {
	s := openTiny(t)
	ctx := context.Background()
	var groups []art.TrajectoryGroup
	for g := 0; g < 2; g++ {
		seed := int64(g)
		resp, err := s.Chat(ctx, host.ChatRequest{Model: "agent@0", Messages: arttest.RawMessages(t, art.UserMsg("hi")), N: 4, MaxTokens: 5, Seed: &seed}, nil)
		if err != nil {
			t.Fatal(err)
		}
		var grp art.TrajectoryGroup
		for i, c := range resp.Choices {
			tr := art.Trajectory{Reward: float64(i % 2)}
			tr.AddMessage(art.UserMsg("hi"))
			tr.AddChoice(toArtChoice(c))
			grp.Trajectories = append(grp.Trajectories, tr)
		}
		groups = append(groups, grp)
	}
	cfg := art.TrainConfig{LearningRate: 1e-3}
	res, err := s.Train(ctx, groups, cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Step != 1 || res.Skipped || res.Metrics["data/step_num_groups_trainable"] != 2 {
		t.Fatalf("result %+v", res)
	}
	models, _ := host.ModelIDs(s)
	if strings.Join(models, ",") != "agent@0,agent@1" {
		t.Fatalf("served %v", models)
	}
	if _, err := s.Chat(ctx, host.ChatRequest{Model: "agent@1", Messages: arttest.RawMessages(t, art.UserMsg("hi")), MaxTokens: 2}, nil); err != nil {
		t.Fatal(err)
	}
	for i := range groups {
		for j := range groups[i].Trajectories {
			groups[i].Trajectories[j].Reward = 0.5
		}
	}
	res, err = s.Train(ctx, groups, cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Step != 2 || !res.Skipped || res.SkipReason == "" {
		t.Fatalf("equal rewards: got %+v; want a skipped step 2 with a reason", res)
	}
	if _, err := s.Resolve("agent@2"); err != nil {
		t.Fatal(err)
	}
	// KL shaping against an earlier checkpoint: a missing step is an error
	// that saves nothing; step 1 is loaded and measured against.
	for i := range groups {
		for j := range groups[i].Trajectories {
			groups[i].Trajectories[j].Reward = float64(j % 2)
		}
	}
	missing := 9
	kl := art.TrainConfig{LearningRate: 1e-3, KLPenaltyCoef: 0.1, KLPenaltyReferenceStep: &missing, PrecalculateLogprobs: true}
	if _, err := s.Train(ctx, groups, kl, nil); err == nil || !strings.Contains(err.Error(), "KL reference step 9") || s.Step() != 2 {
		t.Fatalf("KL against a missing step: err %v, step %d", err, s.Step())
	}
	one := 1
	kl.KLPenaltyReferenceStep = &one
	res, err = s.Train(ctx, groups, kl, nil)
	if err != nil || res.Step != 3 || res.Skipped {
		t.Fatalf("KL against step 1: %+v, %v", res, err)
	}
	if _, ok := res.Metrics["loss/kl_policy_ref"]; !ok {
		t.Errorf("no loss/kl_policy_ref in %v", res.Metrics)
	}
	// Reopening resumes at the latest step.
	s2, err := Open(ctx, s.opt)
	if err != nil {
		t.Fatal(err)
	}
	if s2.Step() != 3 {
		t.Fatalf("reopened at step %d; want 3", s2.Step())
	}
}

func toArtChoice(c host.ChatChoice) art.Choice {
	out := art.Choice{Index: c.Index, FinishReason: c.FinishReason, Message: art.AssistantMsg(c.Content)}
	for _, tok := range c.Tokens {
		out.Logprobs = append(out.Logprobs, art.TokenLogprob{TokenID: tok.ID, Token: string(tok.Bytes), Bytes: tok.Bytes, Logprob: tok.Logprob})
	}
	return out
}

// Ensure requests never wait for each other forever: with two generation
// slots, a request for more choices than slots is answered, and many
// concurrent requests of two choices each (which could each hold one slot
// and wait for the other) all finish.
func TestChat_SlotsNeverDeadlock(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "base")
	if _, err := initmodel.Write(dir, initmodel.Options{Arch: "qwen2", Shape: "tiny", Tokenizer: initmodel.ByteTokenizer, DType: kernels.F32, Seed: 1, Std: 0.2}); err != nil {
		t.Fatal(err)
	}
	h, err := Open(context.Background(), Options{BaseModel: dir, Name: "agent", Project: "p", Path: filepath.Join(t.TempDir(), ".art"), MaxConcurrent: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	req := func(n int) host.ChatRequest {
		return host.ChatRequest{Model: "agent", Messages: arttest.RawMessages(t, art.UserMsg("hi")), N: n, MaxTokens: 8}
	}
	if resp, err := h.Chat(ctx, req(5), nil); err != nil || len(resp.Choices) != 5 {
		t.Fatalf("n=5 with 2 slots: %v", err)
	}
	errs := make(chan error, 16)
	for range 16 {
		go func() {
			_, err := h.Chat(ctx, req(2), nil)
			errs <- err
		}()
	}
	for range 16 {
		if err := <-errs; err != nil {
			t.Fatalf("concurrent n=2 requests with 2 slots: %v", err)
		}
	}
	if running, _ := h.Load(); running != 0 {
		t.Fatalf("%d slots still held after every request finished", running)
	}
}

// Ensure skipped steps are warned about once, then at most once a minute
// with the count since: a converged run skips dozens of steps in a row.
func TestSkipWarnings(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo}))
	var w skipWarnings
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i, d := range []time.Duration{0, time.Second, 2 * time.Second, 61 * time.Second, 62 * time.Second} {
		w.report(log, i+1, "equal rewards", t0.Add(d))
	}
	out := buf.String()
	if n := strings.Count(out, "level=WARN"); n != 2 {
		t.Fatalf("%d warnings, want 2 (the first skip, then one after a minute):\n%s", n, out)
	}
	if n := strings.Count(out, "level=INFO"); n != 3 {
		t.Fatalf("%d info lines, want 3:\n%s", n, out)
	}
	if !strings.Contains(out, "step=4 reason=\"equal rewards\" also_skipped_since_last_warning=2") {
		t.Fatalf("the second warning does not count the two skips since the first:\n%s", out)
	}
}
