// Command calculator trains an agent to solve arithmetic word problems with
// a calculator tool, by GRPO, written the way a user of the SDK would: a
// TrainableModel on the in-process backend, multi-turn rollouts that call
// the model's OpenAI-compatible endpoint with a function tool, a loop that
// resumes from the model's latest step, and a held-out set evaluated every
// few steps.
//
//	go run ./examples/calculator --base-model DIR [--steps 50]
//
// A model that has never called a tool (such as a random one from `art
// init-model`) can first be taught by supervised learning: --sft-warmup N
// trains on N transcripts of a teacher that calls the calculator with the
// right expression and answers with its result (one TrainSFT call,
// checkpoint 1); --sft-noise P makes the teacher answer a wrong number
// without the tool in a fraction P of them, so GRPO has something to
// improve. --eval N runs N held-out problems before and after training and
// prints the mean reward; --report FILE writes a JSON summary.
// --problems products, --system and --compact-tool make the episodes
// short enough for a tiny model. A LoRA warm-up (--sft-warmup) of a random
// 0.1M-parameter model teaches it the tool-call format but not to copy
// numbers, so none of its answers is correct and GRPO has nothing to
// reinforce. Without a pretrained model, build the base by full-parameter
// SFT instead: --write-teacher FILE --teacher N writes N teacher
// transcripts as JSONL (one art.Trajectory per line) and exits, and `art
// pretrain` trains every weight of a random model on them, which does learn
// to copy. With --sft-noise 0.5 the base calls the tool in about half of its
// episodes, and GRPO teaches it to call it every time:
//
//	art init-model --shape tiny --tokenizer bytes --chat-template compact.jinja --rope-theta 1000 --out random
//	calculator --write-teacher teacher.jsonl --teacher 4000 --problems products --sft-noise 0.5 --compact-tool --system "Use the calculator."
//	art pretrain --model random --data teacher.jsonl --epochs 10 --hold-out 200 --eval-every 50 --stop-loss 0.06 --out base
//	calculator --base-model base --problems products --compact-tool --system "Use the calculator." --eval 200
//
// bench/learning runs this pipeline (with its compact tool template and
// GRPO settings); see BENCHMARKS.md.
//
// The problems are generated from --seed with exact integer answers (see
// GenerateProblems); the calculator is a small exact evaluator (see Eval);
// the reward is 1 for the exact answer, 0.1 for a wrong number, 0 otherwise
// (see Grade). Checkpoints and logs go to <path>/<project>/models/<name>/.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"math"
	"os"
	"os/signal"
	"time"

	"github.com/artgo/art"
	"github.com/artgo/art/backend/local"
	"github.com/artgo/art/examples/benchmark"
)

// config is the command line.
type config struct {
	base, path, project, name string
	steps, groups, groupSize  int
	lr                        float64
	gradAccum, loraRank       int
	seed                      uint64
	problems                  string
	trainSize, valSize        int
	evalEvery                 int
	maxTurns, maxTokens       int
	system                    string
	compactTool               bool
	concurrency               int
	callTimeout               time.Duration
	maxExceptions             float64
	sftWarmup, sftBatch       int
	sftLR, sftNoise           float64
	eval                      int
	report                    string
	writeTeacher              string
	teacher                   int
	quiet                     bool
}

