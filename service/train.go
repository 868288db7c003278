package service

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/artgo/art"
	"github.com/artgo/art/engine/model"
	"github.com/artgo/art/engine/train"
)

// Train runs one training step on groups and saves the result as the next
// checkpoint, which is served at once. A step with nothing to train still
// advances (the adapter is carried over) and the result says so. On error
// (including cancellation) no checkpoint is written and the adapter and
// optimizer are left as they were before the call. progress, if non-nil,
// is called after each trained sequence.
func (s *Service) Train(ctx context.Context, groups []art.TrajectoryGroup, cfg art.TrainConfig, progress func(done, total int)) (art.TrainResult, error) {
	if err := cfg.Validate(); err != nil {
		return art.TrainResult{}, err
	}
	tc, err := engineConfig(cfg)
	if err != nil {
		return art.TrainResult{}, err
	}
	tgroups, err := convertGroups(groups, cfg.AllowTrainingWithoutLogprobs)
	if err != nil {
		return art.TrainResult{}, err
	}
	tc.Seed = s.opt.Seed
	var ref model.Adapter // nil: KL against the base model
	if step := cfg.KLPenaltyReferenceStep; step != nil && cfg.KLPenaltyCoef > 0 {
		a, err := s.adapter(*step)
		if err != nil {
			return art.TrainResult{}, fmt.Errorf("service: KL reference step %d: %w", *step, err)
		}
		ref = a
	}
	var res train.StepResult
	out, err := s.trainAndSave(func(tr *train.Trainer, next int) (map[string]float64, error) {
		var err error
		res, err = tr.Step(ctx, tgroups, tc, next, ref, progress)
		return res.Metrics, err
	})
	if err != nil {
		return art.TrainResult{}, err
	}
	out.Skipped, out.SkipReason = !res.Trained, res.Reason
	for _, w := range res.Warnings {
		s.log.Warn("service: " + w)
	}
	if out.Skipped {
		s.log.Warn("service: step advanced WITHOUT training: checkpoint carried over", "step", out.Step, "reason", res.Reason)
	} else {
		s.log.Info("service: trained", "step", out.Step, "loss", res.Metrics["loss/train"], "sequences", res.Metrics["data/step_num_gradient_steps"])
	}
	return out, nil
}

// TrainSFT fine-tunes the adapter on trajectories by supervised learning
// (every assistant turn of every history; see art.TrainSFTConfig) and saves
// the result as the next checkpoint, served at once. The metrics are the
// means over the batches, plus the totals of data/*. On error (including
// cancellation) no checkpoint is written and the adapter and optimizer are
// left as they were. progress, if non-nil, is called after each batch.
func (s *Service) TrainSFT(ctx context.Context, trajectories []art.Trajectory, cfg art.TrainSFTConfig, progress func(done, total int)) (art.TrainResult, error) {
	if err := cfg.Validate(len(trajectories)); err != nil {
		return art.TrainResult{}, err
	}
	if len(trajectories) == 0 {
		return art.TrainResult{}, fmt.Errorf("service: train sft: no trajectories")
	}
	cfg = cfg.WithDefaults()
	examples := make([][]train.History, len(trajectories))
	for ti, t := range trajectories {
		var err error
		if examples[ti], err = SFTHistories(t); err != nil {
			return art.TrainResult{}, fmt.Errorf("service: train sft: trajectory %d %w", ti, err)
		}
	}
	batches := cfg.Batches(len(trajectories))
	return s.trainAndSave(func(tr *train.Trainer, _ int) (map[string]float64, error) {
		sum := map[string]float64{}
		for b := range batches {
			var batch []train.History
			for _, hs := range examples[b*cfg.BatchSize : min((b+1)*cfg.BatchSize, len(examples))] {
				batch = append(batch, hs...)
			}
			sc := train.DefaultSFTConfig(cfg.LearningRate)
			if len(cfg.LearningRates) > 0 {
				sc.LearningRate = cfg.LearningRates[b]
			}
			m, err := tr.SFTStep(ctx, batch, sc)
			if err != nil {
				return nil, fmt.Errorf("batch %d of %d: %w", b+1, batches, err)
			}
			for k, v := range m {
				sum[k] += v
			}
			if progress != nil {
				progress(b+1, batches)
			}
		}
		for k, v := range sum {
			if !strings.HasPrefix(k, "data/") && !strings.HasPrefix(k, "time/") {
				sum[k] = v / float64(batches) // means; counts and times are totals
			}
		}
		s.log.Info("service: sft trained", "batches", batches, "loss", sum["loss/train"])
		return sum, nil
	})
}

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

// trainAndSave runs one training step under the training lock: step
// updates the trainer's adapter and optimizer and returns the step's
// metrics; the result is saved as checkpoint next and served. If step or
// the save fails, the adapter and optimizer are restored, so a failed or
// cancelled step leaves no half-applied update.
func (s *Service) trainAndSave(step func(tr *train.Trainer, next int) (map[string]float64, error)) (art.TrainResult, error) {
	s.trainMu.Lock()
	defer s.trainMu.Unlock()
	tr := s.trainer
	next := s.Step() + 1
	saved := tr.Snapshot()
	restore := func() { tr.Restore(saved) }
	start := time.Now()
	metrics, err := step(tr, next)
	if err != nil {
		restore()
		return art.TrainResult{}, fmt.Errorf("service: train step %d: %w", next, err)
	}
	if err := train.SaveCheckpoint(s.dir.CheckpointDir(next), tr.Adapter, tr.Opt, s.opt.BaseModel); err != nil {
		restore()
		return art.TrainResult{}, fmt.Errorf("service: %w", err)
	}
	s.mu.Lock()
	s.adapters[next] = tr.Adapter.Clone()
	s.latest = next
	s.evictLocked()
	s.mu.Unlock()
	if metrics == nil {
		metrics = map[string]float64{}
	}
	metrics["time/step_wall_s"] = time.Since(start).Seconds()
	return art.TrainResult{Step: next, Metrics: metrics}, nil
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
	tc.KLSourceSample = c.KLPenaltySource == art.KLSample
	tc.PrecalculateLogprobs = c.PrecalculateLogprobs
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
					return nil, fmt.Errorf("service: %s history %d: %w", name, hi, err)
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
				turn.Sampled = &train.Sampled{TokenIDs: ids, Logprobs: lps}
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
