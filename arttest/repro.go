package arttest

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"

	"github.com/artgo/art"
	"github.com/artgo/art/store"
)

// Sizes of the training RunReproducibilityTest runs twice.
const (
	reproSteps       = 3
	reproGroups      = 4
	reproGroupSize   = 4
	reproConcurrency = 16
	reproMaxTokens   = 6
)

// RunReproducibilityTest checks that the same program with the same seed
// gives the same run: it trains a fresh model twice (each time on a new
// store and a new backend from newBackend, on the same base model folder)
// for 3 GRPO steps of 4 groups of 4 two-turn rollouts gathered 16 at a
// time through the model's stock openai-go client, whose requests carry no
// seed (GatherOptions.Seed seeds them). Both runs must sample the same
// tokens, write the same history.jsonl (times aside) and save byte-equal
// checkpoints.
//
// newBackend should let the 16 rollouts generate at once, so that second
// turns (about 60 tokens) are prefilled in chunks beside other sequences:
// the batch a request lands in must not change its tokens or logprobs.
func RunReproducibilityTest(t *testing.T, newBackend NewBackend) {
	base := TinyModel(t)
	first := reproRun(t, newBackend, base)
	second := reproRun(t, newBackend, base)
	if !reflect.DeepEqual(first.samples, second.samples) {
		for i := range min(len(first.samples), len(second.samples)) {
			if !reflect.DeepEqual(first.samples[i], second.samples[i]) {
				t.Fatalf("sample %d differs between two runs with the same seed:\n%v\n%v", i, first.samples[i], second.samples[i])
			}
		}
		t.Fatalf("the runs sampled %d and %d turns", len(first.samples), len(second.samples))
	}
	if !reflect.DeepEqual(first.history, second.history) {
		t.Fatalf("history.jsonl differs (times aside):\n%v\n%v", first.history, second.history)
	}
	if len(first.checkpoints) != reproSteps+1 {
		t.Fatalf("%d checkpoint files compared; want one adapter per step 0..%d", len(first.checkpoints), reproSteps)
	}
	if a, b := slices.Sorted(maps.Keys(first.files)), slices.Sorted(maps.Keys(second.files)); !slices.Equal(a, b) {
		t.Fatalf("checkpoint files differ: %v vs %v", a, b)
	}
	for name, b := range first.files {
		if !bytes.Equal(b, second.files[name]) {
			t.Errorf("checkpoint file %s differs between the runs", name)
		}
	}
}

// reproResult is what one run of RunReproducibilityTest produced.
type reproResult struct {
	samples     [][]art.TokenLogprob // tokens and logprobs of every sampled turn, in gather order
	history     []map[string]any     // history.jsonl without times
	files       map[string][]byte    // checkpoint files by path under checkpoints/
	checkpoints []string             // the adapter files among them
}

func reproRun(t *testing.T, newBackend NewBackend, base string) reproResult {
	t.Helper()
	env := Env{BaseModel: base, Path: filepath.Join(t.TempDir(), ".art"), Project: "repro", Name: "agent"}
	b := newBackend(t, env)
	defer b.Close()
	ctx := context.Background()
	m := env.Model()
	if err := m.Register(ctx, b); err != nil {
		t.Fatalf("Register: %v", err)
	}
	var res reproResult
	scenarios := make([]int, reproGroups)
	for i := range scenarios {
		scenarios[i] = i
	}
	for step := range reproSteps {
		groups, err := art.GatherGroups(ctx, scenarios, reproGroupSize, func(ctx context.Context, s int) (art.Trajectory, error) {
			return reproRollout(ctx, m, s)
		}, art.GatherOptions{Concurrency: reproConcurrency, Seed: 7, Quiet: true})
		if err != nil {
			t.Fatalf("step %d: gather: %v", step, err)
		}
		for _, g := range groups {
			for _, tr := range g.Trajectories {
				for _, it := range tr.MessagesAndChoices {
					if it.Choice != nil {
						res.samples = append(res.samples, it.Choice.Logprobs)
					}
				}
			}
		}
		if _, err := m.Train(ctx, groups, art.TrainConfig{LearningRate: 1e-2}); err != nil {
			t.Fatalf("step %d: Train: %v", step, err)
		}
	}
	d, err := m.Dir()
	if err != nil {
		t.Fatal(err)
	}
	for _, row := range ReadHistory(t, d.Path()) {
		for k := range row {
			if strings.HasPrefix(k, "time/") || strings.HasPrefix(k, "throughput/") || k == "recorded_at" {
				delete(row, k)
			}
		}
		res.history = append(res.history, row)
	}
	if res.history[len(res.history)-1]["data/step_num_groups_trainable"] == 0.0 {
		t.Fatalf("the last step trained nothing: %v", res.history)
	}
	res.files = map[string][]byte{}
	root := filepath.Join(d.Path(), store.CheckpointsDir)
	err = filepath.WalkDir(root, func(path string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		res.files[rel] = data
		if strings.HasSuffix(rel, "adapter_model.safetensors") {
			res.checkpoints = append(res.checkpoints, rel)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("read checkpoints: %v", err)
	}
	return res
}

// reproRollout is a two-turn conversation about scenario s through m's
// stock client, without a seed; its reward is the share of letters in the
// answers.
func reproRollout(ctx context.Context, m *art.TrainableModel, s int) (art.Trajectory, error) {
	client, err := m.OpenAIClient()
	if err != nil {
		return art.Trajectory{}, err
	}
	var tr art.Trajectory
	tr.AddMessage(art.SystemMsg("s"), art.UserMsg(fmt.Sprint(s)))
	params := openai.ChatCompletionNewParams{Model: m.InferenceName(-1), MaxTokens: openai.Int(reproMaxTokens)}
	first, err := tr.Chat(ctx, client, params)
	if err != nil {
		return art.Trajectory{}, err
	}
	tr.AddMessage(art.UserMsg("+"))
	second, err := tr.Chat(ctx, client, params)
	if err != nil {
		return art.Trajectory{}, err
	}
	text := first.Message.Content.String() + second.Message.Content.String()
	letters := 0
	for _, r := range text {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' {
			letters++
		}
	}
	tr.Reward = float64(letters) / float64(max(len(text), 1))
	return tr, nil
}
