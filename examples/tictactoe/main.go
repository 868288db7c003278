// Command tictactoe trains a tic-tac-toe agent with GRPO, written the way a
// user of the SDK would: a TrainableModel on the in-process backend,
// rollouts that call the model's OpenAI-compatible endpoint, a loop that
// resumes from the model's latest step.
//
//	go run ./examples/tictactoe --base-model DIR [--steps 20]
//
// DIR is a Hugging Face model folder; `art demo` builds a suitable one under
// .art/demo/base-tictactoe.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"os/signal"

	"github.com/artgo/art"
	"github.com/artgo/art/backend/local"
	"github.com/artgo/art/demo/tictactoe"
)

func main() {
	base := flag.String("base-model", ".art/demo/base-tictactoe", "Hugging Face model folder")
	steps := flag.Int("steps", 20, "training steps to reach")
	groups := flag.Int("groups", 8, "scenarios (opponent seeds) per step")
	size := flag.Int("group-size", 8, "games per scenario")
	lr := flag.Float64("lr", 2e-3, "learning rate")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := train(ctx, *base, *steps, *groups, *size, *lr); err != nil {
		log.Fatal(err)
	}
}

func train(ctx context.Context, base string, steps, groups, size int, lr float64) error {
	backend := local.New(local.Options{})
	defer backend.Close()
	model := &art.TrainableModel{Model: art.Model{Name: "tictactoe-example", Project: "examples"}, BaseModel: base}
	if err := model.Register(ctx, backend); err != nil {
		return err
	}
	client, err := model.OpenAIClient()
	if err != nil {
		return err
	}
	start, err := model.Step(ctx) // resume where the last run stopped
	if err != nil {
		return err
	}
	for step := start; step < steps; step++ {
		scenarios := make([]uint64, groups)
		for i := range scenarios {
			scenarios[i] = uint64(step*groups + i)
		}
		name := model.InferenceName(step)
		gs, err := art.GatherGroups(ctx, scenarios, size, func(ctx context.Context, seed uint64) (art.Trajectory, error) {
			return tictactoe.Rollout(ctx, client, name, seed)
		}, art.GatherOptions{Concurrency: 16})
		if err != nil {
			return err
		}
		res, err := backend.Train(ctx, model, gs, art.TrainConfig{LearningRate: lr, GradAccumulationSequences: 32})
		if err != nil {
			return err
		}
		if err := model.Log(ctx, gs, res.LogOptions()); err != nil {
			return err
		}
		fmt.Printf("step %d: loss %.4f skipped=%v\n", res.Step, res.Metrics["loss/train"], res.Skipped)
	}
	return nil
}
