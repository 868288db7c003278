// Package arttest provides helpers for testing code built on package art,
// the way net/http/httptest does for net/http: a tiny random model to
// train in tests, and the conformance suite every art.Backend passes.
package arttest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"

	"github.com/artgo/art"
	"github.com/artgo/art/engine/initmodel"
	"github.com/artgo/art/engine/kernels"
	"github.com/artgo/art/store"
)

// Env is where a backend under test keeps its model.
type Env struct {
	// BaseModel is a tiny random Qwen2-shaped model folder with a byte
	// tokenizer (see TinyModel).
	BaseModel string
	// Path is the store root (TrainableModel.BasePath) of the model.
	Path string
	// Project and Name identify the model.
	Project, Name string
}

// NewEnv writes a tiny model and returns a fresh environment in the test's
// temporary directory.
func NewEnv(tb testing.TB) Env {
	tb.Helper()
	return Env{BaseModel: TinyModel(tb), Path: filepath.Join(tb.TempDir(), ".art"), Project: "conformance", Name: "agent"}
}

// Model returns an unregistered trainable model for env.
func (e Env) Model() *art.TrainableModel {
	return &art.TrainableModel{Model: art.Model{Name: e.Name, Project: e.Project, BasePath: e.Path}, BaseModel: e.BaseModel}
}

// TinyModel writes a tiny random Qwen2-shaped model (2 layers, hidden 64,
// byte tokenizer, Qwen2.5 chat template) into a temporary folder and
// returns its path. It takes milliseconds.
func TinyModel(tb testing.TB) string {
	tb.Helper()
	dir := filepath.Join(tb.TempDir(), "tiny-qwen2")
	if _, err := initmodel.Write(dir, initmodel.Options{Arch: "qwen2", Shape: "tiny", Tokenizer: initmodel.ByteTokenizer,
		DType: kernels.F32, Seed: 1, Std: 0.2}); err != nil {
		tb.Fatalf("arttest: write tiny model: %v", err)
	}
	return dir
}

// ReadHistory returns the rows of modelDir/history.jsonl, failing the test
// if the file cannot be read or has a corrupted line.
func ReadHistory(tb testing.TB, modelDir string) []map[string]any {
	tb.Helper()
	d, err := store.Open(modelDir)
	if err != nil {
		tb.Fatalf("arttest: %v", err)
	}
	rows, err := d.ReadHistory()
	if err != nil {
		tb.Fatalf("arttest: %v", err)
	}
	return rows
}

// NewBackend returns a backend under test that keeps env's model. The suite
// calls it twice on the same env, closing the first backend before asking
// for the second, to check that registering again resumes.
type NewBackend func(t *testing.T, env Env) art.Backend

// Capability names an optional interface of art.Backend.
type Capability string

// The optional capabilities of art.Backend.
const (
	SFT               Capability = "art.SFTTrainer"         // TrainableModel.TrainSFT
	DeleteCheckpoints Capability = "art.CheckpointDeleter"  // TrainableModel.DeleteCheckpoints
	RestoreCheckpoint Capability = "art.CheckpointRestorer" // Watch.Recovery
)

// has reports whether b implements the optional interface c.
func (c Capability) has(b art.Backend) bool {
	switch c {
	case SFT:
		_, ok := b.(art.SFTTrainer)
		return ok
	case DeleteCheckpoints:
		_, ok := b.(art.CheckpointDeleter)
		return ok
	case RestoreCheckpoint:
		_, ok := b.(art.CheckpointRestorer)
		return ok
	}
	return false
}

