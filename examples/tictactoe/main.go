// Command tictactoe trains a tic-tac-toe agent with GRPO, written the way a
// user of the SDK would: a TrainableModel on the in-process backend,
// rollouts that call the model's OpenAI-compatible endpoint, a loop that
// resumes from the model's latest step.
//
//	go run ./examples/tictactoe [--base-model DIR] [--steps 100]
//
// DIR is a Hugging Face model folder; `art demo` builds a suitable one under
// .art/demo/base-tictactoe. Any other chat model is told the rules in a
// system prompt (--instructions, on by default for other folders). --eval N
// plays N held-out games before and after training and prints the mean
// reward; --report FILE writes a JSON summary.
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
	"github.com/artgo/art/experiment"
	"github.com/artgo/art/games/tictactoe"
)

// demoBase is where `art demo` leaves its tic-tac-toe base model.
var demoBase = filepath.Join(".art", "demo", "base-tictactoe")

// config is the command line: the flags the examples share and the game's.
type config struct {
	experiment.Flags
	invalidPenalty float64
	instructions   bool
}

func parseFlags(args []string, stderr io.Writer) (config, error) {
	c := config{Flags: experiment.Defaults("tictactoe")}
	c.BaseModel, c.Steps, c.LR, c.GradAccum = demoBase, 100, 1e-3, 32
	fs := flag.NewFlagSet("tictactoe", flag.ContinueOnError)
	fs.SetOutput(stderr)
	c.Register(fs)
	fs.Float64Var(&c.invalidPenalty, "invalid-penalty", 1, "subtracted from the training reward of a game lost to an invalid move")
	instructions := fs.String("instructions", "auto", `send the rules as a system prompt: "on", "off", or "auto" (on unless the base model is art demo's)`)
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	switch {
	case fs.NArg() > 0:
		return c, fmt.Errorf("unexpected arguments %q", fs.Args())
	case c.GroupSize < 2:
		return c, errors.New("--group-size must be >= 2: GRPO compares the games of a group")
	case c.invalidPenalty < 0:
		return c, fmt.Errorf("--invalid-penalty %v: want >= 0", c.invalidPenalty)
	}
	switch *instructions {
	case "on":
		c.instructions = true
	case "off":
	case "auto":
		c.instructions = filepath.Clean(c.BaseModel) != demoBase
	default:
		return c, fmt.Errorf("--instructions %q: want on, off or auto", *instructions)
	}
	return c, c.Check(true)
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
	backend := local.New(local.Options{Quiet: cfg.Quiet, Seed: cfg.Seed})
	defer backend.Close()
	model := &art.TrainableModel{Model: art.Model{Name: cfg.Name, Project: cfg.Project, BasePath: cfg.Path}, BaseModel: cfg.BaseModel}
	if err := model.Register(ctx, backend); err != nil {
		return err
	}
	client, err := model.OpenAIClient()
	if err != nil {
		return err
	}
	opt := tictactoe.RolloutOptions{CallTimeout: cfg.CallTimeout}
	if cfg.instructions {
		opt.System = tictactoe.Instructions
	}
	heldOut := func(ctx context.Context, step int) ([]art.TrajectoryGroup, error) {
		seeds := make([]uint64, cfg.Eval) // opponent seeds apart from every training game's
		for i := range seeds {
			seeds[i] = 1<<63 | uint64(i)
		}
		name := model.InferenceName(step)
		return art.GatherGroups(ctx, seeds, 1, func(ctx context.Context, seed uint64) (art.Trajectory, error) {
			o := opt
			ss := seed << 4 // reproducible sampling: the same games for the same checkpoint
			o.SampleSeed = &ss
			return tictactoe.RolloutWith(ctx, client, name, seed, o)
		}, cfg.GatherOptions(fmt.Sprintf("eval step %d", step)))
	}
	run := experiment.NewRun("tictactoe", cfg.Flags, model, heldOut, stdout)
	run.Unit, run.Metrics = "game", []string{"win", "invalid_move"}
	run.Report.Config["invalid_penalty"], run.Report.Config["instructions"] = cfg.invalidPenalty, cfg.instructions

	start, err := model.Step(ctx) // resume where the last run stopped
	if err != nil {
		return err
	}
	if err := run.Begin(ctx, start); err != nil {
		return err
	}
	for step := start; step < cfg.Steps; step++ {
		scenarios := make([]uint64, cfg.Groups) // opponent seeds, the same on a resumed run
		for i := range scenarios {
			scenarios[i] = cfg.Seed<<32 | uint64(step*cfg.Groups+i)
		}
		name := model.InferenceName(step)
		groups, err := art.GatherGroups(ctx, scenarios, cfg.GroupSize, func(ctx context.Context, seed uint64) (art.Trajectory, error) {
			return tictactoe.RolloutWith(ctx, client, name, seed, opt)
		}, cfg.GatherOptions(fmt.Sprintf("step %d", step)))
		if err != nil {
			return err
		}
		res, err := model.Train(ctx, experiment.PenalizeInvalid(groups, cfg.invalidPenalty), cfg.TrainConfig(), art.LogGroups(groups)) // logged with the real rewards
		if err != nil {
			return err
		}
		if err := run.Step(ctx, groups, res); err != nil {
			return err
		}
	}
	return run.Finish(ctx)
}
