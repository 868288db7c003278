package main

import (
	"fmt"
	"io"
	"math"
	"time"

	"github.com/spf13/cobra"

	"github.com/artgo/art/pretrain"
)

func newPretrainCmd() *cobra.Command {
	var opt pretrain.Options
	var every int
	cmd := &cobra.Command{
		Use:   "pretrain",
		Short: "Train every weight of a model folder on transcripts, JSONL or parquet (full-parameter SFT, for experiments without a pretrained model)",
		Long: `pretrain trains every weight of a model (embeddings, LM head, norms and
projections) by supervised learning on transcripts, and writes the result as
a new Hugging Face model folder. It is for experiments without a pretrained
model: a random model from art init-model, taught by a teacher's transcripts
until it solves the task only sometimes, becomes a base that GRPO can
improve. With a real model use TrainSFT (LoRA) instead.

--data is a JSONL file with one trajectory per line, in the SDK's
art.Trajectory JSON (messages_and_choices and tools), or a trajectories
parquet file as training logs them (<model dir>/trajectories/<split>/
<step>.parquet): every assistant turn is learned, tool calls included, as
TrainSFT learns it. The model's weights
must be f32. Training takes shuffled batches for --epochs passes, stopped
after --max-steps optimizer steps if that comes first; --hold-out N keeps
the last N transcripts out of training and reports their loss, and
--stop-loss ends training once that loss is low enough (a base that is right
only some of the time leaves GRPO something to improve). The output folder
appears complete or not at all.`,
		Example: `  art init-model --shape tiny --tokenizer bytes --out ./random
  go run ./examples/calculator --write-teacher teacher.jsonl --teacher 4000 --problems products
  art pretrain --model ./random --data teacher.jsonl --epochs 2 --hold-out 200 --out ./base`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkPretrainFlags(opt, every); err != nil {
				return err
			}
			opt.Progress = progressPrinter(cmd.ErrOrStderr(), every)
			res, err := pretrain.Run(cmd.Context(), opt)
			if err != nil {
				return err
			}
			stopped := ""
			if res.Stopped {
				stopped = fmt.Sprintf(" (stopped: held-out loss below %g)", opt.StopLoss)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "wrote %s: %d steps%s over %d transcripts (%d learned tokens an epoch) in %s, loss %.4f%s\n",
				opt.Out, res.Steps, stopped, res.Train, res.Tokens, res.Elapsed.Round(time.Second), res.Loss, heldOutText(res))
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&opt.Model, "model", "", "Hugging Face model folder to start from, f32 weights (required)")
	f.StringVar(&opt.Data, "data", "", "transcripts: a JSONL file, one art.Trajectory per line, or a trajectories parquet file as training logs them (required)")
	f.StringVar(&opt.Out, "out", "", "output folder, must not exist (required)")
	f.IntVar(&opt.Epochs, "epochs", 1, "passes over the training transcripts")
	f.IntVar(&opt.MaxSteps, "max-steps", 0, "stop after this many optimizer steps (0: after --epochs)")
	f.IntVar(&opt.BatchSize, "batch", 32, "transcripts per optimizer step")
	f.Float64Var(&opt.LR, "lr", 3e-3, "AdamW learning rate (constant; gradients clipped to norm 1, no weight decay)")
	f.IntVar(&opt.HoldOut, "hold-out", 0, "transcripts at the end of --data kept out of training, for a held-out loss")
	f.IntVar(&opt.EvalEvery, "eval-every", 0, "measure the held-out loss every this many steps (0: before and after only)")
	f.Float64Var(&opt.StopLoss, "stop-loss", 0, "stop once the held-out loss falls below this (needs --hold-out and --eval-every; 0: never)")
	f.IntVar(&opt.MaxSeqLen, "max-seq-len", 4096, "longest transcript in tokens; a longer one is an error")
	f.Uint64Var(&opt.Seed, "seed", 1, "seed of the batch order")
	f.IntVar(&every, "log-every", 10, "print the loss every this many steps (0: only held-out measurements)")
	return cmd
}

// checkPretrainFlags rejects out-of-range numbers naming their flag, before
// anything is read or loaded. Package pretrain reads 0 as its default,
// which a flag given 0 must not silently get.
func checkPretrainFlags(opt pretrain.Options, logEvery int) error {
	if err := atLeast("pretrain",
		intFlag{"--epochs", opt.Epochs, 1}, intFlag{"--batch", opt.BatchSize, 1}, intFlag{"--max-seq-len", opt.MaxSeqLen, 1},
		intFlag{"--max-steps", opt.MaxSteps, 0}, intFlag{"--hold-out", opt.HoldOut, 0}, intFlag{"--eval-every", opt.EvalEvery, 0},
		intFlag{"--log-every", logEvery, 0}); err != nil {
		return err
	}
	if !(opt.LR > 0) || math.IsInf(opt.LR, 0) {
		return fmt.Errorf("pretrain: --lr must be > 0, got %v", opt.LR)
	}
	if !(opt.StopLoss >= 0) || math.IsInf(opt.StopLoss, 0) {
		return fmt.Errorf("pretrain: --stop-loss must be >= 0, got %v", opt.StopLoss)
	}
	if opt.StopLoss > 0 && (opt.HoldOut == 0 || opt.EvalEvery == 0) {
		return fmt.Errorf("pretrain: --stop-loss %v needs --hold-out N and --eval-every N (a held-out loss measured during training)", opt.StopLoss)
	}
	return nil
}

// progressPrinter prints every n-th step (and the last, and any with a
// held-out loss) to w.
func progressPrinter(w io.Writer, n int) func(pretrain.Progress) {
	return func(p pretrain.Progress) {
		if !math.IsNaN(p.HeldOut) {
			fmt.Fprintf(w, "step %d/%d (epoch %d): loss %.4f held-out %.4f [%s]\n", p.Step, p.Steps, p.Epoch, p.Loss, p.HeldOut,
				p.Elapsed.Round(time.Second))
		} else if n > 0 && (p.Step%n == 0 || p.Step == p.Steps) {
			fmt.Fprintf(w, "step %d/%d (epoch %d): loss %.4f grad norm %.2f [%s]\n", p.Step, p.Steps, p.Epoch, p.Loss, p.GradNorm,
				p.Elapsed.Round(time.Second))
		}
	}
}

func heldOutText(r pretrain.Result) string {
	if r.HeldOut == 0 {
		return ""
	}
	return fmt.Sprintf("; held-out loss %.4f → %.4f (%d transcripts)", r.HeldOutBefore, r.HeldOutAfter, r.HeldOut)
}