// RunBackendTests runs the conformance suite of art.Backend against the
// backends newBackend returns. Subtests run in order and share one model;
// the suite stops at the first failing one. want lists the optional
// capabilities the backend declares: the suite fails if the backend does
// not implement one of them.
//
// It checks: Register serves step 0; the model's stock openai-go client
// gets choices with token ids and logprobs for "name@0", which
// art.ChoiceFromOpenAI makes trainable, and Trajectory.Chat records them;
// TrainableModel.Train saves step 1, which is served at once (by name@1,
// by the bare name and by InferenceName(-1)) while step 0 stays served,
// and logs the step (history.jsonl and the parquet trajectories); a step
// with equal rewards is skipped with a reason and still advances; a failed
// step saves nothing; and a new backend on the same store resumes at the
// latest step. Each optional capability the backend has is checked
// (DeleteCheckpointsExcept keeps the latest; TrainSFT saves a step per
// call, refuses a bad config without one, and lowers its loss on the same
// transcripts; RestoreCheckpoint serves the best checkpoint again when the
// collapse watch with Recovery flags a step, and later steps train at the
// lower learning rate); for each it lacks, the model method must fail with
// errors.ErrUnsupported.
func RunBackendTests(t *testing.T, newBackend NewBackend, want ...Capability) {
	env := NewEnv(t)
	ctx := context.Background()
	b := newBackend(t, env)
	defer func() {
		if b != nil {
			b.Close()
		}
	}()
	for _, c := range want {
		if !c.has(b) {
			t.Fatalf("backend %T declares %s but does not implement it", b, c)
		}
	}
	m := env.Model()
	id := func(step int) string { return m.InferenceName(step) }
	var groups []art.TrajectoryGroup
	latest := 0

	steps := []struct {
		name string
		run  func(t *testing.T)
	}{
		{"Register", func(t *testing.T) {
			if err := m.Register(ctx, b); err != nil {
				t.Fatalf("Register: %v", err)
			}
			if m.InferenceBaseURL == "" || m.InferenceModelName != id(0) || m.InferenceName(-1) != id(0) {
				t.Fatalf("after Register: base URL %q, model name %q; want a URL and %q", m.InferenceBaseURL, m.InferenceModelName, id(0))
			}
			wantStep(t, ctx, b, m, 0)
		}},
		{"ChatTrainableChoices", func(t *testing.T) {
			for g := range 2 {
				choices := chat(t, ctx, m, id(0), id(0), 4, int64(g))
				var grp art.TrajectoryGroup
				for i, c := range choices {
					tr := art.Trajectory{Reward: float64(i % 2)}
					tr.AddMessage(art.UserMsg("hi"))
					tr.AddChoice(c)
					grp.Trajectories = append(grp.Trajectories, tr)
				}
				groups = append(groups, grp)
			}
			client, err := m.OpenAIClient()
			if err != nil {
				t.Fatal(err)
			}
			var tr art.Trajectory
			tr.AddMessage(art.UserMsg("hi"))
			c, err := tr.Chat(ctx, client, openai.ChatCompletionNewParams{Model: m.InferenceName(-1), MaxTokens: openai.Int(4)})
			if err != nil || len(c.Logprobs) == 0 || len(tr.MessagesAndChoices) != 2 || tr.MessagesAndChoices[1].Choice == nil {
				t.Fatalf("Trajectory.Chat = %+v, %v; want a trainable choice appended", c, err)
			}
		}},
		{"TrainServesNextStep", func(t *testing.T) {
			res, err := m.Train(ctx, groups, art.TrainConfig{LearningRate: 1e-3})
			if err != nil {
				t.Fatalf("Train: %v", err)
			}
			if res.Step != 1 || res.Skipped || res.Metrics["data/step_num_groups_trainable"] != 2 {
				t.Fatalf("Train = %+v; want step 1 trained on 2 groups", res)
			}
			latest = 1
			wantStep(t, ctx, b, m, 1)
			ep, err := b.InferenceEndpoint(ctx, m, -1)
			if err != nil || ep.Model != id(1) || m.InferenceName(-1) != id(1) {
				t.Fatalf("InferenceEndpoint(latest) = %+v, %v, InferenceName(-1) = %q; want model %q", ep, err, m.InferenceName(-1), id(1))
			}
			chat(t, ctx, m, id(1), id(1), 1, 7)
			chat(t, ctx, m, m.Name, id(1), 1, 7) // a bare name is the latest step
			chat(t, ctx, m, id(0), id(0), 1, 7)  // older steps stay served
			d, err := m.Dir()
			if err != nil {
				t.Fatal(err)
			}
			rows := ReadHistory(t, d.Path())
			if len(rows) != 1 || rows[0]["step"] != 1.0 || rows[0]["train/reward"] != 0.5 || rows[0]["loss/train"] == nil {
				t.Fatalf("history after Train = %v; want one train row at step 1 with reward and loss", rows)
			}
			if logged, err := d.ReadTrajectories("train", 1); err != nil || len(logged) != 8 {
				t.Fatalf("logged trajectories at step 1: %d, %v; want 8", len(logged), err)
			}
		}},
		{"EqualRewardsSkipAndAdvance", func(t *testing.T) {
			same := cloneGroups(groups)
			for i := range same {
				for j := range same[i].Trajectories {
					same[i].Trajectories[j].Reward = 0.5
				}
			}
			res, err := m.Train(ctx, same, art.TrainConfig{LearningRate: 1e-3})
			if err != nil {
				t.Fatalf("Train: %v", err)
			}
			if res.Step != 2 || !res.Skipped || res.SkipReason == "" {
				t.Fatalf("Train with equal rewards = %+v; want step 2 skipped with a reason", res)
			}
			latest = 2
			wantStep(t, ctx, b, m, 2)
			chat(t, ctx, m, id(2), id(2), 1, 1)
		}},
		{"FailedStepSavesNothing", func(t *testing.T) {
			if _, err := b.Train(ctx, m, groups, art.TrainConfig{LearningRate: -1}); err == nil {
				t.Fatal("Train with a negative learning rate succeeded")
			}
			wantStep(t, ctx, b, m, 2)
		}},
		{"DeleteCheckpointsKeepsLatest", func(t *testing.T) {
			del, ok := b.(art.CheckpointDeleter)
			if !ok {
				if err := m.DeleteCheckpoints(ctx, ""); !errors.Is(err, errors.ErrUnsupported) {
					t.Fatalf("DeleteCheckpoints on a backend without it = %v; want errors.ErrUnsupported", err)
				}
				t.Logf("backend %T is not an art.CheckpointDeleter: DeleteCheckpoints fails with ErrUnsupported", b)
				return
			}
			if err := del.DeleteCheckpointsExcept(ctx, m, []int{0}); err != nil {
				t.Fatalf("DeleteCheckpointsExcept: %v", err)
			}
			for step, want := range map[int]bool{0: true, 1: false, 2: true} {
				_, err := b.InferenceEndpoint(ctx, m, step)
				if (err == nil) != want {
					t.Errorf("after DeleteCheckpointsExcept([0]): InferenceEndpoint(%d) error %v; want served=%v", step, err, want)
				}
			}
			client, err := m.OpenAIClient()
			if err != nil {
				t.Fatal(err)
			}
			_, err = client.Chat.Completions.New(ctx, chatParams(id(1), 1, 0))
			var apiErr *openai.Error
			if !errors.As(err, &apiErr) || apiErr.StatusCode != 404 {
				t.Errorf("chat with deleted %s: got %v; want a 404", id(1), err)
			}
			wantStep(t, ctx, b, m, 2)
		}},
		{"TrainSFTLearns", func(t *testing.T) {
			var trajs []art.Trajectory
			for i := range 4 {
				var tr art.Trajectory
				tr.AddMessage(art.UserMsg(fmt.Sprintf("ping %d", i)), art.AssistantMsg("pong"))
				trajs = append(trajs, tr)
			}
			if _, ok := b.(art.SFTTrainer); !ok {
				if _, err := m.TrainSFT(ctx, trajs, art.TrainSFTConfig{LearningRate: 1e-2}); !errors.Is(err, errors.ErrUnsupported) {
					t.Fatalf("TrainSFT on a backend without it = %v; want errors.ErrUnsupported", err)
				}
				t.Logf("backend %T is not an art.SFTTrainer: TrainSFT fails with ErrUnsupported", b)
				return
			}
			if _, err := m.TrainSFT(ctx, trajs, art.TrainSFTConfig{LearningRates: []float64{1e-2}}); err == nil {
				t.Fatal("TrainSFT with a schedule of 1 rate for 2 batches succeeded")
			}
			wantStep(t, ctx, b, m, 2)
			var losses []float64
			for want := 3; want <= 4; want++ {
				res, err := m.TrainSFT(ctx, trajs, art.TrainSFTConfig{LearningRate: 1e-2})
				if err != nil {
					t.Fatalf("TrainSFT: %v", err)
				}
				if res.Step != want || res.Skipped || res.Metrics["data/step_num_gradient_steps"] != 2 || res.Metrics["data/step_num_trajectories"] != 4 {
					t.Fatalf("TrainSFT = %+v; want step %d, 2 optimizer steps on 4 trajectories", res, want)
				}
				if m.InferenceName(-1) != id(want) {
					t.Fatalf("after TrainSFT: InferenceName(-1) = %q; want %q", m.InferenceName(-1), id(want))
				}
				losses = append(losses, res.Metrics["loss/train"])
			}
			if !(losses[1] < losses[0]) {
				t.Errorf("SFT loss %v did not fall on the same transcripts", losses)
			}
			latest = 4
			wantStep(t, ctx, b, m, 4)
			chat(t, ctx, m, m.Name, id(4), 1, 5)
		}},
		{"WatchRollsBack", func(t *testing.T) {
			latest = watchRollsBack(t, ctx, b, m, groups, latest)
		}},
		{"RegisterAgainResumes", func(t *testing.T) {
			if err := b.Close(); err != nil {
				t.Fatalf("Close: %v", err)
			}
			b = newBackend(t, env)
			m = env.Model()
			if err := m.Register(ctx, b); err != nil {
				t.Fatalf("Register again: %v", err)
			}
			if m.InferenceModelName != id(latest) || m.InferenceName(-1) != id(latest) {
				t.Errorf("InferenceModelName = %q, InferenceName(-1) = %q after resuming; want %q", m.InferenceModelName, m.InferenceName(-1), id(latest))
			}
			wantStep(t, ctx, b, m, latest)
			chat(t, ctx, m, m.Name, id(latest), 1, 3)
		}},
	}
	for _, s := range steps {
		if !t.Run(s.name, s.run) {
			return
		}
	}
}

