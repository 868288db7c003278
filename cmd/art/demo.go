package main

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/artgo/art/demo"
)

func newDemoCmd() *cobra.Command {
	opt := demo.DefaultOptions()
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Train a tic-tac-toe agent end to end on the CPU (SFT base model, then GRPO)",
		Long: `demo trains an agent end to end on this machine's CPU. It builds (or reuses,
under <path>/demo/base-tictactoe) a small base model by supervised fine-tuning
on random legal tic-tac-toe moves, then trains a LoRA adapter with GRPO through
the public SDK: a TrainableModel on the in-process backend, rollouts calling
the OpenAI-compatible endpoint it serves. It prints the mean reward on
held-out games every 25 steps, before and after, and leaves checkpoints,
history.jsonl, trajectory logs and a reward curve (reward.png) under
<path>/demo/models/tictactoe, replacing the previous run's (use --path to keep
runs apart). About 2–3 minutes on 2 cores.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			// Checked before anything is built: the library reads 0 as
			// its default, which a flag given 0 must not silently get.
			if err := atLeast("demo", intFlag{"--steps", opt.RLSteps, 1}, intFlag{"--eval-games", opt.EvalGames, 1}); err != nil {
				return err
			}
			opt.Out = cmd.ErrOrStderr()
			rep, err := demo.Run(cmd.Context(), opt)
			if err != nil {
				err = commandError("demo", err) // "demo: …", an art error's "art: " replaced too
				if cmd.Context().Err() != nil {
					// Ctrl-C: say so first, as the other commands do; what
					// it stopped follows.
					return &prefixedError{msg: "demo: interrupted: " + strings.TrimPrefix(err.Error(), "demo: "), err: err}
				}
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "held-out reward: %.3f → %.3f after %d GRPO steps (base %s; run %s)\n",
				rep.Before, rep.After, rep.Steps, rep.BaseModel, rep.ModelDir)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&opt.Path, "path", opt.Path, "where models, checkpoints and logs go")
	f.StringVar(&opt.BaseModel, "base-model", "", "use this Hugging Face model folder instead of building the tiny base")
	f.IntVar(&opt.RLSteps, "steps", opt.RLSteps, "GRPO steps")
	f.IntVar(&opt.EvalGames, "eval-games", opt.EvalGames, "held-out games for the before/after evaluation")
	f.Uint64Var(&opt.Seed, "seed", opt.Seed, "random seed")
	f.BoolVar(&opt.Quiet, "quiet", false, "no progress bars")
	return cmd
}
