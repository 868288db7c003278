package art

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/artgo/art/store"
)

// Defaults of Watch.
const (
	DefaultGradNormFactor = 10
	DefaultRewardWindow   = 5
	DefaultRewardSE       = 4
	DefaultExceptionJump  = 0.2
	DefaultLRFactor       = 0.5
)

// minWatchHistory is the number of earlier steps the grad-norm and
// exception checks need before they judge a step.
const minWatchHistory = 3

// Watch is the collapse watch of a TrainableModel. After each training
// step (TrainableModel.Train) it compares the step with the run so far and
// flags a step that looks like the start of a collapse:
//
//   - its grad norm (loss/grad_norm) is more than GradNormFactor times the
//     median of the earlier steps';
//   - the mean train reward of the last RewardWindow steps is more than
//     RewardSE standard errors below the best mean of 2·RewardWindow steps
//     of the run (the longer mean tempers the upward bias of a best); the
//     noise is estimated from step-to-step differences, so a reward that
//     rises steadily does not count as noise. On synthetic noisy runs of
//     60 steps, 3 standard errors warned on 2 % of healthy runs, 4 on none
//     of 300, and a fall like the one in issue #22 was still caught about
//     5 steps in;
//   - its exception rate (failed rollouts) is more than ExceptionJump above
//     the median of the earlier steps';
//   - it and the RewardWindow−1 steps before it had no trainable group
//     (every group's rewards equal, so nothing trained) at a mean train
//     reward below the best step's before them: the policy fell into a
//     state GRPO cannot leave. A small model at a high learning rate does
//     this within its first ten steps, before the reward check has the
//     history it needs (BENCHMARKS.md, "Why small models collapse").
//
// The first flagged step of a streak logs one warning naming the cause and
// the step and adds it to TrainResult.Warnings; every step records the
// figures in history.jsonl as watch/grad_norm_ratio, watch/reward_drop_se,
// watch/exception_rate_jump and watch/collapse (1 when flagged). The zero
// value watches with the defaults and only warns; Recovery also acts.
type Watch struct {
	// Off turns the watch off.
	Off bool
	// GradNormFactor, RewardWindow, RewardSE and ExceptionJump are the
	// thresholds above (0 means 10, 5, 4 and 0.2).
	GradNormFactor float64
	RewardWindow   int
	RewardSE       float64
	ExceptionJump  float64
	// Recovery, if set, rolls back to the best checkpoint when a step is
	// flagged. It needs a backend that is a CheckpointRestorer.
	Recovery *Recovery
}

// Recovery says how the collapse watch recovers: the best checkpoint so far
// by Metric is restored as the next step (served at once, the optimizer
// state with it), and every later step trains at the learning rate times
// LRFactor, once more for each rollback. Rollbacks are counted from
// history.jsonl (watch/restored_from), so the lower rate survives a
// restart.
type Recovery struct {
	// Metric ranks the checkpoints, higher is better: "" means val/reward
	// when the run logs it, else train/reward. A train/* metric at step s
	// measures the rollouts sampled from checkpoint s-1, so that checkpoint
	// is the one restored.
	Metric string
	// LRFactor in (0, 1] scales the learning rate after each rollback (0
	// means 0.5).
	LRFactor float64
}

// CheckpointRestorer is a Backend that can serve an earlier checkpoint as
// the next step (Watch.Recovery).
type CheckpointRestorer interface {
	// RestoreCheckpoint copies the checkpoint at step (adapter and optimizer
	// state) to the next step, which is served at once and from which
	// training continues, and returns the new step.
	RestoreCheckpoint(ctx context.Context, m *TrainableModel, step int) (int, error)
}

func (w Watch) withDefaults() Watch {
	if w.GradNormFactor == 0 {
		w.GradNormFactor = DefaultGradNormFactor
	}
	if w.RewardWindow == 0 {
		w.RewardWindow = DefaultRewardWindow
	}
	if w.RewardSE == 0 {
		w.RewardSE = DefaultRewardSE
	}
	if w.ExceptionJump == 0 {
		w.ExceptionJump = DefaultExceptionJump
	}
	if w.Recovery != nil {
		r := *w.Recovery
		if r.LRFactor == 0 {
			r.LRFactor = DefaultLRFactor
		}
		w.Recovery = &r
	}
	return w
}

