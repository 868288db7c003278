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
	if _, _, err := PlayFrom(context.Background(), agent, NewOpponent(7), start); err != nil {
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

// Ensure a sharp opponent wins when it can, else blocks, and that
// sharpness 0 is the random opponent move for move.
func TestSharpOpponent(t *testing.T) {
	for _, c := range []struct {
		board string
		want  int
	}{
		{"XX.OO....", 5}, // its own win before X's block
		{"XX.O.....", 2}, // block
		{"X...O...X", -1},
	} {
		for seed := range uint64(20) {
			b := boardOf(c.board)
			NewSharpOpponent(seed, 1).Move(&b)
			if c.want >= 0 && b[c.want] != 'O' {
				t.Fatalf("sharp opponent on %s played %s; want O at %d", c.board, b.String(), c.want)
			}
		}
	}
	for seed := range uint64(50) {
		a, b := Opening(seed, 1), Opening(seed, 1)
		random, blunt := NewOpponent(seed), NewSharpOpponent(seed, 0)
		for len(a.Empty()) > 0 {
			random.Move(&a)
			blunt.Move(&b)
			if a != b {
				t.Fatalf("sharpness 0 played %s where the random opponent played %s", b.String(), a.String())
			}
		}
	}
	// Sharpness 0.5 takes a win about half the time.
	wins := 0
	for seed := range uint64(400) {
		b := boardOf("XX.OO....")
		NewSharpOpponent(seed, 0.5).Move(&b)
		if b.Winner() == 'O' {
			wins++
		}
	}
	if wins < 200+20 || wins > 200+120 { // 0.5 sharp + 0.5·(1/5) random
		t.Errorf("sharpness 0.5 won %d of 400 times; want about 240", wins)
	}
}

// Ensure Blunder names missed wins and missed blocks, and nothing else.
func TestBlunder(t *testing.T) {
	for _, c := range []struct {
		board string
		cell  int
		want  bool
	}{
		{"XX.OO....", 2, false}, // wins
		{"XX.OO....", 5, true},  // blocks, but 2 won at once
		{"XX.OO....", 8, true},
		{"X..OO....", 5, false}, // the block
		{"X..OO....", 8, true},  // O completes 3-4-5 next
		{"X.XOO.O..", 1, false}, // wins (and O's threats do not matter)
		{"...OO..O.", 0, false}, // O threatens two cells: no single block
		{"X...O...X", 2, false}, // nothing to win or block
	} {
		b := boardOf(c.board)
		if got := b.Blunder(c.cell); got != c.want {
			t.Errorf("%s, X at %d: Blunder = %v; want %v", c.board, c.cell, got, c.want)
		}
	}
}

// boardOf reads a board written as its nine cells, row by row, '.' empty.
func boardOf(cells string) Board {
	var b Board
	for i := range b {
		if cells[i] != '.' {
			b[i] = cells[i]
		}
	}
	return b
}
