package demo

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/artgo/art"
	"github.com/artgo/art/engine/lora"
	"github.com/artgo/art/engine/model"
	"github.com/artgo/art/engine/train"
	"github.com/artgo/art/games/tictactoe"
)

// TestDiagnose is the measurement behind BENCHMARKS.md's "Why the demo
// plateaued": it runs the demo with settings taken from the environment and
// then scores every EXACT_EVERY-th checkpoint exactly over the game tree,
// sampled at temperature 1 and greedily. Skipped unless EXP (the run's
// name) is set:
//
//	EXP=stop10 SEED=1 STOP_INVALID=0.1 go test ./demo -run Diagnose -v
//
// Knobs: SEED, STEPS, LR, LR_END (exponential decay to it), GROUPS, GSIZE,
// EVAL_EVERY, PENALTY, STOP_INVALID, RANK (alpha 2·rank), ACCUM (sequences
// per optimizer step), NOSCALE, NONORM, KL (KL advantage shaping against
// the base, its coefficient), ENT (Options.EntropyBonus; -1 for none), SHAPE
// (the base's model.Preset shape), OPEN (Options.openings), SOONER
// (Options.winSooner), BRANCH (Options.branch), SHARP (Options.sharp),
// TACTICS (Options.tactics), TEMP (Options.temperature), PERMOVE
// (Options.perMove), EXACT_EVERY, EXP_PATH (the store, where bases are
// reused per seed and SFT setting).
//
// With DISTILL set it measures the capacity of a LoRA on the seed's base
// (built by an earlier run in EXP_PATH) instead: it trains a fresh adapter
// of rank RANK by supervised learning on the optimal move of every board
// the agent can face (DSTEPS steps of 64 boards at learning rate LR), then
// scores it exactly, sampled and greedy; with DAGGER also set, on the
// boards the adapter reaches in its own games.
//
// With ANALYSE_STEP also set it only analyses that checkpoint (-1: the
// base) of the run EXP left in EXP_PATH: the regret against the optimal
// policy by board depth, split into invalid and legal-but-worse moves, and
// the costliest boards.
func TestDiagnose(t *testing.T) {
	tag := os.Getenv("EXP")
	if tag == "" {
		t.Skip("set EXP (a run name) and the knobs to diagnose the demo's learning")
	}
	env := func(k string, d float64) float64 {
		v := os.Getenv(k)
		if v == "" {
			return d
		}
		f, err := strconv.ParseFloat(v, 64)
		if err != nil {
			t.Fatalf("%s=%q: %v", k, v, err)
		}
		return f
	}
	opt := DefaultOptions()
	opt.Path = os.Getenv("EXP_PATH")
	if opt.Path == "" {
		opt.Path = filepath.Join(os.TempDir(), "art-demo-diagnose")
	}
	opt.ModelName = "exp-" + tag
	opt.Seed = uint64(env("SEED", 1))
	opt.Base.Seed = opt.Seed
	opt.Base.StopInvalid = env("STOP_INVALID", 0)
	opt.Base.Shape = os.Getenv("SHAPE")
	if os.Getenv("DISTILL") != "" {
		distill(t, filepath.Join(opt.Path, "demo", "base-tictactoe"), int(env("RANK", 8)), int(env("DSTEPS", 2000)), env("LR", 3e-3), opt.Seed)
		return
	}
	if s := os.Getenv("ANALYSE_STEP"); s != "" {
		step, err := strconv.Atoi(s)
		if err != nil {
			t.Fatal(err)
		}
		analyse(t, filepath.Join(opt.Path, "demo", "base-tictactoe"), filepath.Join(opt.Path, "demo", "models", opt.ModelName), step)
		return
	}
	opt.RLSteps = int(env("STEPS", float64(opt.RLSteps)))
	opt.LearningRate = env("LR", opt.LearningRate)
	opt.GroupsPerStep = int(env("GROUPS", float64(opt.GroupsPerStep)))
	opt.GroupSize = int(env("GSIZE", float64(opt.GroupSize)))
	opt.EvalEvery = int(env("EVAL_EVERY", float64(opt.EvalEvery)))
	opt.InvalidPenalty = env("PENALTY", opt.InvalidPenalty)
	opt.openings = int(env("OPEN", float64(opt.openings)))
	opt.winSooner = env("SOONER", opt.winSooner)
	opt.branch = int(env("BRANCH", 0))
	opt.sharp = env("SHARP", 0)
	opt.tactics = env("TACTICS", 0)
	opt.temperature = env("TEMP", 0)
	opt.perMove = os.Getenv("PERMOVE") != ""
	opt.EntropyBonus = env("ENT", opt.EntropyBonus)
	if r := env("RANK", 0); r > 0 {
		opt.lora = art.LoRAConfig{Rank: int(r), Alpha: 2 * r}
	}
	accum := int(env("ACCUM", 32))
	kl := env("KL", 0)
	opt.tune = func(c *art.TrainConfig) {
		c.GradAccumulationSequences = accum
		c.DisableRewardScaling = os.Getenv("NOSCALE") != ""
		c.DisableAdvantageNormalization = os.Getenv("NONORM") != ""
		c.KLPenaltyCoef = kl
	}
	if end := env("LR_END", 0); end > 0 {
		lr0, n := opt.LearningRate, float64(opt.RLSteps)
		opt.lrAt = func(step int) float64 { return lr0 * math.Pow(end/lr0, float64(step)/n) }
	}
	opt.Quiet = true
	var out strings.Builder
	opt.Out = &out
	rep, err := Run(context.Background(), opt)
	if err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	t.Logf("%s seed %d: %d SFT steps, base %.0f s, GRPO %.0f s", tag, opt.Seed, rep.SFTSteps, rep.BuildBase.Seconds(), rep.RL.Seconds())
	var curve strings.Builder
	for _, e := range rep.Evals {
		fmt.Fprintf(&curve, " %d:%.3f", e.Step, e.Reward)
	}
	t.Logf("%s seed %d held-out curve:%s", tag, opt.Seed, curve.String())
	for s := 0; s <= rep.Steps; s += int(env("EXACT_EVERY", 50)) {
		p, err := loadPolicy(rep.BaseModel, rep.ModelDir, s)
		if err != nil {
			t.Fatal(err)
		}
		r, inv, g := exactScores(t, p)
		held := ""
		for _, e := range rep.Evals {
			if e.Step == s {
				held = fmt.Sprintf(", held-out %.3f (invalid %.3f)", e.Reward, e.Invalid)
			}
		}
		t.Logf("%s seed %d step %d: exact %.3f (invalid %.3f), greedy %.3f%s", tag, opt.Seed, s, r, inv, g, held)
	}
}