// Validate checks the thresholds.
func (w Watch) Validate() error {
	w = w.withDefaults()
	var errs []error
	if !(w.GradNormFactor > 1) || math.IsInf(w.GradNormFactor, 0) {
		errs = append(errs, fmt.Errorf("art: Watch.GradNormFactor = %v: must be a finite number > 1 (0 selects 10)", w.GradNormFactor))
	}
	if w.RewardWindow < 1 {
		errs = append(errs, fmt.Errorf("art: Watch.RewardWindow = %d: must be >= 1 (0 selects 5)", w.RewardWindow))
	}
	if !(w.RewardSE > 0) || math.IsInf(w.RewardSE, 0) {
		errs = append(errs, fmt.Errorf("art: Watch.RewardSE = %v: must be a finite number > 0 (0 selects 4)", w.RewardSE))
	}
	if !(w.ExceptionJump > 0 && w.ExceptionJump <= 1) {
		errs = append(errs, fmt.Errorf("art: Watch.ExceptionJump = %v: must be in (0, 1] (0 selects 0.2)", w.ExceptionJump))
	}
	if r := w.Recovery; r != nil && !(r.LRFactor > 0 && r.LRFactor <= 1) {
		errs = append(errs, fmt.Errorf("art: Watch.Recovery.LRFactor = %v: must be in (0, 1] (0 selects 0.5)", r.LRFactor))
	}
	return errors.Join(errs...)
}

// watchPoint is one training step as the watch sees it; NaN marks a figure
// the step lacks.
type watchPoint struct {
	step                            int
	gradNorm, reward, exceptionRate float64
	collapse                        bool
	// stuck: the step reported no trainable group (nothing trained).
	stuck bool
}

// pointOf reads a watch point from a history row's metrics.
func pointOf(step int, metrics map[string]any) watchPoint {
	get := func(k string) float64 {
		if v, ok := metrics[k].(float64); ok {
			return v
		}
		return math.NaN()
	}
	return watchPoint{step: step, gradNorm: get("loss/grad_norm"), reward: get("train/reward"),
		exceptionRate: get("train/exception_rate"), collapse: get("watch/collapse") == 1,
		stuck: get("data/step_num_groups_trainable") == 0}
}

