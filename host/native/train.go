package native

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/artgo/art"
	"github.com/artgo/art/engine/model"
	"github.com/artgo/art/engine/train"
	"github.com/artgo/art/host"
)

// Train runs one training step on groups and saves the result as the next
// checkpoint, which is served at once. A step with nothing to train still
// advances (the adapter is carried over) and the result says so. On error
// (including cancellation) no checkpoint is written and the adapter and
// optimizer are left as they were before the call. progress, if non-nil,
// is called after each trained sequence.
func (h *Host) Train(ctx context.Context, groups []art.TrajectoryGroup, cfg art.TrainConfig, progress func(done, total int)) (art.TrainResult, error) {
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
	h.answers.templateKwargs(tgroups)
	tc.Seed = h.opt.Seed
	var ref model.Adapter // nil: KL against the base model
	if step := cfg.KLPenaltyReferenceStep; step != nil && cfg.KLPenaltyCoef > 0 {
		a, err := h.adapter(*step)
		if err != nil {
			return art.TrainResult{}, fmt.Errorf("native: KL reference step %d: %w", *step, err)
		}
		ref = a
	}
	var res train.StepResult
	out, err := h.trainAndSave(ctx, func(tr *train.Trainer, next int) (map[string]float64, error) {
		var err error
		// Turns answered as the step the adapter is at were sampled with
		// the weights the step starts from (loss/rollout_logprob_abs_diff).
		tc.Policy = host.Info{Name: h.opt.Name}.ModelID(next - 1)
		res, err = tr.Step(ctx, tgroups, tc, next, ref, progress)
		return res.Metrics, err
	})
	if err != nil {
		return art.TrainResult{}, err
	}
	out.Skipped, out.SkipReason = !res.Trained, res.Reason
	for _, w := range res.Warnings {
		h.log.Warn("native: " + w)
	}
	if out.Skipped {
		h.skips.report(h.log, out.Step, res.Reason, time.Now())
	} else {
		h.log.Info("native: trained", "step", out.Step, "loss", res.Metrics["loss/train"], "sequences", res.Metrics["data/step_num_gradient_steps"])
	}
	return out, nil
}

// TrainSFT fine-tunes the adapter on trajectories by supervised learning
// (every assistant turn of every history; see art.TrainSFTConfig) and saves
// the result as the next checkpoint, served at once. The metrics are the
// means over the batches, plus the totals of data/*. On error (including
// cancellation) no checkpoint is written and the adapter and optimizer are
// left as they were. progress, if non-nil, is called after each batch.
func (h *Host) TrainSFT(ctx context.Context, trajectories []art.Trajectory, cfg art.TrainSFTConfig, progress func(done, total int)) (art.TrainResult, error) {
	if err := cfg.Validate(len(trajectories)); err != nil {
		return art.TrainResult{}, err
	}
	if len(trajectories) == 0 {
		return art.TrainResult{}, fmt.Errorf("native: train sft: no trajectories")
	}
	cfg = cfg.WithDefaults()
	examples := make([][]train.History, len(trajectories))
	for ti, t := range trajectories {
		var err error
		if examples[ti], err = SFTHistories(t); err != nil {
			return art.TrainResult{}, fmt.Errorf("native: train sft: trajectory %d %w", ti, err)
		}
	}
	batches := cfg.Batches(len(trajectories))
	return h.trainAndSave(ctx, func(tr *train.Trainer, _ int) (map[string]float64, error) {
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
		h.log.Info("native: sft trained", "batches", batches, "loss", sum["loss/train"])
		return sum, nil
	})
}

// trainAndSave runs one training step under the training lock: step
// updates the trainer's adapter and optimizer and returns the step's
// metrics; the result is saved as checkpoint next and served. If step or
// the save fails, the adapter and optimizer are restored, so a failed or
// cancelled step leaves no half-applied update. A step whose loss,
// gradient or update goes non-finite fails (train.ErrNonFinite) before
// any weight changes, so no NaN or Inf reaches a checkpoint; the step
// counter does not advance.
func (h *Host) trainAndSave(ctx context.Context, step func(tr *train.Trainer, next int) (map[string]float64, error)) (art.TrainResult, error) {
	unlock, err := h.lockTraining(ctx)
	if err != nil {
		return art.TrainResult{}, fmt.Errorf("native: %w", err)
	}
	defer unlock()
	// A call whose context ended while it waited trains nothing, not even
	// a step with nothing to train (which would still save a checkpoint).
	if err := ctx.Err(); err != nil {
		return art.TrainResult{}, fmt.Errorf("native: %w", err)
	}
	tr := h.trainer
	next := h.Step() + 1
	saved := tr.Snapshot()
	restore := func() { tr.Restore(saved) }
	start := time.Now()
	metrics, err := step(tr, next)
	if err != nil {
		restore()
		return art.TrainResult{}, fmt.Errorf("native: train step %d failed, nothing saved: %w", next, err)
	}
	if err := train.SaveCheckpoint(h.dir.CheckpointDir(next), tr.Adapter, tr.Opt, h.checkpointInfo()); err != nil {
		restore()
		return art.TrainResult{}, fmt.Errorf("native: %w", err)
	}
	h.mu.Lock()
	h.adapters[next] = tr.Adapter.Clone()
	h.latest = next
	evicted := h.evictLocked()
	h.mu.Unlock()
	h.forget(evicted)
	if metrics == nil {
		metrics = map[string]float64{}
	}
	metrics["time/step_wall_s"] = time.Since(start).Seconds()
	return art.TrainResult{Step: next, Metrics: metrics}, nil
}

// skipWarnEvery is how often skipped steps are warned about: a run near
// its best skips many in a row (a converged demo, dozens of its last
// hundred steps) and its caller sees TrainResult.Skipped for each anyway.
const skipWarnEvery = time.Minute

// skipWarnings reports steps that advanced without training: a warning for
// the first, then at most one per skipWarnEvery counting those logged at
// Info level since the last.
type skipWarnings struct {
	mu    sync.Mutex
	last  time.Time // of the last warning
	since int       // skipped steps logged at Info since then
}

func (w *skipWarnings) report(log *slog.Logger, step int, reason string, now time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.last.IsZero() && now.Sub(w.last) < skipWarnEvery {
		w.since++
		log.Info("native: step advanced without training: checkpoint carried over", "step", step, "reason", reason)
		return
	}
	args := []any{"step", step, "reason", reason}
	if w.since > 0 {
		args = append(args, "also_skipped_since_last_warning", w.since)
	}
	log.Warn("native: step advanced WITHOUT training: checkpoint carried over", args...)
	w.last, w.since = now, 0
}
