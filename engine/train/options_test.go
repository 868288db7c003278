package train

import (
	"context"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/artgo/art/engine/internal/exactunit"
	"github.com/artgo/art/engine/lora"
	"github.com/artgo/art/engine/model"
)

// optionGroups samples two groups of the color task with varied rewards;
// shift is added to every recorded sampling logprob (NaN drops them).
func optionGroups(c *colorTask, shift float64) []Group {
	var groups []Group
	seed := uint64(1)
	for range 2 {
		var g Group
		for i := range 4 {
			ans, s := c.sample(seed)
			seed++
			s.Logprobs = slices.Clone(s.Logprobs)
			for j := range s.Logprobs {
				s.Logprobs[j] += shift
			}
			g.Trajectories = append(g.Trajectories, Trajectory{Reward: float64(i % 2), Histories: []History{c.history(ans, s)}})
		}
		groups = append(groups, g)
	}
	return groups
}

// stepFrom runs one step from adapter start with cfg and returns the new
// parameters and the result.
func stepFrom(t *testing.T, c *colorTask, start *lora.Adapter, ref *lora.Adapter, groups []Group, cfg Config) ([]float32, StepResult) {
	t.Helper()
	tr := &Trainer{Model: c.tr.Model, Adapter: start.Clone(), Opt: NewAdamW(len(start.Params())), Tokenizer: c.z}
	var klRef model.Adapter // nil, not a nil *lora.Adapter: the base model
	if ref != nil {
		klRef = ref
	}
	res, err := tr.Step(context.Background(), groups, cfg, 0, klRef, nil)
	if err != nil || !res.Trained {
		t.Fatalf("step: %+v, %v", res, err)
	}
	return slices.Clone(tr.Adapter.Params()), res
}

// perturbed returns a copy of a whose parameters (B included) are all
// nudged, so that it differs from the base model.
func perturbed(a *lora.Adapter, seed uint64) *lora.Adapter {
	b := a.Clone()
	rng := rand.New(rand.NewPCG(seed, 1))
	for i := range b.Params() {
		b.Params()[i] += float32(rng.NormFloat64() * 0.05)
	}
	return b
}

// Ensure PrecalculateLogprobs makes the step ignore wrong sampling
// logprobs: with one optimizer step, every recomputed ratio is exactly 1,
// as when no logprobs were recorded at all; without it the wrong ones
// change the update. With TIS the sampling logprobs still weight the loss.
func TestStep_PrecalculateLogprobs(t *testing.T) {
	c := newColorTask(t)
	start := perturbed(c.tr.Adapter, 3)
	cfg := DefaultConfig()
	cfg.LearningRate = 1e-3
	cfg.Loss = "ppo" // ratios clip at 1±0.2, so a shift of 0.7 matters
	cfg.Epsilon, cfg.EpsilonHigh = 0.2, 0.2
	cfg.GradAccumulationSequences = 1 << 20
	onPolicy, _ := stepFrom(t, c, start, nil, optionGroups(c, math.NaN()), cfg)
	wrong, _ := stepFrom(t, c, start, nil, optionGroups(c, 0.7), cfg)
	if slices.Equal(onPolicy, wrong) {
		t.Fatal("shifted sampling logprobs did not change the update; the test cannot tell")
	}
	cfg.PrecalculateLogprobs = true
	pre, _ := stepFrom(t, c, start, nil, optionGroups(c, 0.7), cfg)
	if !slices.Equal(onPolicy, pre) {
		t.Error("with precalculated logprobs the wrong sampling logprobs still changed the update")
	}
	cfg.TruncatedIS = 0.5 // min(e^(old-orig), 0.5) = min(e^-0.7·…, 0.5) < 1 scales the loss
	tis, res := stepFrom(t, c, start, nil, optionGroups(c, 0.7), cfg)
	if slices.Equal(tis, pre) || math.IsNaN(res.Metrics["loss/train"]) {
		t.Error("TIS with precalculated logprobs ignored the sampling logprobs")
	}
}

