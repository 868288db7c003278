// Package pretrain trains every weight of a model folder on transcripts by
// supervised learning (full-parameter SFT, engine/train.FullSFT) and writes
// the result as a new Hugging Face model folder: `art pretrain`.
//
// It is for experiments without a pretrained model: a random tiny model
// from `art init-model`, taught by a teacher's transcripts until it solves
// a task only sometimes, becomes a base that GRPO can improve (as `art
// demo` builds its tic-tac-toe base). With a real model, fine-tune a LoRA
// adapter instead (TrainableModel.TrainSFT).
package pretrain

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/artgo/art"
	"github.com/artgo/art/engine/hfmodel"
	"github.com/artgo/art/engine/model"
	"github.com/artgo/art/engine/train"
	"github.com/artgo/art/host/native"
	"github.com/artgo/art/internal/atomicfile"
)

// Options say what to train on and for how long.
type Options struct {
	Model string // Hugging Face model folder to start from (F32 weights)
	Data  string // JSONL file, one art.Trajectory per line, or a trajectories parquet file
	Out   string // the folder to write; must not exist

	Epochs    int     // passes over the training transcripts (0: 1)
	MaxSteps  int     // stop after this many optimizer steps (0: no bound but Epochs)
	BatchSize int     // transcripts per optimizer step (0: 32)
	LR        float64 // AdamW learning rate, constant (0: 3e-3)
	// HoldOut transcripts, taken from the end of the file, are not trained
	// on; their loss is measured before, every EvalEvery steps, and after.
	HoldOut   int
	EvalEvery int // 0: only before and after
	// StopLoss > 0 ends training at the first held-out measurement below
	// it (needs HoldOut and EvalEvery): a base that is right only some of
	// the time, whatever its seed's pace, as the demo stops its own.
	StopLoss  float64
	MaxSeqLen int    // a longer transcript is an error (0: 4096 tokens)
	Seed      uint64 // shuffles the transcripts of each epoch

	// Progress, if set, sees every optimizer step.
	Progress func(Progress)
}

func (o *Options) defaults() {
	if o.Epochs == 0 {
		o.Epochs = 1
	}
	if o.BatchSize == 0 {
		o.BatchSize = 32
	}
	if o.LR == 0 {
		o.LR = 3e-3
	}
	if o.MaxSeqLen == 0 {
		o.MaxSeqLen = 4096
	}
}

func (o Options) validate() error {
	switch {
	case o.Model == "" || o.Data == "" || o.Out == "":
		return errors.New("pretrain: the model folder, the data file and the output folder are all required")
	case o.Epochs < 0 || o.MaxSteps < 0 || o.BatchSize < 0 || o.HoldOut < 0 || o.EvalEvery < 0 || o.MaxSeqLen < 0:
		return errors.New("pretrain: epochs, max steps, batch size, hold-out, eval-every and max-seq-len must be >= 0")
	case !(o.LR > 0) || math.IsInf(o.LR, 0):
		return fmt.Errorf("pretrain: learning rate %v; want > 0", o.LR)
	case !(o.StopLoss >= 0):
		return fmt.Errorf("pretrain: stop loss %v; want >= 0", o.StopLoss)
	case o.StopLoss > 0 && (o.HoldOut == 0 || o.EvalEvery == 0):
		return errors.New("pretrain: a stop loss needs a held-out set and an eval interval to measure it")
	}
	return nil
}

// Progress reports one optimizer step.
type Progress struct {
	Step, Steps int // this step and the planned total
	Epoch       int // 1-based
	Loss        float64
	GradNorm    float64
	// HeldOut is the held-out loss after this step, NaN when not measured.
	HeldOut float64
	Elapsed time.Duration
}

// Result summarises a run.
type Result struct {
	Steps          int
	Train, HeldOut int     // transcripts trained on and held out
	Tokens         int     // learned tokens per epoch
	Loss           float64 // mean training loss of the last 10 steps
	HeldOutBefore  float64 // NaN without a held-out set
	HeldOutAfter   float64
	Elapsed        time.Duration
	Stopped        bool // the held-out loss fell below Options.StopLoss
	LongestSeq     int  // the longest transcript, in tokens
}

