package art

import (
	"math"
	"reflect"
	"strings"
	"testing"
)

func TestTrainConfig_Defaults(t *testing.T) {
	tests := []struct {
		name string
		in   TrainConfig
		want TrainConfig
	}{
		{"zero value is ART's default", TrainConfig{}, TrainConfig{
			LearningRate: 5e-6, Loss: LossCISPO, Epsilon: 1, EpsilonHigh: 4,
			ImportanceSamplingLevel: ISToken, KLPenaltySource: KLCurrentLearner, MaxGradNorm: 0.1,
		}},
		{"ppo", TrainConfig{Loss: LossPPO}, TrainConfig{
			LearningRate: 5e-6, Loss: LossPPO, Epsilon: 0.2, EpsilonHigh: 0.2,
			ImportanceSamplingLevel: ISToken, KLPenaltySource: KLCurrentLearner, MaxGradNorm: 0.1,
		}},
		{"ppo high follows epsilon", TrainConfig{Loss: LossPPO, Epsilon: 0.3}, TrainConfig{
			LearningRate: 5e-6, Loss: LossPPO, Epsilon: 0.3, EpsilonHigh: 0.3,
			ImportanceSamplingLevel: ISToken, KLPenaltySource: KLCurrentLearner, MaxGradNorm: 0.1,
		}},
		{"explicit values kept", TrainConfig{LearningRate: 1e-5, Epsilon: 0.5, EpsilonHigh: 2, ImportanceSamplingLevel: ISSequence, KLPenaltySource: KLSample, MaxGradNorm: -1}, TrainConfig{
			LearningRate: 1e-5, Loss: LossCISPO, Epsilon: 0.5, EpsilonHigh: 2,
			ImportanceSamplingLevel: ISSequence, KLPenaltySource: KLSample, MaxGradNorm: -1,
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.in.WithDefaults(); !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("WithDefaults() = %+v; want %+v", got, tt.want)
			}
			if err := tt.in.Validate(); err != nil {
				t.Fatalf("Validate() = %v; want nil", err)
			}
		})
	}
}

func TestTrainConfig_Switches(t *testing.T) {
	tests := []struct {
		name             string
		cfg              TrainConfig
		scale, normalize bool
	}{
		{"default", TrainConfig{}, true, true},
		{"no scaling", TrainConfig{DisableRewardScaling: true}, false, true},
		{"no normalisation implies no scaling", TrainConfig{DisableAdvantageNormalization: true}, false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.cfg.ScaleRewards(); got != tt.scale {
				t.Errorf("ScaleRewards() = %v; want %v", got, tt.scale)
			}
			if got := tt.cfg.NormalizeAdvantages(); got != tt.normalize {
				t.Errorf("NormalizeAdvantages() = %v; want %v", got, tt.normalize)
			}
		})
	}
}

