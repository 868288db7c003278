package train

import (
	"context"
	"encoding/json"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"

	"github.com/artgo/art/engine/chat"
	"github.com/artgo/art/engine/generate"
	"github.com/artgo/art/engine/kernels"
	"github.com/artgo/art/engine/lora"
	"github.com/artgo/art/engine/model"
)

// Ensure true on-policy training: the trainer's logprobs of sampled tokens
// equal the sampler's bit for bit on the same weights (issue #22), with the
// sampler at its most different from the trainer's whole-sequence pass: a
// prompt longer than the batcher's per-pass budget prefilled in chunks
// beside other sequences, n > 1 samples sharing a prefill, decoding
// batches of varying size, a non-zero LoRA adapter, f32, bf16 and
// quantized (Q8, Q4) base weights, an FFN wide enough that its products sum in several K blocks, and more
// than one attention key block. Trainer.Step then reports
// loss/rollout_logprob_abs_diff = 0 for the turns its starting policy
// sampled.
//
// A mixture-of-experts model (qwen3_moe) too: the trainer routes every
// token to the experts the sampler did, with no routing replay.
func TestOnPolicy_SamplerEqualsTrainer(t *testing.T) {
	// Every unit the weight products can run on (kernels.Unit): sampler
	// and trainer share the one in use.
	for _, u := range kernels.Units() {
		withUnit(t, u, func() {
			for _, dt := range []kernels.DType{kernels.F32, kernels.BF16, kernels.Q8, kernels.Q4} {
				t.Run(u.String()+"-unit/"+dt.String(), func(t *testing.T) { testOnPolicy(t, "qwen2", dt) })
			}
			for _, dt := range []kernels.DType{kernels.BF16, kernels.Q8} {
				t.Run(u.String()+"-unit/qwen3_moe-"+dt.String(), func(t *testing.T) { testOnPolicy(t, "qwen3_moe", dt) })
			}
		})
	}
}

// withUnit runs f with the weight products on u, then restores the unit.
func withUnit(t *testing.T, u kernels.Unit, f func()) {
	t.Helper()
	prev, _ := kernels.ActiveUnit()
	if err := kernels.SetUnit(u); err != nil {
		t.Fatal(err)
	}
	defer kernels.SetUnit(prev)
	f()
}