func wantStep(t *testing.T, ctx context.Context, b art.Backend, m *art.TrainableModel, want int) {
	t.Helper()
	if got, err := b.Step(ctx, m); err != nil || got != want {
		t.Fatalf("Step = %d, %v; want %d", got, err, want)
	}
	if got, err := m.Step(ctx); err != nil || got != want {
		t.Fatalf("model.Step = %d, %v; want %d", got, err, want)
	}
}

func chatParams(model string, n int, seed int64) openai.ChatCompletionNewParams {
	return openai.ChatCompletionNewParams{
		Model:     model,
		Messages:  []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")},
		N:         openai.Int(int64(n)),
		MaxTokens: openai.Int(6),
		Seed:      openai.Int(seed),
	}
}

// chat asks model for n choices through m's openai-go client, checks that
// wantModel answered, and returns the choices as trainable art.Choices.
func chat(t *testing.T, ctx context.Context, m *art.TrainableModel, model, wantModel string, n int, seed int64) []art.Choice {
	t.Helper()
	client, err := m.OpenAIClient()
	if err != nil {
		t.Fatal(err)
	}
	resp, err := client.Chat.Completions.New(ctx, chatParams(model, n, seed))
	if err != nil {
		t.Fatalf("chat with %s: %v", model, err)
	}
	if resp.Model != wantModel || len(resp.Choices) != n {
		t.Fatalf("chat with %s: answered by %q with %d choices; want %q with %d", model, resp.Model, len(resp.Choices), wantModel, n)
	}
	var out []art.Choice
	for _, oc := range resp.Choices {
		c, err := art.ChoiceFromOpenAI(oc)
		if err != nil {
			t.Fatal(err)
		}
		if len(c.Logprobs) == 0 || slices.ContainsFunc(c.Logprobs, func(l art.TokenLogprob) bool { return l.TokenID < 0 || l.Logprob > 0 }) {
			t.Fatalf("choice %d is not trainable: logprobs %+v", c.Index, c.Logprobs)
		}
		out = append(out, c)
	}
	return out
}

