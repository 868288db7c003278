package tictactoe

import (
	"context"
	"testing"
)

func TestWinnerAndParse(t *testing.T) {
	var b Board
	b[0], b[4], b[8] = 'X', 'X', 'X'
	if b.Winner() != 'X' {
		t.Fatal("diagonal not detected")
	}
	b = Board{}
	b[4] = 'O'
	cases := []struct {
		reply string
		cell  int
		ok    bool
	}{{"1", 0, true}, {" 9\n", 8, true}, {"5", 4, false}, {"0", 0, false}, {"12", 0, false}, {"x", 0, false}, {"", 0, false}}
	for _, c := range cases {
		cell, ok := ParseMove(&b, c.reply)
		if ok != c.ok || (ok && cell != c.cell) {
			t.Errorf("ParseMove(%q) = %d, %v; want %d, %v", c.reply, cell, ok, c.cell, c.ok)
		}
	}
	if got := b.String(); got != "...\n.O.\n..." {
		t.Fatalf("String() = %q", got)
	}
}

// Ensure the random-legal policy scores what the probe measured (about
// 0.65 as X against a random opponent) and never plays invalid moves.
func TestRandomAgent(t *testing.T) {
	var sum float64
	const n = 2000
	for i := 0; i < n; i++ {
		out, turns, err := Play(context.Background(), RandomAgent(uint64(i)), uint64(i+7))
		if err != nil || out.Invalid || len(turns) == 0 {
			t.Fatalf("game %d: %+v %v", i, out, err)
		}
		sum += out.Reward
	}
	if m := sum / n; m < 0.6 || m > 0.7 {
		t.Fatalf("random-legal mean reward %.3f; want about 0.65", m)
	}
}