// Run trains a copy of opt.Model's weights on opt.Data and writes the
// result to opt.Out, which appears complete or not at all. The input is
// checked before any training: a missing folder, an empty file or a bad
// line is an error naming it, and nothing is written.
func Run(ctx context.Context, opt Options) (Result, error) {
	opt.defaults()
	if err := opt.validate(); err != nil {
		return Result{}, err
	}
	if _, err := os.Stat(opt.Out); err == nil {
		return Result{}, fmt.Errorf("pretrain: %s already exists; remove it or choose another output folder", opt.Out)
	}
	trajs, err := ReadTrajectories(opt.Data)
	if err != nil {
		return Result{}, err
	}
	if opt.HoldOut >= len(trajs) {
		return Result{}, fmt.Errorf("pretrain: %s has %d transcripts; holding out %d leaves none to train on", opt.Data, len(trajs), opt.HoldOut)
	}
	m, err := model.Load(opt.Model)
	if err != nil {
		return Result{}, fmt.Errorf("pretrain: %w", err)
	}
	z, err := loadTokenizer(opt.Model)
	if err != nil {
		return Result{}, err
	}
	seqs, err := tokenize(z, trajs, opt.MaxSeqLen)
	if err != nil {
		return Result{}, fmt.Errorf("pretrain: %s: %w", opt.Data, err)
	}
	full, err := train.NewFullSFT(m)
	if err != nil {
		return Result{}, fmt.Errorf("pretrain: %s: %w (write one with art init-model --dtype f32)", opt.Model, err)
	}
	nTrain := len(trajs) - opt.HoldOut
	res, err := fit(ctx, full, seqs[:nTrain], seqs[nTrain:], opt)
	if err != nil {
		return Result{}, err
	}
	if err := SaveFolder(m, opt.Model, opt.Out); err != nil {
		return Result{}, err
	}
	return res, nil
}

// ReadTrajectories reads a JSONL file of trajectories (art.Trajectory's
// JSON, one per line; blank lines are skipped), or a trajectories parquet
// file as training logs them (art.ReadTrajectoryGroups: its groups' rows in
// order). An empty file, or a line that is not a trajectory, is an error
// naming the line.
func ReadTrajectories(path string) ([]art.Trajectory, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("pretrain: %w", err)
	}
	defer f.Close()
	r := bufio.NewReader(f)
	if magic, _ := r.Peek(4); string(magic) == "PAR1" {
		groups, err := art.ReadTrajectoryGroups(path)
		if err != nil {
			return nil, fmt.Errorf("pretrain: %w", err)
		}
		var out []art.Trajectory
		for _, g := range groups {
			out = append(out, g.Trajectories...)
		}
		if len(out) == 0 {
			return nil, fmt.Errorf("pretrain: %s has no trajectories", path)
		}
		return out, nil
	}
	var out []art.Trajectory
	for line := 1; ; line++ {
		b, err := r.ReadBytes('\n')
		if err != nil && err != io.EOF {
			return nil, fmt.Errorf("pretrain: %s: %w", path, err)
		}
		if b = bytes.TrimSpace(b); len(b) > 0 {
			var t art.Trajectory
			if err := json.Unmarshal(b, &t); err != nil {
				return nil, fmt.Errorf("pretrain: %s line %d: %w", path, line, err)
			}
			if len(t.MessagesAndChoices) == 0 {
				return nil, fmt.Errorf("pretrain: %s line %d: no messages_and_choices (want one art.Trajectory per line)", path, line)
			}
			out = append(out, t)
		}
		if err == io.EOF {
			break
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("pretrain: %s has no transcripts (want one art.Trajectory JSON per line)", path)
	}
	return out, nil
}

// loadTokenizer returns the tokenizer and chat templates of a model folder,
// as the server renders and trains with them.
func loadTokenizer(dir string) (*train.Tokenizer, error) {
	f, err := hfmodel.OpenText(dir)
	if err != nil {
		return nil, fmt.Errorf("pretrain: %w", err)
	}
	return f.TrainTokenizer(), nil
}

