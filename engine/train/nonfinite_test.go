package train

import (
	"context"
	"errors"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// trainerState is a bit-exact copy of a trainer's adapter and optimizer.
type trainerState struct {
	params, m, v []uint32
	t            int
}

func bits(xs []float32) []uint32 {
	out := make([]uint32, len(xs))
	for i, x := range xs {
		out[i] = math.Float32bits(x)
	}
	return out
}

func stateOf(tr *Trainer) trainerState {
	return trainerState{bits(tr.Adapter.Params()), bits(tr.Opt.M), bits(tr.Opt.V), tr.Opt.T}
}

func (s trainerState) equal(o trainerState) bool {
	return slices.Equal(s.params, o.params) && slices.Equal(s.m, o.m) && slices.Equal(s.v, o.v) && s.t == o.t
}

// wantNonFinite fails unless err is a *NonFiniteError about what whose
// message names the learning rate lr.
func wantNonFinite(t *testing.T, err error, what, lr string) *NonFiniteError {
	t.Helper()
	var nf *NonFiniteError
	if !errors.As(err, &nf) || !errors.Is(err, ErrNonFinite) {
		t.Fatalf("error %v; want a *NonFiniteError wrapping ErrNonFinite", err)
	}
	if what != "" && nf.What != what {
		t.Errorf("non-finite %q; want %q (%v)", nf.What, what, err)
	}
	if !strings.Contains(err.Error(), "learning rate "+lr) || !strings.Contains(err.Error(), "lower the learning rate") {
		t.Errorf("error %q does not name learning rate %s and say to lower it", err, lr)
	}
	return nf
}

// Ensure a GRPO step whose update overflows (learning rate 1e300, which a
// config's validation lets through: it is finite) fails with a
// *NonFiniteError and leaves the adapter and optimizer bit-identical, and
// that the next step then trains exactly as if the failed one had never
// run. At 1e30 the first update is still finite but the next sequence's
// loss is not: the update already applied is undone too.
func TestStep_NonFiniteUpdateChangesNothing(t *testing.T) {
	c := newColorTask(t)
	tr := c.tr
	ctx := context.Background()
	cfg := DefaultConfig()
	cfg.LearningRate = 1e-3
	groups := optionGroups(c, math.NaN())
	if _, err := tr.Step(ctx, groups, cfg, 0, nil, nil); err != nil {
		t.Fatal(err)
	}
	before := stateOf(tr)
	snap := tr.Snapshot()

	for _, lr := range []struct {
		rate    float64
		name    string
		what    string
		updates int // at least
	}{{1e300, "1e+300", "LoRA weights", 0}, {1e30, "1e+30", "", 1}} {
		bad := cfg
		bad.LearningRate = lr.rate
		res, err := tr.Step(ctx, groups, bad, 1, nil, nil)
		nf := wantNonFinite(t, err, lr.what, lr.name)
		t.Logf("learning rate %s: %v", lr.name, err)
		if nf.Updates < lr.updates {
			t.Errorf("learning rate %s: failed after %d updates; want at least %d (%v)", lr.name, nf.Updates, lr.updates, err)
		}
		if res.Trained {
			t.Errorf("learning rate %s: the failed step reports Trained", lr.name)
		}
		if !stateOf(tr).equal(before) {
			t.Fatalf("learning rate %s: the failed step changed the adapter or optimizer", lr.name)
		}
	}

	res, err := tr.Step(ctx, groups, cfg, 1, nil, nil)
	if err != nil || !res.Trained {
		t.Fatalf("step after the failed ones: %+v, %v", res, err)
	}
	for _, k := range []string{"loss/train", "loss/grad_norm", "loss/entropy"} {
		if v := res.Metrics[k]; !finite64(v) {
			t.Errorf("%s = %v after the failed steps", k, v)
		}
	}
	after := stateOf(tr)
	tr.Restore(snap)
	if _, err := tr.Step(ctx, groups, cfg, 1, nil, nil); err != nil {
		t.Fatal(err)
	}
	if !stateOf(tr).equal(after) {
		t.Fatal("the step after the failed ones differs from the same step without them")
	}
}

// Ensure an SFT step whose update overflows fails with a *NonFiniteError
// and changes nothing: the adapter and its optimizer, and with TrainBase
// the base weights too.
func TestSFTStep_NonFiniteUpdateChangesNothing(t *testing.T) {
	c := newColorTask(t)
	tr := c.tr
	ctx := context.Background()
	batch := []History{
		{Turns: []Turn{{Message: msg("user", "say red")}, {Message: msg("assistant", "red")}}},
		{Turns: []Turn{{Message: msg("user", "say blue")}, {Message: msg("assistant", "blue")}}},
	}
	if _, err := tr.SFTStep(ctx, batch, DefaultSFTConfig(1e-3)); err != nil {
		t.Fatal(err)
	}
	before := stateOf(tr)
	_, err := tr.SFTStep(ctx, batch, DefaultSFTConfig(1e300))
	wantNonFinite(t, err, "LoRA weights", "1e+300")
	if !stateOf(tr).equal(before) {
		t.Fatal("the failed SFT step changed the adapter or optimizer")
	}
	met, err := tr.SFTStep(ctx, batch, DefaultSFTConfig(1e-3))
	if err != nil || !finite64(met["loss/train"]) || !finite64(met["loss/grad_norm"]) {
		t.Fatalf("SFT step after the failed one: %v, %v", met, err)
	}

	// TrainBase: the base weights stay as they were too.
	z := byteTokenizer(t)
	full := &Trainer{Model: tinyF32(t, z.Tok.VocabSize()), Tokenizer: z, TrainBase: true}
	if _, err := full.SFTStep(ctx, batch, DefaultSFTConfig(1e-3)); err != nil {
		t.Fatal(err)
	}
	params, _ := full.Model.BaseParams()
	var saved [][]uint32
	for _, p := range params {
		saved = append(saved, bits(p))
	}
	_, err = full.SFTStep(ctx, batch, DefaultSFTConfig(1e300))
	wantNonFinite(t, err, "base weights", "1e+300")
	params, _ = full.Model.BaseParams()
	for i, p := range params {
		if !slices.Equal(bits(p), saved[i]) {
			t.Fatalf("the failed SFT step changed base weight slice %d", i)
		}
	}
	if _, err := full.SFTStep(ctx, batch, DefaultSFTConfig(1e-3)); err != nil {
		t.Fatalf("SFT step after the failed one: %v", err)
	}
}

// Ensure full-parameter SFT (pretrain's optimizer step) refuses an update
// that overflows and keeps every weight, then trains on.
func TestFullSFT_NonFiniteUpdateKeepsWeights(t *testing.T) {
	z := byteTokenizer(t)
	m := tinyF32(t, z.Tok.VocabSize())
	f, err := NewFullSFT(m)
	if err != nil {
		t.Fatal(err)
	}
	seqs := echoSequences(t, z, 4)
	ctx := context.Background()
	if _, _, err := f.StepSequences(ctx, seqs, 1e-3); err != nil {
		t.Fatal(err)
	}
	params, _ := m.BaseParams()
	var saved [][]uint32
	for _, p := range params {
		saved = append(saved, bits(p))
	}
	_, _, err = f.StepSequences(ctx, seqs, 1e300)
	wantNonFinite(t, err, "base weights", "1e+300")
	params, _ = m.BaseParams()
	for i, p := range params {
		if !slices.Equal(bits(p), saved[i]) {
			t.Fatalf("the failed step changed weight slice %d", i)
		}
	}
	if loss, norm, err := f.StepSequences(ctx, seqs, 1e-3); err != nil || !finite64(loss) || !finite64(norm) {
		t.Fatalf("step after the failed one: loss %v, norm %v, %v", loss, norm, err)
	}
}

// Ensure SaveCheckpoint refuses an adapter or optimizer state holding a
// NaN or an Inf and leaves no folder behind.
func TestSaveCheckpoint_RefusesNonFinite(t *testing.T) {
	c := newColorTask(t)
	dir := t.TempDir()
	for i, spoil := range []func(a, m []float32){
		func(a, _ []float32) { a[3] = float32(math.NaN()) },
		func(_, m []float32) { m[5] = float32(math.Inf(1)) },
	} {
		a, o := c.tr.Adapter.Clone(), NewAdamW(len(c.tr.Adapter.Params()))
		spoil(a.Params(), o.M)
		path := filepath.Join(dir, "ckpt")
		if err := SaveCheckpoint(path, a, o, CheckpointInfo{BaseModel: "base"}); !errors.Is(err, ErrNonFinite) {
			t.Errorf("case %d: SaveCheckpoint = %v; want an error wrapping ErrNonFinite", i, err)
		}
		if entries, _ := os.ReadDir(dir); len(entries) != 0 {
			t.Errorf("case %d: the refused save left %v", i, entries)
		}
	}
}
