package demo

import (
	"context"
	"math"
	"path/filepath"
	"testing"
	"time"

	"github.com/artgo/art/engine/model"
	"github.com/artgo/art/games/tictactoe"
)

// Ensure the default base model builds quickly and ends where the demo
// wants it: it knows the rules only roughly (invalid moves in 30-40% of
// games), and sampled games agree with the exact expectation.
func TestBuildBase(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a model (about 20 s)")
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
	if info.Invalid >= 0.4 || info.Invalid < 0.2 || info.Steps >= 800 {
		t.Errorf("base after %d steps: expected invalid %.3f; want in [0.2, 0.4) before the step limit", info.Steps, info.Invalid)
	}
	m, err := model.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	enc, err := newPromptEncoder(dir)
	if err != nil {
		t.Fatal(err)
	}
	if r, inv := tictactoe.Expected(enginePolicy(m, nil, enc)); r != info.Reward || inv != info.Invalid {
		t.Errorf("reloaded model: expected reward %v invalid %v; the build measured %v %v", r, inv, info.Reward, info.Invalid)
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
