// Package demo is `art demo`: it trains a tic-tac-toe agent end to end on
// the CPU. It builds (or reuses) a small base model by supervised
// fine-tuning on random legal moves, then runs GRPO through the public SDK
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
	"math/rand/v2"
	"os"
	"path/filepath"
	"time"

	"github.com/artgo/art/engine/initmodel"
	"github.com/artgo/art/engine/kernels"
	"github.com/artgo/art/engine/model"
	"github.com/artgo/art/engine/train"
	"github.com/artgo/art/games/tictactoe"
	"github.com/artgo/art/pretrain"
)

// BaseOptions control how the base model is built.
type BaseOptions struct {
	Shape     string  // model.Preset shape, "tiny" by default
	SFTSteps  int     // at most this many optimizer steps (default 1200)
	BatchSize int     // positions per step (default 64)
	LR        float64 // learning rate (default 3e-3)
	// StopInvalid ends SFT as soon as the model's games against the random
	// opponent end in an invalid move with probability below it (computed
	// exactly over the game tree every EvalEvery steps). The base model
	// then knows the rules but still plays like the random teacher, so
	// GRPO has the strategy to teach. 0 means 0.02; < 0 disables the check
	// (SFTSteps steps are run). A base stopped earlier left GRPO to learn
	// the rules first, and its policy turned nearly deterministic on moves
	// that were often wrong: held-out reward stuck near 0.8 from a base
	// stopped at 0.4, near 0.9 from one stopped at 0.1 (BENCHMARKS.md,
	// "Why the demo plateaued").
	StopInvalid float64
	// EvalEvery is the number of steps between exact evaluations (default
	// 25; a fifth of that once the invalid rate is within 0.15 of
	// StopInvalid).
	EvalEvery int
	Seed      uint64
	Progress  func(step, total int, loss float64)
	// Eval, if set, sees each exact evaluation: the expected reward and
	// invalid-move probability of the model's games.
	Eval func(step int, reward, invalid float64)
}

// validate rejects negative counts and a learning rate that is negative or
// not finite; zero values are left for defaults.
func (o *BaseOptions) validate() error {
	var d BaseOptions
	d.defaults()
	for _, f := range []struct {
		name   string
		v, def int
	}{{"SFTSteps", o.SFTSteps, d.SFTSteps}, {"BatchSize", o.BatchSize, d.BatchSize}, {"EvalEvery", o.EvalEvery, d.EvalEvery}} {
		if f.v < 0 {
			return fmt.Errorf("demo: base model: %s = %d: must be >= 0 (0 means %d)", f.name, f.v, f.def)
		}
	}
	if !(o.LR >= 0) || math.IsInf(o.LR, 0) {
		return fmt.Errorf("demo: base model: LR = %v: must be > 0 (0 means 3e-3)", o.LR)
	}
	if math.IsNaN(o.StopInvalid) {
		return fmt.Errorf("demo: base model: StopInvalid = NaN: want a probability (0 means 0.02, < 0 no check)")
	}
	return nil
}

func (o *BaseOptions) defaults() {
	if o.Shape == "" {
		o.Shape = "tiny"
	}
	if o.SFTSteps == 0 {
		o.SFTSteps = 1200
	}
	if o.StopInvalid == 0 {
		o.StopInvalid = 0.02
	}
	if o.EvalEvery == 0 {
		o.EvalEvery = 25
	}
	if o.BatchSize == 0 {
		o.BatchSize = 64
	}
	if o.LR == 0 {
		o.LR = 3e-3
	}
}

// chatTemplate is the base model's chat template: ChatML without a default
// system prompt, so a move's prompt is about 30 tokens.
const chatTemplate = `{%- for message in messages %}{{- '<|im_start|>' + message.role + '\n' + message.content + '<|im_end|>' + '\n' }}{%- endfor %}{%- if add_generation_prompt %}{{- '<|im_start|>assistant\n' }}{%- endif %}`

// baseFormat versions what BuildBase writes; a cached base of another
// version (or other options) is rebuilt.
const baseFormat = 3

// baseInfo is written next to the weights as demo-base.json.
type baseInfo struct {
	Format      int     `json:"format"`
	Shape       string  `json:"shape"`
	Seed        uint64  `json:"seed"`
	StopInvalid float64 `json:"stop_invalid"`
	MaxSteps    int     `json:"max_sft_steps"`
	BatchSize   int     `json:"batch_size"`
	LR          float64 `json:"lr"`
	// What the build measured.
	Steps   int     `json:"sft_steps"`
	Reward  float64 `json:"expected_reward"`
	Invalid float64 `json:"expected_invalid"`
}