func TestTrainConfig_Validate(t *testing.T) {
	neg := -1
	tests := []struct {
		name string
		cfg  TrainConfig
		want []string // substrings of the error, one per expected problem
	}{
		{"negative learning rate", TrainConfig{LearningRate: -1e-5}, []string{"TrainConfig.LearningRate = -1e-05: must be a finite number > 0"}},
		{"NaN learning rate", TrainConfig{LearningRate: math.NaN()}, []string{"LearningRate = NaN"}},
		{"unknown loss", TrainConfig{Loss: "grpo"}, []string{`TrainConfig.Loss = "grpo": must be "cispo" or "ppo"`}},
		{"epsilon above 1", TrainConfig{Epsilon: 1.5}, []string{"TrainConfig.Epsilon = 1.5: must be in (0, 1]"}},
		{"negative epsilon high", TrainConfig{EpsilonHigh: -2}, []string{"TrainConfig.EpsilonHigh = -2"}},
		{"advantage balance", TrainConfig{AdvantageBalance: 1.5}, []string{"TrainConfig.AdvantageBalance = 1.5: must be in [-1, 1]"}},
		{"advantage balance NaN", TrainConfig{AdvantageBalance: math.NaN()}, []string{"AdvantageBalance = NaN"}},
		{"is level", TrainConfig{ImportanceSamplingLevel: "tok"}, []string{`TrainConfig.ImportanceSamplingLevel = "tok": must be "token", "sequence", "average" or "geometric_average"`}},
		{"kl source", TrainConfig{KLPenaltySource: "ref"}, []string{`KLPenaltySource = "ref"`}},
		{"kl reference step", TrainConfig{KLPenaltyReferenceStep: &neg}, []string{"KLPenaltyReferenceStep = -1: must be >= 0"}},
		{"several at once", TrainConfig{KLPenaltyCoef: -1, KimiK2Tau: math.Inf(1), TruncatedImportanceSampling: -3, MaxNegativeAdvantageImportanceSamplingWeight: -1, PackedSequenceLength: -8}, []string{
			"KLPenaltyCoef = -1: must be a finite number >= 0 (0 means off)",
			"KimiK2Tau = +Inf",
			"TruncatedImportanceSampling = -3",
			"MaxNegativeAdvantageImportanceSamplingWeight = -1",
			"PackedSequenceLength = -8: must be >= 0",
		}},
		{"entropy coef", TrainConfig{EntropyCoef: -0.01}, []string{"EntropyCoef = -0.01: must be a finite number >= 0 (0 means off)"}},
		{"lr power", TrainConfig{NumTrajectoriesLearningRateMultiplierPower: math.NaN()}, []string{"NumTrajectoriesLearningRateMultiplierPower = NaN: must be finite"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.cfg.Validate()
			if err == nil {
				t.Fatalf("Validate() = nil; want errors %q", tt.want)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Validate() = %q; want it to contain %q", err, w)
				}
			}
			if got := strings.Count(err.Error(), "art: TrainConfig."); got != len(tt.want) {
				t.Errorf("Validate() reported %d problems; want %d: %v", got, len(tt.want), err)
			}
		})
	}
}

func TestLoRAConfig(t *testing.T) {
	def := LoRAConfig{}.WithDefaults()
	want := LoRAConfig{Rank: 8, Alpha: 16, TargetModules: []string{"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"}}
	if !reflect.DeepEqual(def, want) {
		t.Fatalf("zero LoRAConfig with defaults = %+v; want %+v", def, want)
	}
	// The default list is fresh each time: changing one copy changes no other.
	def.TargetModules[0] = "changed"
	if got := defaultLoRATargetModules()[0]; got != "q_proj" {
		t.Fatalf("defaultLoRATargetModules()[0] = %q after a caller changed its copy; want q_proj", got)
	}

	scales := []struct {
		cfg  LoRAConfig
		want float64
	}{
		{LoRAConfig{}, 2},
		{LoRAConfig{Rank: 16, Alpha: 32}, 2},
		{LoRAConfig{Rank: 16, Alpha: 8, UseRSLoRA: true}, 2},
	}
	for _, s := range scales {
		if got := s.cfg.Scale(); got != s.want {
			t.Errorf("%+v.Scale() = %v; want %v", s.cfg, got, s.want)
		}
	}

	tests := []struct {
		name string
		cfg  LoRAConfig
		want []string
	}{
		{"valid", LoRAConfig{Rank: 4, Alpha: 8, Dropout: 0.1, TargetModules: []string{"q_proj"}, LayersToTransform: []int{0, 3}}, nil},
		{"negative rank", LoRAConfig{Rank: -1}, []string{"LoRAConfig.Rank = -1: must be in [1, 1024]"}},
		{"rank past the engine's", LoRAConfig{Rank: 1025}, []string{"LoRAConfig.Rank = 1025: must be in [1, 1024]"}},
		{"alpha", LoRAConfig{Alpha: -2}, []string{"LoRAConfig.Alpha = -2"}},
		{"dropout", LoRAConfig{Dropout: 1}, []string{"LoRAConfig.Dropout = 1: must be in [0, 1)"}},
		{"empty targets", LoRAConfig{TargetModules: []string{}}, []string{"TargetModules = []: must name at least one module"}},
		{"bad targets", LoRAConfig{TargetModules: []string{"q_proj", "", "q_proj"}}, []string{"TargetModules[1]", `TargetModules[2] = "q_proj": is listed twice`}},
		{"bad layers", LoRAConfig{LayersToTransform: []int{-1, 2, 2}}, []string{"LayersToTransform[0] = -1", "LayersToTransform[2] = 2: is listed twice"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.cfg.Validate()
			if len(tt.want) == 0 {
				if err != nil {
					t.Fatalf("Validate() = %v; want nil", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Validate() = nil; want %q", tt.want)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Validate() = %q; want it to contain %q", err, w)
				}
			}
		})
	}
}