// loadPolicy is the move distribution of the base model with the
// checkpoint of step (none when step < 0), remembered per board.
func loadPolicy(base, modelDir string, step int) (tictactoe.Policy, error) {
	m, err := model.Load(base)
	if err != nil {
		return nil, err
	}
	enc, err := newPromptEncoder(base)
	if err != nil {
		return nil, err
	}
	var ad model.Adapter
	if step >= 0 {
		a, err := lora.Load(filepath.Join(modelDir, "checkpoints", fmt.Sprintf("%04d", step)), m.Config)
		if err != nil {
			return nil, err
		}
		ad = a
	}
	p := enginePolicy(m, ad, enc)
	memo := map[tictactoe.Board][9]float64{}
	return func(b *tictactoe.Board) ([9]float64, error) {
		if v, ok := memo[*b]; ok {
			return v, nil
		}
		v, err := p(b)
		if err == nil {
			memo[*b] = v
		}
		return v, err
	}, nil
}

// exactScores is p's exact expected reward and invalid-move rate sampled
// at temperature 1, and its greedy policy's expected reward.
func exactScores(t *testing.T, p tictactoe.Policy) (reward, invalid, greedyReward float64) {
	t.Helper()
	reward, invalid, err := tictactoe.Expected(p)
	if err == nil {
		greedyReward, _, err = tictactoe.Expected(greedy(p))
	}
	if err != nil {
		t.Fatal(err)
	}
	return reward, invalid, greedyReward
}

