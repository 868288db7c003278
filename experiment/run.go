package experiment

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/artgo/art"
)

// HeldOut runs the held-out scenarios on the checkpoint of step, one
// trajectory each or several with different sampling seeds (the same
// scenarios and seeds every time, so that evaluations pair up by the
// trajectories' "scenario_id"), and returns their groups.
type HeldOut func(ctx context.Context, step int) ([]art.TrajectoryGroup, error)

// Run keeps the record of one training run of an example: it evaluates
// the held-out set before, during and after training, prints a line per
// step and evaluation, and writes the Report when --report asks. The
// example keeps its own loop (gather, then model.Train, which also logs)
// and tells Run what happened:
//
//	run := experiment.NewRun("2048", cfg.Flags, model, heldOut, stdout)
//	start, _ := model.Step(ctx)
//	... start, err = run.Warmup(ctx, teacherTranscripts, "teacher moves")
//	run.Begin(ctx, start)
//	for step := start; step < cfg.Steps; step++ {
//		groups, _ := art.GatherGroups(...)
//		res, _ := model.Train(ctx, groups, cfg.TrainConfig())
//		run.Step(ctx, groups, res)
//	}
//	return run.Finish(ctx)
//
// (each call's error checked).
type Run struct {
	// Report is what --report writes; Run fills it as the run goes, and
	// the example may add to it (Config, above all).
	Report Report
	// Metrics name the trajectory metrics printed after the reward.
	Metrics []string
	// Unit names a held-out scenario in the closing line ("game").
	Unit string
	// EvalEvery > 0 also evaluates the held-out set every this many
	// steps (without --eval, on whatever set HeldOut runs).
	EvalEvery int

	flags         Flags
	model         *art.TrainableModel
	heldOut       HeldOut
	out           io.Writer
	start, rl     time.Time
	rlEval        float64 // evaluation seconds before the first step
	lastEval      int
	first, latest []art.TrajectoryGroup
}

// NewRun starts the record of a run of example with flags f, training
// model, printing to out. heldOut may be nil: no held-out set.
func NewRun(example string, f Flags, model *art.TrainableModel, heldOut HeldOut, out io.Writer) *Run {
	return &Run{
		Report: Report{Example: example, Seed: f.Seed, EvalScenarios: f.Eval, Config: map[string]any{
			"groups": f.Groups, "group_size": f.GroupSize, "lr": f.LR, "grad_accum": f.GradAccum, "train_config": f.TrainJSON}},
		Unit: "scenario", flags: f, model: model, heldOut: heldOut, out: out, start: time.Now(), lastEval: -1,
	}
}

// Warmup is the SFT warm-up at step 0: it trains the model on trajs
// (model.TrainSFT with --sft-lr and --sft-batch), which becomes the next
// checkpoint, and returns its step. what names the transcripts in the
// printed line ("teacher moves").
func (r *Run) Warmup(ctx context.Context, trajs []art.Trajectory, what string) (int, error) {
	t := time.Now()
	res, err := r.model.TrainSFT(ctx, trajs, art.TrainSFTConfig{LearningRate: r.flags.SFTLR, BatchSize: r.flags.SFTBatch})
	if err != nil {
		return 0, err
	}
	r.Report.SFTTrajectories, r.Report.SFTSeconds = len(trajs), time.Since(t).Seconds()
	r.Report.Config["sft_lr"], r.Report.Config["sft_batch"] = r.flags.SFTLR, r.flags.SFTBatch
	fmt.Fprintf(r.out, "sft warm-up: %d %s, %.0f tokens, loss %.4f, %.1fs\n", len(trajs), what,
		res.Metrics["data/step_trainer_tokens"], res.Metrics["loss/train"], r.Report.SFTSeconds)
	return res.Step, nil
}

// Begin marks the start of GRPO at step (where the model stands after a
// resume or a warm-up) and evaluates the held-out set there: always with
// --eval, at step 0 every EvalEvery steps (a resumed run evaluated its
// start at the end of the last one). Nothing is evaluated if the run
// has no step left to train.
func (r *Run) Begin(ctx context.Context, step int) error {
	r.Report.StartStep, r.Report.FinalStep = step, step
	var err error
	if step < r.flags.Steps && (r.flags.Eval > 0 || step == 0) {
		r.Report.Before, r.Report.BeforeStderr, r.Report.BeforeMetrics, err = r.evaluate(ctx, step, r.flags.Eval > 0)
	}
	r.rl, r.rlEval = time.Now(), r.Report.EvalSeconds
	return err
}

