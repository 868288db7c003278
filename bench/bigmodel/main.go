// Command bigmodel is a memory check, not run in CI: a Qwen2.5-7B-shaped
// model (28 layers, hidden 3584, 7.6 B parameters) with random weights
// drawn straight into blockwise 4-bit (or 8-bit) storage, so no 15 GB file
// is written and the model never exists in fp32, loads, samples with a
// LoRA adapter and takes one LoRA training step (forward, backward, AdamW).
// It prints the peak resident memory (VmHWM) after each phase and the
// tokens per second of each.
//
//	go run ./bench/bigmodel [-quantize q4] [-prompt 32] [-new 8] [-T 64] [-rank 8]
//
// It needs about 5 GB of memory at q4 and several minutes on 2 cores
// (drawing 7.6 B normal numbers alone takes about a minute).
package main

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"time"

	"github.com/artgo/art/engine/generate"
	"github.com/artgo/art/engine/kernels"
	"github.com/artgo/art/engine/lora"
	"github.com/artgo/art/engine/model"
	"github.com/artgo/art/engine/train"
	"github.com/artgo/art/internal/procstat"
)

func main() {
	quantize := flag.String("quantize", "q4", "storage of the weight matrices: q4 or q8")
	prompt := flag.Int("prompt", 32, "prompt tokens of the sampling request")
	newTok := flag.Int("new", 8, "tokens to sample")
	T := flag.Int("T", 64, "tokens of the training sequence")
	rank := flag.Int("rank", 8, "LoRA rank (all seven projections of every layer)")
	flag.Parse()
	if err := run(*quantize, *prompt, *newTok, *T, *rank); err != nil {
		fmt.Fprintln(os.Stderr, "bigmodel:", err)
		os.Exit(1)
	}
}

// qwen7B returns the shape of Qwen2.5-7B (qkv biases as qwen2 has them).
func qwen7B() (model.Config, error) {
	cfg, err := model.Preset("qwen2", "qwen2.5-0.5b", 0)
	if err != nil {
		return cfg, err
	}
	cfg.HiddenSize, cfg.IntermediateSize, cfg.NumLayers = 3584, 18944, 28
	cfg.NumHeads, cfg.NumKVHeads, cfg.HeadDim = 28, 4, 128
	cfg.VocabSize, cfg.TieWordEmbeddings = 152064, false
	return cfg, nil
}

func run(quantize string, promptLen, newTok, T, rank int) error {
	q, err := model.ParseQuantization(quantize)
	if err != nil {
		return err
	}
	dt := map[model.Quantization]kernels.DType{model.Q4: kernels.Q4, model.Q8: kernels.Q8}[q]
	if dt == 0 {
		return fmt.Errorf("-quantize %q: want q4 or q8", quantize)
	}
	cfg, err := qwen7B()
	if err != nil {
		return err
	}
	fmt.Printf("Qwen2.5-7B shape: %d layers, hidden %d, MLP %d, vocab %d, %.2f B parameters, %v weights, GOMAXPROCS %d\n",
		cfg.NumLayers, cfg.HiddenSize, cfg.IntermediateSize, cfg.VocabSize, float64(cfg.NumParams())/1e9, dt, runtime.GOMAXPROCS(0))

	t0 := time.Now()
	m, err := model.New(cfg, model.RandomWeights(cfg, model.InitOptions{Seed: 1, DType: dt}))
	if err != nil {
		return err
	}
	m.W.Prepack()
	runtime.GC()
	report("load (random weights drawn and quantized, packed)", time.Since(t0), 0, "")

	ad, err := lora.New(cfg, lora.Config{Rank: rank, Alpha: float64(2 * rank)}, 1)
	if err != nil {
		return err
	}
	rng := rand.New(rand.NewPCG(2, 3))
	for i, v := range ad.Params() {
		if v == 0 { // B: random instead of PEFT's zero, so the adapter counts
			ad.Params()[i] = float32(0.01 * rng.NormFloat64())
		}
	}
	ids := func(n int) []int {
		out := make([]int, n)
		for i := range out {
			out[i] = rng.IntN(cfg.VocabSize)
		}
		return out
	}

	ctx := context.Background()
	t0 = time.Now()
	res, err := generate.Generate(ctx, m, generate.Request{Prompt: ids(promptLen), MaxTokens: newTok,
		Sampling: generate.SamplingParams{Temperature: 1}, Seed: 1, Adapter: ad})
	if err != nil {
		return err
	}
	report(fmt.Sprintf("sample (%d-token prompt, %d tokens)", promptLen, len(res.IDs())), time.Since(t0), promptLen+len(res.IDs()), "prompt + sampled")

	t0 = time.Now()
	tokens := ids(T)
	acts := m.NewActs(T)
	rows, targets := make([]int, T-1), make([]int, T-1)
	for i := range rows {
		rows[i], targets[i] = i, tokens[i+1]
	}
	ad.ZeroGrad()
	if _, err := m.TrainForward(acts, tokens, ad); err != nil {
		return err
	}
	n := float64(len(rows))
	var loss float64
	// CISPO on-policy with advantage 1: L = −mean log π.
	_, dh := m.LMHeadBackward(acts, rows, targets, func(_ int, lp, _ float64) (float64, float64) {
		loss -= lp / n
		return -1 / n, 0
	})
	m.TrainBackward(acts, dh, ad)
	train.NewAdamW(len(ad.Params())).Step(ad.Params(), ad.Grads(), 1e-5)
	report(fmt.Sprintf("LoRA training step (%d tokens, rank %d, loss %.3f)", T, rank, loss), time.Since(t0), T, "")
	return nil
}

// report prints a phase's wall time, its tokens per second if tokens > 0,
// and the peak RSS so far.
func report(phase string, d time.Duration, tokens int, what string) {
	line := fmt.Sprintf("%-60s %7.1f s", phase, d.Seconds())
	if tokens > 0 {
		if what == "" {
			what = "tokens"
		}
		line += fmt.Sprintf("  %.2f tok/s (%s)", float64(tokens)/d.Seconds(), what)
	}
	fmt.Printf("%s  peak RSS %.2f GB\n", line, float64(procstat.Bytes("VmHWM"))/1e9)
}
