package tictactoe

import (
	"context"
	"errors"
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

// Ensure Expected scores the random legal player exactly (no invalid
// moves, the mean reward the sampled games approach) and stops at the
// policy's first error instead of counting it as an invalid move.
func TestExpected(t *testing.T) {
	uniform := func(b *Board) ([9]float64, error) {
		var p [9]float64
		free := b.Empty()
		for _, c := range free {
			p[c] = 1 / float64(len(free))
		}
		return p, nil
	}
	r, inv, err := Expected(uniform)
	if err != nil || inv > 1e-12 || r < 0.6 || r > 0.7 {
		t.Errorf("Expected(uniform) = %v, %v, %v; want about 0.65, 0, nil", r, inv, err)
	}
	boom := errors.New("boom")
	calls := 0
	failing := func(b *Board) ([9]float64, error) {
		if calls++; calls > 3 {
			return [9]float64{}, boom
		}
		return uniform(b)
	}
	if _, _, err := Expected(failing); !errors.Is(err, boom) {
		t.Errorf("Expected with a failing policy: %v; want %v", err, boom)
	}
}

// Ensure an opening has the asked pairs of moves (fewer only where the
// next pair would end the game), never ends the game, is fixed by its
// seed, and that a game played from it starts there.
func TestOpening(t *testing.T) {
	count := func(b Board, mark byte) (n int) {
		for _, c := range b {
			if c == mark {
				n++
			}
		}
		return n
	}
	short, varied := 0, map[Board]bool{}
	for seed := range uint64(300) {
		for pairs := range 4 {
			b := Opening(seed, pairs)
			x, o := count(b, 'X'), count(b, 'O')
			if x != o || x > pairs {
				t.Fatalf("Opening(%d, %d) = %q: %d X, %d O", seed, pairs, b.String(), x, o)
			}
			if _, done := result(&b, 0); done {
				t.Fatalf("Opening(%d, %d) = %q ends the game", seed, pairs, b.String())
			}
			if x < pairs {
				short++
			}
			if b != Opening(seed, pairs) {
				t.Fatalf("Opening(%d, %d) differs between calls", seed, pairs)
			}
			if pairs == 2 {
				varied[b] = true
			}
		}
	}
	if short == 0 || len(varied) < 100 {
		t.Errorf("openings: %d stopped short, %d distinct boards after 2 pairs; want some and many", short, len(varied))
	}
	start := Opening(7, 2)
	var first string
	agent := func(_ context.Context, board string) (string, error) {
		if first == "" {
			first = board
		}
		return FreeCells(board)[0], nil
	}
	if _, _, err := PlayFrom(context.Background(), agent, 7, start); err != nil {
		t.Fatal(err)
	}
	if first != start.Prompt() {
		t.Errorf("PlayFrom's first board %q; want the opening %q", first, start.Prompt())
	}
}

// Ensure ParseBoard inverts Prompt and refuses other text.
func TestParseBoard(t *testing.T) {
	for seed := range uint64(50) {
		b := Opening(seed, int(seed%4))
		got, ok := ParseBoard(b.Prompt())
		if !ok || got != b {
			t.Fatalf("ParseBoard(%q) = %q, %v", b.Prompt(), got.String(), ok)
		}
	}
	for _, bad := range []string{"", "X23\n4O6\n78", "X23\n4O6\n781", "X23 4O6 789", "123\n456\n78Z"} {
		if _, ok := ParseBoard(bad); ok {
			t.Errorf("ParseBoard(%q) accepted", bad)
		}
	}
}
