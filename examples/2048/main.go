// Command 2048 trains an agent to play 2048 with GRPO, written the way a
// user of the SDK would: a TrainableModel on the in-process backend,
// rollouts that play through the model's OpenAI-compatible endpoint (the
// board in a user message, a one-word move in the reply), a loop that
// resumes from the model's latest step.
//
//	go run ./examples/2048 --base-model DIR [--steps 20] [--target 128]
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
)

// config is the command line.
type config struct {
	base, path, project, name string
	steps, groups, groupSize  int
	lr                        float64
	seed                      uint64
	target, maxMoves          int
	maxTokens, concurrency    int
	callTimeout               time.Duration
	maxExceptions             float64
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
	fs.IntVar(&c.steps, "steps", 20, "training steps to reach")
	fs.IntVar(&c.groups, "groups", 8, "scenarios (games from one seed) per step")
	fs.IntVar(&c.groupSize, "group-size", 8, "games per scenario")
	fs.Float64Var(&c.lr, "lr", 1e-5, "learning rate")
	fs.Uint64Var(&c.seed, "seed", 1, "seed of the game scenarios")
	fs.IntVar(&c.target, "target", 128, "tile that wins the game (a power of two)")
	fs.IntVar(&c.maxMoves, "max-moves", 300, "moves after which a game stops")
	fs.IntVar(&c.maxTokens, "max-tokens", 8, "completion tokens per move")
	fs.IntVar(&c.concurrency, "concurrency", 16, "games played at once")
	fs.DurationVar(&c.callTimeout, "call-timeout", 2*time.Minute, "bound on each chat completion")
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
	case c.steps < 0 || c.groups < 1 || c.groupSize < 1 || c.maxTokens < 1 || c.concurrency < 1:
		return c, errors.New("--steps must be >= 0 and --groups, --group-size, --max-tokens, --concurrency >= 1")
	case c.callTimeout <= 0:
		return c, errors.New("--call-timeout must be > 0")
	case c.maxExceptions < 0:
		return c, errors.New("--max-exceptions must be >= 0")
	}
	return c, Rules{Target: c.target, MaxMoves: c.maxMoves}.Validate()
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

// scenarios returns the games of a step: their seeds depend only on the
// run's seed and the step, so a resumed run plays the same games.
func scenarios(seed uint64, step, groups int) []Scenario {
	out := make([]Scenario, groups)
	for i := range out {
		out[i] = Scenario{Seed: seed<<32 | uint64(step*groups+i)}
	}
	return out
}

func train(ctx context.Context, cfg config, stdout io.Writer) error {
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
	opt := RolloutOptions{
		Rules:     Rules{Target: cfg.target, MaxMoves: cfg.maxMoves},
		MaxTokens: cfg.maxTokens, CallTimeout: cfg.callTimeout,
	}
	start, err := model.Step(ctx) // resume where the last run stopped
	if err != nil {
		return err
	}
	for step := start; step < cfg.steps; step++ {
		name := model.InferenceName(step)
		groups, err := art.GatherGroups(ctx, scenarios(cfg.seed, step, cfg.groups), cfg.groupSize,
			func(ctx context.Context, sc Scenario) (art.Trajectory, error) {
				return Rollout(ctx, client, name, sc, opt)
			}, art.GatherOptions{Concurrency: cfg.concurrency, MaxExceptions: cfg.maxExceptions, Quiet: cfg.quiet,
				Description: fmt.Sprintf("2048 step %d", step)})
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
		fmt.Fprintf(stdout, "step %d: reward %.3f max_tile %.1f loss %.4f skipped=%v %s\n", res.Step,
			mean(groups, func(t art.Trajectory) float64 { return t.Reward }),
			mean(groups, func(t art.Trajectory) float64 { return t.Metrics["max_tile"] }),
			res.Metrics["loss/train"], res.Skipped, res.SkipReason)
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
