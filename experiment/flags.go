package experiment

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"strings"
	"time"

	"github.com/artgo/art"
)

// Flags are the command-line flags the examples share: where the model
// and its logs live, the size of a GRPO run, how rollouts are gathered,
// the held-out evaluation and the report, and an optional SFT warm-up.
// Each example embeds them in its own configuration, sets its defaults
// (see Defaults) and adds the flags that are its own.
type Flags struct {
	BaseModel, Path, Project, Name string

	Steps, Groups, GroupSize int
	LR                       float64
	GradAccum                int
	Seed                     uint64
	// TrainJSON is --train-config: more TrainConfig fields as a JSON
	// object with TrainConfig's keys ({"max_grad_norm": 1}), applied
	// before --lr and --grad-accum.
	TrainJSON string

	Concurrency   int
	CallTimeout   time.Duration
	MaxExceptions float64

	// Eval held-out scenarios are run before and after training, with
	// seeded sampling; Report names the file the run's Report is written
	// to.
	Eval   int
	Report string
	Quiet  bool

	// The SFT warm-up (RegisterWarmup): at step 0, SFTWarmup teacher
	// transcripts are trained on first (Run.Warmup).
	SFTWarmup, SFTBatch int
	SFTLR               float64
}

// Defaults are the examples' usual defaults for the example name: the
// model "<name>-example" of the project "examples" under .art, 50 steps of
// 8 groups of 8, learning rate 1e-5, 16 rollouts at once.
func Defaults(name string) Flags {
	return Flags{Path: ".art", Project: "examples", Name: name + "-example", Steps: 50, Groups: 8, GroupSize: 8, LR: 1e-5,
		Seed: 1, Concurrency: 16, CallTimeout: 3 * time.Minute, MaxExceptions: 0.1, SFTBatch: 32, SFTLR: 6e-3}
}

// Register defines the shared flags on fs, with f's values as their
// defaults (the SFT warm-up's are RegisterWarmup's).
func (f *Flags) Register(fs *flag.FlagSet) {
	fs.StringVar(&f.BaseModel, "base-model", f.BaseModel, "Hugging Face model folder to train")
	fs.StringVar(&f.Path, "path", f.Path, "root of checkpoints and logs")
	fs.StringVar(&f.Project, "project", f.Project, "project name")
	fs.StringVar(&f.Name, "name", f.Name, "model name")
	fs.IntVar(&f.Steps, "steps", f.Steps, "training step to reach (an SFT warm-up, if any, is step 1)")
	fs.IntVar(&f.Groups, "groups", f.Groups, "scenarios per step")
	fs.IntVar(&f.GroupSize, "group-size", f.GroupSize, "rollouts per scenario (GRPO compares the rollouts of a group)")
	fs.Float64Var(&f.LR, "lr", f.LR, "learning rate")
	fs.IntVar(&f.GradAccum, "grad-accum", f.GradAccum, "sequences per optimizer step (0: one per sequence, ART's default)")
	fs.StringVar(&f.TrainJSON, "train-config", f.TrainJSON, `more GRPO options as a JSON object with art.TrainConfig's keys, e.g. '{"max_grad_norm": 1, "loss_fn": "ppo"}'`)
	fs.Uint64Var(&f.Seed, "seed", f.Seed, "seed of the scenarios and of sampling")
	fs.IntVar(&f.Concurrency, "concurrency", f.Concurrency, "rollouts run at once")
	fs.DurationVar(&f.CallTimeout, "call-timeout", f.CallTimeout, "bound on each chat completion")
	fs.Float64Var(&f.MaxExceptions, "max-exceptions", f.MaxExceptions, "failed rollouts (errors, timeouts) a gather tolerates: a fraction in (0, 1) or a count")
	fs.IntVar(&f.Eval, "eval", f.Eval, "held-out scenarios run before and after training, with seeded sampling (0: none)")
	fs.StringVar(&f.Report, "report", f.Report, "write a JSON summary of the run to this file")
	fs.BoolVar(&f.Quiet, "quiet", f.Quiet, "no progress bars")
}

// RegisterWarmup defines the SFT warm-up's flags on fs, with f's values as
// their defaults.
func (f *Flags) RegisterWarmup(fs *flag.FlagSet) {
	fs.IntVar(&f.SFTWarmup, "sft-warmup", f.SFTWarmup, "at step 0, first train by SFT on this many teacher transcripts")
	fs.IntVar(&f.SFTBatch, "sft-batch", f.SFTBatch, "transcripts per SFT optimizer step")
	fs.Float64Var(&f.SFTLR, "sft-lr", f.SFTLR, "SFT learning rate")
}

// Check reports a shared flag out of range; needBase makes --base-model
// required (a command that only writes data needs none).
func (f Flags) Check(needBase bool) error {
	switch {
	case needBase && f.BaseModel == "":
		return errors.New("--base-model is required: a Hugging Face model folder (config.json, *.safetensors, tokenizer.json)")
	case f.Steps < 0 || f.Groups < 1 || f.GroupSize < 1 || f.Concurrency < 1:
		return errors.New("--steps must be >= 0 and --groups, --group-size, --concurrency >= 1")
	case !(f.LR > 0) || f.GradAccum < 0:
		return errors.New("--lr must be > 0 and --grad-accum >= 0")
	case f.CallTimeout <= 0:
		return errors.New("--call-timeout must be > 0")
	case f.MaxExceptions < 0:
		return errors.New("--max-exceptions must be >= 0")
	case f.Eval < 0:
		return errors.New("--eval must be >= 0")
	case f.SFTWarmup < 0 || f.SFTBatch < 1 || !(f.SFTLR > 0):
		return errors.New("--sft-warmup must be >= 0, --sft-batch >= 1 and --sft-lr > 0")
	}
	if _, err := f.trainConfig(); err != nil {
		return err
	}
	return nil
}

// TrainConfig is the GRPO configuration of the flags (--train-config,
// then --lr and --grad-accum); Check has validated it.
func (f Flags) TrainConfig() art.TrainConfig {
	c, _ := f.trainConfig()
	return c
}

func (f Flags) trainConfig() (art.TrainConfig, error) {
	var c art.TrainConfig
	if f.TrainJSON != "" {
		dec := json.NewDecoder(strings.NewReader(f.TrainJSON))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&c); err != nil {
			return art.TrainConfig{}, fmt.Errorf("--train-config %s: %w (want a JSON object with art.TrainConfig's keys)", f.TrainJSON, err)
		}
	}
	c.LearningRate, c.GradAccumulationSequences = f.LR, f.GradAccum
	if err := c.Validate(); err != nil {
		return art.TrainConfig{}, fmt.Errorf("--train-config, --lr, --grad-accum: %w", err)
	}
	return c, nil
}

// GatherOptions are the options of a gather under the flags
// (--concurrency, --max-exceptions, --quiet), its progress bar labelled
// description.
func (f Flags) GatherOptions(description string) art.GatherOptions {
	return art.GatherOptions{Concurrency: f.Concurrency, MaxExceptions: f.MaxExceptions, Quiet: f.Quiet, Description: description}
}
