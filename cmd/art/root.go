package main

import (
	"fmt"
	"log/slog"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/artgo/art/engine/kernels"
)

// newRootCmd builds the art command with every subcommand. To add one, write
// newXxxCmd() *cobra.Command in its own file and list it in AddCommand below.
// Subcommands get the context with cmd.Context() and print with
// cmd.OutOrStdout() / cmd.ErrOrStderr(); they should return errors rather
// than print them. The root's PersistentPreRunE configures slog; a
// subcommand that needs its own pre-run hook should use PreRunE, which does
// not replace it.
func newRootCmd() *cobra.Command {
	var logLevel, unit string
	root := &cobra.Command{
		Use:   "art",
		Short: "Agent Reinforcement Trainer: train LLM agents with reinforcement learning",
		Long: `art trains the LLM behind an agent with reinforcement learning (GRPO on a
LoRA adapter), from the agent's own rollouts, and serves each checkpoint on an
OpenAI-compatible endpoint as name@step.`,
		SilenceUsage:  true, // an error is not a usage problem; main prints it
		SilenceErrors: true,
		PersistentPreRunE: func(cmd *cobra.Command, args []string) error {
			var level slog.Level
			if err := level.UnmarshalText([]byte(logLevel)); err != nil {
				return fmt.Errorf("--log-level %q: want debug, info, warn or error", logLevel)
			}
			slog.SetDefault(slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), &slog.HandlerOptions{Level: level})))
			return setMatmulUnit(unit)
		},
	}
	root.PersistentFlags().StringVar(&logLevel, "log-level", "info", "log level: "+strings.Join([]string{"debug", "info", "warn", "error"}, ", "))
	root.PersistentFlags().StringVar(&unit, "matmul-unit", "", "arithmetic of the weight products: fp32 (exact), bf16 (bf16 inputs, fp32 sums; CPUs with AVX512_BF16), int8 (q8 and q4 weights times activations rounded to 8 bits a block of 32, int32 sums; CPUs with AVX512_VNNI; other weights as bf16) or auto (the faster of fp32 and bf16, measured at start-up); default $"+kernels.UnitEnv+", else auto")

	root.SetHelpCommand(newHelpCmd())
	root.AddCommand(
		newVersionCmd(),
		newDemoCmd(),
		newServeCmd(),
		newInitModelCmd(),
		newPretrainCmd(),
		newLogprobsCmd(),
		newExportCmd(),
		newChartCmd(),
		newRunsCmd(),
		newShowCmd(),
		newPlotCmd(),
		newDashboardCmd(),
		newTrajectoriesCmd(),
		newRulerCmd(),
		newAutoRLCmd(),
	)
	return root
}

// setMatmulUnit applies --matmul-unit, else $ART_MATMUL_UNIT, with the same
// errors for either (both empty: the kernels choose on first use, by
// measuring). Sampler and trainer share the process, so one unit serves
// both.
func setMatmulUnit(s string) error {
	what := "--matmul-unit " + s
	if s == "" {
		s = os.Getenv(kernels.UnitEnv)
		what = fmt.Sprintf("$%s=%s", kernels.UnitEnv, s)
	}
	if s == "" {
		return nil
	}
	if _, err := kernels.UseUnit(s); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}

// commandError returns err for main to print after its "art: ". Errors of
// the art package already start with "art: " (art.TrainableModel.Register:
// `art: register model "x": …`), which would print doubled; commandError
// puts the command's name in its place. Other errors are returned as they
// are. errors.Is and errors.As still see err.
func commandError(command string, err error) error {
	rest, ok := strings.CutPrefix(err.Error(), "art: ")
	if !ok {
		return err
	}
	return &prefixedError{msg: command + ": " + rest, err: err}
}

// prefixedError is err with another message.
type prefixedError struct {
	msg string
	err error
}

func (e *prefixedError) Error() string { return e.msg }
func (e *prefixedError) Unwrap() error { return e.err }
