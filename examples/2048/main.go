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
//	--train-config '{"disable_reward_scaling": true}'
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
	"maps"
	"os"
	"os/signal"
	"time"

	"github.com/artgo/art"
	"github.com/artgo/art/backend/local"
	"github.com/artgo/art/experiment"
	"github.com/openai/openai-go/v3"
)

// config is the command line: the flags the examples share and the game's.
type config struct {
	experiment.Flags
	invalidPenalty   float64
	target, maxMoves int
	prompt, system   string
	maxTokens        int
}

func parseFlags(args []string, stderr io.Writer) (config, error) {
	c := config{Flags: experiment.Defaults("2048")}
	c.Steps, c.CallTimeout = 20, 2*time.Minute
	fs := flag.NewFlagSet("2048", flag.ContinueOnError)
	fs.SetOutput(stderr)
	c.Register(fs)
	c.RegisterWarmup(fs)
	fs.Float64Var(&c.invalidPenalty, "invalid-penalty", 0, "lower the training reward of games lost to an invalid reply by this much (logged rewards are unchanged)")
	fs.IntVar(&c.target, "target", 128, "tile that wins the game (a power of two)")
	fs.IntVar(&c.maxMoves, "max-moves", 300, "moves after which a game stops")
	fs.StringVar(&c.prompt, "prompt", "full", `what the model is asked before each move: "full" (rules, board, answer format) or "board" (the board alone, for a model taught by --sft-warmup)`)
	fs.StringVar(&c.system, "system", "", "system message sent before each move's prompt (none by default)")
	fs.IntVar(&c.maxTokens, "max-tokens", 8, "completion tokens per move")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	switch {
	case fs.NArg() > 0:
		return c, fmt.Errorf("unexpected arguments %q", fs.Args())
	case c.maxTokens < 1:
		return c, errors.New("--max-tokens must be >= 1")
	case c.invalidPenalty < 0:
		return c, errors.New("--invalid-penalty must be >= 0")
	case c.prompt != "full" && c.prompt != "board":
		return c, fmt.Errorf(`--prompt %q: want "full" or "board"`, c.prompt)
	}
	if err := c.Check(true); err != nil {
		return c, err
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
	backend := local.New(local.Options{Quiet: cfg.Quiet, Seed: cfg.Seed})
	defer backend.Close()
	model := &art.TrainableModel{
		Model:     art.Model{Name: cfg.Name, Project: cfg.Project, BasePath: cfg.Path},
		BaseModel: cfg.BaseModel,
	}
	if err := model.Register(ctx, backend); err != nil {
		return err
	}
	client, err := model.OpenAIClient()
	if err != nil {
		return err
	}
	opt := RolloutOptions{Rules: cfg.rules(), System: cfg.system, MaxTokens: cfg.maxTokens, CallTimeout: cfg.CallTimeout}
	heldOut := func(ctx context.Context, step int) ([]art.TrajectoryGroup, error) {
		name := model.InferenceName(step)
		return art.GatherGroups(ctx, evalScenarios(cfg.Eval), 1, func(ctx context.Context, sc Scenario) (art.Trajectory, error) {
			o := opt
			ss := sc.Seed * 1024 // reproducible sampling: the same games for the same checkpoint
			o.SampleSeed = &ss
			return Rollout(ctx, client, name, sc, o)
		}, cfg.GatherOptions(fmt.Sprintf("2048 eval step %d", step)))
	}
	run := experiment.NewRun("2048", cfg.Flags, model, heldOut, stdout)
	run.Unit, run.Metrics = "game", []string{"max_tile", "invalid_move", "noop_moves"}
	maps.Copy(run.Report.Config, map[string]any{"invalid_penalty": cfg.invalidPenalty, "target": cfg.target,
		"max_moves": cfg.maxMoves, "prompt": cfg.prompt, "system": cfg.system})

	start, err := model.Step(ctx) // resume where the last run stopped
	if err != nil {
		return err
	}
	if start == 0 && cfg.SFTWarmup > 0 && cfg.Steps > 0 {
		trajs := TeacherTranscripts(cfg.Seed, cfg.SFTWarmup, opt.Rules, opt.System)
		if start, err = run.Warmup(ctx, trajs, "teacher moves"); err != nil {
			return err
		}
	}
	if err := run.Begin(ctx, start); err != nil {
		return err
	}
	for step := start; step < cfg.Steps; step++ {
		name := model.InferenceName(step)
		groups, err := art.GatherTrajectoryGroups(ctx, trainingGroups(client, name, scenarios(cfg.Seed, step, cfg.Groups), cfg.GroupSize, opt),
			cfg.GatherOptions(fmt.Sprintf("2048 step %d", step)))
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