// check judges cur against the earlier steps of its lineage. It returns the
// watch/* metrics of cur and the causes that flag it, one sentence each.
func (w Watch) check(past []watchPoint, cur watchPoint) (map[string]float64, []string) {
	out := map[string]float64{}
	var causes []string
	series := func(f func(watchPoint) float64) []float64 {
		var s []float64
		for _, p := range past {
			if v := f(p); !math.IsNaN(v) {
				s = append(s, v)
			}
		}
		return s
	}
	if norms := series(func(p watchPoint) float64 { return p.gradNorm }); len(norms) >= minWatchHistory && !math.IsNaN(cur.gradNorm) {
		med := median(norms)
		ratio := cur.gradNorm / math.Max(med, 1e-12)
		out["watch/grad_norm_ratio"] = ratio
		if ratio > w.GradNormFactor {
			causes = append(causes, fmt.Sprintf("grad norm %.3g is %.1f× the run's median %.3g", cur.gradNorm, ratio, med))
		}
	}
	if rates := series(func(p watchPoint) float64 { return p.exceptionRate }); len(rates) >= minWatchHistory && !math.IsNaN(cur.exceptionRate) {
		med := median(rates)
		jump := cur.exceptionRate - med
		out["watch/exception_rate_jump"] = jump
		if jump > w.ExceptionJump {
			causes = append(causes, fmt.Sprintf("exception rate %.2f is %.2f above the run's median %.2f", cur.exceptionRate, jump, med))
		}
	}
	rewards := series(func(p watchPoint) float64 { return p.reward })
	if k := w.RewardWindow; !math.IsNaN(cur.reward) && len(rewards)+1 >= 3*k {
		rewards = append(rewards, cur.reward)
		// The step-to-step noise σ from successive differences (von
		// Neumann): E[(r_i − r_{i−1})²] = 2σ², which a trend shifts far less
		// than it shifts the spread of the levels.
		var ss float64
		for i := 1; i < len(rewards); i++ {
			d := rewards[i] - rewards[i-1]
			ss += d * d
		}
		sigma := math.Sqrt(ss / float64(2*(len(rewards)-1)))
		// The best is the best mean of 2k steps: the best of many noisy
		// means is biased up, less so the longer they are.
		se := math.Max(sigma*math.Sqrt(1/float64(k)+1/float64(2*k)), 1e-9)
		mean := func(end, n int) float64 { return sum(rewards[end-n:end]) / float64(n) }
		best := math.Inf(-1)
		for end := 2 * k; end < len(rewards); end++ {
			best = math.Max(best, mean(end, 2*k))
		}
		now := mean(len(rewards), k)
		drop := (best - now) / se
		out["watch/reward_drop_se"] = drop
		if drop > w.RewardSE {
			causes = append(causes, fmt.Sprintf("the mean train reward of the last %d steps, %.3g, is %.1f standard errors below the run's best, %.3g", k, now, drop, best))
		}
	}
	if k := w.RewardWindow; cur.stuck && !math.IsNaN(cur.reward) && len(past) > k-1 {
		window := append(slices.Clone(past[len(past)-(k-1):]), cur)
		var stuckSum float64
		for _, p := range window {
			if !p.stuck {
				window = nil
				break
			}
			stuckSum += p.reward
		}
		best := math.Inf(-1)
		for _, p := range past[:len(past)-(k-1)] {
			if !math.IsNaN(p.reward) {
				best = math.Max(best, p.reward)
			}
		}
		if mean := stuckSum / float64(k); window != nil && mean < best {
			causes = append(causes, fmt.Sprintf("no group's rewards have differed for %d steps (nothing trains) at a mean train reward of %.3g, below the best step's %.3g", k, mean, best))
		}
	}
	out["watch/collapse"] = 0
	if len(causes) > 0 {
		out["watch/collapse"] = 1
	}
	return out, causes
}

func sum(xs []float64) float64 {
	var s float64
	for _, x := range xs {
		s += x
	}
	return s
}

