package art

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
)

// Loss selects the policy-gradient loss.
type Loss string

// Losses.
const (
	// LossCISPO is REINFORCE with a clipped, stop-gradient importance weight:
	// -clip(r, 1-ε, 1+ε_high)·A·log π. ART's default since 2026.
	LossCISPO Loss = "cispo"
	// LossPPO is the PPO clipped surrogate: -min(r·A, clip(r, 1-ε, 1+ε_high)·A).
	LossPPO Loss = "ppo"
)

// ImportanceSamplingLevel selects how the importance ratio r is formed.
type ImportanceSamplingLevel string

// Importance sampling levels.
const (
	ISToken            ImportanceSamplingLevel = "token"             // per token
	ISSequence         ImportanceSamplingLevel = "sequence"          // one ratio per sequence (GSPO)
	ISAverage          ImportanceSamplingLevel = "average"           // token ratio times the sequence mean
	ISGeometricAverage ImportanceSamplingLevel = "geometric_average" // √(token ratio · sequence ratio)
)

// KLPenaltySource selects the logprobs compared with the reference model when
// KLPenaltyCoef > 0.
type KLPenaltySource string

// KL penalty sources.
const (
	KLCurrentLearner KLPenaltySource = "current_learner" // the learner's own logprobs (default)
	KLSample         KLPenaltySource = "sample"          // the logprobs recorded at sampling time
)

// Defaults of TrainConfig, as in ART.
const (
	DefaultLearningRate = 5e-6
	// DefaultMaxGradNorm is ART's gradient clipping bound.
	DefaultMaxGradNorm  = 0.1
	defaultCISPOEpsilon = 1.0
	defaultCISPOHigh    = 4.0
	defaultPPOEpsilon   = 0.2
)