func parseFlags(args []string, stderr io.Writer) (config, error) {
	var c config
	fs := flag.NewFlagSet("calculator", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&c.base, "base-model", "", "Hugging Face model folder to train (required)")
	fs.StringVar(&c.path, "path", ".art", "root of checkpoints and logs")
	fs.StringVar(&c.project, "project", "examples", "project name")
	fs.StringVar(&c.name, "name", "calculator-example", "model name")
	fs.IntVar(&c.steps, "steps", 50, "training steps to reach (the SFT warm-up is step 1)")
	fs.IntVar(&c.groups, "groups", 8, "problems per step")
	fs.IntVar(&c.groupSize, "group-size", 8, "attempts per problem")
	fs.Float64Var(&c.lr, "lr", 1e-5, "learning rate")
	fs.IntVar(&c.gradAccum, "grad-accum", 0, "episodes per optimizer step (0: one per episode, ART's default)")
	fs.IntVar(&c.loraRank, "lora-rank", 8, "rank of the LoRA adapter (alpha is twice the rank)")
	fs.Uint64Var(&c.seed, "seed", 1, "seed of the problem sets and their order")
	fs.StringVar(&c.problems, "problems", "words", `problem set: "words" (word problems) or "products" ("Compute 37 * 54.", for a tiny model)`)
	fs.IntVar(&c.trainSize, "train-size", 2000, "training problems")
	fs.IntVar(&c.valSize, "val-size", 50, "held-out problems")
	fs.IntVar(&c.evalEvery, "eval-every", 10, "evaluate the held-out set every this many steps (0: never)")
	fs.IntVar(&c.maxTurns, "max-turns", 6, "model calls per episode")
	fs.IntVar(&c.maxTokens, "max-tokens", 256, "completion tokens per model call")
	fs.StringVar(&c.system, "system", "", "system message (default: the task instructions, SystemPrompt)")
	fs.BoolVar(&c.compactTool, "compact-tool", false, "send the calculator tool without descriptions (a shorter prompt)")
	fs.IntVar(&c.concurrency, "concurrency", 16, "episodes run at once")
	fs.DurationVar(&c.callTimeout, "call-timeout", 3*time.Minute, "bound on each chat completion")
	fs.Float64Var(&c.maxExceptions, "max-exceptions", 0.1, "failed rollouts (errors, timeouts) a gather tolerates: a fraction in (0, 1) or a count")
	fs.IntVar(&c.sftWarmup, "sft-warmup", 0, "at step 0, first train by SFT on this many teacher transcripts (tool call, then the answer)")
	fs.Float64Var(&c.sftNoise, "sft-noise", 0, "fraction of teacher transcripts that answer a wrong number without the tool")
	fs.IntVar(&c.sftBatch, "sft-batch", 32, "transcripts per SFT optimizer step")
	fs.Float64Var(&c.sftLR, "sft-lr", 6e-3, "SFT learning rate")
	fs.IntVar(&c.eval, "eval", 0, "held-out problems run before and after training, with seeded sampling (0: none; the held-out set grows to at least this size)")
	fs.StringVar(&c.report, "report", "", "write a JSON summary of the run to this file")
	fs.BoolVar(&c.quiet, "quiet", false, "no progress bars")
	fs.StringVar(&c.writeTeacher, "write-teacher", "", "write --teacher teacher transcripts to this JSONL file (for art pretrain) and exit")
	fs.IntVar(&c.teacher, "teacher", 2000, "transcripts --write-teacher writes")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	switch {
	case fs.NArg() > 0:
		return c, fmt.Errorf("unexpected arguments %q", fs.Args())
	case c.writeTeacher != "" && c.teacher < 1:
		return c, errors.New("--teacher must be >= 1")
	case c.base == "" && c.writeTeacher == "":
		return c, errors.New("--base-model is required: a Hugging Face model folder (config.json, *.safetensors, tokenizer.json)")
	case c.steps < 0 || c.groups < 1 || c.groupSize < 1 || c.trainSize < 1 || c.valSize < 0 || c.evalEvery < 0:
		return c, errors.New("--steps, --val-size and --eval-every must be >= 0 and --groups, --group-size, --train-size >= 1")
	case c.maxTurns < 1 || c.maxTokens < 1 || c.concurrency < 1:
		return c, errors.New("--max-turns, --max-tokens and --concurrency must be >= 1")
	case c.callTimeout <= 0:
		return c, errors.New("--call-timeout must be > 0")
	case c.maxExceptions < 0:
		return c, errors.New("--max-exceptions must be >= 0")
	case c.loraRank < 1:
		return c, errors.New("--lora-rank must be >= 1")
	case c.gradAccum < 0 || c.sftWarmup < 0 || c.sftBatch < 1 || !(c.sftLR > 0) || c.eval < 0:
		return c, errors.New("--grad-accum, --sft-warmup and --eval must be >= 0, --sft-batch >= 1 and --sft-lr > 0")
	case !(c.sftNoise >= 0 && c.sftNoise <= 1):
		return c, errors.New("--sft-noise must be in [0, 1]")
	case c.problems != "words" && c.problems != "products":
		return c, fmt.Errorf(`--problems %q: want "words" or "products"`, c.problems)
	case c.problems == "products" && c.trainSize+max(c.valSize, c.eval) > 68*68:
		return c, fmt.Errorf("--problems products has %d problems; --train-size plus the held-out set ask for more", 68*68)
	}
	c.valSize = max(c.valSize, c.eval)
	return c, nil
}