const baseInfoFile = "demo-base.json"

func (o BaseOptions) info() baseInfo {
	return baseInfo{Format: baseFormat, Shape: o.Shape, Seed: o.Seed, StopInvalid: o.StopInvalid, MaxSteps: o.SFTSteps,
		BatchSize: o.BatchSize, LR: o.LR}
}

// readBaseInfo returns the build record of the base model in dir, ok only
// when it was built by this version with the same options.
func readBaseInfo(dir string, opt BaseOptions) (baseInfo, bool) {
	opt.defaults()
	b, err := os.ReadFile(filepath.Join(dir, baseInfoFile))
	if err != nil {
		return baseInfo{}, false
	}
	var got baseInfo
	if json.Unmarshal(b, &got) != nil {
		return baseInfo{}, false
	}
	want := opt.info()
	if _, err := os.Stat(filepath.Join(dir, "model.safetensors")); err != nil {
		return got, false
	}
	same := got.Format == want.Format && got.Shape == want.Shape && got.Seed == want.Seed && got.StopInvalid == want.StopInvalid &&
		got.MaxSteps == want.MaxSteps && got.BatchSize == want.BatchSize && got.LR == want.LR
	return got, same
}

// BuildBase writes a tic-tac-toe base model into dir: a random Qwen2-shaped
// model (2 layers, width 64) with a byte-level vocabulary, taught the game
// by full-parameter SFT. Each example is a position X faces after random
// moves, and the target is the uniform distribution over its empty cells
// (soft targets: the exact gradient of imitating a random legal player;
// with sampled labels instead, a model this small barely learns in the
// same number of steps). The folder is an ordinary Hugging Face model
// folder.
func BuildBase(ctx context.Context, dir string, opt BaseOptions) (err error) {
	if err := opt.validate(); err != nil {
		return err
	}
	opt.defaults()
	tmp := dir + ".building"
	os.RemoveAll(tmp)
	defer func() {
		if err != nil {
			os.RemoveAll(tmp) // an interrupted or failed build leaves nothing half-built
		}
	}()
	if _, err := initmodel.Write(tmp, initmodel.Options{Arch: "qwen2", Shape: opt.Shape, Tokenizer: initmodel.ByteTokenizer,
		DType: kernels.F32, Seed: opt.Seed, RopeTheta: 10000, ChatTemplate: chatTemplate}); err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	m, err := model.Load(tmp)
	if err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	enc, err := newPromptEncoder(tmp)
	if err != nil {
		return err
	}
	tr, err := newSFT(m)
	if err != nil {
		return err
	}
	rng := rand.New(rand.NewPCG(opt.Seed, 0x736674)) // "sft"
	info := opt.info()
	info.Reward, info.Invalid = math.NaN(), math.NaN()
	for step := 1; step <= opt.SFTSteps; step++ {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("demo: building the base model: %w", err)
		}
		batch := make([]sftExample, opt.BatchSize)
		for i := range batch {
			b := randomPosition(rng, rng.IntN(5))
			if batch[i], err = moveExample(enc, &b, rng); err != nil {
				return err
			}
		}
		loss, err := tr.step(batch, opt.LR)
		if err != nil {
			return fmt.Errorf("demo: sft step %d: %w", step, err)
		}
		info.Steps = step
		if opt.Progress != nil {
			opt.Progress(step, opt.SFTSteps, loss)
		}
		every := opt.EvalEvery
		if info.Invalid < opt.StopInvalid+0.15 {
			every = max(1, every/5) // close to the target: stop near it
		}
		if step%every == 0 || step == opt.SFTSteps {
			if info.Reward, info.Invalid, err = tictactoe.Expected(enginePolicy(m, nil, enc)); err != nil {
				return fmt.Errorf("demo: sft step %d: exact evaluation: %w", step, err)
			}
			if opt.Eval != nil {
				opt.Eval(step, info.Reward, info.Invalid)
			}
			if info.Invalid < opt.StopInvalid {
				break
			}
		}
	}
	// The trained weights, the init folder's tokenizer and template and the
	// build's record become the base folder the way `art pretrain` writes
	// its output: all at once, or not at all.
	b, _ := json.MarshalIndent(info, "", "  ")
	if err := os.WriteFile(filepath.Join(tmp, baseInfoFile), b, 0o644); err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("demo: replace %s: %w", dir, err)
	}
	if err := pretrain.SaveFolder(m, tmp, dir); err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	return os.RemoveAll(tmp)
}

