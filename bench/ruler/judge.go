package main

import (
	"bufio"
	"context"
	"encoding/json"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"

	"github.com/artgo/art"
	"github.com/artgo/art/engine/initmodel"
	"github.com/artgo/art/engine/kernels"
	"github.com/artgo/art/games/tictactoe"
	"github.com/artgo/art/pretrain"
	"github.com/artgo/art/ruler"
)

// rubric is the judge's grading standard: what a user who knows the game
// would write in one sentence.
const rubric = "- Winning the game is best (1), a draw is worth half (0.5), a loss little (0.1), and losing by an invalid move nothing (0)."

// verdict is what the judge is taught to answer for a game.
func verdict(out tictactoe.Outcome) (string, float64) {
	switch {
	case out.Invalid:
		return "invalid move", 0
	case out.Win:
		return "won", 1
	case out.Draw:
		return "draw", 0.5
	}
	return "lost", 0.1
}

// randomGame plays one game of a random policy that errs with probability
// pInvalid (a taken cell, or a reply that is no cell) against the
// opponent of seed, and records it as the demo's rollouts record theirs:
// one chat per move, the first the main history, then the outcome.
func randomGame(ctx context.Context, rng *rand.Rand, seed uint64, pInvalid float64) (art.Trajectory, tictactoe.Outcome, error) {
	var t art.Trajectory
	agent := func(_ context.Context, board string) (string, error) {
		free := tictactoe.FreeCells(board)
		reply := free[rng.IntN(len(free))]
		if rng.Float64() < pInvalid {
			switch taken := takenCells(board, free); {
			case len(taken) > 0 && rng.IntN(3) > 0:
				reply = taken[rng.IntN(len(taken))]
			default:
				reply = []string{"0", "x", "55", "", "a1"}[rng.IntN(5)]
			}
		}
		h := art.History{}
		h.AddMessage(art.UserMsg(board))
		h.AddChoice(art.Choice{FinishReason: "stop", Message: art.AssistantMsg(reply)})
		if t.MessagesAndChoices == nil {
			t.MessagesAndChoices = h.MessagesAndChoices
		} else {
			t.AdditionalHistories = append(t.AdditionalHistories, h)
		}
		return reply, nil
	}
	out, _, err := tictactoe.Play(ctx, agent, seed)
	if err != nil {
		return t, out, err
	}
	tictactoe.AddOutcome(&t, out)
	t.Reward = out.Reward
	return t, out, nil
}

func takenCells(board string, free []string) []string {
	var taken []string
	for c := '1'; c <= '9'; c++ {
		if !slices.Contains(free, string(c)) {
			taken = append(taken, string(c))
		}
	}
	return taken
}

func newRNG(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, 0x6a75646765)) }

// judgeExample is one group of games with the judge's prompt and the
// answer the game's rules give.
type judgeExample struct {
	group    art.TrajectoryGroup
	outcomes []tictactoe.Outcome
	prompt   ruler.Prompt
	answer   string
}

// makeExample plays a group of n games against one opponent seed, with a
// spread of error rates so groups hold different outcomes.
func makeExample(ctx context.Context, rng *rand.Rand, seed uint64, n int) (judgeExample, error) {
	var ex judgeExample
	subjects := make([][]art.History, n)
	for i := range n {
		p := []float64{0, 0.05, 0.15, 0.3, 0.6}[rng.IntN(5)]
		t, out, err := randomGame(ctx, rng, seed, p)
		if err != nil {
			return ex, err
		}
		ex.group.Trajectories = append(ex.group.Trajectories, t)
		ex.outcomes = append(ex.outcomes, out)
		subjects[i] = t.Histories()
	}
	p, err := ruler.NewPrompt(subjects, rubric)
	if err != nil {
		return ex, err
	}
	ex.prompt = p
	type item struct {
		ID          string  `json:"trajectory_id"`
		Explanation string  `json:"explanation"`
		Score       float64 `json:"score"`
	}
	var items []item
	for i := range p.Expected {
		e, s := verdict(ex.outcomes[i])
		items = append(items, item{strconv.Itoa(i + 1), e, s})
	}
	b, err := json.Marshal(map[string]any{"scores": items})
	ex.answer = string(b)
	return ex, err
}

// judgeOptions size the judge and its training.
type judgeOptions struct {
	Shape     string
	Groups    int // training transcripts (groups of games)
	GroupSize int
	Epochs    int
	LR        float64
	Seed      uint64
	// From, if set, is a judge to keep training (on fresh games: the data
	// seed is Seed+Round) instead of a random model.
	From  string `json:",omitempty"`
	Round uint64 `json:",omitempty"`
}

// buildJudge writes transcripts of judged groups and trains a random model
// on them by full-parameter SFT (package pretrain), into dir. It reuses dir
// when it holds a judge built with the same options.
func buildJudge(ctx context.Context, dir string, o judgeOptions, logf func(string, ...any)) error {
	stamp := filepath.Join(dir, "judge-options.json")
	want, _ := json.Marshal(o)
	if got, err := os.ReadFile(stamp); err == nil && string(got) == string(want) {
		logf("reusing the judge in %s", dir)
		return nil
	}
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	work := dir + ".work"
	os.RemoveAll(work)
	if err := os.MkdirAll(work, 0o755); err != nil {
		return err
	}
	defer os.RemoveAll(work)
	data := filepath.Join(work, "judge.jsonl")
	f, err := os.Create(data)
	if err != nil {
		return err
	}
	w := bufio.NewWriter(f)
	rng := newRNG(o.Seed + o.Round)
	longest := 0
	for g := range o.Groups {
		ex, err := makeExample(ctx, rng, 50_000_000+o.Round*1_000_000+uint64(g), o.GroupSize)
		if err != nil {
			return err
		}
		var t art.Trajectory
		for _, m := range ex.prompt.Messages {
			t.AddMessage(m)
		}
		t.AddMessage(art.AssistantMsg(ex.answer))
		b, err := json.Marshal(t)
		if err != nil {
			return err
		}
		w.Write(b)
		w.WriteByte('\n')
		longest = max(longest, len(ex.prompt.Messages[0].Content.Text)+len(ex.prompt.Messages[1].Content.Text)+len(ex.answer))
	}
	if err := w.Flush(); err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	logf("judge data: %d groups of %d games, longest transcript %d bytes", o.Groups, o.GroupSize, longest)
	base := o.From
	if base == "" {
		base = filepath.Join(work, "random")
		if _, err := initmodel.Write(base, initmodel.Options{Arch: "qwen2", Shape: o.Shape, Tokenizer: initmodel.ByteTokenizer,
			DType: kernels.F32, Seed: o.Seed}); err != nil {
			return err
		}
	}
	res, err := pretrain.Run(ctx, pretrain.Options{Model: base, Data: data, Out: dir, Epochs: o.Epochs, BatchSize: 16, LR: o.LR,
		HoldOut: min(64, o.Groups/10), EvalEvery: 50, Seed: o.Seed, MaxSeqLen: 8192,
		Progress: func(p pretrain.Progress) {
			if p.Step%25 == 0 || p.Step == p.Steps {
				logf("  judge sft step %d/%d: loss %.4f, held-out %.4f (%s)", p.Step, p.Steps, p.Loss, p.HeldOut, p.Elapsed.Round(1e9))
			}
		}})
	if err != nil {
		return err
	}
	logf("judge trained: %d steps in %s, held-out loss %.4f → %.4f", res.Steps, res.Elapsed.Round(1e9), res.HeldOutBefore, res.HeldOutAfter)
	return os.WriteFile(stamp, want, 0o644)
}
