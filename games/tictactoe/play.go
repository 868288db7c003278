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
	return PlayFrom(ctx, agent, NewOpponent(seed), Board{})
}

// Opening returns the board after pairs random moves of each side (X
// first), fixed by seed, stopping early before a move that would end the
// game: a start for exploring starts, so that training visits positions
// the agent's own play would avoid. X is to move on it.
func Opening(seed uint64, pairs int) Board {
	rng := rand.New(rand.NewPCG(seed, 0x6f70656e))
	var b Board
	for range pairs {
		nb := b
		for _, mark := range []byte{'X', 'O'} {
			e := nb.Empty()
			nb[e[rng.IntN(len(e))]] = mark
			if _, done := result(&nb, 0); done {
				return b
			}
		}
		b = nb
	}
	return b
}

// PlayFrom is Play against opp from the board start, X to move (see
// Opening).
func PlayFrom(ctx context.Context, agent Agent, opp *Opponent, start Board) (Outcome, []Turn, error) {
	b := start
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
