// Command 2048 trains an agent to play 2048 with GRPO, written the way a
// user of the SDK would: a TrainableModel on the in-process backend,
// rollouts that play through the model's OpenAI-compatible endpoint (the
// board in a user message, a one-word move in the reply), a loop that
// resumes from the model's latest step.
//
//	go run ./examples/2048 --base-model DIR [--steps 20] [--target 128]
//
// A model that has never seen the game (such as a random one from `art
// init-model`) can first be taught the format by supervised learning:
// --sft-warmup N trains on N moves of a teacher playing uniformly random
// moves that change the board (one TrainSFT call, checkpoint 1), and
// GRPO goes on from there. --eval N plays N held-out games before and after
// training and prints the mean reward; --report FILE writes a JSON summary.
// The benchmark configuration of bench/learning, for a random tiny model
// (about 3 minutes on 2 cores; held-out reward about 0.33 → 0.5), is
//
//	--prompt board --system 2048 --target 64 --max-moves 30 --sft-warmup 2000
//	--steps 41 --groups 8 --group-size 4 --lr 5e-4 --grad-accum 64 --eval 200
//
// DIR is a Hugging Face model folder (for example Qwen2.5-0.5B-Instruct, or
// one made by `art init-model`). The reward is in [0, 1]: mostly the
// largest tile, a little the board sum (see Reward); a reply that is not a
// move ends the game with reward 0. Checkpoints and logs go to
// <path>/<project>/models/<name>/.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"os/signal"
	"time"

	"github.com/artgo/art"
	"github.com/artgo/art/backend/local"
	"github.com/artgo/art/examples/benchmark"
	"github.com/openai/openai-go/v3"
)

// config is the command line.
type config struct {
	base, path, project, name string
	steps, groups, groupSize  int
	lr                        float64
	gradAccum                 int
	invalidPenalty            float64
	seed                      uint64
	target, maxMoves          int
	prompt, system            string
	maxTokens, concurrency    int
	callTimeout               time.Duration
	maxExceptions             float64
	sftWarmup, sftBatch       int
	sftLR                     float64
	eval                      int
	report                    string
	quiet                     bool
}

func parseFlags(args []string, stderr io.Writer) (config, error) {
	var c config
	fs := flag.NewFlagSet("2048", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&c.base, "base-model", "", "Hugging Face model folder to train (required)")
	fs.StringVar(&c.path, "path", ".art", "root of checkpoints and logs")
	fs.StringVar(&c.project, "project", "examples", "project name")
	fs.StringVar(&c.name, "name", "2048-example", "model name")
	fs.IntVar(&c.steps, "steps", 20, "training steps to reach (the SFT warm-up is step 1)")
	fs.IntVar(&c.groups, "groups", 8, "scenarios (games from one seed) per step")
	fs.IntVar(&c.groupSize, "group-size", 8, "games per scenario")
	fs.Float64Var(&c.lr, "lr", 1e-5, "learning rate")
	fs.IntVar(&c.gradAccum, "grad-accum", 0, "move sequences per optimizer step (0: one per sequence, ART's default)")
	fs.Float64Var(&c.invalidPenalty, "invalid-penalty", 0, "lower the training reward of games lost to an invalid reply by this much (logged rewards are unchanged)")
	fs.Uint64Var(&c.seed, "seed", 1, "seed of the game scenarios")
	fs.IntVar(&c.target, "target", 128, "tile that wins the game (a power of two)")
	fs.IntVar(&c.maxMoves, "max-moves", 300, "moves after which a game stops")
	fs.StringVar(&c.prompt, "prompt", "full", `what the model is asked before each move: "full" (rules, board, answer format) or "board" (the board alone, for a model taught by --sft-warmup)`)
	fs.StringVar(&c.system, "system", "", "system message sent before each move's prompt (none by default)")
	fs.IntVar(&c.maxTokens, "max-tokens", 8, "completion tokens per move")
	fs.IntVar(&c.concurrency, "concurrency", 16, "games played at once")
	fs.DurationVar(&c.callTimeout, "call-timeout", 2*time.Minute, "bound on each chat completion")
	fs.Float64Var(&c.maxExceptions, "max-exceptions", 0.1, "failed rollouts (errors, timeouts) a gather tolerates: a fraction in (0, 1) or a count")
	fs.IntVar(&c.sftWarmup, "sft-warmup", 0, "at step 0, first train by SFT on this many moves of a random teacher (moves that change the board)")
	fs.IntVar(&c.sftBatch, "sft-batch", 32, "moves per SFT optimizer step")
	fs.Float64Var(&c.sftLR, "sft-lr", 6e-3, "SFT learning rate")
	fs.IntVar(&c.eval, "eval", 0, "held-out games played before and after training (0: none)")
	fs.StringVar(&c.report, "report", "", "write a JSON summary of the run to this file")
	fs.BoolVar(&c.quiet, "quiet", false, "no progress bars")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	switch {
	case fs.NArg() > 0:
		return c, fmt.Errorf("unexpected arguments %q", fs.Args())
	case c.base == "":
		return c, errors.New("--base-model is required: a Hugging Face model folder (config.json, *.safetensors, tokenizer.json)")
	case c.steps < 0 || c.groups < 1 || c.groupSize < 1 || c.maxTokens < 1 || c.concurrency < 1:
		return c, errors.New("--steps must be >= 0 and --groups, --group-size, --max-tokens, --concurrency >= 1")
	case c.callTimeout <= 0:
		return c, errors.New("--call-timeout must be > 0")
	case c.maxExceptions < 0:
		return c, errors.New("--max-exceptions must be >= 0")
	case c.gradAccum < 0 || c.invalidPenalty < 0:
		return c, errors.New("--grad-accum and --invalid-penalty must be >= 0")
	case c.sftWarmup < 0 || c.sftBatch < 1 || !(c.sftLR > 0) || c.eval < 0:
		return c, errors.New("--sft-warmup and --eval must be >= 0, --sft-batch >= 1 and --sft-lr > 0")
	case c.prompt != "full" && c.prompt != "board":
		return c, fmt.Errorf(`--prompt %q: want "full" or "board"`, c.prompt)
	}
	return c, c.rules().Validate()
}

