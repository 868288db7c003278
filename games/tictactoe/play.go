package tictactoe

import (
	"context"
	"math/rand/v2"
)

// Turn is one exchange: the board prompt the agent saw and its reply.
type Turn struct {
	Board string
	Reply string
}

// Agent answers one move: given the board prompt (complete information, so
// no history is needed) it returns its reply.
type Agent func(ctx context.Context, board string) (string, error)

// Play runs one game of the agent (X, moving first) against a random
// opponent seeded by seed, returning the outcome and the transcript.
func Play(ctx context.Context, agent Agent, seed uint64) (Outcome, []Turn, error) {
	var b Board
	opp := NewOpponent(seed)
	var turns []Turn
	moves := 0
	for {
		view := b.Prompt()
		reply, err := agent(ctx, view)
		if err != nil {
			return Outcome{}, turns, err
		}
		turns = append(turns, Turn{Board: view, Reply: reply})
		cell, ok := ParseMove(&b, reply)
		if !ok {
			return Outcome{Reward: 0, Invalid: true, Moves: moves}, turns, nil
		}
		b[cell] = 'X'
		moves++
		if out, done := result(&b, moves); done {
			return out, turns, nil
		}
		opp.Move(&b)
		if out, done := result(&b, moves); done {
			return out, turns, nil
		}
	}
}

// RandomAgent plays uniformly random legal moves, chosen by a source
// seeded with seed. It is the SFT teacher.
func RandomAgent(seed uint64) Agent {
	rng := rand.New(rand.NewPCG(seed, 0x72616e64))
	return func(_ context.Context, board string) (string, error) {
		free := FreeCells(board)
		if len(free) == 0 {
			return "", nil
		}
		return free[rng.IntN(len(free))], nil
	}
}