// tokenize turns each trajectory into its learning sequences (one per
// history with an assistant turn, more when train.Tokenizer.Tokenize
// splits one). A trajectory that teaches nothing, or
// a sequence longer than maxSeqLen, is an error naming its line (blank
// lines aside, trajectory i is on line i+1 of a file ReadTrajectories read).
func tokenize(z *train.Tokenizer, trajs []art.Trajectory, maxSeqLen int) ([][]train.Sequence, error) {
	out := make([][]train.Sequence, len(trajs))
	for i, t := range trajs {
		hs, err := native.SFTHistories(t)
		if err != nil {
			return nil, fmt.Errorf("transcript %d: %w", i+1, err)
		}
		for hi, h := range hs {
			seqs, err := z.SFTSequences(h)
			if err != nil {
				return nil, fmt.Errorf("transcript %d history %d: %w", i+1, hi, err)
			}
			for _, seq := range seqs {
				if len(seq.Tokens) > maxSeqLen {
					return nil, fmt.Errorf("transcript %d history %d: %d tokens exceed the maximum sequence length %d", i+1, hi, len(seq.Tokens), maxSeqLen)
				}
			}
			out[i] = append(out[i], seqs...)
		}
		if len(out[i]) == 0 {
			return nil, fmt.Errorf("transcript %d has no assistant turn to learn", i+1)
		}
	}
	return out, nil
}

// fit runs the optimizer steps: epochs of shuffled batches of
// transcripts, up to opt.MaxSteps, measuring the held-out loss as asked.
func fit(ctx context.Context, full *train.FullSFT, trainSet, heldOut [][]train.Sequence, opt Options) (Result, error) {
	start := time.Now()
	res := Result{Train: len(trainSet), HeldOut: len(heldOut), HeldOutBefore: math.NaN(), HeldOutAfter: math.NaN()}
	for _, ss := range trainSet {
		for i := range ss {
			res.Tokens += ss[i].NumSampled()
			res.LongestSeq = max(res.LongestSeq, len(ss[i].Tokens))
		}
	}
	heldOutLoss := func() (float64, error) {
		if len(heldOut) == 0 {
			return math.NaN(), nil
		}
		return full.Loss(ctx, flatten(heldOut))
	}
	var err error
	if res.HeldOutBefore, err = heldOutLoss(); err != nil {
		return res, fmt.Errorf("pretrain: %w", err)
	}
	perEpoch := (len(trainSet) + opt.BatchSize - 1) / opt.BatchSize
	total := perEpoch * opt.Epochs
	if opt.MaxSteps > 0 {
		total = min(total, opt.MaxSteps)
	}
	rng := rand.New(rand.NewPCG(opt.Seed, 0x707265)) // "pre"
	var losses []float64
	var order []int
	for res.Steps < total && !res.Stopped {
		b := res.Steps % perEpoch
		if b == 0 {
			order = rng.Perm(len(trainSet))
		}
		var batch [][]train.Sequence
		for _, i := range order[b*opt.BatchSize : min((b+1)*opt.BatchSize, len(order))] {
			batch = append(batch, trainSet[i])
		}
		loss, norm, err := full.StepSequences(ctx, flatten(batch), opt.LR)
		if err != nil {
			return res, fmt.Errorf("pretrain: step %d: %w", res.Steps+1, err)
		}
		res.Steps++
		losses = append(losses, loss)
		p := Progress{Step: res.Steps, Steps: total, Epoch: (res.Steps-1)/perEpoch + 1, Loss: loss, GradNorm: norm, HeldOut: math.NaN()}
		if opt.EvalEvery > 0 && res.Steps%opt.EvalEvery == 0 && res.Steps < total {
			if p.HeldOut, err = heldOutLoss(); err != nil {
				return res, fmt.Errorf("pretrain: %w", err)
			}
			res.Stopped = p.HeldOut < opt.StopLoss
		}
		p.Elapsed = time.Since(start)
		if opt.Progress != nil {
			opt.Progress(p)
		}
	}
	res.Loss = meanLast(losses, 10)
	if res.HeldOutAfter, err = heldOutLoss(); err != nil {
		return res, fmt.Errorf("pretrain: %w", err)
	}
	res.Elapsed = time.Since(start)
	return res, nil
}

// meanLast returns the mean of the last n values of xs (NaN if none).
func meanLast(xs []float64, n int) float64 {
	xs = xs[max(0, len(xs)-n):]
	var sum float64
	for _, x := range xs {
		sum += x
	}
	return sum / float64(len(xs))
}

