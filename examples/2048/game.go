package main

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"math/rand/v2"
	"strings"
)

// Size is the side of the board.
const Size = 4

// Board is a 2048 board: Board[r][c] is the tile in row r (0 at the top) and
// column c (0 on the left), 0 for an empty cell. Tiles are powers of two.
type Board [Size][Size]int

// Direction is a move: the direction every tile slides in.
type Direction int

// The four moves.
const (
	Up Direction = iota
	Down
	Left
	Right
)

var directionNames = [...]string{Up: "up", Down: "down", Left: "left", Right: "right"}

func (d Direction) String() string {
	if d < 0 || int(d) >= len(directionNames) {
		return fmt.Sprintf("Direction(%d)", int(d))
	}
	return directionNames[d]
}

// ErrBadMove is wrapped by the error of ParseMove for a reply that is not a
// move.
var ErrBadMove = errors.New("2048: reply is not a move")

// ParseMove reads the model's reply: exactly one of the words up, down, left
// and right, in any case, optionally wrapped in whitespace, quotes or a final
// period. Anything else (two words, an explanation, nothing) is not a move.
func ParseMove(reply string) (Direction, error) {
	w := strings.ToLower(strings.Trim(strings.TrimSpace(reply), "\"'`.!"))
	for d, name := range directionNames {
		if w == name {
			return Direction(d), nil
		}
	}
	return 0, fmt.Errorf("%w: %.40q", ErrBadMove, reply)
}

// slideLine slides a line of tiles towards index 0 and merges equal
// neighbours, each tile at most once per move, the pair nearest index 0
// first (so [2 2 2 0] becomes [4 2 0 0] and [2 2 2 2] becomes [4 4 0 0]).
// It returns the new line and the sum of the merged tiles.
func slideLine(line [Size]int) (out [Size]int, gained int) {
	n := 0
	last := 0 // value of out[n-1] if it may still merge, else 0
	for _, v := range line {
		if v == 0 {
			continue
		}
		if v == last {
			out[n-1] = 2 * v
			gained += 2 * v
			last = 0
			continue
		}
		out[n] = v
		n++
		last = v
	}
	return out, gained
}

// cell returns the board coordinates of the i-th cell of line k when lines
// are read in the direction tiles travel from, so that the cell a move
// pushes towards is index 0: for Left line k is row k read left to right,
// for Up it is column k read top to bottom.
func cell(d Direction, k, i int) (r, c int) {
	switch d {
	case Left:
		return k, i
	case Right:
		return k, Size - 1 - i
	case Up:
		return i, k
	default: // Down
		return Size - 1 - i, k
	}
}

// Move returns the board after sliding every tile in direction d, the score
// gained (the sum of the merged tiles, as in the original game) and whether
// any tile moved. It does not add a new tile; see Game.Apply.
func (b Board) Move(d Direction) (next Board, gained int, changed bool) {
	for k := range Size {
		var line [Size]int
		for i := range Size {
			r, c := cell(d, k, i)
			line[i] = b[r][c]
		}
		out, g := slideLine(line)
		gained += g
		for i := range Size {
			r, c := cell(d, k, i)
			next[r][c] = out[i]
		}
	}
	return next, gained, next != b
}

// MaxTile returns the largest tile, 0 on an empty board.
func (b Board) MaxTile() int {
	m := 0
	for _, row := range b {
		for _, v := range row {
			m = max(m, v)
		}
	}
	return m
}

// Sum returns the sum of all tiles.
func (b Board) Sum() int {
	s := 0
	for _, row := range b {
		for _, v := range row {
			s += v
		}
	}
	return s
}

// CanMove reports whether some move changes the board.
func (b Board) CanMove() bool {
	for d := range directionNames {
		if _, _, changed := b.Move(Direction(d)); changed {
			return true
		}
	}
	return false
}

// String renders the board as the model sees it: one line per row, cells
// right-aligned in columns of 5, "." for an empty cell.
func (b Board) String() string {
	var s strings.Builder
	for r, row := range b {
		if r > 0 {
			s.WriteByte('\n')
		}
		for c, v := range row {
			if c > 0 {
				s.WriteByte(' ')
			}
			cell := "."
			if v != 0 {
				cell = fmt.Sprint(v)
			}
			fmt.Fprintf(&s, "%4s", cell)
		}
	}
	return s.String()
}

// Game is one game of 2048: a board plus the random source that places new
// tiles, so a seed fixes where tiles appear given the same moves.
type Game struct {
	Board Board
	Score int // sum of all merged tiles so far
	Moves int // moves applied, no-op moves included
	rng   *rand.Rand
}

// NewGame starts a game with two tiles placed from seed.
func NewGame(seed uint64) *Game {
	g := &Game{rng: rand.New(rand.NewPCG(seed, 0x2048))}
	g.spawn()
	g.spawn()
	return g
}