func median(xs []float64) float64 {
	s := slices.Sorted(slices.Values(xs))
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// restoredFrom is the history key of a rollback's row: the step restored.
const restoredFrom = "watch/restored_from"

// lineage returns the training rows of the adapter now being trained, in
// order: a rollback to step b drops the rows after b up to it. It also
// returns how many rollbacks the history holds.
func lineage(rows []map[string]any) (kept []map[string]any, rollbacks int) {
	for _, r := range rows {
		if b, ok := r[restoredFrom].(float64); ok {
			rollbacks++
			kept = slices.DeleteFunc(kept, func(k map[string]any) bool { return stepOf(k) > int(b) })
			continue
		}
		if _, ok := r["train/reward"]; ok { // a Train row, not SFT nor val
			kept = append(kept, r)
		}
	}
	return kept, rollbacks
}

func stepOf(row map[string]any) int {
	s, _ := row["step"].(float64)
	return int(s)
}

// bestCheckpoint returns the step to restore: the checkpoint whose rows in
// the lineage rank best by metric (see Recovery.Metric).
func bestCheckpoint(rows []map[string]any, metric string) (step int, used string, ok bool) {
	kept, _ := lineage(rows)
	if metric == "" {
		metric = "train/reward"
		for _, r := range rows {
			if _, has := r[defaultBestCheckpointMetric]; has {
				metric = defaultBestCheckpointMetric
				break
			}
		}
	}
	// Val rows are not training rows: rank every row of a lineage step.
	steps := map[int]bool{}
	for _, r := range kept {
		steps[stepOf(r)] = true
	}
	var ranked []map[string]any
	for _, r := range rows {
		if steps[stepOf(r)] || stepOf(r) == 0 {
			ranked = append(ranked, r)
		}
	}
	best, found := bestStep(ranked, metric)
	if !found {
		return 0, metric, false
	}
	if strings.HasPrefix(metric, "train/") && best > 0 {
		best--
	}
	return best, metric, true
}

// watchStep runs the watch on a trained step: it adds the watch/* metrics
// to metrics, warns on the first flagged step of a streak, and returns
// whether the step is flagged. rows is the history before the step.
func (m *TrainableModel) watchStep(rows []map[string]any, res *TrainResult, metrics map[string]float64) bool {
	w := m.Watch.withDefaults()
	kept, _ := lineage(rows)
	past := make([]watchPoint, len(kept))
	for i, r := range kept {
		past[i] = pointOf(stepOf(r), r)
	}
	curRow := make(map[string]any, len(metrics))
	for k, v := range metrics {
		curRow[k] = v
	}
	wm, causes := w.check(past, pointOf(res.Step, curRow))
	for k, v := range wm {
		metrics[k] = v
	}
	if len(causes) == 0 {
		return false
	}
	if len(past) > 0 && past[len(past)-1].collapse {
		return true // the streak was already reported
	}
	msg := fmt.Sprintf("art: model %q may be collapsing at step %d: %s", m.Name, res.Step, strings.Join(causes, "; "))
	if w.Recovery == nil {
		msg += " (set Watch.Recovery to roll back to the best checkpoint automatically)"
	}
	m.logger().Warn(msg)
	res.Warnings = append(res.Warnings, msg)
	return true
}

// rollBack restores the best checkpoint as the next step after a flagged
// step and logs the rollback. It returns the new step.
func (m *TrainableModel) rollBack(ctx context.Context, r CheckpointRestorer, d *store.ModelDir, res *TrainResult) error {
	rows, err := d.ReadHistory()
	if cerr := (*store.CorruptLinesError)(nil); err != nil && !errors.As(err, &cerr) {
		return fmt.Errorf("art: model %q: recovery: %w", m.Name, err)
	}
	best, metric, ok := bestCheckpoint(rows, m.Watch.Recovery.Metric)
	if !ok {
		msg := fmt.Sprintf("art: model %q: no rollback at step %d: no history row has %s", m.Name, res.Step, metric)
		m.logger().Warn(msg)
		res.Warnings = append(res.Warnings, msg)
		return nil
	}
	_, rollbacks := lineage(rows)
	factor := m.Watch.withDefaults().Recovery.LRFactor
	step, err := r.RestoreCheckpoint(ctx, m, best)
	if err != nil {
		return fmt.Errorf("art: model %q: recovery: restore step %d: %w", m.Name, best, err)
	}
	m.setLatest(step)
	scale := math.Pow(factor, float64(rollbacks+1))
	msg := fmt.Sprintf("art: model %q: rolled back: step %d (best %s) is served again as step %d; training goes on at %g× the learning rate",
		m.Name, best, metric, step, scale)
	m.logger().Warn(msg)
	res.Warnings = append(res.Warnings, msg)
	res.Step = step
	// The restored step is served: its row (which later steps' learning
	// rate is counted from) is written even if ctx ended meanwhile.
	return m.Log(context.WithoutCancel(ctx), nil, LogOptions{Split: "train", Step: &step, Metrics: map[string]float64{restoredFrom: float64(best), "watch/lr_scale": scale}})
}

// learningRateScale returns the factor the learning rate is multiplied by
// after the rollbacks recorded in rows.
func (w Watch) learningRateScale(rows []map[string]any) float64 {
	if w.Recovery == nil {
		return 1
	}
	_, n := lineage(rows)
	return math.Pow(w.withDefaults().Recovery.LRFactor, float64(n))
}