// greedy plays p's most likely digit.
func greedy(p tictactoe.Policy) tictactoe.Policy {
	return func(b *tictactoe.Board) ([9]float64, error) {
		probs, err := p(b)
		best := 0
		for c := range probs {
			if probs[c] > probs[best] {
				best = c
			}
		}
		var one [9]float64
		one[best] = 1
		return one, err
	}
}

// optimal holds the values of the best play against the random opponent.
type optimal map[tictactoe.Board]float64

// terminal scores a finished board.
func terminal(b *tictactoe.Board) (float64, bool) {
	switch w := b.Winner(); {
	case w == 'X':
		return 1, true
	case w == 'O':
		return 0, true
	case b.Full():
		return 0.5, true
	}
	return 0, false
}

// q returns the optimal value of each move on b (-1 for taken cells).
func (o optimal) q(b tictactoe.Board) [9]float64 {
	var q [9]float64
	for c := range q {
		q[c] = -1
	}
	for _, c := range b.Empty() {
		nb := b
		nb[c] = 'X'
		if r, done := terminal(&nb); done {
			q[c] = r
			continue
		}
		free := nb.Empty()
		q[c] = 0
		for _, r := range free {
			ob := nb
			ob[r] = 'O'
			v, done := terminal(&ob)
			if !done {
				v = o.v(ob)
			}
			q[c] += v / float64(len(free))
		}
	}
	return q
}

// v returns the optimal value of b.
func (o optimal) v(b tictactoe.Board) float64 {
	if v, ok := o[b]; ok {
		return v
	}
	q := o.q(b)
	best := q[0]
	for _, v := range q {
		best = max(best, v)
	}
	o[b] = best
	return best
}

// analyse splits a checkpoint's regret against the optimal policy by the
// performance-difference lemma: each board's reach probability times what
// its move distribution loses there, by invalid moves (their share of the
// optimal value) and by legal but worse moves.
func analyse(t *testing.T, base, modelDir string, step int) {
	p, err := loadPolicy(base, modelDir, step)
	if err != nil {
		t.Fatal(err)
	}
	opt := optimal{}
	type cost struct {
		b    tictactoe.Board
		loss float64
	}
	var costs []cost
	reach := map[tictactoe.Board]float64{{}: 1}
	var total [2]float64
	for depth := 0; len(reach) > 0; depth++ {
		next := map[tictactoe.Board]float64{}
		var invalid, worse float64
		for b, rb := range reach {
			probs, err := p(&b)
			if err != nil {
				t.Fatal(err)
			}
			q, v := opt.q(b), opt.v(b)
			var legal, expect float64
			for _, c := range b.Empty() {
				legal += probs[c]
				expect += probs[c] * q[c]
				nb := b
				nb[c] = 'X'
				if _, done := terminal(&nb); done {
					continue
				}
				free := nb.Empty()
				for _, r := range free {
					ob := nb
					ob[r] = 'O'
					if _, done := terminal(&ob); !done {
						next[ob] += rb * probs[c] / float64(len(free))
					}
				}
			}
			invalid += rb * (1 - legal) * v
			worse += rb * (legal*v - expect)
			costs = append(costs, cost{b, rb * (v - expect)})
		}
		t.Logf("depth %d: regret %.4f from invalid moves, %.4f from legal but worse ones", depth, invalid, worse)
		total[0] += invalid
		total[1] += worse
		reach = next
	}
	best := opt.v(tictactoe.Board{})
	t.Logf("optimal %.4f − invalid %.4f − worse %.4f = %.4f", best, total[0], total[1], best-total[0]-total[1])
	sort.Slice(costs, func(i, j int) bool { return costs[i].loss > costs[j].loss })
	for _, c := range costs[:min(8, len(costs))] {
		probs, _ := p(&c.b)
		q := opt.q(c.b)
		t.Logf("costs %.4f:\n%s\npolicy  %.2f\noptimal %.2f", c.loss, c.b.Prompt(), probs, q)
	}
}