func testOnPolicy(t *testing.T, arch string, dt kernels.DType) {
	z := byteTokenizer(t)
	cfg, err := model.Preset(arch, "tiny", z.Tok.VocabSize())
	if err != nil {
		t.Fatal(err)
	}
	// down_proj sums over K = 600: three K blocks (with experts, each
	// expert's down_proj).
	cfg.IntermediateSize, cfg.MoEIntermediateSize = 600, 600*min(cfg.NumExperts, 1)
	init := model.InitOptions{Seed: 3, DType: dt, Std: 0.2}
	quant := map[kernels.DType]model.Quantization{kernels.Q8: model.Q8, kernels.Q4: model.Q4}[dt]
	if quant != model.NoQuantization {
		// Whole blocks of 32, in three K blocks of 208 that start
		// inside blocks of 32.
		cfg.IntermediateSize, cfg.MoEIntermediateSize, init.DType = 608, 608*min(cfg.NumExperts, 1), kernels.F32
	}
	m, err := model.New(cfg, model.RandomWeights(cfg, init))
	if err != nil {
		t.Fatal(err)
	}
	down := func() *kernels.Mat {
		if l := m.W.Layers[0]; l.Down != nil {
			return l.Down
		}
		return m.W.Layers[0].Experts[0].Down
	}
	if quant != model.NoQuantization {
		if err := m.W.Quantize(quant); err != nil {
			t.Fatal(err)
		}
		if down().DType != dt || m.W.Embed.DType != dt {
			t.Fatalf("Quantize left down_proj %v, embedding %v", down().DType, m.W.Embed.DType)
		}
	}
	a, err := lora.New(cfg, lora.Config{Rank: 8, Alpha: 16}, 2)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(7, 8))
	for i, p := range a.Params() { // B is zero after New: make the delta count
		a.Params()[i] = p + float32(rng.NormFloat64()*0.05)
	}

	type call struct {
		msgs []json.RawMessage
		ids  []int
		n    int
		res  []generate.Result
	}
	long := strings.Repeat("a long prompt, prefilled in chunks. ", 4) // > 64 keys, > MaxTokens
	var calls []*call
	for i, user := range []string{long, "hi", "colour?", long + "again", "x"} {
		msgs := []json.RawMessage{msg("system", "Answer briefly."), msg("user", user)}
		text, err := z.Template.Render(msgs, nil, chat.RenderOptions{AddGenerationPrompt: true})
		if err != nil {
			t.Fatal(err)
		}
		calls = append(calls, &call{msgs: msgs, ids: z.Tok.Encode(text), n: 1 + i%3})
	}
	imEnd, _ := z.Tok.ID("<|im_end|>")
	b := generate.NewBatcher(m, generate.BatcherOptions{MaxTokens: 24, MaxSequences: 6})
	defer b.Close()
	var wg sync.WaitGroup
	errs := make([]error, len(calls))
	for i, c := range calls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.res, errs[i] = b.Generate(context.Background(), generate.Request{
				Prompt: c.ids, MaxTokens: 20, Sampling: generate.SamplingParams{Temperature: 1},
				Seed: uint64(10 * i), StopTokenIDs: []int{imEnd}, Adapter: a,
			}, c.n, nil)
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
	}

	// The trainer's pass over prompt + sampled ids, token by token.
	acts := m.NewActs(512)
	var groups []Group
	tokens := 0
	for ci, c := range calls {
		var g Group
		for si, res := range c.res {
			seq := append(append([]int(nil), c.ids...), res.IDs()...)
			if _, err := m.TrainForward(acts, seq, a); err != nil {
				t.Fatal(err)
			}
			rows, targets := make([]int, len(res.Tokens)), res.IDs()
			for j := range rows {
				rows[j] = len(c.ids) - 1 + j
			}
			st, _ := m.LMHeadBackward(acts, rows, targets, nil)
			for j, tok := range res.Tokens {
				if st.Logprobs[j] != tok.Logprob {
					t.Fatalf("call %d sample %d token %d (position %d): trainer logprob %v, sampler %v (diff %g)",
						ci, si, j, rows[j]+1, st.Logprobs[j], tok.Logprob, st.Logprobs[j]-tok.Logprob)
				}
				tokens++
			}
			g.Trajectories = append(g.Trajectories, Trajectory{Reward: float64(si), Histories: []History{sampledHistory(c.msgs, res, "p@0")}})
		}
		groups = append(groups, g)
	}
	t.Logf("%d sampled tokens, all equal", tokens)

	tr := &Trainer{Model: m, Adapter: a, Opt: NewAdamW(len(a.Params())), Tokenizer: z}
	tc := DefaultConfig()
	tc.Policy = "p@0"
	for _, ga := range []int{1, 64} {
		tc.GradAccumulationSequences = ga
		snap := tr.Snapshot()
		res, err := tr.Step(context.Background(), groups, tc, 1, nil, nil)
		tr.Restore(snap)
		if err != nil {
			t.Fatal(err)
		}
		d, ok := res.Metrics["loss/rollout_logprob_abs_diff"]
		if !ok || d != 0 {
			t.Fatalf("grad accumulation %d: loss/rollout_logprob_abs_diff = %v (logged %v), want exactly 0", ga, d, ok)
		}
	}
	// Turns another policy sampled are not compared.
	tc.Policy = "p@1"
	res, err := tr.Step(context.Background(), groups, tc, 1, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if d, ok := res.Metrics["loss/rollout_logprob_abs_diff"]; ok {
		t.Fatalf("loss/rollout_logprob_abs_diff = %v for turns sampled by another policy; want it not logged", d)
	}
}

// sampledHistory is msgs followed by res as an assistant turn that policy
// sampled.
func sampledHistory(msgs []json.RawMessage, res generate.Result, policy string) History {
	var turns []Turn
	for _, mm := range msgs {
		turns = append(turns, Turn{Message: mm})
	}
	lps := make([]float64, len(res.Tokens))
	for i, tok := range res.Tokens {
		lps[i] = tok.Logprob
	}
	s := &Sampled{TokenIDs: res.IDs(), Logprobs: lps, Policy: policy}
	turns = append(turns, Turn{Message: msg("assistant", "answer"), Sampled: s})
	return History{Turns: turns}
}
