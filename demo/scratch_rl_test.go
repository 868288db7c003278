package demo

import (
	"context"
	"encoding/json"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/artgo/art/demo/tictactoe"
	"github.com/artgo/art/engine/chat"
	"github.com/artgo/art/engine/generate"
	"github.com/artgo/art/engine/lora"
	"github.com/artgo/art/engine/model"
	"github.com/artgo/art/engine/train"
)

func TestScratchRL(t *testing.T) {
	if os.Getenv("SCRATCHRL") == "" {
		t.Skip()
	}
	seed := uint64(envF("SEED", 1))
	dir := os.Getenv("BASE")
	if _, err := os.Stat(filepath.Join(dir, "model.safetensors")); err != nil {
		if err := BuildBase(context.Background(), dir, BaseOptions{Seed: seed, StopInvalid: envF("STOPINV", 0.4)}); err != nil {
			t.Fatal(err)
		}
	}
	m, err := model.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	enc, err := newPromptEncoder(dir)
	if err != nil {
		t.Fatal(err)
	}
	r0, i0 := tictactoe.Expected(enginePolicy(m, nil, enc))
	t.Logf("base exact reward %.3f invalid %.3f", r0, i0)
	diag(t, enginePolicy(m, nil, enc))
	ad, err := lora.New(m.Config, lora.Config{Rank: int(envF("RANK", 8)), Alpha: envF("ALPHA", 16)}, seed)
	if err != nil {
		t.Fatal(err)
	}
	tr := &train.Trainer{Model: m, Adapter: ad, Opt: train.NewAdamW(len(ad.Params())),
		Tokenizer: &train.Tokenizer{Tok: enc.tok, Template: enc.tmpl, Render: chat.RenderOptions{EOSToken: "<|im_end|>"}}}
	cfg := train.DefaultConfig()
	cfg.LearningRate = envF("RLLR", 1e-3)
	cfg.GradAccumulationSequences = int(envF("ACC", 32))
	if v := os.Getenv("LOSS"); v != "" {
		cfg.Loss = v
	}
	G, N := int(envF("NGROUPS", 8)), int(envF("GSIZE", 8))
	steps := int(envF("RLSTEPS", 300))
	start, cpu0 := time.Now(), cpuTime()
	for step := 1; step <= steps; step++ {
		groups := make([]train.Group, G)
		var mean float64
		for g := range G {
			for i := range N {
				tj := playEngine(m, ad, enc, uint64(1000+step*G+g), uint64(step*1_000_000+g*1000+i)*16)
				mean += tj.Reward
				if tj.Reward == 0 && tj.Name == "invalid" {
					tj.Reward = -envF("INVPEN", 0)
				}
				groups[g].Trajectories = append(groups[g].Trajectories, tj)
			}
		}
		res, err := tr.Step(context.Background(), groups, cfg, step, nil)
		if err != nil {
			t.Fatal(err)
		}
		if step%int(envF("RLEVERY", 25)) == 0 || step == steps {
			r, inv := tictactoe.Expected(enginePolicy(m, ad, enc))
			t.Logf("rl %d train %.3f exact reward %.3f invalid %.3f ent %.3f gsteps %v [%.0fs wall %.0fs cpu]", step, mean/float64(G*N), r, inv,
				res.Metrics["loss/entropy"], res.Metrics["data/step_num_gradient_steps"], time.Since(start).Seconds(), (cpuTime() - cpu0).Seconds())
		}
	}
	diag(t, enginePolicy(m, ad, enc))
}

func playEngine(m *model.Model, ad *lora.Adapter, enc *promptEncoder, scenario, sampleSeed uint64) train.Trajectory {
	var tr train.Trajectory
	var b tictactoe.Board
	opp := rand.New(rand.NewPCG(scenario, 7))
	for {
		prompt := b.Prompt()
		ids, _ := enc.encode(prompt)
		res, err := generate.Generate(context.Background(), m, generate.Request{Prompt: ids, MaxTokens: 3,
			Sampling: generate.SamplingParams{Temperature: 1}, Seed: sampleSeed, StopTokenIDs: []int{enc.end}, Adapter: ad})
		if err != nil {
			panic(err)
		}
		sampleSeed++
		u, _ := json.Marshal(map[string]string{"role": "user", "content": prompt})
		s, _ := enc.tok.Decode(res.IDs())
		a, _ := json.Marshal(map[string]string{"role": "assistant", "content": s})
		smp := &train.Sampled{}
		for _, tk := range res.Tokens {
			smp.TokenIDs = append(smp.TokenIDs, tk.ID)
			smp.Logprobs = append(smp.Logprobs, tk.Logprob)
		}
		tr.Histories = append(tr.Histories, train.History{Turns: []train.Turn{{Message: u}, {Message: a, Sampled: smp}}})
		ids = res.IDs()
		cell := -1
		if len(ids) == 2 && ids[1] == enc.end {
			for i := range 9 {
				if ids[0] == enc.digit[i] && b[i] == 0 {
					cell = i
				}
			}
		}
		if cell < 0 {
			tr.Name = "invalid"
			return tr
		}
		b[cell] = 'X'
		if b.Winner() == 'X' {
			tr.Reward = 1
			return tr
		}
		if b.Full() {
			tr.Reward = 0.5
			return tr
		}
		e := b.Empty()
		b[e[opp.IntN(len(e))]] = 'O'
		if b.Winner() == 'O' {
			return tr
		}
		if b.Full() {
			tr.Reward = 0.5
			return tr
		}
	}
}

// diag prints, per move number, the reach probability and the invalid mass
// (on taken cells / not a digit) the policy puts there.
func diag(t *testing.T, p tictactoe.Policy) {
	type acc struct{ reach, taken, nondigit float64 }
	var by [5]acc
	var walk func(b tictactoe.Board, reach float64, k int)
	walk = func(b tictactoe.Board, reach float64, k int) {
		pr := p(&b)
		sum := 0.0
		for c := range 9 {
			sum += pr[c]
			if b[c] != 0 {
				by[k].taken += reach * pr[c]
			}
		}
		by[k].nondigit += reach * (1 - sum)
		by[k].reach += reach
		for c := range 9 {
			if b[c] != 0 || pr[c] < 1e-4 {
				continue
			}
			nb := b
			nb[c] = 'X'
			if nb.Winner() != 0 || nb.Full() {
				continue
			}
			free := nb.Empty()
			for _, o := range free {
				ob := nb
				ob[o] = 'O'
				if ob.Winner() != 0 || ob.Full() {
					continue
				}
				walk(ob, reach*pr[c]/float64(len(free)), k+1)
			}
		}
	}
	walk(tictactoe.Board{}, 1, 0)
	for k, a := range by {
		t.Logf("move %d: reach %.3f invalid-taken %.3f (%.3f per visit) non-digit %.4f", k+1, a.reach, a.taken, a.taken/a.reach, a.nondigit)
	}
}
