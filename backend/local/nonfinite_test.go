package local_test

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"

	"github.com/artgo/art"
	"github.com/artgo/art/arttest"
	"github.com/artgo/art/backend/local"
)

// Ensure a learning rate so large that the update overflows (1e300 passes
// TrainConfig.Validate: it is finite) is a clear error that loses nothing,
// through TrainableModel.Train and TrainSFT: the error names the
// non-finite value and the learning rate, the latest step does not move,
// no checkpoint folder (not even a temporary one) and no history row
// appear, the latest step still chats, and the next step at a sane rate
// trains with finite metrics.
func TestTrain_OverflowingLearningRateSavesNothing(t *testing.T) {
	ctx := context.Background()
	b := local.New(local.Options{Path: filepath.Join(t.TempDir(), ".art"), Quiet: true, Seed: 1})
	defer b.Close()
	m := &art.TrainableModel{Model: art.Model{Name: "agent", Project: "p"}, BaseModel: arttest.TinyModel(t)}
	if err := m.Register(ctx, b); err != nil {
		t.Fatal(err)
	}
	client, err := m.OpenAIClient()
	if err != nil {
		t.Fatal(err)
	}
	groups, err := arttest.SampleGroups(ctx, client, m.InferenceName(-1), "hi", 2, 6)
	if err != nil {
		t.Fatal(err)
	}
	d, err := m.Dir()
	if err != nil {
		t.Fatal(err)
	}
	// entries lists the checkpoints folder, temporary folders included.
	entries := func() []string {
		es, err := os.ReadDir(filepath.Join(filepath.Dir(d.CheckpointDir(0))))
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, e := range es {
			names = append(names, e.Name())
		}
		return names
	}
	adapter := func(step int) []byte {
		data, err := os.ReadFile(filepath.Join(d.CheckpointDir(step), "adapter_model.safetensors"))
		if err != nil {
			t.Fatal(err)
		}
		return data
	}
	wantFinite := func(what string, res art.TrainResult, keys ...string) {
		t.Helper()
		for _, k := range keys {
			v, ok := res.Metrics[k]
			if !ok || math.IsNaN(v) || math.IsInf(v, 0) {
				t.Errorf("%s: %s = %v (present %v); want a finite value", what, k, v, ok)
			}
		}
	}
	// unchanged checks that the failed call at step latest left everything
	// as it was and that latest still chats.
	unchanged := func(what string, err error, latest int, before []string, rows int, weights []byte) {
		t.Helper()
		if err == nil {
			t.Fatalf("%s succeeded", what)
		}
		t.Logf("%s: %v", what, err)
		for _, want := range []string{"non-finite", "learning rate", "1e+300"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("%s: error %q does not mention %q", what, err, want)
			}
		}
		if step, err := m.Step(ctx); err != nil || step != latest {
			t.Errorf("%s: latest step %d (%v); want %d", what, step, err, latest)
		}
		if m.InferenceName(-1) != m.InferenceName(latest) {
			t.Errorf("%s: InferenceName(-1) = %q; want %q", what, m.InferenceName(-1), m.InferenceName(latest))
		}
		if after := entries(); !slices.Equal(after, before) {
			t.Errorf("%s: checkpoints folder holds %v; before it held %v", what, after, before)
		}
		if n := len(arttest.ReadHistory(t, d.Path())); n != rows {
			t.Errorf("%s: history has %d rows; want %d", what, n, rows)
		}
		if !slices.Equal(adapter(latest), weights) {
			t.Errorf("%s: the adapter of step %d changed on disk", what, latest)
		}
		if _, err := client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: m.InferenceName(-1),
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")}, MaxTokens: openai.Int(3)}); err != nil {
			t.Errorf("%s: chat with the latest step: %v", what, err)
		}
	}

	before := entries()
	err = func() error { _, err := m.Train(ctx, groups, art.TrainConfig{LearningRate: 1e300}); return err }()
	unchanged("Train at learning rate 1e300 from step 0", err, 0, before, 0, adapter(0))
	res, err := m.Train(ctx, groups, art.TrainConfig{LearningRate: 1e-3})
	if err != nil || res.Step != 1 || res.Skipped {
		t.Fatalf("Train after the failed step: %+v, %v; want step 1 trained", res, err)
	}
	wantFinite("Train after the failed step", res, "loss/train", "loss/grad_norm", "loss/entropy")

	// A failure after a trained step, and SFT.
	before, weights := entries(), adapter(1)
	err = func() error { _, err := m.Train(ctx, groups, art.TrainConfig{LearningRate: 1e300}); return err }()
	unchanged("Train at learning rate 1e300 from step 1", err, 1, before, 1, weights)
	var trajs []art.Trajectory
	for _, w := range []string{"red", "blue", "gold"} {
		var tr art.Trajectory
		tr.AddMessage(art.UserMsg("say "+w), art.AssistantMsg(w))
		trajs = append(trajs, tr)
	}
	err = func() error { _, err := m.TrainSFT(ctx, trajs, art.TrainSFTConfig{LearningRate: 1e300}); return err }()
	unchanged("TrainSFT at learning rate 1e300", err, 1, before, 1, weights)
	// The second batch overflows after the first trained: still nothing.
	err = func() error {
		_, err := m.TrainSFT(ctx, trajs, art.TrainSFTConfig{LearningRates: []float64{1e-3, 1e300}})
		return err
	}()
	unchanged("TrainSFT whose second batch's rate is 1e300", err, 1, before, 1, weights)
	if res, err = m.TrainSFT(ctx, trajs, art.TrainSFTConfig{LearningRate: 1e-3}); err != nil || res.Step != 2 {
		t.Fatalf("TrainSFT after the failed ones: %+v, %v; want step 2", res, err)
	}
	wantFinite("TrainSFT after the failed ones", res, "loss/train", "loss/grad_norm")
	if res, err = m.Train(ctx, groups, art.TrainConfig{LearningRate: 1e-3}); err != nil || res.Step != 3 || res.Skipped {
		t.Fatalf("Train after the failed SFT: %+v, %v; want step 3 trained", res, err)
	}
	wantFinite("Train after the failed SFT", res, "loss/train", "loss/grad_norm", "loss/entropy")
	if n := len(arttest.ReadHistory(t, d.Path())); n != 3 {
		t.Errorf("history has %d rows after 3 steps; want 3", n)
	}
}
