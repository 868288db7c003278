package model

import (
	"context"
	"math"
	"strings"
	"testing"

	"github.com/artgo/art/engine/internal/exactunit"
	"github.com/artgo/art/engine/kernels"
)

// Bounds of |logprob(q8) − logprob(checkpoint dtype)| per token on the
// random test models below (weights ~N(0, 0.08²), 47 scored tokens, mean
// logprob about −6.4 to −7.3 over a 512-token vocabulary): each weight
// moves by at most half a step, max|w|/254 of its block of 32. Measured
// (2026-11-26): mean 0.008–0.03, worst 0.027 (tiny), 0.079 (small, 4
// layers); the bounds leave about twice that. A wrong block or scale
// layout moves logprobs by whole units.
const (
	q8LogprobMaxTol  = 0.15
	q8LogprobMeanTol = 0.05
)

// The same bounds for q4, whose step is max|w|/8 of a block (about 16
// times q8's): measured (2026-11-26) mean 0.14 (tiny), 0.52 (small, bf16),
// worst 0.35, 0.45 (tiny) and 1.49 (small); the bounds leave about twice
// that. The exact check against the dequantized model is what catches a
// wrong layout; these bound the quantization's own error.
const (
	q4LogprobMaxTol  = 3.0
	q4LogprobMeanTol = 1.0
)

// Ensure a model loaded with --quantize q8 stores every matrix as Q8,
// scores tokens exactly as the fp32 model holding the dequantized weights
// does (the same products in the same order), and stays within
// q8LogprobTol of the unquantized model.
func TestLoadWith_Q8(t *testing.T) {
	exactunit.Use(t) // an fp32 reference
	testLoadWithQuant(t, Q8, kernels.Q8, q8LogprobMaxTol, q8LogprobMeanTol)
}

// TestLoadWith_Q4 is TestLoadWith_Q8 for --quantize q4.
func TestLoadWith_Q4(t *testing.T) {
	exactunit.Use(t) // an fp32 reference
	testLoadWithQuant(t, Q4, kernels.Q4, q4LogprobMaxTol, q4LogprobMeanTol)
}

func testLoadWithQuant(t *testing.T, quant Quantization, dt kernels.DType, maxTol, meanTol float64) {
	const vocab = 512
	for _, c := range []parityCase{
		{name: "qwen2-tiny-f32-tied", arch: "qwen2", shape: "tiny", dtype: kernels.F32, tied: true},
		{name: "qwen3-small-bf16-untied", arch: "qwen3", shape: "small", dtype: kernels.BF16},
		{name: "gemma3-tiny-f32-tied", arch: "gemma3", shape: "tiny", dtype: kernels.F32, tied: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := writeRandomModel(t, c, vocab, 5)
			base, err := Load(dir)
			if err != nil {
				t.Fatal(err)
			}
			q, err := LoadWith(context.Background(), dir, LoadOptions{Quantize: quant})
			if err != nil {
				t.Fatal(err)
			}
			if err := q.Save(t.TempDir()); err == nil || !strings.Contains(err.Error(), dt.String()) {
				t.Errorf("saving a quantized model: err = %v, want a %v error", err, dt)
			}
			if c.tied != (q.W.LMHead == q.W.Embed) {
				t.Errorf("tied embeddings: LM head shared = %v, want %v", q.W.LMHead == q.W.Embed, c.tied)
			}
			mats := []*kernels.Mat{q.W.Embed, q.W.LMHead}
			for l := range q.W.Layers {
				for mod := range NumModules {
					mats = append(mats, *q.W.Layers[l].Proj(mod))
				}
			}
			for i, m := range mats {
				if m.DType != dt {
					t.Fatalf("matrix %d is %v after LoadWith(%s)", i, m.DType, quant)
				}
			}
			// The oracle: the same model with each matrix dequantized to fp32.
			deq, err := LoadWith(context.Background(), dir, LoadOptions{Quantize: quant})
			if err != nil {
				t.Fatal(err)
			}
			deq.W.Embed = kernels.Dequantize(deq.W.Embed)
			if c.tied {
				deq.W.LMHead = deq.W.Embed
			} else {
				deq.W.LMHead = kernels.Dequantize(deq.W.LMHead)
			}
			for l := range deq.W.Layers {
				for mod := range NumModules {
					p := deq.W.Layers[l].Proj(mod)
					*p = kernels.Dequantize(*p)
				}
			}
			tokens := randomTokens(48, vocab, 9)
			got, err := q.LogProbs(tokens, nil)
			if err != nil {
				t.Fatal(err)
			}
			exact, err := deq.LogProbs(tokens, nil)
			if err != nil {
				t.Fatal(err)
			}
			ref, err := base.LogProbs(tokens, nil)
			if err != nil {
				t.Fatal(err)
			}
			var worst, sum float64
			for i := range got {
				if got[i] != exact[i] {
					t.Fatalf("token %d: %s logprob %v, dequantized fp32 %v: want them equal", i, quant, got[i], exact[i])
				}
				worst = max(worst, math.Abs(got[i]-ref[i]))
				sum += math.Abs(got[i] - ref[i])
			}
			mean := sum / float64(len(got))
			t.Logf("|logprob(%s) − logprob(%v)|: max %.3g, mean %.3g over %d tokens", quant, c.dtype, worst, mean, len(got))
			if worst > maxTol || mean > meanTol {
				t.Errorf("%s logprobs differ from the %v model's by up to %.3g (mean %.3g); bounds %g (mean %g)",
					quant, c.dtype, worst, mean, maxTol, meanTol)
			}
		})
	}
}

func TestParseQuantization(t *testing.T) {
	for s, want := range map[string]Quantization{"": NoQuantization, "none": NoQuantization, "q8": Q8, "q4": Q4} {
		if got, err := ParseQuantization(s); err != nil || got != want {
			t.Errorf("ParseQuantization(%q) = %q, %v; want %q", s, got, err, want)
		}
	}
	for _, s := range []string{"q5", "Q8_0", "int8"} {
		if _, err := ParseQuantization(s); err == nil || !strings.Contains(err.Error(), "unknown quantization") {
			t.Errorf("ParseQuantization(%q): err = %v, want an unknown-quantization error", s, err)
		}
	}
	if _, err := LoadWith(context.Background(), t.TempDir(), LoadOptions{Quantize: "q3"}); err == nil || !strings.Contains(err.Error(), `"q3"`) {
		t.Errorf("LoadWith q3: err = %v, want it named", err)
	}
}
