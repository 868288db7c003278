package main

import (
	"context"
	"errors"
	"math"
	"testing"
)

// Ensure a line slides towards index 0 and each tile merges at most once,
// the pair nearest the wall first (checked by hand against the original
// game's rules).
func TestSlideLine(t *testing.T) {
	for _, c := range []struct {
		in, want [Size]int
		gained   int
	}{
		{[4]int{0, 0, 0, 0}, [4]int{0, 0, 0, 0}, 0},
		{[4]int{0, 0, 0, 2}, [4]int{2, 0, 0, 0}, 0},
		{[4]int{2, 0, 2, 0}, [4]int{4, 0, 0, 0}, 4},
		{[4]int{2, 2, 2, 0}, [4]int{4, 2, 0, 0}, 4},
		{[4]int{2, 2, 2, 2}, [4]int{4, 4, 0, 0}, 8},
		{[4]int{4, 4, 8, 8}, [4]int{8, 16, 0, 0}, 24},
		{[4]int{4, 4, 8, 0}, [4]int{8, 8, 0, 0}, 8}, // the new 8 does not merge again
		{[4]int{2, 4, 2, 4}, [4]int{2, 4, 2, 4}, 0},
		{[4]int{0, 4, 4, 4}, [4]int{8, 4, 0, 0}, 8},
		{[4]int{8, 0, 0, 8}, [4]int{16, 0, 0, 0}, 16},
	} {
		got, gained := slideLine(c.in)
		if got != c.want || gained != c.gained {
			t.Errorf("slideLine(%v) = %v, %d; want %v, %d", c.in, got, gained, c.want, c.gained)
		}
	}
}

// Ensure each direction moves whole rows or columns the right way.
func TestBoard_Move(t *testing.T) {
	b := Board{
		{2, 2, 0, 4},
		{0, 0, 0, 0},
		{2, 0, 4, 4},
		{2, 8, 0, 8},
	}
	for _, c := range []struct {
		d      Direction
		want   Board
		gained int
	}{
		{Left, Board{{4, 4, 0, 0}, {0, 0, 0, 0}, {2, 8, 0, 0}, {2, 16, 0, 0}}, 28},
		{Right, Board{{0, 0, 4, 4}, {0, 0, 0, 0}, {0, 0, 2, 8}, {0, 0, 2, 16}}, 28},
		{Up, Board{{4, 2, 4, 8}, {2, 8, 0, 8}, {0, 0, 0, 0}, {0, 0, 0, 0}}, 12},
		{Down, Board{{0, 0, 0, 0}, {0, 0, 0, 0}, {2, 2, 0, 8}, {4, 8, 4, 8}}, 12},
	} {
		got, gained, changed := b.Move(c.d)
		if got != c.want || gained != c.gained || !changed {
			t.Errorf("%v: got\n%v\ngained %d changed %v; want\n%v\ngained %d", c.d, got, gained, changed, c.want, c.gained)
		}
	}
	if _, _, changed := (Board{{2, 4, 0, 0}}).Move(Left); changed {
		t.Error("a move that changes nothing reported a change")
	}
}

func TestBoard_CanMove(t *testing.T) {
	stuck := Board{{2, 4, 2, 4}, {4, 2, 4, 2}, {2, 4, 2, 4}, {4, 2, 4, 2}}
	if stuck.CanMove() {
		t.Errorf("CanMove on a full board without pairs = true")
	}
	pair := stuck
	pair[3][3] = 4 // pairs with the 4 above... and to its left
	if !pair.CanMove() {
		t.Errorf("CanMove on a full board with a pair = false")
	}
}

func TestParseMove(t *testing.T) {
	for _, c := range []struct {
		in   string
		want Direction
		ok   bool
	}{
		{"up", Up, true}, {" Down\n", Down, true}, {"LEFT.", Left, true}, {`"right"`, Right, true},
		{"", 0, false}, {"go left", 0, false}, {"upward", 0, false}, {"left right", 0, false}, {"<move>up</move>", 0, false},
	} {
		got, err := ParseMove(c.in)
		if c.ok && (err != nil || got != c.want) {
			t.Errorf("ParseMove(%q) = %v, %v; want %v", c.in, got, err, c.want)
		}
		if !c.ok && !errors.Is(err, ErrBadMove) {
			t.Errorf("ParseMove(%q) = %v, %v; want ErrBadMove", c.in, got, err)
		}
	}
}

