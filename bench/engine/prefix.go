package main

import (
	"cmp"
	"context"
	"flag"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"time"

	"github.com/artgo/art/engine/generate"
)

// runPrefix measures what reusing a prompt's keys and values saves in the
// two shapes of an agent's rollouts, each with and without it in the same
// process, alternating the order between rounds:
//
//   - group: n rollouts of one scenario sent at once as separate requests
//     (as ART's gather does), each prompt the same -prompt tokens;
//   - turns: one conversation of -turns turns, each prompt the last one,
//     its answer and -grow new tokens (a tool's output).
//
// Both sample -tokens tokens an answer at temperature 1, with the same
// seeds both ways, and check that the tokens are the same.
func runPrefix(args []string, log func(string, ...any)) error {
	fs := flag.NewFlagSet("prefix", flag.ExitOnError)
	dtype := fs.String("dtype", "bf16", "weight storage: f16 or bf16")
	quantize := fs.String("quantize", "", "load the weights quantized (q8 or q4)")
	rounds := fs.Int("rounds", 3, "measurement rounds")
	promptLen := fs.Int("prompt", 1024, "tokens of the scenario's prompt (group) and of the first turn (turns)")
	n := fs.Int("n", 8, "rollouts in the group")
	tokens := fs.Int("tokens", 32, "tokens sampled per answer")
	turns := fs.Int("turns", 4, "turns of the conversation")
	grow := fs.Int("grow", 256, "new prompt tokens per turn")
	threads := fs.Int("threads", 2, "GOMAXPROCS")
	dir := fs.String("dir", "", "asset cache directory (default <repo>/.assets/bench)")
	fs.Parse(args)
	runtime.GOMAXPROCS(*threads)
	m, md, err := benchModel(*dtype, *quantize, *dir, log)
	if err != nil {
		return err
	}
	text, err := promptTokens(md, *promptLen+*turns**grow)
	if err != nil {
		return err
	}
	ctx := context.Background()
	req := func(prompt []int, seed uint64) generate.Request {
		return generate.Request{Prompt: prompt, MaxTokens: *tokens, Seed: seed, Sampling: generate.SamplingParams{Temperature: 1}}
	}
	// group returns the wall time of n concurrent requests and their
	// answers' tokens.
	group := func(b *generate.Batcher) (time.Duration, [][]int, error) {
		out := make([][]int, *n)
		errs := make([]error, *n)
		var wg sync.WaitGroup
		t0 := time.Now()
		for i := range *n {
			wg.Go(func() {
				res, err := b.Generate(ctx, req(text[:*promptLen], uint64(i)), 1, nil)
				if err == nil {
					out[i] = res[0].IDs()
				}
				errs[i] = err
			})
		}
		wg.Wait()
		for _, err := range errs {
			if err != nil {
				return 0, nil, err
			}
		}
		return time.Since(t0), out, nil
	}
	// conversation returns the wall time of its turns and their answers.
	conversation := func(b *generate.Batcher) (time.Duration, [][]int, error) {
		var out [][]int
		prompt := slices.Clone(text[:*promptLen])
		t0 := time.Now()
		for k := range *turns {
			res, err := b.Generate(ctx, req(prompt, uint64(k)), 1, nil)
			if err != nil {
				return 0, nil, err
			}
			ids := res[0].IDs()
			out = append(out, ids)
			fresh := text[*promptLen+k**grow : *promptLen+(k+1)**grow]
			prompt = append(append(prompt, ids...), fresh...)
		}
		return time.Since(t0), out, nil
	}
	shapes := []struct {
		name string
		run  func(*generate.Batcher) (time.Duration, [][]int, error)
	}{{"group", group}, {"turns", conversation}}
	log("machine: %s, load %s", cpuModel(), readLoadavg())
	times := map[string][2][]float64{}
	for r := range *rounds {
		waitIdle(30*time.Second, log)
		for _, sh := range shapes {
			var answers [2][][]int
			for k := range 2 {
				reuse := (r+k)%2 == 1
				// A fresh batcher per run: nothing kept from the last one.
				opt := generate.BatcherOptions{NoPrefixSharing: !reuse}
				if reuse {
					opt.KeepPrefixes = 512 << 20
				}
				b := generate.NewBatcher(m, opt)
				el, ans, err := sh.run(b)
				b.Close()
				if err != nil {
					return err
				}
				i := 0
				if reuse {
					i = 1
				}
				answers[i] = ans
				t := times[sh.name]
				t[i] = append(t[i], el.Seconds())
				times[sh.name] = t
				log("round %d %s reuse=%v: %.2f s", r+1, sh.name, reuse, el.Seconds())
			}
			for i := range answers[0] {
				if !slices.Equal(answers[0][i], answers[1][i]) {
					return fmt.Errorf("%s answer %d differs with and without reuse: %v and %v", sh.name, i, answers[0][i], answers[1][i])
				}
			}
		}
	}
	weights := cmp.Or(*quantize, *dtype)
	fmt.Printf("| shape | rollouts | without reuse (s) | with (s) | speed-up |\n|---|---|---|---|---|\n")
	for _, sh := range shapes {
		what := fmt.Sprintf("%d requests of one %d-token prompt at once, %d tokens each", *n, *promptLen, *tokens)
		if sh.name == "turns" {
			what = fmt.Sprintf("%d turns from a %d-token prompt, +%d tokens a turn, %d tokens each", *turns, *promptLen, *grow, *tokens)
		}
		t := times[sh.name]
		without, with := medianOf(t[0]), medianOf(t[1])
		fmt.Printf("| %s %s | %s | %.2f | %.2f | %.2f× |\n", defaultShape, weights, what, without, with, without/with)
	}
	fmt.Printf("\nmedians of %d rounds; load %s; %s; GOMAXPROCS=%d\n", *rounds, readLoadavg(), cpuModel(), *threads)
	return nil
}
