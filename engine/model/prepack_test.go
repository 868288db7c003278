package model

import (
	"slices"
	"testing"

	"github.com/artgo/art/engine/kernels"
)

// Ensure packing the weights up front changes no result: the logits of a
// bf16 model equal those of the same model packed lazily.
func TestPrepack_SameLogits(t *testing.T) {
	cfg, err := Preset("qwen2", "tiny", 300)
	if err != nil {
		t.Fatal(err)
	}
	build := func() *Model {
		m, err := New(cfg, RandomWeights(cfg, InitOptions{Seed: 4, DType: kernels.BF16, Std: 0.1}))
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	lazy, eager := build(), build()
	eager.W.Prepack()
	toks := randomTokens(9, cfg.VocabSize, 2)
	logits := func(m *Model) []float32 {
		acts := m.NewActs(len(toks))
		hidden, err := m.TrainForward(acts, toks, nil)
		if err != nil {
			t.Fatal(err)
		}
		out := make([]float32, len(toks)*cfg.VocabSize)
		m.Logits(out, hidden, len(toks))
		return out
	}
	if !slices.Equal(logits(lazy), logits(eager)) {
		t.Error("prepacked weights give different logits")
	}
}
