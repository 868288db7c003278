// Command calculator trains an agent to solve arithmetic word problems with
// a calculator tool, by GRPO, written the way a user of the SDK would: a
// TrainableModel on the in-process backend, multi-turn rollouts that call
// the model's OpenAI-compatible endpoint with a function tool, a loop that
// resumes from the model's latest step, and a held-out set evaluated every
// few steps.
//
//	go run ./examples/calculator --base-model DIR [--steps 50]
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
)

// config is the command line.
type config struct {
	base, path, project, name string
	steps, groups, groupSize  int
	lr                        float64
	seed                      uint64
	trainSize, valSize        int
	evalEvery                 int
	maxTurns, maxTokens       int
	concurrency               int
	callTimeout               time.Duration
	maxExceptions             float64
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
	fs.IntVar(&c.steps, "steps", 50, "training steps to reach")
	fs.IntVar(&c.groups, "groups", 8, "problems per step")
	fs.IntVar(&c.groupSize, "group-size", 8, "attempts per problem")
	fs.Float64Var(&c.lr, "lr", 1e-5, "learning rate")
	fs.Uint64Var(&c.seed, "seed", 1, "seed of the problem sets and their order")
	fs.IntVar(&c.trainSize, "train-size", 2000, "training problems")
	fs.IntVar(&c.valSize, "val-size", 50, "held-out problems")
	fs.IntVar(&c.evalEvery, "eval-every", 10, "evaluate the held-out set every this many steps (0: never)")
	fs.IntVar(&c.maxTurns, "max-turns", 6, "model calls per episode")
	fs.IntVar(&c.maxTokens, "max-tokens", 256, "completion tokens per model call")
	fs.IntVar(&c.concurrency, "concurrency", 16, "episodes run at once")
	fs.DurationVar(&c.callTimeout, "call-timeout", 3*time.Minute, "bound on each chat completion")
	fs.Float64Var(&c.maxExceptions, "max-exceptions", 0.1, "failed rollouts (errors, timeouts) a gather tolerates: a fraction in (0, 1) or a count")
	fs.BoolVar(&c.quiet, "quiet", false, "no progress bars")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	switch {
	case fs.NArg() > 0:
		return c, fmt.Errorf("unexpected arguments %q", fs.Args())
	case c.base == "":
		return c, errors.New("--base-model is required: a Hugging Face model folder (config.json, *.safetensors, tokenizer.json)")
	case c.steps < 0 || c.groups < 1 || c.groupSize < 1 || c.trainSize < 1 || c.valSize < 0 || c.evalEvery < 0:
		return c, errors.New("--steps, --val-size and --eval-every must be >= 0 and --groups, --group-size, --train-size >= 1")
	case c.maxTurns < 1 || c.maxTokens < 1 || c.concurrency < 1:
		return c, errors.New("--max-turns, --max-tokens and --concurrency must be >= 1")
	case c.callTimeout <= 0:
		return c, errors.New("--call-timeout must be > 0")
	case c.maxExceptions < 0:
		return c, errors.New("--max-exceptions must be >= 0")
	}
	return c, nil
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

func train(ctx context.Context, cfg config, stdout io.Writer) error {
	trainSet, valSet := SplitProblems(cfg.seed, cfg.trainSize, cfg.valSize)
	backend := local.New(local.Options{Quiet: cfg.quiet})
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
	opt := RolloutOptions{MaxTurns: cfg.maxTurns, MaxTokens: cfg.maxTokens, CallTimeout: cfg.callTimeout}
	gather := func(ctx context.Context, step int, problems []Problem, size int, desc string) ([]art.TrajectoryGroup, error) {
		name := model.InferenceName(step)
		return art.GatherGroups(ctx, problems, size, func(ctx context.Context, p Problem) (art.Trajectory, error) {
			return Rollout(ctx, client, name, p, opt)
		}, art.GatherOptions{Concurrency: cfg.concurrency, MaxExceptions: cfg.maxExceptions, Quiet: cfg.quiet, Description: desc})
	}
	evaluate := func(step int) error {
		if cfg.evalEvery == 0 || cfg.valSize == 0 || step%cfg.evalEvery != 0 {
			return nil
		}
		groups, err := gather(ctx, step, valSet, 1, fmt.Sprintf("val step %d", step))
		if err != nil {
			return err
		}
		if err := model.Log(ctx, groups, art.LogOptions{Split: "val", Step: &step}); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "val step %d: reward %.3f correct %.3f\n", step, mean(groups, "reward"), mean(groups, "correct"))
		return nil
	}

	start, err := model.Step(ctx) // resume where the last run stopped
	if err != nil {
		return err
	}
	if start >= cfg.steps {
		return nil
	}
	if start == 0 {
		if err := evaluate(0); err != nil { // the base model's score
			return err
		}
	}
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
		groups, err := gather(ctx, step, batch.Items, cfg.groupSize, fmt.Sprintf("train step %d", step))
		if err != nil {
			return err
		}
		res, err := backend.Train(ctx, model, groups, art.TrainConfig{LearningRate: cfg.lr})
		if err != nil {
			return err
		}
		if err := model.Log(ctx, groups, res.LogOptions()); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "step %d: reward %.3f correct %.3f tool_calls %.2f loss %.4f skipped=%v %s\n", res.Step,
			mean(groups, "reward"), mean(groups, "correct"), mean(groups, "tool_calls"),
			res.Metrics["loss/train"], res.Skipped, res.SkipReason)
		if err := evaluate(res.Step); err != nil {
			return err
		}
	}
	return nil
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