// TrainConfig holds the options of one training step.
//
// The zero value is ART's default configuration: every field whose zero
// value is not the default reads "0 means the default". ART's two options
// that default to true are expressed as Disable… fields so that the zero
// value keeps them on. WithDefaults fills the defaults in explicitly.
type TrainConfig struct {
	// LearningRate is the constant learning rate (0 means 5e-6).
	LearningRate float64 `json:"learning_rate,omitempty"`
	// Loss is the policy loss ("" means LossCISPO).
	Loss Loss `json:"loss_fn,omitempty"`
	// Epsilon and EpsilonHigh bound the importance weight to
	// [1-Epsilon, 1+EpsilonHigh]. Zero means the loss's default:
	// CISPO 1.0 and 4.0; PPO 0.2 and EpsilonHigh = Epsilon.
	Epsilon     float64 `json:"epsilon,omitempty"`
	EpsilonHigh float64 `json:"epsilon_high,omitempty"`
	// DisableRewardScaling stops dividing group-centred rewards by the
	// group's standard deviation (ART's scale_rewards=False).
	DisableRewardScaling bool `json:"disable_reward_scaling,omitempty"`
	// DisableAdvantageNormalization stops the batch-level normalisation of
	// advantages (ART's normalize_advantages=False); it also disables
	// reward scaling, as in ART.
	DisableAdvantageNormalization bool `json:"disable_advantage_normalization,omitempty"`
	// AdvantageBalance in [-1, 1] shrinks negative advantages by (1-b) when
	// b > 0, or positive ones by (1+b) when b < 0.
	AdvantageBalance float64 `json:"advantage_balance,omitempty"`
	// ImportanceSamplingLevel is how the ratio is formed ("" means ISToken).
	ImportanceSamplingLevel ImportanceSamplingLevel `json:"importance_sampling_level,omitempty"`
	// MaxNegativeAdvantageImportanceSamplingWeight clamps the ratio from
	// above (0 means no clamp).
	MaxNegativeAdvantageImportanceSamplingWeight float64 `json:"max_negative_advantage_importance_sampling_weight,omitempty"`
	// MaskProbRatio zeroes the ratio outside (1-Epsilon, 1+EpsilonHigh).
	MaskProbRatio bool `json:"mask_prob_ratio,omitempty"`
	// KimiK2Tau subtracts τ·(log-ratio) from the advantage (0 means off).
	KimiK2Tau float64 `json:"kimi_k2_tau,omitempty"`
	// KLPenaltyCoef turns on KL advantage shaping against a reference model
	// when > 0.
	KLPenaltyCoef float64 `json:"kl_penalty_coef,omitempty"`
	// KLPenaltySource is compared with the reference ("" means
	// KLCurrentLearner; on the serverless backend, as ART's client does,
	// KLSample when KLPenaltyCoef > 0).
	KLPenaltySource KLPenaltySource `json:"kl_penalty_source,omitempty"`
	// KLPenaltyReferenceStep names the checkpoint used as reference; nil
	// means the base model with the adapter disabled.
	KLPenaltyReferenceStep *int `json:"kl_penalty_reference_step,omitempty"`
	// EntropyCoef > 0 adds an entropy bonus to the loss: -EntropyCoef·H per
	// sampled token, H the entropy of the distribution the token was drawn
	// from, averaged like the policy loss. It keeps a policy sampling the
	// actions it is not yet sure of (ART's Python trainer has none; verl's
	// entropy_coeff is the same term). 0 means off.
	EntropyCoef float64 `json:"entropy_coef,omitempty"`
	// PrecalculateLogprobs recomputes the old-policy logprobs with the
	// trainer before the update instead of trusting the sampled ones.
	PrecalculateLogprobs bool `json:"precalculate_logprobs,omitempty"`
	// TruncatedImportanceSampling is the TIS upper bound (0 means off).
	TruncatedImportanceSampling float64 `json:"truncated_importance_sampling,omitempty"`
	// AllowTrainingWithoutLogprobs trains plain assistant messages and
	// choices without logprobs too. Off by default: such turns are context.
	AllowTrainingWithoutLogprobs bool `json:"allow_training_without_logprobs,omitempty"`
	// NumTrajectoriesLearningRateMultiplierPower scales the learning rate by
	// (completions in the packed row)^p.
	NumTrajectoriesLearningRateMultiplierPower float64 `json:"num_trajectories_learning_rate_multiplier_power,omitempty"`
	// PackedSequenceLength is the length of a packed training row in tokens
	// (0 means chosen from the longest sequence).
	PackedSequenceLength int `json:"packed_sequence_length,omitempty"`
	// GradAccumulationSequences is the number of sequences whose gradients
	// make one optimizer step (0 means 1: ART's one step per sequence). A
	// value at least the number of sequences takes one step per Train call.
	GradAccumulationSequences int `json:"grad_accumulation_sequences,omitempty"`
	// MaxGradNorm clips the gradient's global L2 norm before each optimizer
	// step (ART's max_grad_norm): 0 means DefaultMaxGradNorm, a negative
	// value turns clipping off. loss/grad_norm reports the norm before
	// clipping.
	MaxGradNorm float64 `json:"max_grad_norm,omitempty"`
}

// WithDefaults returns c with each zero field that stands for a default
// replaced by that default.
func (c TrainConfig) WithDefaults() TrainConfig {
	if c.LearningRate == 0 {
		c.LearningRate = DefaultLearningRate
	}
	if c.Loss == "" {
		c.Loss = LossCISPO
	}
	switch c.Loss {
	case LossCISPO:
		if c.Epsilon == 0 {
			c.Epsilon = defaultCISPOEpsilon
		}
		if c.EpsilonHigh == 0 {
			c.EpsilonHigh = defaultCISPOHigh
		}
	case LossPPO:
		if c.Epsilon == 0 {
			c.Epsilon = defaultPPOEpsilon
		}
		if c.EpsilonHigh == 0 {
			c.EpsilonHigh = c.Epsilon
		}
	}
	if c.ImportanceSamplingLevel == "" {
		c.ImportanceSamplingLevel = ISToken
	}
	if c.KLPenaltySource == "" {
		c.KLPenaltySource = KLCurrentLearner
	}
	if c.MaxGradNorm == 0 {
		c.MaxGradNorm = DefaultMaxGradNorm
	}
	return c
}

