package main

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/openai/openai-go/v3"

	"github.com/artgo/art"
)

// Scenario is one game to play: Seed fixes where the tiles appear.
type Scenario struct {
	Seed uint64
}

// RolloutOptions configure Rollout.
type RolloutOptions struct {
	Rules       Rules
	MaxTokens   int           // completion tokens per move
	CallTimeout time.Duration // bound on each chat completion, retries included
	// System, if not empty, is a system message sent before each move's
	// prompt. Without one, a Qwen-style chat template adds its default
	// system prompt.
	System string
	// SampleSeed, if set, makes sampling reproducible: the k-th move's
	// request carries the seed *SampleSeed+k.
	SampleSeed *uint64
}

// Rollout plays one game through an OpenAI-compatible chat endpoint and
// returns it as a trajectory. Each move is its own chat of one user message
// (the board is the whole state; see Prompt), after the optional system message, sampled at temperature 1, so
// the first move is the main history and later moves are additional
// histories; all share the game's reward (see Reward). Metrics: max_tile,
// board_sum, num_moves, noop_moves, invalid_move, won.
func Rollout(ctx context.Context, client openai.Client, modelName string, sc Scenario, opt RolloutOptions) (art.Trajectory, error) {
	var traj art.Trajectory
	calls := 0
	agent := func(ctx context.Context, prompt string) (string, error) {
		calls++
		var h art.History
		if opt.System != "" {
			h.AddMessage(art.SystemMsg(opt.System))
		}
		h.AddMessage(art.UserMsg(prompt))
		params := openai.ChatCompletionNewParams{Model: modelName, MaxTokens: openai.Int(int64(opt.MaxTokens)), Temperature: openai.Float(1)}
		if opt.SampleSeed != nil {
			params.Seed = openai.Int(int64((*opt.SampleSeed + uint64(calls)) & math.MaxInt64))
		}
		cctx, cancel := context.WithTimeout(ctx, opt.CallTimeout)
		defer cancel()
		choice, err := h.Chat(cctx, client, params)
		if err != nil {
			return "", fmt.Errorf("2048: move %d: %w", calls, err)
		}
		traj.AddHistory(h)
		return choice.Message.Content.String(), nil
	}
	out, err := Play(ctx, agent, sc.Seed, opt.Rules)
	if err != nil {
		return art.Trajectory{}, err
	}
	traj.Reward = out.Reward
	traj.SetMetric("max_tile", float64(out.Board.MaxTile()))
	traj.SetMetric("board_sum", float64(out.Board.Sum()))
	traj.SetMetric("num_moves", float64(out.Moves))
	traj.SetMetric("noop_moves", float64(out.NoOps))
	traj.SetMetric("invalid_move", b2f(out.Invalid))
	traj.SetMetric("won", b2f(out.Won))
	traj.Metadata = map[string]any{"scenario_id": fmt.Sprint(sc.Seed)} // ART's key: data/cum/num_unique_scenarios counts it
	traj.Logf("final board (%d moves):\n%s", out.Moves, out.Board)
	traj.Finish()
	return traj, nil
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
