package tictactoe

import (
	"context"
	"errors"
	"fmt"
	"math"

	"github.com/openai/openai-go/v3"

	"github.com/artgo/art"
)

// Rollout plays one game through an OpenAI-compatible chat endpoint and
// returns it as a trajectory. Each move is its own chat (one user message
// holding the board, which is the whole state; see Messages), sampled at
// temperature 1, so the first move is the main history and later moves are
// additional histories; all share the game's reward. Metrics: win, draw,
// invalid_move, num_moves.
func Rollout(ctx context.Context, client openai.Client, modelName string, seed uint64) (art.Trajectory, error) {
	return rollout(ctx, client, modelName, seed, nil)
}

// SeededRollout is Rollout with reproducible sampling: the k-th move's
// request carries the seed sampleSeed+k, so the same model, scenario and
// sampleSeed give the same game. Give each game of a group its own
// sampleSeed.
func SeededRollout(ctx context.Context, client openai.Client, modelName string, seed, sampleSeed uint64) (art.Trajectory, error) {
	return rollout(ctx, client, modelName, seed, &sampleSeed)
}

func rollout(ctx context.Context, client openai.Client, modelName string, seed uint64, sampleSeed *uint64) (art.Trajectory, error) {
	var traj art.Trajectory
	move := 0
	agent := func(ctx context.Context, board string) (string, error) {
		msgs := []openai.ChatCompletionMessageParamUnion{openai.UserMessage(board)}
		params := openai.ChatCompletionNewParams{
			Model: modelName, Messages: msgs, MaxTokens: openai.Int(3), Temperature: openai.Float(1),
		}
		if sampleSeed != nil {
			params.Seed = openai.Int(int64((*sampleSeed + uint64(move)) & math.MaxInt64))
		}
		move++
		resp, err := client.Chat.Completions.New(ctx, params)
		if err != nil {
			return "", fmt.Errorf("tictactoe: chat: %w", err)
		}
		if len(resp.Choices) == 0 {
			return "", errors.New("tictactoe: chat returned no choices")
		}
		choice, err := art.ChoiceFromOpenAI(resp.Choices[0])
		if err != nil {
			return "", err
		}
		h := art.History{MessagesAndChoices: []art.MessageOrChoice{
			{Message: ptr(art.UserMsg(board))}, {Choice: &choice},
		}}
		if traj.MessagesAndChoices == nil {
			traj.MessagesAndChoices = h.MessagesAndChoices
		} else {
			traj.AdditionalHistories = append(traj.AdditionalHistories, h)
		}
		return choice.Message.Content.String(), nil
	}
	out, _, err := Play(ctx, agent, seed)
	if err != nil {
		return art.Trajectory{}, err
	}
	traj.Reward = out.Reward
	traj.Metrics = map[string]float64{"win": b2f(out.Win), "draw": b2f(out.Draw), "invalid_move": b2f(out.Invalid), "num_moves": float64(out.Moves)}
	traj.Metadata = map[string]any{"scenario_id": fmt.Sprint(seed)}
	return traj, nil
}

func ptr[T any](v T) *T { return &v }

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
