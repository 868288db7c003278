package demo

import (
	"context"
	"math"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/artgo/art/engine/initmodel"
	"github.com/artgo/art/engine/kernels"
	"github.com/artgo/art/engine/model"
	"github.com/artgo/art/games/tictactoe"
)

// Ensure the default base model builds quickly and ends where the demo
// wants it: it knows the rules (invalid moves in 1-2% of games) but not
// yet the strategy, and sampled games agree with the exact expectation.
func TestBuildBase(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a model (about 40 s)")
	}
	dir := filepath.Join(t.TempDir(), "base")
	start := time.Now()
	err := BuildBase(context.Background(), dir, BaseOptions{Seed: 1, Eval: func(step int, r, inv float64) {
		t.Logf("step %d: expected reward %.3f invalid %.3f (%.1fs)", step, r, inv, time.Since(start).Seconds())
	}})
	if err != nil {
		t.Fatal(err)
	}
	info, ok := readBaseInfo(dir, BaseOptions{Seed: 1})
	if !ok {
		t.Fatalf("build record missing or not matching: %+v", info)
	}
	if info.Invalid >= 0.02 || info.Invalid < 0.01 || info.Steps >= 1200 {
		t.Errorf("base after %d steps: expected invalid %.3f; want in [0.01, 0.02) before the step limit", info.Steps, info.Invalid)
	}
	m, err := model.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	enc, err := newPromptEncoder(dir)
	if err != nil {
		t.Fatal(err)
	}
	if r, inv, err := tictactoe.Expected(enginePolicy(m, nil, enc)); err != nil || r != info.Reward || inv != info.Invalid {
		t.Errorf("reloaded model: expected reward %v invalid %v (%v); the build measured %v %v", r, inv, err, info.Reward, info.Invalid)
	}
	agent := engineAgent(m, nil, enc, 5)
	var sum, invalid float64
	const n = 400
	for i := 0; i < n; i++ {
		out, _, err := tictactoe.Play(context.Background(), agent, uint64(10_000_000+i))
		if err != nil {
			t.Fatal(err)
		}
		sum += out.Reward
		if out.Invalid {
			invalid++
		}
	}
	t.Logf("%d sampled games: reward %.3f invalid %.3f; exact %.3f %.3f (%.1fs)", n, sum/n, invalid/n, info.Reward, info.Invalid, time.Since(start).Seconds())
	if math.Abs(sum/n-info.Reward) > 0.08 || math.Abs(invalid/n-info.Invalid) > 0.08 {
		t.Errorf("sampled games disagree with the exact expectation")
	}
}

// Ensure a prompt the engine cannot render is an error of the exact
// evaluation, not a board where every move is invalid.
func TestEnginePolicy_Error(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "m")
	if _, err := initmodel.Write(dir, initmodel.Options{Arch: "qwen2", Shape: "tiny", Tokenizer: initmodel.ByteTokenizer,
		DType: kernels.F32, Seed: 1, ChatTemplate: `{{ raise_exception("no template") }}`}); err != nil {
		t.Fatal(err)
	}
	m, err := model.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	enc, err := newPromptEncoder(dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := tictactoe.Expected(enginePolicy(m, nil, enc)); err == nil || !strings.Contains(err.Error(), "no template") {
		t.Errorf("Expected with an unrenderable prompt: %v; want the template's error", err)
	}
}
