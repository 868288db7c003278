// Command learning measures how much an agent learns: for each example and
// seed it trains from nothing and prints a markdown table of the mean
// held-out reward before and after training, with the wall time of each
// phase, for BENCHMARKS.md, then a summary per example over the seeds: the
// minimum, median and maximum held-out gain and how many seeds learned (a
// gain of at least 3 standard errors, paired by held-out scenario).
//
//	go run ./bench/learning [-seeds 1,2,3,4,5] [-steps N] [-examples tictactoe,2048,calculator,emailsearch,mcp]
//
// tictactoe runs `art demo` end to end (the base model built by SFT, then
// GRPO through the SDK) and also prints, per seed, the wall time to the
// first held-out evaluation (every 25 steps) at or above 0.7, 0.8 and 0.9,
// with and without the time the evaluations themselves took. The other examples are built once with `go build`
// and run as a user runs them, in their benchmark configuration (see
// exampleBenches): a random tiny model from engine/initmodel, an SFT
// warm-up on teacher transcripts (a LoRA one through the SDK, or, for the
// calculator, `art pretrain`'s full-parameter SFT of the whole model on
// transcripts the example writes with --write-teacher), GRPO, and a
// held-out evaluation before and after, read back from the example's
// --report.
//
// Each run uses a fresh directory, so the base model is always rebuilt and
// the times include it. -keep leaves the examples' directories in place
// (their pretrained base, teacher transcripts, checkpoints and trajectory
// logs, which `art trajectories` prints) and names them on stderr.
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
	"github.com/artgo/art/store"
)

func main() {
	seeds := flag.String("seeds", "1,2,3", "comma-separated seeds, one full demo run each")
	steps := flag.Int("steps", 0, "GRPO steps (0: the demo's default)")
	verbose := flag.Bool("v", false, "print each run's progress")
	examples := flag.String("examples", "tictactoe", "comma-separated examples to run: tictactoe (the demo), 2048, calculator, emailsearch, mcp")
	keep := flag.Bool("keep", false, "keep each example run's directory (base model, teacher transcripts, checkpoints) and print its path")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, *examples, *seeds, *steps, *verbose, *keep); err != nil {
		log.Fatal(err)
	}
}

func run(ctx context.Context, exampleList, seedList string, steps int, verbose, keep bool) error {
	var seeds []uint64
	for _, s := range strings.Split(seedList, ",") {
		v, err := strconv.ParseUint(strings.TrimSpace(s), 10, 64)
		if err != nil {
			return fmt.Errorf("-seeds %q: %w", seedList, err)
		}
		seeds = append(seeds, v)
	}
	var names []string
	for _, n := range strings.Split(exampleList, ",") {
		n = strings.TrimSpace(n)
		if _, ok := exampleBenches[n]; !ok && n != "tictactoe" {
			return fmt.Errorf("-examples: unknown example %q (want tictactoe, 2048, calculator, emailsearch or mcp)", n)
		}
		names = append(names, n)
	}
	var outs []outcome
	var reached []string
	for _, name := range names {
		var r []outcome
		var err error
		if name == "tictactoe" {
			r, reached, err = runDemo(ctx, seeds, steps, verbose)
		} else {
			r, err = runExamples(ctx, exampleBenches[name], seeds, steps, verbose, keep)
		}
		if err != nil {
			return err
		}
		outs = append(outs, r...)
	}
	fmt.Printf("GOMAXPROCS=%d, %s\n\n", runtime.GOMAXPROCS(0), time.Now().UTC().Format("2006-01-02"))
	fmt.Println("| example | seed | SFT | GRPO steps | held-out reward before → after | details | base build / SFT | GRPO + evals | total |")
	fmt.Println("|---|---|---|---|---|---|---|---|---|")
	for _, o := range outs {
		fmt.Println(o.row)
	}
	if len(reached) > 0 {
		fmt.Println()
		fmt.Println("Wall time from the start of `art demo` (base model build included) to the checkpoint of the first held-out evaluation at or above each reward:")
		fmt.Println()
		fmt.Println("| seed | held-out ≥ 0.7 | held-out ≥ 0.8 | held-out ≥ 0.9 | evaluated every |")
		fmt.Println("|---|---|---|---|---|")
		for _, r := range reached {
			fmt.Println(r)
		}
	}
	fmt.Println()
	writeSummary(os.Stdout, outs)
	return nil
}

