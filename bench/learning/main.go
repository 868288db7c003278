// Command learning measures how much an agent learns: for each seed it runs
// `art demo` end to end from nothing (the base model built by SFT, then
// GRPO through the SDK) and prints a markdown table of the mean held-out
// reward before and after training, with the wall time of each phase, for
// BENCHMARKS.md.
//
//	go run ./bench/learning [-seeds 1,2,3] [-steps N]
//
// Each run uses a fresh directory, so the base model is always rebuilt and
// the times include it.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/artgo/art/demo"
)

func main() {
	seeds := flag.String("seeds", "1,2,3", "comma-separated seeds, one full demo run each")
	steps := flag.Int("steps", 0, "GRPO steps (0: the demo's default)")
	verbose := flag.Bool("v", false, "print each run's progress")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, *seeds, *steps, *verbose); err != nil {
		log.Fatal(err)
	}
}

func run(ctx context.Context, seedList string, steps int, verbose bool) error {
	var seeds []uint64
	for _, s := range strings.Split(seedList, ",") {
		v, err := strconv.ParseUint(strings.TrimSpace(s), 10, 64)
		if err != nil {
			return fmt.Errorf("-seeds %q: %w", seedList, err)
		}
		seeds = append(seeds, v)
	}
	var rows []string
	for _, seed := range seeds {
		dir, err := os.MkdirTemp("", "art-learning-*")
		if err != nil {
			return err
		}
		opt := demo.DefaultOptions()
		opt.Path, opt.Seed, opt.Quiet = dir, seed, true
		if steps > 0 {
			opt.RLSteps = steps
		}
		opt.Out = io.Discard
		if verbose {
			opt.Out = os.Stderr
		}
		fmt.Fprintf(os.Stderr, "seed %d: running the demo in %s\n", seed, dir)
		start := time.Now()
		rep, err := demo.Run(ctx, opt)
		if err != nil {
			return fmt.Errorf("seed %d: %w", seed, err)
		}
		total := time.Since(start)
		os.RemoveAll(dir)
		row := fmt.Sprintf("| tic-tac-toe (`art demo`) | %d | %d | %d | %.3f → **%.3f** (%+.3f) | %.0f%% → %.0f%% | %.3f → %.3f | %.0f s | %.0f s | **%.1f min** |",
			seed, rep.SFTSteps, rep.Steps, rep.Before, rep.After, rep.After-rep.Before, 100*rep.InvalidBefore, 100*rep.InvalidAfter,
			rep.ExpectedBefore, rep.ExpectedAfter, rep.BuildBase.Seconds(), rep.RL.Seconds(), total.Minutes())
		fmt.Fprintln(os.Stderr, row)
		rows = append(rows, row)
	}
	fmt.Printf("GOMAXPROCS=%d, %s\n\n", runtime.GOMAXPROCS(0), time.Now().UTC().Format("2006-01-02"))
	fmt.Println("| example | seed | SFT steps | GRPO steps | held-out reward before → after | invalid moves | exact expected reward | base build | GRPO + evals | total |")
	fmt.Println("|---|---|---|---|---|---|---|---|---|---|")
	for _, r := range rows {
		fmt.Println(r)
	}
	return nil
}
