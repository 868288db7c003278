package demo

import (
	"context"
	"encoding/json"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/artgo/art/demo/tictactoe"
	"github.com/artgo/art/engine/chat"
	"github.com/artgo/art/engine/generate"
	"github.com/artgo/art/engine/initmodel"
	"github.com/artgo/art/engine/kernels"
	"github.com/artgo/art/engine/lora"
	"github.com/artgo/art/engine/model"
	"github.com/artgo/art/engine/tokenizer"
	"github.com/artgo/art/engine/train"
)

const scratchTemplate = `{%- for message in messages %}{{- '<|im_start|>' + message.role + '\n' + message.content + '<|im_end|>' + '\n' }}{%- endfor %}{%- if add_generation_prompt %}{{- '<|im_start|>assistant\n' }}{%- endif %}`

func envF(k string, d float64) float64 {
	if v := os.Getenv(k); v != "" {
		f, _ := strconv.ParseFloat(v, 64)
		return f
	}
	return d
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

type xtask struct {
	m       *model.Model
	tok     *tokenizer.Tokenizer
	tmpl    *chat.Template
	format  string
	sys     string
	digit   [9]int
	imEnd   int
	cache   map[tictactoe.Board][]int
	adapter *lora.Adapter
}

func (x *xtask) user(b *tictactoe.Board) string {
	switch x.format {
	case "digits": // empty cells show their number
		var sb strings.Builder
		for i, c := range b {
			if c == 0 {
				c = byte('1' + i)
			}
			sb.WriteByte(c)
			if i%3 == 2 && i < 8 {
				sb.WriteByte('\n')
			}
		}
		return sb.String()
	case "mask": // board then the 9-slot mask
		var sb strings.Builder
		sb.WriteString(b.String())
		sb.WriteByte('\n')
		for i, c := range b {
			if c == 0 {
				sb.WriteByte(byte('1' + i))
			} else {
				sb.WriteByte('.')
			}
		}
		return sb.String()
	case "board":
		return b.String()
	}
	panic(x.format)
}

func (x *xtask) prompt(b *tictactoe.Board) []int {
	if ids, ok := x.cache[*b]; ok {
		return ids
	}
	var msgs []json.RawMessage
	if x.sys != "" {
		m, _ := json.Marshal(map[string]string{"role": "system", "content": x.sys})
		msgs = append(msgs, m)
	}
	m, _ := json.Marshal(map[string]string{"role": "user", "content": x.user(b)})
	msgs = append(msgs, m)
	text, err := x.tmpl.Render(msgs, nil, chat.RenderOptions{AddGenerationPrompt: true})
	if err != nil {
		panic(err)
	}
	ids := x.tok.Encode(text)
	x.cache[*b] = ids
	return ids
}

// dist returns p(digit) for the 9 cells at the answer position.
func (x *xtask) dist(b *tictactoe.Board, ws *model.Workspace, logits []float32) [9]float64 {
	ids := x.prompt(b)
	cache := x.m.NewKVCache(len(ids))
	seg := model.Segment{Cache: cache, N: len(ids)}
	if x.adapter != nil {
		seg.Adapter = x.adapter
	}
	h, err := x.m.Forward(ws, ids, []model.Segment{seg})
	if err != nil {
		panic(err)
	}
	C := x.m.Config.HiddenSize
	x.m.Logits(logits, h[(len(ids)-1)*C:len(ids)*C], 1)
	mx := math.Inf(-1)
	for _, v := range logits {
		mx = math.Max(mx, float64(v))
	}
	var s float64
	for _, v := range logits {
		s += math.Exp(float64(v) - mx)
	}
	var p [9]float64
	for i := range 9 {
		p[i] = math.Exp(float64(logits[x.digit[i]])-mx) / s
	}
	return p
}

// exact expected reward and invalid probability vs the random opponent.
func (x *xtask) exact() (reward, invalid float64) {
	ws := &model.Workspace{}
	logits := make([]float32, x.m.Config.VocabSize)
	type rv struct{ r, inv float64 }
	memo := map[tictactoe.Board]rv{}
	var v func(b tictactoe.Board) rv
	v = func(b tictactoe.Board) rv {
		if r, ok := memo[b]; ok {
			return r
		}
		p := x.dist(&b, ws, logits)
		var out rv
		valid := 0.0
		for c := range 9 {
			if b[c] != 0 {
				continue
			}
			valid += p[c]
			nb := b
			nb[c] = 'X'
			if nb.Winner() == 'X' {
				out.r += p[c]
				continue
			}
			if nb.Full() {
				out.r += p[c] * 0.5
				continue
			}
			e := nb.Empty()
			for _, o := range e {
				ob := nb
				ob[o] = 'O'
				w := p[c] / float64(len(e))
				if ob.Winner() == 'O' {
					continue
				}
				if ob.Full() {
					out.r += w * 0.5
					continue
				}
				s := v(ob)
				out.r += w * s.r
				out.inv += w * s.inv
			}
		}
		out.inv += 1 - valid
		memo[b] = out
		return out
	}
	r := v(tictactoe.Board{})
	return r.r, r.inv
}

func TestScratchSFT(t *testing.T) {
	if os.Getenv("SCRATCH") == "" {
		t.Skip()
	}
	dir := filepath.Join(t.TempDir(), "m")
	theta := envF("THETA", 1e4)
	_, err := initmodel.Write(dir, initmodel.Options{Arch: "qwen2", Shape: "tiny", Tokenizer: initmodel.ByteTokenizer,
		DType: kernels.F32, Seed: uint64(envF("SEED", 1)), RopeTheta: theta, ChatTemplate: scratchTemplate, Std: envF("STD", 0.02)})
	if err != nil {
		t.Fatal(err)
	}
	m, err := model.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	tok, _ := tokenizer.LoadDir(dir)
	tmpl, _ := chat.NewTemplate(scratchTemplate)
	x := &xtask{m: m, tok: tok, tmpl: tmpl, format: os.Getenv("FORMAT"), sys: os.Getenv("SYS"), cache: map[tictactoe.Board][]int{}}
	if x.format == "" {
		x.format = "digits"
	}
	for i := range 9 {
		x.digit[i] = tok.Encode(string(rune('1' + i)))[0]
	}
	x.imEnd, _ = tok.ID("<|im_end|>")
	var b0 tictactoe.Board
	b0[0], b0[4] = 'X', 'O'
	t.Logf("prompt %q -> %d tokens", x.user(&b0), len(x.prompt(&b0)))

	steps := int(envF("STEPS", 300))
	B := int(envF("BATCH", 32))
	lr := envF("LR", 3e-3)
	soft := envF("SOFT", 1) != 0
	rng := rand.New(rand.NewPCG(1, 2))
	// positions X faces in random-vs-random games
	var pool []tictactoe.Board
	for len(pool) < 200000 {
		var b tictactoe.Board
		for {
			pool = append(pool, b)
			e := b.Empty()
			b[e[rng.IntN(len(e))]] = 'X'
			if b.Winner() != 0 || b.Full() {
				break
			}
			e = b.Empty()
			b[e[rng.IntN(len(e))]] = 'O'
			if b.Winner() != 0 || b.Full() {
				break
			}
		}
	}
	acts := m.NewActs(128)
	grads := m.NewBaseGrads()
	var opts []*train.AdamW
	for _, g := range grads.Slices() {
		o := train.NewAdamW(len(g))
		o.WeightDecay = 0
		opts = append(opts, o)
	}
	start, cpu0 := time.Now(), cpuTime()
	r, inv := x.exact()
	t.Logf("step 0 exact reward %.3f invalid %.3f (eval %.1fs)", r, inv, time.Since(start).Seconds())
	start, cpu0 = time.Now(), cpuTime()
	var evalTime time.Duration
	avg := 0.0
	for step := 1; step <= steps; step++ {
		for _, g := range grads.Slices() {
			clear(g)
		}
		acts.Base = grads
		var loss float64
		for i := 0; i < B; i++ {
			b := pool[rng.IntN(len(pool))]
			ids := x.prompt(&b)
			e := b.Empty()
			pick := e[rng.IntN(len(e))]
			seq := append(append([]int(nil), ids...), x.digit[pick], x.imEnd)
			if _, err := m.TrainForward(acts, seq, nil); err != nil {
				t.Fatal(err)
			}
			var rows, tg []int
			var w []float64
			r := len(ids) - 1
			if soft {
				eps := envF("EPS", 0)
				for c := range 9 {
					q := eps / 9
					if b[c] == 0 {
						q += (1 - eps) / float64(len(e))
					}
					rows, tg, w = append(rows, r), append(tg, x.digit[c]), append(w, q)
				}
			} else {
				rows, tg, w = append(rows, r), append(tg, x.digit[pick]), append(w, 1)
			}
			rows, tg, w = append(rows, r+1), append(tg, x.imEnd), append(w, 1)
			_, dh := m.LMHeadBackward(acts, rows, tg, func(i int, lp, _ float64) float64 {
				if i < len(rows)-1 {
					loss -= w[i] * lp
				}
				return -w[i] / float64(B)
			})
			m.TrainBackward(acts, dh, nil)
		}
		var ss float64
		for _, g := range grads.Slices() {
			for _, v := range g {
				ss += float64(v) * float64(v)
			}
		}
		norm := math.Sqrt(ss)
		if norm > 1 {
			s := float32(1 / norm)
			for _, g := range grads.Slices() {
				for i := range g {
					g[i] *= s
				}
			}
		}
		params, _ := m.BaseParams()
		for i, g := range grads.Slices() {
			opts[i].Step(params[i], g, lr)
		}
		m.RefreshBase()
		acts.Base = nil
		loss /= float64(B)
		if step == 1 {
			avg = loss
		}
		avg = 0.9*avg + 0.1*loss
		if step%int(envF("EVERY", 25)) == 0 || step == steps {
			e0 := time.Now()
			r, inv := x.exact()
			evalTime += time.Since(e0)
			var ill float64
			ws := &model.Workspace{}
			lg := make([]float32, m.Config.VocabSize)
			for k := 0; k < 256; k++ {
				b := pool[len(pool)-1-k]
				p := x.dist(&b, ws, lg)
				v := 0.0
				for c := range 9 {
					if b[c] == 0 {
						v += p[c]
					}
				}
				ill += (1 - v) / 256
			}
			t.Logf("illegal mass per position %.3f", ill)
			t.Logf("step %d loss %.3f avg %.3f norm %.2f exact reward %.3f invalid %.3f  [%.1fs wall, %.1fs cpu, eval %.1fs]", step, loss, avg, norm, r, inv,
				time.Since(start).Seconds(), (cpuTime() - cpu0).Seconds(), evalTime.Seconds())
		}
	}
	if envF("RL", 0) == 0 {
		return
	}
	x.rl(t)
}

func (x *xtask) history(b *tictactoe.Board, res generate.Result) train.History {
	var h train.History
	if x.sys != "" {
		m, _ := json.Marshal(map[string]string{"role": "system", "content": x.sys})
		h.Turns = append(h.Turns, train.Turn{Message: m})
	}
	m, _ := json.Marshal(map[string]string{"role": "user", "content": x.user(b)})
	h.Turns = append(h.Turns, train.Turn{Message: m})
	s, _ := x.tok.Decode(res.IDs())
	a, _ := json.Marshal(map[string]string{"role": "assistant", "content": s})
	smp := &train.Sampled{}
	for _, tk := range res.Tokens {
		smp.TokenIDs = append(smp.TokenIDs, tk.ID)
		smp.Logprobs = append(smp.Logprobs, tk.Logprob)
	}
	h.Turns = append(h.Turns, train.Turn{Message: a, Sampled: smp})
	return h
}

// game plays one game with the adapter, opponent seeded by seed.
func (x *xtask) game(ad *lora.Adapter, seed, sampleSeed uint64) train.Trajectory {
	var tr train.Trajectory
	var b tictactoe.Board
	opp := rand.New(rand.NewPCG(seed, 7))
	for {
		res, err := generate.Generate(context.Background(), x.m, generate.Request{Prompt: x.prompt(&b), MaxTokens: 3,
			Sampling: generate.SamplingParams{Temperature: 1}, Seed: sampleSeed, StopTokenIDs: []int{x.imEnd}, Adapter: ad})
		if err != nil {
			panic(err)
		}
		sampleSeed += 1000003
		tr.Histories = append(tr.Histories, x.history(&b, res))
		ids := res.IDs()
		cell := -1
		if len(ids) == 2 && ids[1] == x.imEnd {
			for i := range 9 {
				if ids[0] == x.digit[i] && b[i] == 0 {
					cell = i
				}
			}
		}
		if cell < 0 {
			tr.Reward = 0
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
			tr.Reward = 0
			return tr
		}
		if b.Full() {
			tr.Reward = 0.5
			return tr
		}
	}
}

func (x *xtask) rl(t *testing.T) {
	ad, err := lora.New(x.m.Config, lora.Config{Rank: int(envF("RANK", 8)), Alpha: envF("ALPHA", 16)}, 1)
	if err != nil {
		t.Fatal(err)
	}
	tr := &train.Trainer{Model: x.m, Adapter: ad, Opt: train.NewAdamW(len(ad.Params())),
		Tokenizer: &train.Tokenizer{Tok: x.tok, Template: x.tmpl, Render: chat.RenderOptions{EOSToken: "<|im_end|>"}}}
	cfg := train.DefaultConfig()
	cfg.LearningRate = envF("RLLR", 1e-3)
	cfg.GradAccumulationSequences = int(envF("ACC", 1<<20))
	if v := os.Getenv("LOSS"); v != "" {
		cfg.Loss = v
	}
	cfg.MaxGradNorm = envF("CLIP", 0.1)
	G, N := int(envF("GROUPS", 8)), int(envF("GSIZE", 8))
	steps := int(envF("RLSTEPS", 100))
	start, cpu0 := time.Now(), cpuTime()
	var evalTime time.Duration
	x.adapter = ad
	for step := 1; step <= steps; step++ {
		groups := make([]train.Group, G)
		var mean float64
		for g := range G {
			for i := range N {
				tj := x.game(ad, uint64(1000+step*G+g), uint64(step*1_000_000+g*1000+i))
				mean += tj.Reward
				groups[g].Trajectories = append(groups[g].Trajectories, tj)
			}
		}
		res, err := tr.Step(context.Background(), groups, cfg, step, nil)
		if err != nil {
			t.Fatal(err)
		}
		if step%int(envF("RLEVERY", 10)) == 0 || step == steps {
			e0 := time.Now()
			r, inv := x.exact()
			evalTime += time.Since(e0)
			t.Logf("rl %d train %.3f exact reward %.3f invalid %.3f loss %.4f ent %.3f gsteps %v [%.1fs wall %.1fs cpu, eval %.1fs]", step, mean/float64(G*N), r, inv,
				res.Metrics["loss/train"], res.Metrics["loss/entropy"], res.Metrics["data/step_num_gradient_steps"], time.Since(start).Seconds(), (cpuTime() - cpu0).Seconds(), evalTime.Seconds())
		}
	}
}