func main() {
	cfg, err := parseFlags(os.Args[1:], os.Stderr)
	if errors.Is(err, flag.ErrHelp) {
		return
	} else if err != nil {
		log.Fatal(err)
	}
	if cfg.writeTeacher != "" {
		if err := writeTeacher(cfg, os.Stdout); err != nil {
			log.Fatal(err)
		}
		return
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := train(ctx, cfg, os.Stdout); err != nil {
		log.Fatal(err)
	}
}

// splitProblems returns the training and held-out problems of cfg.
func splitProblems(cfg config) (train, val []Problem) {
	if cfg.problems == "products" {
		all := ProductProblems(cfg.seed, cfg.trainSize+cfg.valSize)
		return all[:cfg.trainSize], all[cfg.trainSize:]
	}
	return SplitProblems(cfg.seed, cfg.trainSize, cfg.valSize)
}

func train(ctx context.Context, cfg config, stdout io.Writer) error {
	t0 := time.Now()
	rep := benchmark.Report{Example: "calculator", Seed: cfg.seed, EvalScenarios: cfg.eval, Config: map[string]any{
		"groups": cfg.groups, "group_size": cfg.groupSize, "lr": cfg.lr, "grad_accum": cfg.gradAccum,
		"problems": cfg.problems, "max_turns": cfg.maxTurns, "max_tokens": cfg.maxTokens, "system": cfg.system,
		"compact_tool": cfg.compactTool, "lora_rank": cfg.loraRank, "sft_lr": cfg.sftLR, "sft_batch": cfg.sftBatch, "sft_noise": cfg.sftNoise}}
	trainSet, valSet := splitProblems(cfg)
	backend := local.New(local.Options{Quiet: cfg.quiet, Seed: cfg.seed})
	defer backend.Close()
	model := &art.TrainableModel{
		Model:     art.Model{Name: cfg.name, Project: cfg.project, BasePath: cfg.path},
		BaseModel: cfg.base,
		LoRA:      art.LoRAConfig{Rank: cfg.loraRank, Alpha: 2 * float64(cfg.loraRank)},
	}
	if err := model.Register(ctx, backend); err != nil {
		return err
	}
	client, err := model.OpenAIClient()
	if err != nil {
		return err
	}
	opt := RolloutOptions{MaxTurns: cfg.maxTurns, MaxTokens: cfg.maxTokens, CallTimeout: cfg.callTimeout,
		System: cfg.system, CompactTool: cfg.compactTool}
	gather := func(ctx context.Context, step int, problems []Problem, size int, desc string, seeded bool) ([]art.TrajectoryGroup, error) {
		name := model.InferenceName(step)
		return art.GatherGroups(ctx, problems, size, func(ctx context.Context, p Problem) (art.Trajectory, error) {
			o := opt
			if seeded { // the same samples for the same checkpoint: a fair before/after
				ss := hashID(p.ID) * 64
				o.SampleSeed = &ss
			}
			return Rollout(ctx, client, name, p, o)
		}, art.GatherOptions{Concurrency: cfg.concurrency, MaxExceptions: cfg.maxExceptions, Quiet: cfg.quiet, Description: desc})
	}
	lastEval := -1
	var firstEval, latestEval []art.TrajectoryGroup // held-out groups, for the paired error
	// evaluate runs the held-out set at step when forced (the first and
	// last step of an --eval run) or every --eval-every steps.
	evaluate := func(step int, force bool) (mean, stderr float64, metrics map[string]float64, err error) {
		if step == lastEval || len(valSet) == 0 || !force && (cfg.evalEvery == 0 || step%cfg.evalEvery != 0) {
			return 0, 0, nil, nil
		}
		lastEval = step
		t := time.Now()
		defer func() { rep.EvalSeconds += time.Since(t).Seconds() }()
		set := valSet
		if cfg.eval > 0 {
			set = valSet[:cfg.eval]
		}
		groups, err := gather(ctx, step, set, 1, fmt.Sprintf("val step %d", step), cfg.eval > 0)
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
		fmt.Fprintf(stdout, "val step %d: reward %.3f ± %.3f correct %.3f tool_calls %.2f\n", step, mean, stderr,
			metrics["correct"], metrics["tool_calls"])
		return mean, stderr, metrics, nil
	}

	start, err := model.Step(ctx) // resume where the last run stopped
	if err != nil {
		return err
	}
	if start >= cfg.steps {
		return nil
	}
	if start == 0 && cfg.sftWarmup > 0 {
		t := time.Now()
		trajs := TeacherTranscripts(trainSet, cfg.sftWarmup, cfg.sftNoise, cfg.seed, opt.system(), CalculatorTool(cfg.compactTool))
		res, err := model.TrainSFT(ctx, trajs, art.TrainSFTConfig{LearningRate: cfg.sftLR, BatchSize: cfg.sftBatch})
		if err != nil {
			return err
		}
		start = res.Step
		rep.SFTTrajectories, rep.SFTSeconds = len(trajs), time.Since(t).Seconds()
		fmt.Fprintf(stdout, "sft warm-up: %d teacher transcripts, loss %.4f, %.1fs\n", len(trajs), res.Metrics["loss/train"], rep.SFTSeconds)
	}
	rep.StartStep, rep.FinalStep = start, start
	if start == 0 || cfg.eval > 0 { // the score before training
		if rep.Before, rep.BeforeStderr, rep.BeforeMetrics, err = evaluate(start, cfg.eval > 0); err != nil {
			return err
		}
	}
	tRL := time.Now()
	evalBefore := rep.EvalSeconds
	// Enough epochs to reach cfg.steps; IterateDataset resumes at start.
	epochs := int(math.Ceil(float64(cfg.steps) / float64(art.DatasetSteps(len(trainSet), cfg.groups, 1))))
	batches, err := art.IterateDataset(trainSet, cfg.groups, epochs, start, int64(cfg.seed))
	if err != nil {
		return err
	}
	for batch := range batches {
		step := batch.Step
		if step >= cfg.steps {
			break
		}
		groups, err := gather(ctx, step, batch.Items, cfg.groupSize, fmt.Sprintf("train step %d", step), false)
		if err != nil {
			return err
		}
		res, err := model.Train(ctx, groups, art.TrainConfig{LearningRate: cfg.lr, GradAccumulationSequences: cfg.gradAccum})
		if err != nil {
			return err
		}
		rep.Steps++
		rep.FinalStep = res.Step
		fmt.Fprintf(stdout, "step %d: reward %.3f correct %.3f tool_calls %.2f loss %.4f skipped=%v %s\n", res.Step,
			mean(groups, "reward"), mean(groups, "correct"), mean(groups, "tool_calls"),
			res.Metrics["loss/train"], res.Skipped, res.SkipReason)
		if res.Step < cfg.steps || cfg.eval == 0 {
			if _, _, _, err := evaluate(res.Step, false); err != nil {
				return err
			}
		}
	}
	rep.RLSeconds = time.Since(tRL).Seconds() - (rep.EvalSeconds - evalBefore)
	if cfg.eval > 0 && rep.Steps > 0 {
		if rep.After, rep.AfterStderr, rep.AfterMetrics, err = evaluate(rep.FinalStep, true); err != nil {
			return err
		}
		rep.DiffStderr = benchmark.PairedStderr(firstEval, latestEval)
		fmt.Fprintf(stdout, "held-out reward %.3f → %.3f (± %.3f paired by problem, %d problems) after %d steps\n", rep.Before, rep.After,
			rep.DiffStderr, cfg.eval, rep.Steps)
	}
	rep.TotalSeconds = time.Since(t0).Seconds()
	if cfg.report != "" {
		return benchmark.WriteReport(cfg.report, rep)
	}
	return nil
}

// hashID hashes a problem id (FNV-1a), to seed its evaluation samples.
func hashID(id string) uint64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(id); i++ {
		h = (h ^ uint64(id[i])) * 1099511628211
	}
	return h >> 8
}

// mean averages the reward (key "reward") or a metric over the
// trajectories of groups, 0 if there are none.
func mean(groups []art.TrajectoryGroup, key string) float64 {
	var sum float64
	n := 0
	for _, g := range groups {
		for _, t := range g.Trajectories {
			if key == "reward" {
				sum += t.Reward
			} else {
				sum += t.Metrics[key]
			}
			n++
		}
	}
	if n == 0 {
		return 0
	}
	return sum / float64(n)
}
