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