// ScaleRewards reports whether group-centred rewards are divided by the
// group's standard deviation.
func (c TrainConfig) ScaleRewards() bool {
	return !c.DisableRewardScaling && !c.DisableAdvantageNormalization
}

// NormalizeAdvantages reports whether advantages are normalised over the
// batch.
func (c TrainConfig) NormalizeAdvantages() bool { return !c.DisableAdvantageNormalization }

// Validate checks c with its defaults filled in. The error names each bad
// field and its allowed range.
func (c TrainConfig) Validate() error {
	c = c.WithDefaults()
	var errs []error
	bad := func(field string, v any, rule string) {
		errs = append(errs, fmt.Errorf("art: TrainConfig.%s = %v: %s", field, v, rule))
	}
	if !isFinite(c.LearningRate) || c.LearningRate <= 0 {
		bad("LearningRate", c.LearningRate, "must be a finite number > 0 (0 selects 5e-6)")
	}
	if c.Loss != LossCISPO && c.Loss != LossPPO {
		bad("Loss", quote(c.Loss), `must be "cispo" or "ppo"`)
	} else {
		if !(c.Epsilon > 0 && c.Epsilon <= 1) {
			bad("Epsilon", c.Epsilon, "must be in (0, 1] (0 selects the loss's default)")
		}
		if !isFinite(c.EpsilonHigh) || c.EpsilonHigh <= 0 {
			bad("EpsilonHigh", c.EpsilonHigh, "must be a finite number > 0 (0 selects the loss's default)")
		}
	}
	if !(c.AdvantageBalance >= -1 && c.AdvantageBalance <= 1) {
		bad("AdvantageBalance", c.AdvantageBalance, "must be in [-1, 1]")
	}
	switch c.ImportanceSamplingLevel {
	case ISToken, ISSequence, ISAverage, ISGeometricAverage:
	default:
		bad("ImportanceSamplingLevel", quote(c.ImportanceSamplingLevel), `must be "token", "sequence", "average" or "geometric_average"`)
	}
	nonNegative := func(field string, v float64, off string) {
		if !isFinite(v) || v < 0 {
			bad(field, v, "must be a finite number >= 0 ("+off+")")
		}
	}
	nonNegative("MaxNegativeAdvantageImportanceSamplingWeight", c.MaxNegativeAdvantageImportanceSamplingWeight, "0 means no clamp")
	nonNegative("KimiK2Tau", c.KimiK2Tau, "0 means off")
	nonNegative("KLPenaltyCoef", c.KLPenaltyCoef, "0 means off")
	nonNegative("EntropyCoef", c.EntropyCoef, "0 means off")
	nonNegative("TruncatedImportanceSampling", c.TruncatedImportanceSampling, "0 means off")
	if !isFinite(c.MaxGradNorm) {
		bad("MaxGradNorm", c.MaxGradNorm, "must be finite (0 selects 0.1, < 0 turns clipping off)")
	}
	if c.KLPenaltySource != KLCurrentLearner && c.KLPenaltySource != KLSample {
		bad("KLPenaltySource", quote(c.KLPenaltySource), `must be "current_learner" or "sample"`)
	}
	if s := c.KLPenaltyReferenceStep; s != nil && *s < 0 {
		bad("KLPenaltyReferenceStep", *s, "must be >= 0 (nil means the base model)")
	}
	if !isFinite(c.NumTrajectoriesLearningRateMultiplierPower) {
		bad("NumTrajectoriesLearningRateMultiplierPower", c.NumTrajectoriesLearningRateMultiplierPower, "must be finite")
	}
	if c.GradAccumulationSequences < 0 {
		bad("GradAccumulationSequences", c.GradAccumulationSequences, "must be >= 0 (0 means one optimizer step per sequence)")
	}
	if c.PackedSequenceLength < 0 {
		bad("PackedSequenceLength", c.PackedSequenceLength, "must be >= 0 (0 means automatic)")
	}
	return errors.Join(errs...)
}

