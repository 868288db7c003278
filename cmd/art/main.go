// Command art is the command-line tool of ART for Go: it serves and trains
// models, runs the demo, builds and pretrains model folders, inspects runs
// (the dashboard, runs, show, charts, logged trajectories, RULER scores) and
// exports models and checkpoints for llama.cpp. Run `art help` for the list
// of commands; the benchmarks are separate programs under bench/.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run executes the command line args and returns the process exit code: 0 on
// success, 1 with the error on stderr otherwise. ctx is cancelled on SIGINT
// or SIGTERM; commands stop their work when it is.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	root := newRootCmd()
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	if err := root.ExecuteContext(ctx); err != nil {
		fmt.Fprintf(stderr, "art: %v\n", err)
		return 1
	}
	return 0
}
