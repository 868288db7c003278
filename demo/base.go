// Package demo is `art demo`: it trains a tic-tac-toe agent end to end on
// the CPU. It builds (or reuses) a small base model by supervised
// fine-tuning on random legal games, then runs GRPO through the public SDK
// (a TrainableModel on the in-process backend, rollouts calling the served
// OpenAI-compatible endpoint), and reports the held-out reward before and
// after.
package demo

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"time"

	"github.com/artgo/art/demo/tictactoe"
	"github.com/artgo/art/engine/chat"
	"github.com/artgo/art/engine/initmodel"
	"github.com/artgo/art/engine/kernels"
	"github.com/artgo/art/engine/model"
	"github.com/artgo/art/engine/tokenizer"
	"github.com/artgo/art/engine/train"
)

// BaseOptions control how the base model is built.
type BaseOptions struct {
	Shape     string  // model.Preset shape, "tiny" by default
	SFTSteps  int     // optimizer steps
	BatchSize int     // games per step
	LR        float64 // learning rate
	// StopLoss ends SFT early once the moving average of the loss falls
	// below it, leaving the policy some entropy to explore from (RL needs
	// different samples within a group). 0 means 0.35; < 0 disables it.
	StopLoss float64
	Seed     uint64
	Progress func(step, total int, loss float64)
}

func (o *BaseOptions) defaults() {
	if o.Shape == "" {
		o.Shape = "tiny"
	}
	if o.SFTSteps == 0 {
		o.SFTSteps = 400
	}
	if o.StopLoss == 0 {
		o.StopLoss = 0.35
	}
	if o.BatchSize == 0 {
		o.BatchSize = 64
	}
	if o.LR == 0 {
		o.LR = 3e-3
	}
}

// BuildBase writes a tic-tac-toe base model into dir: a random Qwen2-shaped
// model with a byte-level vocabulary, taught to play random legal moves by
// full-parameter SFT. The folder is an ordinary Hugging Face model folder.
func BuildBase(ctx context.Context, dir string, opt BaseOptions) error {
	opt.defaults()
	tmp := dir + ".building"
	os.RemoveAll(tmp)
	if _, err := initmodel.Write(tmp, initmodel.Options{Arch: "qwen2", Shape: opt.Shape, Tokenizer: initmodel.ByteTokenizer,
		DType: kernels.F32, Seed: opt.Seed, RopeTheta: 10000}); err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	m, err := model.Load(tmp)
	if err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	tr, err := sftTrainer(tmp, m, opt.Seed)
	if err != nil {
		return err
	}
	seed := opt.Seed * 1_000_003
	avg := math.Inf(1)
	for step := 0; step < opt.SFTSteps && !(avg < opt.StopLoss); step++ {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("demo: building the base model: %w", err)
		}
		// Moves of random legal games, one chat per move.
		var batch []train.History
		for len(batch) < opt.BatchSize {
			_, turns, err := tictactoe.Play(ctx, tictactoe.RandomAgent(seed), seed+1)
			if err != nil {
				return err
			}
			seed += 2
			for _, t := range turns {
				batch = append(batch, moveHistory(t))
			}
		}
		met, err := tr.SFTStep(ctx, batch, train.DefaultSFTConfig(opt.LR))
		if err != nil {
			return fmt.Errorf("demo: sft step %d: %w", step, err)
		}
		if l := met["loss/train"]; math.IsInf(avg, 1) {
			avg = l
		} else {
			avg = 0.8*avg + 0.2*l
		}
		if opt.Progress != nil {
			opt.Progress(step+1, opt.SFTSteps, met["loss/train"])
		}
	}
	if err := m.Save(tmp); err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	os.RemoveAll(dir)
	if err := os.Rename(tmp, dir); err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	return nil
}

// sftTrainer returns a trainer that fine-tunes every weight of the tiny
// model (embedding, norms and projections).
func sftTrainer(dir string, m *model.Model, seed uint64) (*train.Trainer, error) {
	tok, err := tokenizer.LoadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("demo: %w", err)
	}
	cfg, err := chat.LoadConfig(dir)
	if err != nil {
		return nil, fmt.Errorf("demo: %w", err)
	}
	src, err := cfg.TemplateSource(false)
	if err != nil {
		return nil, fmt.Errorf("demo: %w", err)
	}
	tmpl, err := chat.NewTemplate(src)
	if err != nil {
		return nil, fmt.Errorf("demo: %w", err)
	}
	return &train.Trainer{Model: m, TrainBase: true,
		Tokenizer: &train.Tokenizer{Tok: tok, Template: tmpl, Render: chat.RenderOptions{EOSToken: cfg.EOSToken}}}, nil
}

// Messages builds the chat of one move: the rules and the board.
func Messages(board string) []map[string]string {
	return []map[string]string{{"role": "system", "content": tictactoe.SystemPrompt}, {"role": "user", "content": board}}
}

// moveHistory is the SFT example of one move: the chat and the reply.
func moveHistory(t tictactoe.Turn) train.History {
	var h train.History
	for _, m := range append(Messages(t.Board), map[string]string{"role": "assistant", "content": t.Reply}) {
		b, _ := json.Marshal(m)
		h.Turns = append(h.Turns, train.Turn{Message: b})
	}
	return h
}

// logf writes a timestamped progress line.
func logf(w io.Writer, start time.Time, format string, args ...any) {
	fmt.Fprintf(w, "[%5.1fs] %s\n", time.Since(start).Seconds(), fmt.Sprintf(format, args...))
}