// Ensure KL shaping measures the divergence from the reference it is given:
// against the current adapter itself it is zero (the update equals the
// unshaped one), against the base model it is not; and the "sample" source
// uses the recorded logprobs, falling back to the learner's without them.
func TestStep_KLReferenceAndSource(t *testing.T) {
	c := newColorTask(t)
	start := perturbed(c.tr.Adapter, 5)
	cfg := DefaultConfig()
	cfg.LearningRate = 1e-3
	groups := optionGroups(c, math.NaN())
	plain, _ := stepFrom(t, c, start, nil, groups, cfg)
	cfg.KLPenaltyCoef = 0.5
	self, res := stepFrom(t, c, start, start.Clone(), groups, cfg)
	if !slices.Equal(plain, self) || res.Metrics["loss/kl_policy_ref"] != 0 {
		t.Errorf("KL against the adapter itself: kl %v, update changed=%v; want 0 and the unshaped update", res.Metrics["loss/kl_policy_ref"], !slices.Equal(plain, self))
	}
	base, res := stepFrom(t, c, start, nil, groups, cfg)
	if slices.Equal(plain, base) || res.Metrics["loss/kl_policy_ref"] == 0 {
		t.Error("KL against the base model changed nothing")
	}
	cfg.KLSourceSample = true
	noLogprobs, _ := stepFrom(t, c, start, nil, groups, cfg)
	if !slices.Equal(noLogprobs, base) {
		t.Error(`source "sample" without recorded logprobs differs from the learner source`)
	}
	shifted, res := stepFrom(t, c, start, nil, optionGroups(c, -0.3), cfg)
	learner, res2 := stepFrom(t, c, start, nil, optionGroups(c, -0.3), func() Config { c := cfg; c.KLSourceSample = false; return c }())
	if slices.Equal(shifted, learner) || res.Metrics["loss/kl_policy_ref"] == res2.Metrics["loss/kl_policy_ref"] {
		t.Error(`source "sample" ignored the recorded logprobs`)
	}
}

// Ensure a trainer recomputing activations takes exactly the same step.
func TestStep_RecomputeActivations(t *testing.T) {
	c := newColorTask(t)
	start := perturbed(c.tr.Adapter, 9)
	groups := optionGroups(c, math.NaN())
	cfg := DefaultConfig()
	cfg.LearningRate = 1e-3
	var params [2][]float32
	for i, recompute := range []bool{false, true} {
		tr := &Trainer{Model: c.tr.Model, Adapter: start.Clone(), Opt: NewAdamW(len(start.Params())), Tokenizer: c.z, RecomputeActivations: recompute}
		if res, err := tr.Step(context.Background(), groups, cfg, 0, nil, nil); err != nil || !res.Trained {
			t.Fatalf("step: %+v, %v", res, err)
		}
		params[i] = tr.Adapter.Params()
	}
	if !slices.Equal(params[0], params[1]) {
		t.Error("recomputing activations changed the update")
	}
}

// Ensure the entropy bonus's gradient is the derivative of the loss the
// trainer reports, on the token-level path (one LM-head pass) and the
// sequence-level one (two passes): without sampling logprobs every ratio
// is 1, so the loss -A·logπ·w/n - β·H·w/n is an ordinary function of the
// adapter.
func TestSequenceGrad_EntropyBonusMatchesFiniteDifferences(t *testing.T) {
	exactunit.Use(t) // finite differences need the fp32 products
	c := newColorTask(t)
	start := perturbed(c.tr.Adapter, 11)
	for _, level := range []string{"token", "sequence"} {
		t.Run(level, func(t *testing.T) {
			cfg := DefaultConfig()
			cfg.ImportanceSamplingLevel = level
			tr := &Trainer{Model: c.tr.Model, Adapter: start.Clone(), Opt: NewAdamW(len(start.Params())), Tokenizer: c.z}
			seqs, _, err := tr.Prepare(optionGroups(c, math.NaN()), cfg)
			if err != nil || len(seqs) == 0 {
				t.Fatalf("prepare: %d sequences, %v", len(seqs), err)
			}
			s := &seqs[0]
			tr.ensureActs(len(s.Tokens))
			grad := func(cfg Config) (float64, []float32) {
				tr.Adapter.ZeroGrad()
				loss, _, _, err := tr.sequenceGrad(s, cfg, nil)
				if err != nil {
					t.Fatal(err)
				}
				return loss, slices.Clone(tr.Adapter.Grads())
			}
			_, plain := grad(cfg)
			cfg.EntropyCoef = 0.5
			_, grads := grad(cfg)
			if slices.Equal(plain, grads) {
				t.Fatal("the entropy bonus did not change the gradient")
			}
			params := tr.Adapter.Params()
			rng := rand.New(rand.NewPCG(5, 5))
			const eps = 1e-2
			var worst, scale float64
			for range 40 {
				i := rng.IntN(len(params))
				old := params[i]
				params[i] = old + eps
				lp, _ := grad(cfg)
				params[i] = old - eps
				lm, _ := grad(cfg)
				params[i] = old
				num := (lp - lm) / (2 * eps)
				worst = math.Max(worst, math.Abs(num-float64(grads[i])))
				scale = math.Max(scale, math.Abs(num))
			}
			t.Logf("max |analytic-numeric| %.3g, largest gradient %.3g", worst, scale)
			if scale == 0 || worst > 2e-3*scale {
				t.Fatalf("gradient with the entropy bonus disagrees with finite differences: max err %.3g vs scale %.3g", worst, scale)
			}
		})
	}
}