// randomPosition returns a board with X to move after depth random moves
// of each side (the game still open). SFT draws the depth uniformly from
// 0..4: later positions, rarer in whole games, teach the rules best (on
// the empty board every digit is legal).
func randomPosition(rng *rand.Rand, depth int) tictactoe.Board {
	for {
		var b tictactoe.Board
		ok := true
		for k := 0; k < depth && ok; k++ {
			for _, side := range []byte{'X', 'O'} {
				e := b.Empty()
				b[e[rng.IntN(len(e))]] = side
				if b.Winner() != 0 || b.Full() {
					ok = false
					break
				}
			}
		}
		if ok {
			return b
		}
	}
}

// moveExample is the SFT example of one position: the prompt, a teacher's
// random legal reply and the end of the turn. The move is learned against
// the uniform distribution over the empty cells; the end token after it
// is learned as usual.
func moveExample(enc *promptEncoder, b *tictactoe.Board, rng *rand.Rand) (sftExample, error) {
	ids, err := enc.encode(b.Prompt())
	if err != nil {
		return sftExample{}, err
	}
	free := b.Empty()
	reply := free[rng.IntN(len(free))]
	ex := sftExample{tokens: append(ids, enc.digit[reply], enc.end)}
	row := len(ids) - 1
	for _, c := range free {
		ex.add(row, enc.digit[c], 1/float64(len(free)), true)
	}
	ex.add(row+1, enc.end, 1, false)
	return ex, nil
}

// sftExample is one training sequence and its soft targets: each entry
// asks the row's next-token distribution to put weight on target.
type sftExample struct {
	tokens  []int
	rows    []int
	targets []int
	weights []float64
	move    []bool // entries of the move (counted in the reported loss)
}

func (e *sftExample) add(row, target int, w float64, move bool) {
	e.rows, e.targets, e.weights, e.move = append(e.rows, row), append(e.targets, target), append(e.weights, w), append(e.move, move)
}

// sft trains every weight of a small model with the engine's full
// fine-tuning (train.FullSFT); only its soft-target loss is the demo's own.
// BuildBase keeps its own loop rather than package pretrain's: pretrain
// trains on a fixed file of transcripts (epochs of shuffled batches, hard
// targets, stopping on a held-out loss), while every step here draws fresh
// positions, learns soft targets that transcripts cannot express, and
// stops on an exact game-tree evaluation whose cadence depends on its last
// result. What the two share is the optimizer step (train.FullSFT) and
// the writing of the finished model folder (pretrain.SaveFolder).
type sft struct {
	full *train.FullSFT
}

func newSFT(m *model.Model) (*sft, error) {
	full, err := train.NewFullSFT(m)
	if err != nil {
		return nil, fmt.Errorf("demo: %w", err)
	}
	return &sft{full: full}, nil
}

// step takes one optimizer step on the batch's soft cross-entropy and
// returns the mean cross-entropy of the moves.
func (s *sft) step(batch []sftExample, lr float64) (float64, error) {
	maxT := 0
	for _, e := range batch {
		maxT = max(maxT, len(e.tokens))
	}
	m := s.full.Model
	var loss float64
	n := float64(len(batch))
	_, err := s.full.Step(lr, maxT, func(acts *model.Acts) error {
		for _, e := range batch {
			if _, err := m.TrainForward(acts, e.tokens, nil); err != nil {
				return err
			}
			_, dh := m.LMHeadBackward(acts, e.rows, e.targets, func(i int, lp, _ float64) (float64, float64) {
				if e.move[i] {
					loss -= e.weights[i] * lp
				}
				return -e.weights[i] / n, 0
			})
			m.TrainBackward(acts, dh, nil)
		}
		if math.IsNaN(loss) || math.IsInf(loss, 0) {
			return fmt.Errorf("loss is %v", loss)
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	return loss / n, nil
}

// logf writes a timestamped progress line.
func logf(w io.Writer, start time.Time, format string, args ...any) {
	fmt.Fprintf(w, "[%5.1fs] %s\n", time.Since(start).Seconds(), fmt.Sprintf(format, args...))
}
