package native

import (
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/artgo/art"
	"github.com/artgo/art/engine/chat"
	"github.com/artgo/art/engine/lora"
	"github.com/artgo/art/engine/train"
	"github.com/artgo/art/host"
)

// This file is the one place where the SDK's types become the engine's.

// SFTHistories converts a trajectory into the engine's histories for
// supervised learning, as TrainSFT trains it: one per history, each
// assistant turn learned from its text (or its sampled ids, when it is a
// choice that has them).
func SFTHistories(t art.Trajectory) ([]train.History, error) {
	var out []train.History
	for hi, h := range t.Histories() {
		eh, err := convertHistory(h, true)
		if err != nil {
			return nil, fmt.Errorf("history %d: %w", hi, err)
		}
		out = append(out, eh)
	}
	return out, nil
}

// engineConfig maps the SDK's TrainConfig onto the engine's (the KL
// reference step is resolved by Train, which loads that checkpoint).
func engineConfig(c art.TrainConfig) (train.Config, error) {
	c = c.WithDefaults()
	tc := train.DefaultConfig()
	tc.LearningRate = c.LearningRate
	tc.Loss = string(c.Loss)
	tc.Epsilon, tc.EpsilonHigh = c.Epsilon, c.EpsilonHigh
	tc.ScaleRewards = c.ScaleRewards()
	tc.NormalizeAdvantages = c.NormalizeAdvantages()
	tc.AdvantageBalance = c.AdvantageBalance
	tc.ImportanceSamplingLevel = string(c.ImportanceSamplingLevel)
	tc.MaxNegativeAdvantageISWeight = c.MaxNegativeAdvantageImportanceSamplingWeight
	tc.MaskProbRatio = c.MaskProbRatio
	tc.KimiK2Tau = c.KimiK2Tau
	tc.TruncatedIS = c.TruncatedImportanceSampling
	tc.KLPenaltyCoef = c.KLPenaltyCoef
	tc.EntropyCoef = c.EntropyCoef
	tc.KLSourceSample = c.KLPenaltySource == art.KLSample
	tc.PrecalculateLogprobs = c.PrecalculateLogprobs
	tc.MaxGradNorm = max(c.MaxGradNorm, 0) // the engine's 0 is no clipping
	if c.PackedSequenceLength > 0 {
		tc.MaxSeqLen = c.PackedSequenceLength
	}
	if c.GradAccumulationSequences > 0 {
		tc.GradAccumulationSequences = c.GradAccumulationSequences
	}
	return tc, tc.Validate()
}

// convertGroups turns SDK trajectories into engine histories: context
// messages become JSON, choices with token ids become sampled turns.
// Choices without token ids are context unless allowWithoutLogprobs, in
// which case their text is re-encoded and trained (as ART does).
func convertGroups(groups []art.TrajectoryGroup, allowWithoutLogprobs bool) ([]train.Group, error) {
	out := make([]train.Group, len(groups))
	for gi, g := range groups {
		for ti, t := range g.Trajectories {
			name := "group " + strconv.Itoa(gi) + " trajectory " + strconv.Itoa(ti)
			tt := train.Trajectory{Reward: t.Reward, Name: name}
			for hi, h := range t.Histories() {
				eh, err := convertHistory(h, allowWithoutLogprobs)
				if err != nil {
					return nil, fmt.Errorf("native: %s history %d: %w", name, hi, err)
				}
				tt.Histories = append(tt.Histories, eh)
			}
			out[gi].Trajectories = append(out[gi].Trajectories, tt)
		}
	}
	return out, nil
}

func convertHistory(h art.History, allowWithoutLogprobs bool) (train.History, error) {
	var out train.History
	for i, tool := range h.Tools {
		b, err := json.Marshal(tool)
		if err != nil {
			return out, fmt.Errorf("tool %d: %w", i, err)
		}
		out.Tools = append(out.Tools, b)
	}
	for i, mc := range h.MessagesAndChoices {
		msg := mc.AsMessage()
		b, err := json.Marshal(msg)
		if err != nil {
			return out, fmt.Errorf("message %d: %w", i, err)
		}
		turn := train.Turn{Message: b}
		if c := mc.Choice; c != nil {
			ids, lps, ok := sampledTokens(c)
			switch {
			case ok:
				turn.Sampled = &train.Sampled{TokenIDs: ids, Logprobs: lps, Policy: c.Model}
			case allowWithoutLogprobs:
				turn.Sampled = &train.Sampled{} // re-encoded below by the trainer's SFT path
			}
		} else if allowWithoutLogprobs && msg.Role == art.RoleAssistant {
			turn.Sampled = &train.Sampled{}
		}
		out.Turns = append(out.Turns, turn)
	}
	return out, nil
}

// sampledTokens returns a choice's token ids and logprobs, ok only when
// every token carries its id.
func sampledTokens(c *art.Choice) (ids []int, lps []float64, ok bool) {
	if len(c.Logprobs) == 0 {
		return nil, nil, false
	}
	for _, t := range c.Logprobs {
		if t.TokenID < 0 {
			return nil, nil, false
		}
		ids = append(ids, t.TokenID)
		lps = append(lps, t.Logprob)
	}
	return ids, lps, true
}

func loraConfig(c art.LoRAConfig) lora.Config {
	return lora.Config{Rank: c.Rank, Alpha: c.Alpha, Dropout: c.Dropout, TargetModules: c.TargetModules,
		Layers: c.LayersToTransform, UseRSLoRA: c.UseRSLoRA}
}

func sdkLoRAConfig(c lora.Config) art.LoRAConfig {
	return art.LoRAConfig{Rank: c.Rank, Alpha: c.Alpha, Dropout: c.Dropout, TargetModules: c.TargetModules,
		LayersToTransform: c.Layers, UseRSLoRA: c.UseRSLoRA}
}

func toolFormat(f chat.Format) host.ToolFormat {
	switch f {
	case chat.FormatHermes:
		return host.ToolsHermes
	case chat.FormatLlama3JSON:
		return host.ToolsLlama3JSON
	}
	return host.ToolsNone
}