func quote[S ~string](s S) string { return fmt.Sprintf("%q", string(s)) }

// defaultLoRATargetModules returns the modules that get adapters by default:
// every attention and MLP projection of Llama/Qwen-style models.
func defaultLoRATargetModules() []string {
	return []string{"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"}
}

// LoRAConfig describes the low-rank adapters trained on the base model. Its
// zero value is ART's default: rank 8, alpha 16, no dropout, all projection
// modules, every layer.
type LoRAConfig struct {
	Rank              int      `json:"rank,omitempty"`                // 0 means 8
	Alpha             float64  `json:"alpha,omitempty"`               // 0 means 16
	Dropout           float64  `json:"dropout,omitempty"`             // in [0, 1)
	TargetModules     []string `json:"target_modules,omitempty"`      // nil means every attention and MLP projection
	LayersToTransform []int    `json:"layers_to_transform,omitempty"` // nil means every layer
	UseRSLoRA         bool     `json:"use_rslora,omitempty"`          // scale by alpha/√rank instead of alpha/rank
}

// Defaults of LoRAConfig.
const (
	DefaultLoRARank  = 8
	DefaultLoRAAlpha = 16
)

// WithDefaults returns c with its zero fields replaced by the defaults.
func (c LoRAConfig) WithDefaults() LoRAConfig {
	if c.Rank == 0 {
		c.Rank = DefaultLoRARank
	}
	if c.Alpha == 0 {
		c.Alpha = DefaultLoRAAlpha
	}
	if c.TargetModules == nil {
		c.TargetModules = defaultLoRATargetModules()
	}
	return c
}

// String is c with its defaults filled in, as JSON: what the adapter will
// be (for messages).
func (c LoRAConfig) String() string {
	b, _ := json.Marshal(c.WithDefaults())
	return string(b)
}

// IsZero reports whether c is the zero value (ART's defaults, unnamed).
func (c LoRAConfig) IsZero() bool {
	return c.Rank == 0 && c.Alpha == 0 && c.Dropout == 0 && c.TargetModules == nil && c.LayersToTransform == nil && !c.UseRSLoRA
}

// SameAdapter reports whether c and o make the same adapter: equal after
// defaults, target modules and layers compared as sets.
func (c LoRAConfig) SameAdapter(o LoRAConfig) bool {
	c, o = c.WithDefaults(), o.WithDefaults()
	return c.Rank == o.Rank && c.Alpha == o.Alpha && c.Dropout == o.Dropout && c.UseRSLoRA == o.UseRSLoRA &&
		sameSet(c.TargetModules, o.TargetModules) && sameSet(c.LayersToTransform, o.LayersToTransform)
}

// sameSet reports whether a and b hold the same elements, in any order.
func sameSet[T cmp.Ordered](a, b []T) bool {
	return slices.Equal(slices.Sorted(slices.Values(a)), slices.Sorted(slices.Values(b)))
}

// Scale returns the factor applied to the adapter's output: alpha/rank, or
// alpha/√rank with rsLoRA. Defaults are applied first.
func (c LoRAConfig) Scale() float64 {
	c = c.WithDefaults()
	if c.UseRSLoRA {
		return c.Alpha / math.Sqrt(float64(c.Rank))
	}
	return c.Alpha / float64(c.Rank)
}

// Validate checks c with its defaults filled in. The error names each bad
// field and its allowed range.
// maxLoRARank is the largest rank the engine makes an adapter of
// (engine/lora): past it a rank is refused here, before a model loads.
const maxLoRARank = 1024