func cloneGroups(groups []art.TrajectoryGroup) []art.TrajectoryGroup {
	out := slices.Clone(groups)
	for i := range out {
		out[i].Trajectories = slices.Clone(out[i].Trajectories)
	}
	return out
}

// SampleGroups asks model, through client, for groups of 4 choices to
// prompt (one request per group, seeded by its index, at most maxTokens
// each) and returns them as trajectory groups whose rewards alternate 0 and
// 1, so every group has something to train.
func SampleGroups(ctx context.Context, client openai.Client, model, prompt string, groups, maxTokens int) ([]art.TrajectoryGroup, error) {
	out := make([]art.TrajectoryGroup, 0, groups)
	for g := range groups {
		resp, err := client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: model,
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage(prompt)}, N: openai.Int(4),
			MaxTokens: openai.Int(int64(maxTokens)), Seed: openai.Int(int64(g))})
		if err != nil {
			return nil, fmt.Errorf("arttest: sample group %d: %w", g, err)
		}
		var grp art.TrajectoryGroup
		for i, c := range resp.Choices {
			ch, err := art.ChoiceFromOpenAI(c)
			if err != nil {
				return nil, fmt.Errorf("arttest: sample group %d: %w", g, err)
			}
			t := art.Trajectory{Reward: float64(i % 2)}
			t.AddMessage(art.UserMsg(prompt))
			t.AddChoice(ch)
			grp.Trajectories = append(grp.Trajectories, t)
		}
		out = append(out, grp)
	}
	return out, nil
}

