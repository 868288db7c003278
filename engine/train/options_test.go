package train

import (
	"context"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

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