// runExamples builds the example once and runs its benchmark
// configuration for each seed; steps > 0 overrides its GRPO steps.
func runExamples(ctx context.Context, eb exampleBench, seeds []uint64, steps int, verbose, keep bool) ([]outcome, error) {
	dir, err := os.MkdirTemp("", "art-learning-bin-*")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	bin, err := buildExample(ctx, eb.name, dir)
	if err != nil {
		return nil, err
	}
	if steps > 0 { // the SFT warm-up is step 1, so GRPO runs to step 1+steps
		eb.flags = append(eb.flags[:len(eb.flags):len(eb.flags)], "--steps", strconv.Itoa(1+steps))
	}
	var outs []outcome
	for _, seed := range seeds {
		o, err := runExample(ctx, eb, bin, seed, verbose, keep)
		if err != nil {
			return nil, err
		}
		fmt.Fprintln(os.Stderr, o.row)
		outs = append(outs, o)
	}
	return outs, nil
}

// historyOnPolicy reads a model's history.jsonl: how many steps trained,
// how many of them logged loss/rollout_logprob_abs_diff, and its largest
// value.
func historyOnPolicy(modelDir string) (trained, compared int, maxDiff float64, err error) {
	d, err := store.Open(modelDir)
	if err != nil {
		return 0, 0, 0, err
	}
	rows, err := d.ReadHistory()
	if err != nil {
		return 0, 0, 0, fmt.Errorf("read the demo's history: %w", err)
	}
	for _, row := range rows {
		if _, ok := row["loss/train"]; !ok {
			continue // an evaluation, or a step with nothing to train
		}
		trained++
		if v, ok := row["loss/rollout_logprob_abs_diff"].(float64); ok {
			compared++
			maxDiff = max(maxDiff, v)
		}
	}
	return trained, compared, maxDiff, nil
}

// thresholds are the held-out rewards whose first crossing runDemo times.
var thresholds = []float64{0.7, 0.8, 0.9}

// runDemo runs `art demo` for each seed. It returns the outcomes and, per
// seed, a row of the wall time to each of thresholds.
func runDemo(ctx context.Context, seeds []uint64, steps int, verbose bool) (outs []outcome, reached []string, err error) {
	for _, seed := range seeds {
		dir, err := os.MkdirTemp("", "art-learning-*")
		if err != nil {
			return nil, nil, err
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
			return nil, nil, fmt.Errorf("seed %d: %w", seed, err)
		}
		total := time.Since(start)
		o := outcome{example: "tic-tac-toe (`art demo`)", seed: seed, gain: rep.After - rep.Before, se: pairedStderr(rep.BeforeGames, rep.AfterGames)}
		o.trained, o.compared, o.maxDiff, err = historyOnPolicy(rep.ModelDir)
		os.RemoveAll(dir)
		if err != nil {
			return nil, nil, fmt.Errorf("seed %d: %w", seed, err)
		}
		o.row = fmt.Sprintf("| %s | %d | %d steps | %d | %.3f → **%.3f** (%+.3f ± %.3f paired, %d held out) | invalid moves %.0f%% → %.0f%%; exact expected reward %.3f → %.3f | %.0f s | %.0f s | **%.1f min** |",
			o.example, seed, rep.SFTSteps, rep.Steps, rep.Before, rep.After, o.gain, o.se, len(rep.AfterGames), 100*rep.InvalidBefore, 100*rep.InvalidAfter,
			rep.ExpectedBefore, rep.ExpectedAfter, rep.BuildBase.Seconds(), rep.RL.Seconds(), total.Minutes())
		fmt.Fprintln(os.Stderr, o.row)
		outs = append(outs, o)
		r := fmt.Sprintf("| %d | %s | %d steps |", seed, timesToReach(rep.Evals, rep.Steps), opt.EvalEvery)
		fmt.Fprintln(os.Stderr, r)
		reached = append(reached, r)
	}
	return outs, reached, nil
}

// timesToReach formats, for each of thresholds, the wall time and step of
// the first evaluation at or above it, as table cells.
func timesToReach(evals []demo.Eval, steps int) string {
	cells := make([]string, len(thresholds))
	for i, thr := range thresholds {
		cells[i] = fmt.Sprintf("not in %d steps", steps)
		for _, e := range evals {
			if e.Reward >= thr {
				cells[i] = fmt.Sprintf("**%.0f s** (%.0f s without evaluations; step %d: %.3f)", e.Elapsed.Seconds(),
					(e.Elapsed - e.Evaluating).Seconds(), e.Step, e.Reward)
				break
			}
		}
	}
	return strings.Join(cells, " | ")
}
