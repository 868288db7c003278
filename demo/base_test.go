package demo

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/artgo/art/demo/tictactoe"
	"github.com/artgo/art/engine/model"
)

func TestBuildBase_Speed(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "base")
	start := time.Now()
	err := BuildBase(context.Background(), dir, BaseOptions{SFTSteps: 250, StopLoss: -1, Seed: 1, Progress: func(s, n int, loss float64) {
		if s%20 == 0 {
			t.Logf("step %d/%d loss %.3f (%.1fs)", s, n, loss, time.Since(start).Seconds())
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	m, err := model.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	tr, err := sftTrainer(dir, m, 1)
	if err != nil {
		t.Fatal(err)
	}
	agent := engineAgent(m, nil, tr.Tokenizer.Tok, tr.Tokenizer.Template, []int{258}, 5)
	var sum float64
	invalid := 0
	const n = 200
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
	t.Logf("after SFT: reward %.3f invalid %.3f (%.1fs)", sum/n, float64(invalid)/n, time.Since(start).Seconds())
}
