package train

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"testing"

	"github.com/artgo/art/engine/kernels"
	"github.com/artgo/art/engine/model"
)

// echoSequences returns n SFT sequences "say <word>" → "<word>".
func echoSequences(t *testing.T, z *Tokenizer, n int) []Sequence {
	t.Helper()
	var out []Sequence
	for i := range n {
		w := colors[i%len(colors)] + fmt.Sprint(i%3)
		out = append(out, oneSequence(t)(z.SFTSequences(History{Turns: []Turn{{Message: msg("user", "say "+w)}, {Message: msg("assistant", w)}}})))
	}
	return out
}

func tinyF32(t *testing.T, vocab int) *model.Model { return tinyArchF32(t, "qwen2", vocab) }

func tinyArchF32(t *testing.T, arch string, vocab int) *model.Model {
	t.Helper()
	cfg, err := model.Preset(arch, "tiny", vocab)
	if err != nil {
		t.Fatal(err)
	}
	m, err := model.New(cfg, model.RandomWeights(cfg, model.InitOptions{Seed: 1, DType: kernels.F32}))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// Ensure full SFT trains every weight: the loss falls, StepSequences
// reports the loss before its update (as Loss measures it), and the
// embedding, norms and projections (a mixture of experts' router and
// experts) all change.
func TestFullSFT_LossFalls(t *testing.T) {
	for _, arch := range []string{"qwen2", "qwen3_moe"} {
		t.Run(arch, func(t *testing.T) { testFullSFTLossFalls(t, arch) })
	}
}

func testFullSFTLossFalls(t *testing.T, arch string) {
	z := byteTokenizer(t)
	m := tinyArchF32(t, arch, z.Tok.VocabSize())
	f, err := NewFullSFT(m)
	if err != nil {
		t.Fatal(err)
	}
	before, _ := m.BaseParams()
	var saved [][]float32
	for _, p := range before {
		saved = append(saved, slices.Clone(p))
	}
	seqs := echoSequences(t, z, 12)
	ctx := context.Background()
	first, err := f.Loss(ctx, seqs)
	if err != nil {
		t.Fatal(err)
	}
	var last float64
	for step := range 40 {
		loss, norm, err := f.StepSequences(ctx, seqs, 2e-3)
		if err != nil {
			t.Fatal(err)
		}
		if step == 0 && math.Abs(loss-first) > 1e-9 {
			t.Fatalf("first step's loss %v; Loss measured %v", loss, first)
		}
		if !(norm > 0) {
			t.Fatalf("step %d: gradient norm %v", step, norm)
		}
		last = loss
	}
	if final, _ := f.Loss(ctx, seqs); !(final < first/3) || !(final <= last) {
		t.Fatalf("loss %.3f → %.3f (last step %.3f); want a fall to below a third", first, final, last)
	}
	after, _ := m.BaseParams()
	for i := range after {
		if slices.Equal(after[i], saved[i]) {
			t.Errorf("weight slice %d did not change", i)
		}
	}
}

// Ensure a failed pass changes no weight and a bad learning rate is
// refused.
func TestFullSFT_FailedStepKeepsWeights(t *testing.T) {
	z := byteTokenizer(t)
	m := tinyF32(t, z.Tok.VocabSize())
	f, err := NewFullSFT(m)
	if err != nil {
		t.Fatal(err)
	}
	p, _ := m.BaseParams()
	embed := slices.Clone(p[0])
	boom := errors.New("boom")
	if _, err := f.Step(1e-3, 8, func(*model.Acts) error { return boom }); !errors.Is(err, boom) {
		t.Fatalf("Step error %v; want boom", err)
	}
	if _, err := f.Step(0, 8, func(*model.Acts) error { return nil }); err == nil {
		t.Fatal("Step with learning rate 0 succeeded")
	}
	if _, _, err := f.StepSequences(context.Background(), nil, 1e-3); err == nil {
		t.Fatal("StepSequences with nothing to learn succeeded")
	}
	if p, _ = m.BaseParams(); !slices.Equal(p[0], embed) {
		t.Fatal("a failed step changed the embedding")
	}
}

// Ensure a BF16 model is refused up front.
func TestNewFullSFT_NeedsF32(t *testing.T) {
	cfg, err := model.Preset("qwen2", "tiny", 300)
	if err != nil {
		t.Fatal(err)
	}
	m, err := model.New(cfg, model.RandomWeights(cfg, model.InitOptions{Seed: 1, DType: kernels.BF16}))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := NewFullSFT(m); err == nil {
		t.Fatal("NewFullSFT accepted BF16 weights")
	}
}

// Ensure Trainer.TrainBase without an adapter is full SFT: the same
// losses, gradient norms and weights as FullSFT, bit for bit, since both
// use baseOptimizer.
func TestSFTStep_TrainBaseMatchesFullSFT(t *testing.T) {
	z := byteTokenizer(t)
	var batch []History
	var seqs []Sequence
	for _, w := range colors {
		h := History{Turns: []Turn{{Message: msg("user", "say "+w)}, {Message: msg("assistant", w)}}}
		seq := oneSequence(t)(z.SFTSequences(h))
		batch, seqs = append(batch, h), append(seqs, seq)
	}
	tr := &Trainer{Model: tinyF32(t, z.Tok.VocabSize()), Tokenizer: z, TrainBase: true}
	f, err := NewFullSFT(tinyF32(t, z.Tok.VocabSize()))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for step := range 3 {
		met, err := tr.SFTStep(ctx, batch, DefaultSFTConfig(3e-3))
		if err != nil {
			t.Fatal(err)
		}
		loss, norm, err := f.StepSequences(ctx, seqs, 3e-3)
		if err != nil {
			t.Fatal(err)
		}
		if met["loss/train"] != loss || met["loss/grad_norm"] != norm {
			t.Fatalf("step %d: SFTStep loss %v norm %v; FullSFT %v %v", step, met["loss/train"], met["loss/grad_norm"], loss, norm)
		}
	}
	got, _ := tr.Model.BaseParams()
	want, _ := f.Model.BaseParams()
	for i := range want {
		if !slices.Equal(got[i], want[i]) {
			t.Fatalf("weight slice %d differs", i)
		}
	}
}