// Ensure a seed fixes the game and a new tile appears only after a move
// that changed the board.
func TestGame(t *testing.T) {
	a, b := NewGame(7), NewGame(7)
	if a.Board != b.Board {
		t.Fatalf("same seed, different boards:\n%v\n%v", a.Board, b.Board)
	}
	if n := count(a.Board); n != 2 {
		t.Fatalf("new game has %d tiles; want 2", n)
	}
	for _, d := range []Direction{Left, Up, Right, Down, Left, Left} {
		before := a.Board
		_, _, willChange := before.Move(d)
		changed := a.Apply(d)
		b.Apply(d)
		if changed != willChange {
			t.Fatalf("Apply(%v) = %v; want %v", d, changed, willChange)
		}
		moved, _, _ := before.Move(d)
		if changed && count(a.Board) != count(moved)+1 {
			t.Fatalf("after %v: %d tiles; want %d (one new)", d, count(a.Board), count(moved)+1)
		}
		if !changed && a.Board != before {
			t.Fatalf("a no-op %v changed the board", d)
		}
	}
	if a.Board != b.Board || a.Score != b.Score || a.Moves != 6 {
		t.Fatalf("replays diverged or miscounted: %v/%v score %d/%d moves %d", a.Board, b.Board, a.Score, b.Score, a.Moves)
	}
}

func count(b Board) int {
	n := 0
	for _, row := range b {
		for _, v := range row {
			if v != 0 {
				n++
			}
		}
	}
	return n
}

func TestReward(t *testing.T) {
	for _, c := range []struct {
		name string
		b    Board
		want float64
	}{
		{"target reached", Board{{128}}, 1},
		{"beyond target", Board{{256, 2}}, 1},
		// max 2: tile term 0; sum 4: (2-1)/(7+4-1) = 0.1 → 0.2·0.1
		{"start", Board{{2, 2}}, 0.02},
		// max 64: (6-1)/(7-1); sum 128: (7-1)/10
		{"64 alone", Board{{64, 64}}, 0.8*5.0/6 + 0.2*0.6},
		{"empty", Board{}, 0},
	} {
		if got := Reward(c.b, 128); math.Abs(got-c.want) > 1e-12 {
			t.Errorf("%s: Reward = %v; want %v", c.name, got, c.want)
		}
	}
	// Larger tiles are worth more than any board sum with a smaller one.
	if Reward(Board{{32, 16, 16, 16}, {16, 16, 16, 16}}, 128) >= Reward(Board{{64}}, 128)+0.2 {
		t.Error("board sum outweighs the largest tile")
	}
}

// Ensure Play ends on an invalid reply with reward 0, and plays on
// otherwise until the target, a stuck board or the move limit.
func TestPlay(t *testing.T) {
	ctx := context.Background()
	rules := Rules{Target: 16, MaxMoves: 200}
	bad := func(context.Context, string) (string, error) { return "I think left", nil }
	out, err := Play(ctx, bad, 1, rules)
	if err != nil || !out.Invalid || out.Reward != 0 || out.Moves != 0 {
		t.Fatalf("invalid reply: %+v, %v", out, err)
	}
	// A cycling player reaches a 16 quickly on a 4×4 board.
	moves := []string{"left", "down", "right", "down"}
	i := 0
	cycle := func(_ context.Context, prompt string) (string, error) {
		i++
		return moves[i%len(moves)], nil
	}
	out, err = Play(ctx, cycle, 1, rules)
	if err != nil || !out.Won || out.Reward != 1 || out.Board.MaxTile() < 16 || out.Moves != i {
		t.Fatalf("cycling player: %+v (calls %d), %v", out, i, err)
	}
	// The move limit stops a player that only ever pushes up.
	out, err = Play(ctx, func(context.Context, string) (string, error) { return "up", nil }, 1, Rules{Target: 2048, MaxMoves: 5})
	if err != nil || out.Moves != 5 || out.Won || out.Invalid || out.Reward <= 0 {
		t.Fatalf("move limit: %+v, %v", out, err)
	}
	boom := errors.New("boom")
	if _, err := Play(ctx, func(context.Context, string) (string, error) { return "", boom }, 1, rules); !errors.Is(err, boom) {
		t.Fatalf("agent error: got %v", err)
	}
	if _, err := Play(ctx, bad, 1, Rules{Target: 100, MaxMoves: 1}); err == nil {
		t.Fatal("target 100 accepted")
	}
}