// spawn puts a 2 (probability 0.9) or a 4 on an empty cell chosen uniformly.
// It does nothing on a full board.
func (g *Game) spawn() {
	var empty [][2]int
	for r, row := range g.Board {
		for c, v := range row {
			if v == 0 {
				empty = append(empty, [2]int{r, c})
			}
		}
	}
	if len(empty) == 0 {
		return
	}
	p := empty[g.rng.IntN(len(empty))]
	v := 2
	if g.rng.Float64() >= 0.9 {
		v = 4
	}
	g.Board[p[0]][p[1]] = v
}

// Apply plays move d: the tiles slide and merge and, if anything moved, a
// new tile appears. A move that changes nothing is a legal no-op (as in the
// original game) and returns false.
func (g *Game) Apply(d Direction) (changed bool) {
	next, gained, changed := g.Board.Move(d)
	g.Moves++
	if !changed {
		return false
	}
	g.Board, g.Score = next, g.Score+gained
	g.spawn()
	return true
}

// Reward scores a board against the target tile, in [0, 1]:
//
//	tile  = (log2(max tile) − 1) / (log2(target) − 1)       0 for a 2, 1 at the target
//	sum   = (log2(board sum) − 1) / (log2(16·target) − 1)   1 when the board sums to 16 targets
//	reward = 0.8·tile + 0.2·sum, clamped to [0, 1], and 1 once the target is reached
//
// This is the shape of OpenPipe ART's 2048 reward (the largest tile counts
// most, the board sum breaks ties between boards with the same largest
// tile) rescaled to [0, 1]. A game lost to an invalid reply scores 0
// whatever its board (see Outcome.Reward).
func Reward(b Board, target int) float64 {
	mt := b.MaxTile()
	if mt >= target {
		return 1
	}
	if mt == 0 {
		return 0
	}
	lt := math.Log2(float64(target))
	tile := (math.Log2(float64(mt)) - 1) / (lt - 1)
	sum := (math.Log2(float64(b.Sum())) - 1) / (lt + 4 - 1)
	return min(max(0.8*tile+0.2*sum, 0), 1)
}

// Rules configure a game played by Play.
type Rules struct {
	Target   int // the tile that wins, a power of two >= 4
	MaxMoves int // the game stops after this many moves (no-ops included)
	// Prompt writes what the agent is asked before each move; nil means
	// Prompt. BoardPrompt (the board alone) suits a small model taught the
	// format by SFT.
	Prompt func(b Board, target int) string
}

// Validate checks the rules.
func (r Rules) Validate() error {
	if r.Target < 4 || bits.OnesCount(uint(r.Target)) != 1 {
		return fmt.Errorf("2048: target %d must be a power of two >= 4", r.Target)
	}
	if r.MaxMoves < 1 {
		return fmt.Errorf("2048: max moves %d must be >= 1", r.MaxMoves)
	}
	return nil
}

// Outcome is how a game ended.
type Outcome struct {
	Board   Board
	Moves   int  // moves played, no-ops included
	NoOps   int  // moves that changed nothing
	Won     bool // the target tile was reached
	Invalid bool // the game ended on a reply that is not a move
	Stuck   bool // the game ended with no move left
	Reward  float64
}

// Agent chooses a move: it is given the prompt for the current board and
// returns its reply.
type Agent func(ctx context.Context, prompt string) (string, error)

// Prompt is what the model is asked before each move: the rules, the board
// and the expected answer.
func Prompt(b Board, target int) string {
	return fmt.Sprintf("You are playing 2048 and want to reach the %d tile. Tiles slide as far as they can in the "+
		"direction you choose; two equal tiles that meet merge into one. Board (. is empty):\n%s\n"+
		"Reply with one word: up, down, left or right.", target, b)
}

// BoardPrompt is the compact prompt: the board alone, no instructions. It
// is for a model that learned the format from examples (see --sft-warmup);
// a pretrained model needs Prompt's instructions.
func BoardPrompt(b Board, _ int) string { return b.String() }

// prompt returns the rules' prompt for board b.
func (r Rules) prompt(b Board) string {
	if r.Prompt != nil {
		return r.Prompt(b, r.Target)
	}
	return Prompt(b, r.Target)
}

// Play plays one game from seed: the agent is asked for a move until the
// target tile appears, no move is left, MaxMoves moves are played, or it
// gives a reply that is not a move (which ends the game with reward 0). An
// error of the agent ends the game with that error.
func Play(ctx context.Context, agent Agent, seed uint64, rules Rules) (Outcome, error) {
	if err := rules.Validate(); err != nil {
		return Outcome{}, err
	}
	g := NewGame(seed)
	var out Outcome
	for g.Moves < rules.MaxMoves {
		if g.Board.MaxTile() >= rules.Target {
			out.Won = true
			break
		}
		if !g.Board.CanMove() {
			out.Stuck = true
			break
		}
		reply, err := agent(ctx, rules.prompt(g.Board))
		if err != nil {
			return Outcome{}, err
		}
		d, err := ParseMove(reply)
		if err != nil {
			out.Invalid = true
			break
		}
		if !g.Apply(d) {
			out.NoOps++
		}
	}
	if g.Board.MaxTile() >= rules.Target {
		out.Won = true
	}
	out.Board, out.Moves = g.Board, g.Moves
	if !out.Invalid {
		out.Reward = Reward(g.Board, rules.Target)
	}
	return out, nil
}
