// Package tictactoe is tic-tac-toe played as a chat, the environment of
// `art demo` and of examples/tictactoe (and bench/ruler's judge tests).
// The agent is X and moves first; each turn it sees the board (empty cells
// numbered 1-9) and replies with the number of an empty cell; the opponent
// plays uniformly random legal moves from a seeded source. Reward: win 1,
// draw 0.5, loss 0; an invalid reply ends the game with reward 0 and the
// invalid_move metric.
package tictactoe

import (
	"math/rand/v2"
	"slices"
	"strings"
)

// Board is the 3×3 grid, cells 0..8 row by row: 0 empty, 'X' or 'O'.
type Board [9]byte

var lines = [8][3]int{{0, 1, 2}, {3, 4, 5}, {6, 7, 8}, {0, 3, 6}, {1, 4, 7}, {2, 5, 8}, {0, 4, 8}, {2, 4, 6}}

// Winner returns 'X' or 'O' when a line is complete, else 0.
func (b *Board) Winner() byte {
	for _, l := range lines {
		if c := b[l[0]]; c != 0 && c == b[l[1]] && c == b[l[2]] {
			return c
		}
	}
	return 0
}

// Full reports whether no cell is empty.
func (b *Board) Full() bool {
	for _, c := range b {
		if c == 0 {
			return false
		}
	}
	return true
}

// Empty lists the empty cells.
func (b *Board) Empty() []int {
	var out []int
	for i, c := range b {
		if c == 0 {
			out = append(out, i)
		}
	}
	return out
}

// String renders the board as three lines of '.', 'X' and 'O'.
func (b *Board) String() string {
	var sb strings.Builder
	for i, c := range b {
		if c == 0 {
			c = '.'
		}
		sb.WriteByte(c)
		if i%3 == 2 && i < 8 {
			sb.WriteByte('\n')
		}
	}
	return sb.String()
}

// Prompt is what the agent is shown: the board as three lines in which an
// empty cell shows its number and taken cells show X or O ("X23\n4O6\n789").
// The legal replies are exactly the digits in the prompt, each at a fixed
// place, which a tiny model learns quickly.
func (b *Board) Prompt() string {
	var sb strings.Builder
	for i, c := range b {
		if c == 0 {
			c = byte('1' + i)
		}
		sb.WriteByte(c)
		if i%3 == 2 && i < 8 {
			sb.WriteByte('\n')
		}
	}
	return sb.String()
}

// ParseBoard reads a board back from its Prompt; ok is false for text
// that is not one.
func ParseBoard(prompt string) (b Board, ok bool) {
	if len(prompt) != 11 {
		return b, false
	}
	i := 0
	for k := 0; k < len(prompt); k++ {
		c := prompt[k]
		if k%4 == 3 {
			if c != '\n' {
				return Board{}, false
			}
			continue
		}
		switch {
		case c == 'X' || c == 'O':
			b[i] = c
		case c != byte('1'+i):
			return Board{}, false
		}
		i++
	}
	return b, true
}

// FreeCells returns the empty cells named in a prompt, as digits.
func FreeCells(prompt string) []string {
	var out []string
	for _, c := range prompt {
		if c >= '1' && c <= '9' {
			out = append(out, string(c))
		}
	}
	return out
}

// Messages is the chat of one move: a single user message holding the
// board prompt. There is no system prompt: the demo's base model learns the
// task from data, and a short context keeps it fast.
func Messages(prompt string) []map[string]string {
	return []map[string]string{{"role": "user", "content": prompt}}
}

// ParseMove reads the agent's reply: exactly one digit 1-9 naming an empty
// cell (surrounding spaces allowed). ok is false for anything else.
func ParseMove(b *Board, reply string) (cell int, ok bool) {
	s := strings.TrimSpace(reply)
	if len(s) != 1 || s[0] < '1' || s[0] > '9' {
		return 0, false
	}
	cell = int(s[0] - '1')
	return cell, b[cell] == 0
}

// Opponent plays uniformly random legal moves, or, when sharp, completes
// its own line or blocks X's where it can.
type Opponent struct {
	rng   *rand.Rand
	sharp float64
}

// NewOpponent returns an opponent of uniformly random moves fixed by seed.
func NewOpponent(seed uint64) *Opponent {
	return NewSharpOpponent(seed, 0)
}

// NewSharpOpponent returns an opponent fixed by seed that, with
// probability sharp at each move, wins at once if it can and otherwise
// blocks a line X would complete next, if any; its other moves are
// uniformly random. Against it a move that misses a win or a block is
// punished at once, where the random opponent usually lets it pass.
func NewSharpOpponent(seed uint64, sharp float64) *Opponent {
	return &Opponent{rng: rand.New(rand.NewPCG(seed, 0x6f70706f)), sharp: sharp}
}

// Move places an O: a sharp move when one exists and the opponent's
// sharpness says so, else a random empty cell.
func (o *Opponent) Move(b *Board) {
	if o.sharp > 0 && o.rng.Float64() < o.sharp {
		for _, mark := range []byte{'O', 'X'} { // win first, then block
			if cells := b.completing(mark); len(cells) > 0 {
				b[cells[0]] = 'O'
				return
			}
		}
	}
	e := b.Empty()
	b[e[o.rng.IntN(len(e))]] = 'O'
}

// Blunder reports whether X, to move on b, blunders by playing cell: it
// misses a line it could complete at once, or it leaves O a line to
// complete next where one move (cell was not it) would have blocked every
// such line. Against the random opponent a blunder often goes unpunished,
// so a game's result alone rarely says it was one.
func (b Board) Blunder(cell int) bool {
	if wins := b.completing('X'); len(wins) > 0 {
		return !slices.Contains(wins, cell)
	}
	threats := b.completing('O')
	return len(threats) == 1 && threats[0] != cell
}

// completing returns the distinct empty cells that would complete a line
// of mark, in the order of the lines they complete.
func (b *Board) completing(mark byte) []int {
	var cells []int
	for _, l := range lines {
		n, empty := 0, -1
		for _, c := range l {
			switch b[c] {
			case mark:
				n++
			case 0:
				empty = c
			}
		}
		if n == 2 && empty >= 0 && !slices.Contains(cells, empty) {
			cells = append(cells, empty)
		}
	}
	return cells
}

// Outcome of a finished game.
type Outcome struct {
	Reward  float64
	Win     bool
	Draw    bool
	Invalid bool
	Moves   int // agent moves made (valid ones)
}

// Result scores a board after the agent's move or the opponent's.
func result(b *Board, moves int) (Outcome, bool) {
	switch w := b.Winner(); {
	case w == 'X':
		return Outcome{Reward: 1, Win: true, Moves: moves}, true
	case w == 'O':
		return Outcome{Reward: 0, Moves: moves}, true
	case b.Full():
		return Outcome{Reward: 0.5, Draw: true, Moves: moves}, true
	}
	return Outcome{}, false
}