func (c LoRAConfig) Validate() error {
	c = c.WithDefaults()
	var errs []error
	bad := func(field string, v any, rule string) {
		errs = append(errs, fmt.Errorf("art: LoRAConfig.%s = %v: %s", field, v, rule))
	}
	if c.Rank < 0 || c.Rank > maxLoRARank {
		bad("Rank", c.Rank, fmt.Sprintf("must be in [1, %d] (0 selects 8)", maxLoRARank))
	}
	if !isFinite(c.Alpha) || c.Alpha <= 0 {
		bad("Alpha", c.Alpha, "must be a finite number > 0 (0 selects 16)")
	}
	if !(c.Dropout >= 0 && c.Dropout < 1) {
		bad("Dropout", c.Dropout, "must be in [0, 1)")
	}
	if len(c.TargetModules) == 0 {
		bad("TargetModules", "[]", "must name at least one module (nil selects the defaults)")
	}
	for i, m := range c.TargetModules {
		if m == "" {
			bad(fmt.Sprintf("TargetModules[%d]", i), `""`, "must not be empty")
		} else if slices.Index(c.TargetModules, m) < i {
			bad(fmt.Sprintf("TargetModules[%d]", i), quote(m), "is listed twice")
		}
	}
	for i, l := range c.LayersToTransform {
		if l < 0 {
			bad(fmt.Sprintf("LayersToTransform[%d]", i), l, "must be >= 0")
		} else if slices.Index(c.LayersToTransform, l) < i {
			bad(fmt.Sprintf("LayersToTransform[%d]", i), l, "is listed twice")
		}
	}
	return errors.Join(errs...)
}

// TrainSFTConfig configures supervised fine-tuning (TrainableModel.TrainSFT,
// Backend.TrainSFT), as ART's TrainSFTConfig: one optimizer step per batch
// of trajectories, AdamW without weight decay, gradient norm clipped to 1,
// on every assistant turn (the other messages are context). The zero value
// is ART's defaults.
type TrainSFTConfig struct {
	// LearningRate is the constant learning rate (default 5e-5).
	LearningRate float64 `json:"learning_rate,omitempty"`
	// LearningRates, if set, is a schedule: the learning rate of each batch
	// in order (its length must be the number of batches), overriding
	// LearningRate.
	LearningRates []float64 `json:"learning_rates,omitempty"`
	// BatchSize is the number of trajectories per optimizer step (default
	// 2, ART's "auto" on a local backend).
	BatchSize int `json:"batch_size,omitempty"`
}

// WithDefaults returns c with zero fields set to ART's defaults.
func (c TrainSFTConfig) WithDefaults() TrainSFTConfig {
	if c.LearningRate == 0 {
		c.LearningRate = 5e-5
	}
	if c.BatchSize == 0 {
		c.BatchSize = 2
	}
	return c
}

// Batches returns the number of optimizer steps n trajectories make.
func (c TrainSFTConfig) Batches(n int) int {
	c = c.WithDefaults()
	return (n + c.BatchSize - 1) / c.BatchSize
}

// Validate checks c on its own and, when trajectories >= 0, against the
// number of trajectories to train on.
func (c TrainSFTConfig) Validate(trajectories int) error {
	if c.LearningRate < 0 || math.IsNaN(c.LearningRate) || math.IsInf(c.LearningRate, 0) {
		return fmt.Errorf("art: TrainSFTConfig.LearningRate = %v; want > 0 (0 means 5e-5)", c.LearningRate)
	}
	if c.BatchSize < 0 {
		return fmt.Errorf("art: TrainSFTConfig.BatchSize = %d; want > 0 (0 means 2)", c.BatchSize)
	}
	for i, lr := range c.LearningRates {
		if !(lr > 0) || math.IsInf(lr, 0) {
			return fmt.Errorf("art: TrainSFTConfig.LearningRates[%d] = %v; want > 0", i, lr)
		}
	}
	if trajectories >= 0 && len(c.LearningRates) > 0 {
		if n := c.Batches(trajectories); len(c.LearningRates) != n {
			return fmt.Errorf("art: TrainSFTConfig.LearningRates has %d entries but %d trajectories make %d batches of %d",
				len(c.LearningRates), trajectories, n, c.WithDefaults().BatchSize)
		}
	}
	return nil
}