func flatten(batch [][]train.Sequence) []train.Sequence {
	var out []train.Sequence
	for _, ss := range batch {
		out = append(out, ss...)
	}
	return out
}

// SaveFolder writes m into out as a Hugging Face folder, with every other
// file of the source folder (tokenizer, its config, chat templates, notes):
// under a temporary name first, synced, and renamed into place when
// complete, so out is either absent or whole. out must not exist.
func SaveFolder(m *model.Model, src, out string) error {
	parent := filepath.Dir(out)
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return fmt.Errorf("pretrain: %w", err)
	}
	tmp, err := os.MkdirTemp(parent, "."+filepath.Base(out)+".tmp-*")
	if err != nil {
		return fmt.Errorf("pretrain: %w", err)
	}
	ok := false
	defer func() {
		if !ok {
			os.RemoveAll(tmp)
		}
	}()
	if err := copyExtras(src, tmp); err != nil {
		return err
	}
	if err := m.Save(tmp); err != nil {
		return fmt.Errorf("pretrain: %w", err)
	}
	if err := os.Chmod(tmp, 0o755); err != nil {
		return fmt.Errorf("pretrain: %w", err)
	}
	// The folder's entries must be on disk before its new name is.
	if err := atomicfile.SyncDir(tmp); err != nil {
		return fmt.Errorf("pretrain: %w", err)
	}
	if err := os.Rename(tmp, out); err != nil {
		return fmt.Errorf("pretrain: %w", err)
	}
	ok = true
	return atomicfile.SyncDir(parent)
}

// copyExtras copies the files of a model folder that are not the weights
// or what model.Save writes (config.json, generation_config.json): the
// tokenizer, its config and chat templates.
func copyExtras(src, dst string) error {
	entries, err := os.ReadDir(src)
	if err != nil {
		return fmt.Errorf("pretrain: %w", err)
	}
	for _, e := range entries {
		name := e.Name()
		if name == "config.json" || name == "generation_config.json" || strings.HasSuffix(name, ".safetensors") ||
			name == "model.safetensors.index.json" || strings.HasPrefix(name, ".") {
			continue
		}
		if e.IsDir() {
			if name == "additional_chat_templates" {
				if err := copyTree(filepath.Join(src, name), filepath.Join(dst, name)); err != nil {
					return err
				}
			}
			continue
		}
		if err := copyFile(filepath.Join(src, name), filepath.Join(dst, name)); err != nil {
			return err
		}
	}
	return nil
}

// copyFile copies src to dst, synced: SaveFolder renames the folder into
// place once it is complete, and a rename that reaches the disk before the
// files' data would leave a whole-looking folder with an empty tokenizer
// after a crash.
func copyFile(src, dst string) error {
	b, err := os.ReadFile(src)
	if err != nil {
		return fmt.Errorf("pretrain: %w", err)
	}
	if err := atomicfile.WriteFile(dst, b, 0o644); err != nil {
		return fmt.Errorf("pretrain: copy %s: %w", src, err)
	}
	return nil
}

// copyTree copies the folder src to dst with copyFile, each folder synced.
// A link to a file is copied as that file, as the chat template loader
// reads it (a Hugging Face cache's snapshot folder holds only links);
// anything else that is not a file or a folder is an error naming it, not
// silently left out.
func copyTree(src, dst string) error {
	return filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return fmt.Errorf("pretrain: %w", err)
		}
		rel, err := filepath.Rel(src, path)
		if err != nil {
			return fmt.Errorf("pretrain: %w", err)
		}
		target := filepath.Join(dst, rel)
		switch {
		case d.IsDir():
			if err := os.MkdirAll(target, 0o755); err != nil {
				return fmt.Errorf("pretrain: %w", err)
			}
			return nil
		case !d.Type().IsRegular():
			fi, err := os.Stat(path)
			if err != nil {
				return fmt.Errorf("pretrain: copy %s: %w", path, err)
			}
			if !fi.Mode().IsRegular() {
				return fmt.Errorf("pretrain: copy %s: not a file or a link to one (%s)", path, fi.Mode().Type())
			}
		}
		return copyFile(path, target)
	})
}