// Step records a trained step (the groups as gathered, the result of
// Train), prints its line, and evaluates the held-out set if EvalEvery
// says so (the last step's evaluation under --eval is Finish's).
func (r *Run) Step(ctx context.Context, groups []art.TrajectoryGroup, res art.TrainResult) error {
	r.Report.Steps++
	r.Report.FinalStep = res.Step
	if !res.Skipped {
		r.Report.TrainedSteps++
	}
	if d, ok := res.Metrics["loss/rollout_logprob_abs_diff"]; ok {
		r.Report.OnPolicySteps++
		r.Report.MaxRolloutLogprobDiff = max(r.Report.MaxRolloutLogprobDiff, d)
	}
	mean, _, metrics := Summarize(groups)
	fmt.Fprintf(r.out, "step %d: reward %.3f%s loss %.4f skipped=%v %s\n", res.Step, mean, r.metrics(metrics),
		res.Metrics["loss/train"], res.Skipped, res.SkipReason)
	if res.Step < r.flags.Steps || r.flags.Eval == 0 {
		_, _, _, err := r.evaluate(ctx, res.Step, false)
		return err
	}
	return nil
}

// Finish evaluates the final checkpoint under --eval (paired with the
// first evaluation), prints the change, and writes the report if --report
// names a file.
func (r *Run) Finish(ctx context.Context) error {
	if !r.rl.IsZero() {
		r.Report.RLSeconds = time.Since(r.rl).Seconds() - (r.Report.EvalSeconds - r.rlEval)
	}
	if r.flags.Eval > 0 && r.Report.Steps > 0 {
		var err error
		if r.Report.After, r.Report.AfterStderr, r.Report.AfterMetrics, err = r.evaluate(ctx, r.Report.FinalStep, true); err != nil {
			return err
		}
		r.Report.DiffStderr = PairedStderr(r.first, r.latest)
		fmt.Fprintf(r.out, "held-out reward %.3f → %.3f (± %.3f paired by %s, %d %ss) after %d steps\n", r.Report.Before, r.Report.After,
			r.Report.DiffStderr, r.Unit, r.flags.Eval, r.Unit, r.Report.Steps)
	}
	r.Report.TotalSeconds = time.Since(r.start).Seconds()
	if r.flags.Report != "" {
		return WriteReport(r.flags.Report, r.Report)
	}
	return nil
}

// evaluate runs the held-out set at step when forced or every EvalEvery
// steps, once per step, logs it as the val split and prints its line.
func (r *Run) evaluate(ctx context.Context, step int, force bool) (mean, stderr float64, metrics map[string]float64, err error) {
	if r.heldOut == nil || step == r.lastEval || !force && (r.EvalEvery == 0 || step%r.EvalEvery != 0) {
		return 0, 0, nil, nil
	}
	r.lastEval = step
	t := time.Now()
	defer func() { r.Report.EvalSeconds += time.Since(t).Seconds() }()
	groups, err := r.heldOut(ctx, step)
	if err != nil {
		return 0, 0, nil, err
	}
	if err := r.model.Log(ctx, groups, art.LogOptions{Split: "val", Step: &step}); err != nil {
		return 0, 0, nil, err
	}
	if r.first == nil {
		r.first = groups
	}
	r.latest = groups
	mean, stderr, metrics = Summarize(groups)
	fmt.Fprintf(r.out, "val step %d: reward %.3f ± %.3f%s\n", step, mean, stderr, r.metrics(metrics))
	return mean, stderr, metrics, nil
}

// metrics formats the means of the metrics Run prints.
func (r *Run) metrics(means map[string]float64) string {
	var b strings.Builder
	for _, k := range r.Metrics {
		fmt.Fprintf(&b, " %s %.3f", k, means[k])
	}
	return b.String()
}
