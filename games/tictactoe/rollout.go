package tictactoe

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/openai/openai-go/v3"

	"github.com/artgo/art"
)

// Instructions is a system prompt for chat models that were not trained
// on the game's bare format (any real instruct model): the demo's own base
// model learned the format from data and plays without one.
const Instructions = "You are playing tic-tac-toe as X. The board shows each empty cell as its number (1-9) " +
	"and taken cells as X or O. Reply with the number of the empty cell you take, and nothing else."

// RolloutOptions adjust a rollout.
type RolloutOptions struct {
	// SampleSeed, if set, makes sampling reproducible: the k-th move's
	// request carries the seed *SampleSeed+k, so the same model, scenario
	// and SampleSeed give the same game. Give each game of a group its own.
	SampleSeed *uint64
	// System, if not empty, is sent as a system message before each board
	// (see Instructions) and kept in the trajectory.
	System string
	// Outcome appends the game's result, as the environment would show it
	// ("Game over: you won." ...; see OutcomeMessage), to the last move's
	// chat: context a judge can read (RULER), never trained.
	Outcome bool
	// CallTimeout, if > 0, bounds each chat completion.
	CallTimeout time.Duration
	// Start, if set, is the board the game starts from, X to move (an
	// Opening, say: a group's games given one start compare the agent's
	// moves on a position its own play might never reach). The moves that
	// made it are not the agent's and are not in the trajectory.
	Start *Board
	// Sharp is the opponent's sharpness (NewSharpOpponent): 0, the
	// default, is the uniformly random opponent.
	Sharp float64
	// Temperature is the agent's sampling temperature; 0 means 1.
	Temperature float64
}

// OutcomeMessage is the environment's last word on a game.
func OutcomeMessage(out Outcome) string {
	switch {
	case out.Invalid:
		return "Game over: invalid move, you lose."
	case out.Win:
		return "Game over: you won."
	case out.Draw:
		return "Game over: draw."
	}
	return "Game over: you lost."
}

// AddOutcome appends OutcomeMessage(out) to the last history of t.
func AddOutcome(t *art.Trajectory, out Outcome) {
	m := art.UserMsg(OutcomeMessage(out))
	if n := len(t.AdditionalHistories); n > 0 {
		t.AdditionalHistories[n-1].AddMessage(m)
		return
	}
	t.AddMessage(m)
}

// Rollout plays one game through an OpenAI-compatible chat endpoint and
// returns it as a trajectory. Each move is its own chat (one user message
// holding the board, which is the whole state; see Messages), sampled at
// temperature 1 (RolloutOptions.Temperature), so the first move is the main history and later moves are
// additional histories; all share the game's reward. Metrics: win, draw,
// invalid_move, num_moves.
func Rollout(ctx context.Context, client openai.Client, modelName string, seed uint64) (art.Trajectory, error) {
	return RolloutWith(ctx, client, modelName, seed, RolloutOptions{})
}

// RolloutWith is Rollout with options.
func RolloutWith(ctx context.Context, client openai.Client, modelName string, seed uint64, opt RolloutOptions) (art.Trajectory, error) {
	var traj art.Trajectory
	move := 0
	agent := func(ctx context.Context, board string) (string, error) {
		var h art.History
		if opt.System != "" {
			h.AddMessage(art.SystemMsg(opt.System))
		}
		h.AddMessage(art.UserMsg(board))
		temp := opt.Temperature
		if temp == 0 {
			temp = 1
		}
		params := openai.ChatCompletionNewParams{Model: modelName, MaxTokens: openai.Int(maxReplyTokens(opt)), Temperature: openai.Float(temp)}
		if opt.SampleSeed != nil {
			params.Seed = openai.Int(int64((*opt.SampleSeed + uint64(move)) & math.MaxInt64))
		}
		move++
		if opt.CallTimeout > 0 {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, opt.CallTimeout)
			defer cancel()
		}
		choice, err := h.Chat(ctx, client, params)
		if err != nil {
			return "", fmt.Errorf("tictactoe: %w", err)
		}
		traj.AddHistory(h)
		return choice.Message.Content.String(), nil
	}
	var start Board
	if opt.Start != nil {
		start = *opt.Start
	}
	out, _, err := PlayFrom(ctx, agent, NewSharpOpponent(seed, opt.Sharp), start)
	if err != nil {
		return art.Trajectory{}, err
	}
	if opt.Outcome {
		AddOutcome(&traj, out)
	}
	traj.Reward = out.Reward
	traj.Metrics = map[string]float64{"win": b2f(out.Win), "draw": b2f(out.Draw), "invalid_move": b2f(out.Invalid), "num_moves": float64(out.Moves)}
	traj.Metadata = map[string]any{"scenario_id": fmt.Sprint(seed)}
	return traj, nil
}

// Turns reads a game's moves back from its trajectory as RolloutWith
// records them: one history a move, the board in its first user message
// (after any system prompt) and the sampled reply in its answer.
func Turns(t *art.Trajectory) []Turn {
	var turns []Turn
	for _, h := range t.Histories() {
		var turn Turn
		board, reply := false, false
		for _, m := range h.Messages() {
			switch {
			case m.Role == art.RoleUser && !board:
				turn.Board, board = m.Content.String(), true
			case m.Role == art.RoleAssistant && !reply:
				turn.Reply, reply = m.Content.String(), true
			}
		}
		if board {
			turns = append(turns, turn)
		}
	}
	return turns
}

// maxReplyTokens bounds a reply: a digit and the end token, with room for
// a little whitespace from models told the rules by a system prompt.
func maxReplyTokens(opt RolloutOptions) int64 {
	if opt.System != "" {
		return 8
	}
	return 3
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
