package train

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/artgo/art/engine/chat"
	"github.com/artgo/art/engine/generate"
	"github.com/artgo/art/engine/kernels"
	"github.com/artgo/art/engine/lora"
	"github.com/artgo/art/engine/model"
	"github.com/artgo/art/engine/tokenizer"
)

// colorTask is a toy preference task: asked for a color, a model SFT-ed to
// answer one of four words uniformly must learn by GRPO to answer "blue".
type colorTask struct {
	t      *testing.T
	z      *Tokenizer
	tr     *Trainer
	prompt []json.RawMessage
	ids    []int
	imEnd  int
}

var colors = []string{"red", "green", "blue", "gold"}

// byteTokenizer is a byte-level vocabulary with ChatML specials: tiny
// models learn on it quickly and the test needs no fetched asset.
func byteTokenizer(t testing.TB) *Tokenizer {
	t.Helper()
	data, err := tokenizer.ByteVocabJSON([]string{"<|endoftext|>", "<|im_start|>", "<|im_end|>"})
	if err != nil {
		t.Fatal(err)
	}
	tok, err := tokenizer.Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	tmpl, err := chat.NewTemplate(chat.Qwen25Template)
	if err != nil {
		t.Fatal(err)
	}
	return &Tokenizer{Tok: tok, Template: tmpl}
}

func newColorTask(t *testing.T) *colorTask {
	z := byteTokenizer(t)
	cfg, err := model.Preset("qwen2", "tiny", z.Tok.VocabSize())
	if err != nil {
		t.Fatal(err)
	}
	m, err := model.New(cfg, model.RandomWeights(cfg, model.InitOptions{Seed: 1, DType: kernels.F32, Std: 0.2}))
	if err != nil {
		t.Fatal(err)
	}
	a, err := lora.New(cfg, lora.Config{Rank: 8, Alpha: 16}, 1)
	if err != nil {
		t.Fatal(err)
	}
	c := &colorTask{t: t, z: z, tr: &Trainer{Model: m, Adapter: a, Opt: NewAdamW(len(a.Params())), Tokenizer: z}}
	c.prompt = []json.RawMessage{msg("system", "Answer with one color."), msg("user", "Which color?")}
	text, err := z.Template.Render(c.prompt, nil, chat.RenderOptions{AddGenerationPrompt: true})
	if err != nil {
		t.Fatal(err)
	}
	c.ids = z.Tok.Encode(text)
	c.imEnd, _ = z.Tok.ID("<|im_end|>")
	return c
}

// sample draws one answer; it returns the answer text and the sampled turn.
func (c *colorTask) sample(seed uint64) (string, *Sampled) {
	res, err := generate.Generate(context.Background(), c.tr.Model, generate.Request{
		Prompt: c.ids, MaxTokens: 8, Sampling: generate.SamplingParams{Temperature: 1}, Seed: seed,
		StopTokenIDs: []int{c.imEnd}, Adapter: c.tr.Adapter,
	})
	if err != nil {
		c.t.Fatal(err)
	}
	ids := res.IDs()
	text := ids
	if res.FinishReason == generate.FinishStop {
		text = ids[:len(ids)-1]
	}
	s, _ := c.z.Tok.Decode(text)
	lps := make([]float64, len(res.Tokens))
	for i, tok := range res.Tokens {
		lps[i] = tok.Logprob
	}
	return s, &Sampled{TokenIDs: ids, Logprobs: lps}
}

func (c *colorTask) reward(answer string) float64 {
	if answer == "blue" {
		return 1
	}
	return 0
}

func (c *colorTask) meanReward(n int, seed uint64) float64 {
	var sum float64
	for i := 0; i < n; i++ {
		a, _ := c.sample(seed + uint64(i))
		sum += c.reward(a)
	}
	return sum / float64(n)
}

func (c *colorTask) history(answer string, s *Sampled) History {
	turns := []Turn{{Message: c.prompt[0]}, {Message: c.prompt[1]}, {Message: msg("assistant", answer), Sampled: s}}
	return History{Turns: turns}
}

// Ensure SFT drives the loss down and GRPO then raises the reward of a
// learnable preference from ≤ 0.3 to ≥ 0.8 (seeded and deterministic).
func TestLearning_SFTThenGRPO(t *testing.T) {
	if testing.Short() {
		t.Skip("learning test takes a minute")
	}
	c := newColorTask(t)
	ctx := context.Background()
	var batch []History
	for _, w := range colors {
		batch = append(batch, c.history(w, nil))
	}
	var first, last float64
	for step := 0; step < 100; step++ {
		met, err := c.tr.SFTStep(ctx, batch, DefaultSFTConfig(1e-2))
		if err != nil {
			t.Fatal(err)
		}
		if step == 0 {
			first = met["loss/train"]
		}
		last = met["loss/train"]
	}
	t.Logf("SFT loss %.3f → %.3f", first, last)
	// Four equally likely answers of ~2 tokens: the optimum is about ln4/2.
	if !(last < first/3) {
		t.Fatalf("SFT loss %.3f → %.3f; want it to fall by 3×", first, last)
	}
	before := c.meanReward(64, 1000)
	t.Logf("reward after SFT %.3f", before)
	if before > 0.3 {
		t.Fatalf("reward after SFT %.3f; want ≤ 0.3 (a uniform choice of 4)", before)
	}
	cfg := DefaultConfig()
	cfg.LearningRate = 2e-3
	cfg.GradAccumulationSequences = 8
	cfg.MaxGradNorm = 1
	seed := uint64(1)
	after := before
	for step := 0; step < 40 && after < 0.8; step++ {
		var groups []Group
		for g := 0; g < 4; g++ {
			var grp Group
			for i := 0; i < 8; i++ {
				ans, s := c.sample(seed)
				seed++
				grp.Trajectories = append(grp.Trajectories, Trajectory{Reward: c.reward(ans), Histories: []History{c.history(ans, s)}})
			}
			groups = append(groups, grp)
		}
		if _, err := c.tr.Step(ctx, groups, cfg, step, nil, nil); err != nil {
			t.Fatal(err)
		}
		if step%5 == 4 {
			after = c.meanReward(64, 2000+uint64(step)*100)
			t.Logf("GRPO step %d: reward %.3f", step+1, after)
		}
	}
	if after < 0.8 {
		t.Fatalf("reward %.3f → %.3f; want ≥ 0.8", before, after)
	}
}
