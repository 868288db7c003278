package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"runtime"
	"slices"
	"time"

	"github.com/artgo/art/engine/generate"
	"github.com/artgo/art/engine/grammar"
	"github.com/artgo/art/engine/hfmodel"
	"github.com/artgo/art/engine/model"
)

// judgeSchema is RULER's answer for a group of eight with generous bounds:
// long explanations keep a random model inside strings most of the time,
// and every key, number and bracket between them needs a full token mask.
const judgeSchema = `{"type":"object","additionalProperties":false,"required":["scores"],"properties":{"scores":{"type":"array",
"minItems":8,"maxItems":8,"items":{"type":"object","additionalProperties":false,"required":["trajectory_id","explanation","score"],
"properties":{"trajectory_id":{"type":"string","maxLength":3},"explanation":{"type":"string","maxLength":400},
"score":{"type":"number","minimum":0,"maximum":1}}}}}}`

// countingConstraint counts the full masks a sequence needed.
type countingConstraint struct {
	*grammar.Matcher
	masks *int
}

func (c countingConstraint) FillMask(mask []uint64) {
	*c.masks++
	c.Matcher.FillMask(mask)
}

// runSchema measures single-sequence decode with and without a JSON schema
// (structured outputs) on the same model, prompt and seeds, alternating the
// order between rounds, and prints the per-token medians and their ratio.
func runSchema(args []string, log func(string, ...any)) error {
	fs := flag.NewFlagSet("schema", flag.ExitOnError)
	dtype := fs.String("dtype", "bf16", "weight storage: f16 or bf16")
	rounds := fs.Int("rounds", 5, "measurement rounds")
	tokens := fs.Int("tokens", 128, "tokens decoded per run")
	threads := fs.Int("threads", 2, "GOMAXPROCS")
	dir := fs.String("dir", "", "asset cache directory (default <repo>/.assets/bench)")
	fs.Parse(args)
	runtime.GOMAXPROCS(*threads)
	m, md, err := benchModel(*dtype, "", *dir, log)
	if err != nil {
		return err
	}
	folder, err := hfmodel.OpenText(md)
	if err != nil {
		return err
	}
	tok := folder.Tokenizer
	t0 := time.Now()
	vocab, err := grammar.NewVocab(tok.VocabBytes(), folder.StopIDs)
	if err != nil {
		return err
	}
	vocabTime := time.Since(t0)
	t0 = time.Now()
	g, err := grammar.Compile([]byte(judgeSchema))
	if err != nil {
		return err
	}
	compileTime := time.Since(t0)
	prompt, err := promptTokens(md, 64)
	if err != nil {
		return err
	}
	stop := folder.StopIDs
	run := func(seed uint64, constrained bool) (msPerToken float64, n, masks int, err error) {
		req := generate.Request{Prompt: prompt, MaxTokens: *tokens, Seed: seed, StopTokenIDs: stop, VocabLimit: tok.VocabSize(),
			Sampling: generate.SamplingParams{Temperature: 1}}
		if constrained {
			req.NewConstraint = func() generate.Constraint { return countingConstraint{g.NewMatcher(vocab), &masks} }
		}
		var stamps []time.Time
		req.OnToken = func(generate.Sample) error { stamps = append(stamps, time.Now()); return nil }
		if _, err := generate.Generate(context.Background(), m, req); err != nil {
			return 0, 0, 0, err
		}
		if len(stamps) < 2 {
			return 0, 0, 0, errors.New("fewer than 2 tokens")
		}
		last := len(stamps) - 1
		return ms(stamps[last].Sub(stamps[0])) / float64(last), last, masks, nil
	}
	log("machine: %s, load %s; vocab prepared in %v, schema compiled in %v", cpuModel(), readLoadavg(), vocabTime, compileTime)
	var free, cons []float64
	var consTokens, consMasks int
	for r := range *rounds {
		waitIdle(30*time.Second, log)
		for k := range 2 {
			constrained := (r+k)%2 == 1
			v, n, masks, err := run(uint64(r+1), constrained)
			if err != nil {
				return err
			}
			if constrained {
				cons = append(cons, v)
				consTokens += n
				consMasks += masks
			} else {
				free = append(free, v)
			}
			log("round %d constrained=%v: %.2f ms/token over %d tokens (%d full masks)", r+1, constrained, v, n, masks)
		}
	}
	mf, mc := medianOf(free), medianOf(cons)
	fmt.Printf("| model | schema | decode without (ms/token) | with (ms/token) | slowdown | full masks per token | vocab prep | compile |\n|---|---|---|---|---|---|---|---|\n")
	fmt.Printf("| %s %s, %d tokens, T=1, %d rounds | RULER answer for 8 | %.2f | %.2f | %+.1f %% | %.2f | %v | %v |\n",
		defaultShape, *dtype, *tokens, *rounds, mf, mc, 100*(mc/mf-1), float64(consMasks)/float64(consTokens), vocabTime.Round(time.Millisecond), compileTime.Round(time.Microsecond))
	fmt.Printf("\nload %s; %s; GOMAXPROCS=%d\n", readLoadavg(), cpuModel(), *threads)
	return nil
}

func medianOf(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s) == 0 {
		return 0
	}
	return s[len(s)/2]
}

// benchModel loads the benchmark's model (made on first use) with its
// weights packed, and returns its folder.
func benchModel(dtype, quantize, dir string, log func(string, ...any)) (*model.Model, string, error) {
	dt, q, root, md, gp, err := benchAssets(defaultShape, dtype, quantize, dir)
	if err != nil {
		return nil, "", err
	}
	m, err := ensureAssets(defaultShape, root, md, gp, dt, q, log)
	if err != nil {
		return nil, "", err
	}
	m.W.Prepack()
	return m, md, nil
}
