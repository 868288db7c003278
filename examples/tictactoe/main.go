// Command tictactoe trains a tic-tac-toe agent with GRPO, written the way a
// user of the SDK would: a TrainableModel on the in-process backend,
// rollouts that call the model's OpenAI-compatible endpoint, a loop that
// resumes from the model's latest step.
//
//	go run ./examples/tictactoe [--base-model DIR] [--steps 100]
//
// DIR is a Hugging Face model folder; `art demo` builds a suitable one under
// .art/demo/base-tictactoe. Any other chat model is told the rules in a
// system prompt (--instructions, on by default for other folders).
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
	"path/filepath"

	"github.com/artgo/art"
	"github.com/artgo/art/backend/local"
	"github.com/artgo/art/demo/tictactoe"
	"github.com/artgo/art/examples/benchmark"
)

// demoBase is where `art demo` leaves its tic-tac-toe base model.
var demoBase = filepath.Join(".art", "demo", "base-tictactoe")

type config struct {
	base, path, name   string
	steps, groups, n   int
	lr, invalidPenalty float64
	instructions       bool
	quiet              bool
}

func parseFlags(args []string, stderr io.Writer) (config, error) {
	var c config
	fs := flag.NewFlagSet("tictactoe", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&c.base, "base-model", demoBase, "Hugging Face model folder")
	fs.StringVar(&c.path, "path", ".art", "root of checkpoints and logs")
	fs.StringVar(&c.name, "name", "tictactoe-example", "model name (project \"examples\")")
	fs.IntVar(&c.steps, "steps", 100, "training steps to reach")
	fs.IntVar(&c.groups, "groups", 8, "scenarios (opponent seeds) per step")
	fs.IntVar(&c.n, "group-size", 8, "games per scenario")
	fs.Float64Var(&c.lr, "lr", 1e-3, "learning rate")
	fs.Float64Var(&c.invalidPenalty, "invalid-penalty", 1, "subtracted from the training reward of a game lost to an invalid move")
	instructions := fs.String("instructions", "auto", `send the rules as a system prompt: "on", "off", or "auto" (on unless the base model is art demo's)`)
	fs.BoolVar(&c.quiet, "quiet", false, "no progress bars")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	switch {
	case fs.NArg() > 0:
		return c, fmt.Errorf("unexpected arguments %q", fs.Args())
	case c.steps < 0 || c.groups < 1 || c.n < 2:
		return c, errors.New("--steps must be >= 0, --groups >= 1 and --group-size >= 2 (GRPO compares games of a group)")
	case !(c.lr > 0):
		return c, fmt.Errorf("--lr %v: want > 0", c.lr)
	case c.invalidPenalty < 0:
		return c, fmt.Errorf("--invalid-penalty %v: want >= 0", c.invalidPenalty)
	}
	switch *instructions {
	case "on":
		c.instructions = true
	case "off":
	case "auto":
		c.instructions = filepath.Clean(c.base) != demoBase
	default:
		return c, fmt.Errorf("--instructions %q: want on, off or auto", *instructions)
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
	backend := local.New(local.Options{Quiet: cfg.quiet})
	defer backend.Close()
	model := &art.TrainableModel{Model: art.Model{Name: cfg.name, Project: "examples", BasePath: cfg.path}, BaseModel: cfg.base}
	if err := model.Register(ctx, backend); err != nil {
		return err
	}
	client, err := model.OpenAIClient()
	if err != nil {
		return err
	}
	var opt tictactoe.RolloutOptions
	if cfg.instructions {
		opt.System = tictactoe.Instructions
	}
	start, err := model.Step(ctx) // resume where the last run stopped
	if err != nil {
		return err
	}
	for step := start; step < cfg.steps; step++ {
		scenarios := make([]uint64, cfg.groups) // opponent seeds, the same on a resumed run
		for i := range scenarios {
			scenarios[i] = uint64(step*cfg.groups + i)
		}
		name := model.InferenceName(step)
		groups, err := art.GatherGroups(ctx, scenarios, cfg.n, func(ctx context.Context, seed uint64) (art.Trajectory, error) {
			return tictactoe.RolloutWith(ctx, client, name, seed, opt)
		}, art.GatherOptions{Concurrency: 16, Quiet: cfg.quiet, Description: fmt.Sprintf("step %d", step)})
		if err != nil {
			return err
		}
		res, err := model.Train(ctx, benchmark.PenalizeInvalid(groups, cfg.invalidPenalty),
			art.TrainConfig{LearningRate: cfg.lr, GradAccumulationSequences: 32}, art.LogGroups(groups)) // logged with the real rewards
		if err != nil {
			return err
		}
		var reward, invalid, n float64
		for _, g := range groups {
			for _, t := range g.Trajectories {
				reward, invalid, n = reward+t.Reward, invalid+t.Metrics["invalid_move"], n+1
			}
		}
		fmt.Fprintf(stdout, "step %d: reward %.3f invalid %.2f loss %.4f skipped=%v\n", res.Step, reward/n, invalid/n,
			res.Metrics["loss/train"], res.Skipped)
	}
	return nil
}
