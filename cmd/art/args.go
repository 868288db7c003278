package main

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"
)

// noArgs is cobra.NoArgs with a message that says what is wrong: the
// command's inputs are all flags.
func noArgs(cmd *cobra.Command, args []string) error {
	if len(args) > 0 {
		return fmt.Errorf("%q takes no arguments, got %q (its inputs are flags: see %s --help)", cmd.CommandPath(), args[0], cmd.CommandPath())
	}
	return nil
}

// oneArg is cobra.ExactArgs(1) with a message that names the argument
// (what, e.g. "FILE.parquet, a trajectories file that training logged")
// and the command: cobra's "accepts 1 arg(s), received 0" named neither.
func oneArg(what string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		switch len(args) {
		case 1:
			return nil
		case 0:
			return fmt.Errorf("%q needs %s; see %s --help", cmd.CommandPath(), what, cmd.CommandPath())
		}
		quoted := make([]string, len(args))
		for i, a := range args {
			quoted[i] = fmt.Sprintf("%q", a)
		}
		return fmt.Errorf("%q takes one argument, %s; got %d: %s; see %s --help", cmd.CommandPath(), what, len(args),
			strings.Join(quoted, " "), cmd.CommandPath())
	}
}

// intFlag is an integer flag's value and the least value it may take.
type intFlag struct {
	name     string
	v, least int
}

// atLeast returns the error, prefixed with cmd's name, of the first flag
// below its least value: libraries read 0 as their default, which a flag
// given 0 (or a negative) must not silently get.
func atLeast(cmd string, flags ...intFlag) error {
	for _, f := range flags {
		if f.v < f.least {
			return fmt.Errorf("%s: %s must be >= %d, got %d", cmd, f.name, f.least, f.v)
		}
	}
	return nil
}

// groupRun is the RunE of a command that only groups subcommands: alone it
// prints its help; with an argument that names none of them it fails
// (cobra would print the help and exit 0).
func groupRun(cmd *cobra.Command, args []string) error {
	if len(args) > 0 {
		return fmt.Errorf("unknown command %q for %q (its commands: see %s --help)", args[0], cmd.CommandPath(), cmd.CommandPath())
	}
	return cmd.Help()
}

// newHelpCmd replaces cobra's help command, which prints the usage and
// exits 0 for a topic it does not know.
func newHelpCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "help [command]",
		Short: "Help about any command",
		RunE: func(cmd *cobra.Command, args []string) error {
			target, rest, err := cmd.Root().Find(args)
			if err != nil || target == nil || len(rest) > 0 {
				return fmt.Errorf("unknown help topic %q (see art help)", strings.Join(args, " "))
			}
			target.InitDefaultHelpFlag()
			return target.Help()
		},
	}
}