// watchRollsBack trains three healthy steps with the collapse watch's
// Recovery on, then one whose rollouts mostly fail: the best checkpoint by
// train reward must come back as the next step, byte for byte, and the step
// after it must train at half the learning rate. It returns the latest step.
func watchRollsBack(t *testing.T, ctx context.Context, b art.Backend, m *art.TrainableModel, groups []art.TrajectoryGroup, latest int) int {
	t.Helper()
	m.Watch = art.Watch{Recovery: &art.Recovery{Metric: "train/reward", LRFactor: 0.5}}
	defer func() { m.Watch = art.Watch{} }()
	const lr = 1e-3
	if _, ok := b.(art.CheckpointRestorer); !ok {
		if _, err := m.Train(ctx, groups, art.TrainConfig{LearningRate: lr}); !errors.Is(err, errors.ErrUnsupported) {
			t.Fatalf("Train with Watch.Recovery on a backend without RestoreCheckpoint = %v; want errors.ErrUnsupported", err)
		}
		wantStep(t, ctx, b, m, latest)
		t.Logf("backend %T is not an art.CheckpointRestorer: Watch.Recovery fails with ErrUnsupported", b)
		return latest
	}
	shifted := func(by float64, exceptions int) []art.TrajectoryGroup {
		out := cloneGroups(groups)
		for i := range out {
			for j := range out[i].Trajectories {
				out[i].Trajectories[j].Reward += by
			}
			for range exceptions {
				out[i].Exceptions = append(out[i].Exceptions, art.Exception{Type: "error", Message: "malformed reply"})
			}
		}
		return out
	}
	bestStep := 0
	for i, by := range []float64{0, 0.3, 0.1} { // train reward 0.5, 0.8, 0.6
		res, err := m.Train(ctx, shifted(by, 0), art.TrainConfig{LearningRate: lr})
		if err != nil {
			t.Fatalf("healthy step: Train: %v", err)
		}
		if len(res.Warnings) > 0 || res.Step != latest+1 {
			t.Fatalf("healthy step %d: Train = %+v; want step %d without warnings", i, res, latest+1)
		}
		latest = res.Step
		if i == 1 {
			bestStep = res.Step - 1 // the checkpoint that sampled the best rollouts
		}
	}
	res, err := m.Train(ctx, shifted(0, 4), art.TrainConfig{LearningRate: lr})
	if err != nil {
		t.Fatalf("collapsing step: Train: %v", err)
	}
	warnings := strings.Join(res.Warnings, "\n")
	if res.Step != latest+2 || !strings.Contains(warnings, "exception rate") || !strings.Contains(warnings, "rolled back") {
		t.Fatalf("collapsing step: Train = step %d, warnings %q; want step %d (the rollback) warning of the exception rate", res.Step, warnings, latest+2)
	}
	latest = res.Step
	wantStep(t, ctx, b, m, latest)
	d, err := m.Dir()
	if err != nil {
		t.Fatal(err)
	}
	adapter := func(step int) []byte {
		data, err := os.ReadFile(filepath.Join(d.CheckpointDir(step), "adapter_model.safetensors"))
		if err != nil {
			t.Fatal(err)
		}
		return data
	}
	if !bytes.Equal(adapter(latest), adapter(bestStep)) {
		t.Errorf("step %d does not hold the adapter of step %d", latest, bestStep)
	}
	rows := ReadHistory(t, d.Path())
	if last := rows[len(rows)-1]; last["watch/restored_from"] != float64(bestStep) || last["step"] != float64(latest) {
		t.Errorf("last history row %v; want watch/restored_from %d at step %d", last, bestStep, latest)
	}
	chat(t, ctx, m, m.Name, m.InferenceName(latest), 1, 2)
	res, err = m.Train(ctx, groups, art.TrainConfig{LearningRate: lr})
	if err != nil {
		t.Fatalf("after the rollback: Train: %v", err)
	}
	if got := res.Metrics["loss/learning_rate"]; got != lr*0.5 {
		t.Errorf("after one rollback: learning rate %v; want %v", got, lr*0.5)
	}
	return res.Step
}

// RawMessages marshals messages as a host.ChatRequest carries them.
func RawMessages(tb testing.TB, ms ...art.Message) []json.RawMessage {
	tb.Helper()
	var out []json.RawMessage
	for _, m := range ms {
		b, err := json.Marshal(m)
		if err != nil {
			tb.Fatal(err)
		}
		out = append(out, b)
	}
	return out
}