// distill trains a fresh rank-r adapter on base to play the optimal move
// (the first best cell) on every board with X to move, and logs its exact
// expected reward sampled at temperature 1 and greedily as it learns: what
// the adapter can represent, apart from what GRPO finds.
func distill(t *testing.T, base string, rank, steps int, lr float64, seed uint64) {
	m, err := model.Load(base)
	if err != nil {
		t.Fatal(err)
	}
	enc, err := newPromptEncoder(base)
	if err != nil {
		t.Fatal(err)
	}
	opt := optimal{}
	type example struct {
		ids    []int
		target int
	}
	var data []example
	var boards []tictactoe.Board
	seen := map[tictactoe.Board]bool{}
	var walk func(b tictactoe.Board)
	walk = func(b tictactoe.Board) {
		if seen[b] {
			return
		}
		seen[b] = true
		q := opt.q(b)
		best := 0
		for c := range q {
			if q[c] > q[best] {
				best = c
			}
		}
		ids, err := enc.encode(b.Prompt())
		if err != nil {
			t.Fatal(err)
		}
		data = append(data, example{ids, enc.digit[best]})
		boards = append(boards, b)
		for _, c := range b.Empty() {
			nb := b
			nb[c] = 'X'
			if _, done := terminal(&nb); done {
				continue
			}
			for _, r := range nb.Empty() {
				ob := nb
				ob[r] = 'O'
				if _, done := terminal(&ob); !done {
					walk(ob)
				}
			}
		}
	}
	walk(tictactoe.Board{})
	maxT := 0
	for _, e := range data {
		maxT = max(maxT, len(e.ids))
	}
	a, err := lora.New(m.Config, lora.Config{Rank: rank, Alpha: 2 * float64(rank)}, seed)
	if err != nil {
		t.Fatal(err)
	}
	adam := train.NewAdamW(len(a.Params()))
	acts := m.NewActs(maxT)
	rng := rand.New(rand.NewPCG(seed, 77))
	const batch = 64
	score := func(step int) {
		r, inv, g := exactScores(t, enginePolicy(m, a, enc))
		t.Logf("distill rank %d step %d: exact %.3f (invalid %.3f), greedy %.3f", rank, step, r, inv, g)
	}
	// With DAGGER set the boards are those the adapter itself reaches,
	// playing at temperature 1 against the random opponent (DAgger), so
	// the data weighs boards as the exact score does; else uniformly.
	index := map[tictactoe.Board]int{}
	for i, b := range boards {
		index[b] = i
	}
	dagger := os.Getenv("DAGGER") != ""
	play := func() []int {
		p := enginePolicy(m, a, enc)
		var out []int
		for len(out) < batch {
			var b tictactoe.Board
			for {
				if _, done := terminal(&b); done {
					break
				}
				out = append(out, index[b])
				probs, err := p(&b)
				if err != nil {
					t.Fatal(err)
				}
				u, c := rng.Float64(), -1
				for i, pc := range probs {
					if u -= pc; u < 0 {
						c = i
						break
					}
				}
				if c < 0 || b[c] != 0 {
					break // an invalid move ends the game
				}
				b[c] = 'X'
				if _, done := terminal(&b); done {
					break
				}
				free := b.Empty()
				b[free[rng.IntN(len(free))]] = 'O'
			}
		}
		return out[:batch]
	}
	t.Logf("distill: %d boards, rank %d, lr %g, on-policy boards %v", len(data), rank, lr, dagger)
	for step := 1; step <= steps; step++ {
		var picks []int
		if dagger {
			picks = play()
		} else {
			for range batch {
				picks = append(picks, rng.IntN(len(data)))
			}
		}
		a.ZeroGrad()
		var nll float64
		for _, i := range picks {
			e := data[i]
			if _, err := m.TrainForward(acts, e.ids, a); err != nil {
				t.Fatal(err)
			}
			_, dh := m.LMHeadBackward(acts, []int{len(e.ids) - 1}, []int{e.target}, func(_ int, lp, _ float64) (float64, float64) {
				nll -= lp / batch
				return -1.0 / batch, 0
			})
			m.TrainBackward(acts, dh, a)
		}
		adam.Step(a.Params(), a.Grads(), lr)
		if step%(steps/5) == 0 {
			t.Logf("distill step %d: loss %.4f", step, nll)
			score(step)
		}
	}
}