func (c config) rules() Rules {
	r := Rules{Target: c.target, MaxMoves: c.maxMoves}
	if c.prompt == "board" {
		r.Prompt = BoardPrompt
	}
	return r
}

func main() {
	cfg, err := parseFlags(os.Args[1:], os.Stderr)
	if errors.Is(err, flag.ErrHelp) {
		return
	} else if err != nil {
		log.Fatal(err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := train(ctx, cfg, os.Stdout); err != nil {
		log.Fatal(err)
	}
}

// trainingGroups returns a step's groups: groupSize games of each scenario,
// each sampled with its own seed, so that a run is reproducible whatever
// order the server batches the requests in.
func trainingGroups(client openai.Client, model string, scs []Scenario, groupSize int, opt RolloutOptions) []art.GroupSpec {
	specs := make([]art.GroupSpec, len(scs))
	for i, sc := range scs {
		for k := range groupSize {
			o := opt
			ss := (sc.Seed*uint64(groupSize) + uint64(k)) << 12 // room for 4096 moves per game
			o.SampleSeed = &ss
			specs[i].Rollouts = append(specs[i].Rollouts, func(ctx context.Context) (art.Trajectory, error) {
				return Rollout(ctx, client, model, sc, o)
			})
		}
	}
	return specs
}

// scenarios returns the games of a step: their seeds depend only on the
// run's seed and the step, so a resumed run plays the same games.
func scenarios(seed uint64, step, groups int) []Scenario {
	out := make([]Scenario, groups)
	for i := range out {
		out[i] = Scenario{Seed: seed<<32 | uint64(step*groups+i)}
	}
	return out
}

// evalScenarios returns the held-out games: the same for every run and
// seed, apart from every training and teacher game.
func evalScenarios(n int) []Scenario {
	out := make([]Scenario, n)
	for i := range out {
		out[i] = Scenario{Seed: 1<<63 | uint64(i)}
	}
	return out
}

func train(ctx context.Context, cfg config, stdout io.Writer) error {
	t0 := time.Now()
	rep := benchmark.Report{Example: "2048", Seed: cfg.seed, EvalScenarios: cfg.eval, Config: map[string]any{
		"groups": cfg.groups, "group_size": cfg.groupSize, "lr": cfg.lr, "grad_accum": cfg.gradAccum,
		"invalid_penalty": cfg.invalidPenalty, "target": cfg.target, "max_moves": cfg.maxMoves, "prompt": cfg.prompt, "system": cfg.system,
		"sft_lr": cfg.sftLR, "sft_batch": cfg.sftBatch}}
	backend := local.New(local.Options{Quiet: cfg.quiet, Seed: cfg.seed})
	defer backend.Close()
	model := &art.TrainableModel{
		Model:     art.Model{Name: cfg.name, Project: cfg.project, BasePath: cfg.path},
		BaseModel: cfg.base,
	}
	if err := model.Register(ctx, backend); err != nil {
		return err
	}
	client, err := model.OpenAIClient()
	if err != nil {
		return err
	}
	opt := RolloutOptions{Rules: cfg.rules(), System: cfg.system, MaxTokens: cfg.maxTokens, CallTimeout: cfg.callTimeout}
	start, err := model.Step(ctx) // resume where the last run stopped
	if err != nil {
		return err
	}
	if start == 0 && cfg.sftWarmup > 0 && cfg.steps > 0 {
		t := time.Now()
		trajs := TeacherTranscripts(cfg.seed, cfg.sftWarmup, opt.Rules, opt.System)
		res, err := model.TrainSFT(ctx, trajs, art.TrainSFTConfig{LearningRate: cfg.sftLR, BatchSize: cfg.sftBatch})
		if err != nil {
			return err
		}
		start = res.Step
		rep.SFTTrajectories, rep.SFTSeconds = len(trajs), time.Since(t).Seconds()
		fmt.Fprintf(stdout, "sft warm-up: %d teacher moves, loss %.4f, %.1fs\n", len(trajs), res.Metrics["loss/train"], rep.SFTSeconds)
	}
	rep.StartStep, rep.FinalStep = start, start
	var firstEval, latestEval []art.TrajectoryGroup // held-out groups, for the paired error
	evaluate := func(step int) (mean, stderr float64, metrics map[string]float64, err error) {
		t := time.Now()
		defer func() { rep.EvalSeconds += time.Since(t).Seconds() }()
		name := model.InferenceName(step)
		groups, err := art.GatherGroups(ctx, evalScenarios(cfg.eval), 1, func(ctx context.Context, sc Scenario) (art.Trajectory, error) {
			o := opt
			ss := sc.Seed * 1024 // reproducible sampling: the same games for the same checkpoint
			o.SampleSeed = &ss
			return Rollout(ctx, client, name, sc, o)
		}, art.GatherOptions{Concurrency: cfg.concurrency, MaxExceptions: cfg.maxExceptions, Quiet: cfg.quiet,
			Description: fmt.Sprintf("2048 eval step %d", step)})
		if err != nil {
			return 0, 0, nil, err
		}
		if err := model.Log(ctx, groups, art.LogOptions{Split: "val", Step: &step}); err != nil {
			return 0, 0, nil, err
		}
		if firstEval == nil {
			firstEval = groups
		}
		latestEval = groups
		mean, stderr, metrics = benchmark.Summarize(groups)
		fmt.Fprintf(stdout, "val step %d: reward %.3f ± %.3f max_tile %.1f invalid %.3f noop_moves %.1f\n", step, mean, stderr,
			metrics["max_tile"], metrics["invalid_move"], metrics["noop_moves"])
		return mean, stderr, metrics, nil
	}
	if cfg.eval > 0 && start < cfg.steps {
		if rep.Before, rep.BeforeStderr, rep.BeforeMetrics, err = evaluate(start); err != nil {
			return err
		}
	}
	tRL := time.Now()
	for step := start; step < cfg.steps; step++ {
		name := model.InferenceName(step)
		groups, err := art.GatherTrajectoryGroups(ctx, trainingGroups(client, name, scenarios(cfg.seed, step, cfg.groups), cfg.groupSize, opt),
			art.GatherOptions{Concurrency: cfg.concurrency, MaxExceptions: cfg.maxExceptions, Quiet: cfg.quiet,
				Description: fmt.Sprintf("2048 step %d", step)})
		if err != nil {
			return err
		}
		res, err := model.Train(ctx, benchmark.PenalizeInvalid(groups, cfg.invalidPenalty),
			art.TrainConfig{LearningRate: cfg.lr, GradAccumulationSequences: cfg.gradAccum}, art.LogGroups(groups)) // logged with the real rewards
		if err != nil {
			return err
		}
		rep.Steps++
		rep.FinalStep = res.Step
		fmt.Fprintf(stdout, "step %d: reward %.3f max_tile %.1f invalid %.3f loss %.4f skipped=%v %s\n", res.Step,
			mean(groups, func(t art.Trajectory) float64 { return t.Reward }),
			mean(groups, func(t art.Trajectory) float64 { return t.Metrics["max_tile"] }),
			mean(groups, func(t art.Trajectory) float64 { return t.Metrics["invalid_move"] }),
			res.Metrics["loss/train"], res.Skipped, res.SkipReason)
	}
	rep.RLSeconds = time.Since(tRL).Seconds()
	if cfg.eval > 0 && rep.Steps > 0 {
		if rep.After, rep.AfterStderr, rep.AfterMetrics, err = evaluate(rep.FinalStep); err != nil {
			return err
		}
		rep.DiffStderr = benchmark.PairedStderr(firstEval, latestEval)
		fmt.Fprintf(stdout, "held-out reward %.3f → %.3f (± %.3f paired by game, %d games) after %d steps\n", rep.Before, rep.After,
			rep.DiffStderr, cfg.eval, rep.Steps)
	}
	rep.TotalSeconds = time.Since(t0).Seconds()
	if cfg.report != "" {
		return benchmark.WriteReport(cfg.report, rep)
	}
	return nil
}

// mean averages f over the trajectories of groups (0 if there are none).
func mean(groups []art.TrajectoryGroup, f func(art.Trajectory) float64) float64 {
	var sum float64
	n := 0
	for _, g := range groups {
		for _, t := range g.Trajectories {
			sum += f(t)
			n++
		}
	}
	if n == 0 {
		return 0
	}
	return sum / float64(n)
}
