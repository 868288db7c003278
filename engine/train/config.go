package train

import (
	"fmt"
	"math"
)

// Config holds the training hyperparameters the engine needs. Zero values
// are not defaults: start from DefaultConfig (the SDK maps its TrainConfig
// onto this).
type Config struct {
	LearningRate float64
	Loss         string  // "cispo" (default) or "ppo"
	Epsilon      float64 // lower clip: ratio ≥ 1-Epsilon
	EpsilonHigh  float64 // upper clip: ratio ≤ 1+EpsilonHigh
	ScaleRewards bool    // divide group-centred rewards by the group std
	// NormalizeAdvantages rescales advantages so their weighted mean |A|
	// over sampled tokens is 1 (ART's normalize_advantages).
	NormalizeAdvantages bool
	// AdvantageBalance in [-1, 1] shrinks negative (> 0) or positive (< 0)
	// advantages.
	AdvantageBalance float64
	// ImportanceSamplingLevel: "token", "sequence" (GSPO), "average" or
	// "geometric_average".
	ImportanceSamplingLevel string
	// MaxNegativeAdvantageISWeight caps the ratio from above (0: off).
	MaxNegativeAdvantageISWeight float64
	MaskProbRatio                bool    // zero the ratio outside (1-ε, 1+ε_high)
	KimiK2Tau                    float64 // advantage -= τ·(logπ - logπ_old) (0: off)
	TruncatedIS                  float64 // multiply the loss by min(ratio, U) (0: off)
	// KLPenaltyCoef > 0 shapes advantages by the divergence from the
	// reference (Trainer.Step's klRef; the base model, adapter off, when
	// nil): A_t += coef·(mean k - k_t), k_t = logπ_t - logπ_ref,t.
	KLPenaltyCoef float64
	// KLSourceSample compares the sampling-time logprobs, rather than the
	// learner's, with the reference (ART's kl_penalty_source "sample");
	// tokens without them use the learner's.
	KLSourceSample bool
	// EntropyCoef > 0 adds an entropy bonus to the loss: -EntropyCoef·H_t
	// per sampled token t, H_t the entropy of the distribution it was
	// drawn from (over the whole vocabulary), reduced as the policy loss
	// is (the row's mean, times the sequence's weight).
	EntropyCoef float64
	// PrecalculateLogprobs recomputes the old logprobs with the trainer's
	// weights before the step's first update; the rollout logprobs then
	// only weight truncated importance sampling.
	PrecalculateLogprobs bool

	MaxGradNorm float64 // clip the global gradient norm (ART: 0.1)
	// GradAccumulationSequences is how many sequences make one optimizer
	// step (ART: 1, one step per sequence).
	GradAccumulationSequences int
	MaxSeqLen                 int    // longer sequences are dropped with a warning
	Seed                      uint64 // shuffles sequence order per step
	// Policy names the weights the step starts from (the host's
	// "name@step"). Sampled turns whose Sampled.Policy equals it were
	// sampled with these weights: the step compares the trainer's
	// logprobs of their tokens with the sampler's
	// (loss/rollout_logprob_abs_diff, see Trainer.Step). Empty: no
	// comparison.
	Policy string
}

// DefaultConfig is ART's LocalBackend defaults.
func DefaultConfig() Config {
	return Config{
		LearningRate: 5e-6, Loss: "cispo", Epsilon: 1, EpsilonHigh: 4, ScaleRewards: true, NormalizeAdvantages: true,
		ImportanceSamplingLevel: "token", MaxGradNorm: 0.1, GradAccumulationSequences: 1, MaxSeqLen: 8192,
	}
}

// Validate names the first bad field.
func (c Config) Validate() error {
	bad := func(name string, v any, want string) error {
		return fmt.Errorf("train: %s = %v; want %s", name, v, want)
	}
	finite := func(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }
	switch {
	case !(c.LearningRate > 0) || !finite(c.LearningRate):
		return bad("learning_rate", c.LearningRate, "> 0")
	case c.Loss != "cispo" && c.Loss != "ppo":
		return bad("loss", c.Loss, `"cispo" or "ppo"`)
	case !(c.Epsilon >= 0) || !finite(c.Epsilon):
		return bad("epsilon", c.Epsilon, ">= 0")
	case !(c.EpsilonHigh >= 0) || !finite(c.EpsilonHigh):
		return bad("epsilon_high", c.EpsilonHigh, ">= 0")
	case !(c.AdvantageBalance >= -1 && c.AdvantageBalance <= 1):
		return bad("advantage_balance", c.AdvantageBalance, "in [-1, 1]")
	case c.ImportanceSamplingLevel != "token" && c.ImportanceSamplingLevel != "sequence" &&
		c.ImportanceSamplingLevel != "average" && c.ImportanceSamplingLevel != "geometric_average":
		return bad("importance_sampling_level", c.ImportanceSamplingLevel, "token, sequence, average or geometric_average")
	case !(c.MaxNegativeAdvantageISWeight >= 0):
		return bad("max_negative_advantage_importance_sampling_weight", c.MaxNegativeAdvantageISWeight, ">= 0")
	case !(c.KimiK2Tau >= 0) || !finite(c.KimiK2Tau):
		return bad("kimi_k2_tau", c.KimiK2Tau, ">= 0")
	case !(c.TruncatedIS >= 0):
		return bad("truncated_importance_sampling", c.TruncatedIS, ">= 0")
	case !(c.KLPenaltyCoef >= 0) || !finite(c.KLPenaltyCoef):
		return bad("kl_penalty_coef", c.KLPenaltyCoef, ">= 0")
	case !(c.EntropyCoef >= 0) || !finite(c.EntropyCoef):
		return bad("entropy_coef", c.EntropyCoef, ">= 0")
	case !(c.MaxGradNorm >= 0):
		return bad("max_grad_norm", c.MaxGradNorm, ">= 0")
	case c.GradAccumulationSequences < 1:
		return bad("grad_accumulation_sequences", c.GradAccumulationSequences, ">= 1")
	case c.MaxSeqLen < 2:
		return bad("max_seq_len", c.MaxSeqLen, ">= 2")
	}
	return nil
}
