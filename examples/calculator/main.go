// Command calculator trains an agent to solve arithmetic word problems with
// a calculator tool, by GRPO, written the way a user of the SDK would: a
// TrainableModel on the in-process backend, multi-turn rollouts that call
// the model's OpenAI-compatible endpoint with a function tool, a loop that
// resumes from the model's latest step, and a held-out set evaluated every
// few steps.
//
//	go run ./examples/calculator --base-model DIR [--steps 50]
//
// A model that has never called a tool (such as a random one from `art
// init-model`) can first be taught by supervised learning: --sft-warmup N
// trains on N transcripts of a teacher that calls the calculator with the
// right expression and answers with its result (one TrainSFT call,
// checkpoint 1); --sft-noise P makes the teacher answer a wrong number
// without the tool in a fraction P of them, so GRPO has something to
// improve. --eval N runs N held-out problems before and after training and
// prints the mean reward; --report FILE writes a JSON summary.
// --problems products, --system and --compact-tool make the episodes
// short enough for a tiny model. A LoRA warm-up (--sft-warmup) of a random
// 0.1M-parameter model teaches it the tool-call format but not to copy
// numbers, so none of its answers is correct and GRPO has nothing to
// reinforce. Without a pretrained model, build the base by full-parameter
// SFT instead: --write-teacher FILE --teacher N writes N teacher
// transcripts as JSONL (one art.Trajectory per line) and exits, and `art
// pretrain` trains every weight of a random model on them, which does learn
// to copy. With --sft-noise 0.5 the base calls the tool in about half of its
// episodes, and GRPO teaches it to call it every time:
//
//	art init-model --shape tiny --tokenizer bytes --chat-template compact.jinja --rope-theta 1000 --out random
//	calculator --write-teacher teacher.jsonl --teacher 4000 --problems products --sft-noise 0.5 --compact-tool --system "Use the calculator."
//	art pretrain --model random --data teacher.jsonl --epochs 10 --hold-out 200 --eval-every 50 --stop-loss 0.06 --out base
//	calculator --base-model base --problems products --compact-tool --system "Use the calculator." --eval 200
//
// bench/learning runs this pipeline (with its compact tool template and
// GRPO settings); see BENCHMARKS.md.
//
// The problems are generated from --seed with exact integer answers (see
// GenerateProblems); the calculator is a small exact evaluator (see Eval);
// the reward is 1 for the exact answer, 0.1 for a wrong number, 0 otherwise
// (see Grade). Checkpoints and logs go to <path>/<project>/models/<name>/.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"maps"
	"math"
	"os"
	"os/signal"

	"github.com/artgo/art"
	"github.com/artgo/art/backend/local"
	"github.com/artgo/art/experiment"
)

// config is the command line: the flags the examples share and the task's.
type config struct {
	experiment.Flags
	loraRank            int
	problems            string
	trainSize, valSize  int
	evalEvery           int
	maxTurns, maxTokens int
	system              string
	compactTool         bool
	sftNoise            float64
	writeTeacher        string
	teacher             int
}

func parseFlags(args []string, stderr io.Writer) (config, error) {
	c := config{Flags: experiment.Defaults("calculator")}
	fs := flag.NewFlagSet("calculator", flag.ContinueOnError)
	fs.SetOutput(stderr)
	c.Register(fs)
	c.RegisterWarmup(fs)
	fs.IntVar(&c.loraRank, "lora-rank", 8, "rank of the LoRA adapter (alpha is twice the rank)")
	fs.StringVar(&c.problems, "problems", "words", `problem set: "words" (word problems) or "products" ("Compute 37 * 54.", for a tiny model)`)
	fs.IntVar(&c.trainSize, "train-size", 2000, "training problems")
	fs.IntVar(&c.valSize, "val-size", 50, "held-out problems (at least --eval)")
	fs.IntVar(&c.evalEvery, "eval-every", 10, "evaluate the held-out set every this many steps (0: never)")
	fs.IntVar(&c.maxTurns, "max-turns", 6, "model calls per episode")
	fs.IntVar(&c.maxTokens, "max-tokens", 256, "completion tokens per model call")
	fs.StringVar(&c.system, "system", "", "system message (default: the task instructions, SystemPrompt)")
	fs.BoolVar(&c.compactTool, "compact-tool", false, "send the calculator tool without descriptions (a shorter prompt)")
	fs.Float64Var(&c.sftNoise, "sft-noise", 0, "fraction of teacher transcripts that answer a wrong number without the tool")
	fs.StringVar(&c.writeTeacher, "write-teacher", "", "write --teacher teacher transcripts to this JSONL file (for art pretrain) and exit")
	fs.IntVar(&c.teacher, "teacher", 2000, "transcripts --write-teacher writes")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	switch {
	case fs.NArg() > 0:
		return c, fmt.Errorf("unexpected arguments %q", fs.Args())
	case c.writeTeacher != "" && c.teacher < 1:
		return c, errors.New("--teacher must be >= 1")
	case c.trainSize < 1 || c.valSize < 0 || c.evalEvery < 0:
		return c, errors.New("--val-size and --eval-every must be >= 0 and --train-size >= 1")
	case c.maxTurns < 1 || c.maxTokens < 1:
		return c, errors.New("--max-turns and --max-tokens must be >= 1")
	case c.loraRank < 1:
		return c, errors.New("--lora-rank must be >= 1")
	case !(c.sftNoise >= 0 && c.sftNoise <= 1):
		return c, errors.New("--sft-noise must be in [0, 1]")
	case c.problems != "words" && c.problems != "products":
		return c, fmt.Errorf(`--problems %q: want "words" or "products"`, c.problems)
	case c.problems == "products" && c.trainSize+max(c.valSize, c.Eval) > 68*68:
		return c, fmt.Errorf("--problems products has %d problems; --train-size plus the held-out set ask for more", 68*68)
	}
	c.valSize = max(c.valSize, c.Eval)
	return c, c.Check(c.writeTeacher == "")
}

func main() {
	cfg, err := parseFlags(os.Args[1:], os.Stderr)
	if errors.Is(err, flag.ErrHelp) {
		return
	} else if err != nil {
		log.Fatal(err)
	}
	if cfg.writeTeacher != "" {
		if err := writeTeacher(cfg, os.Stdout); err != nil {
			log.Fatal(err)
		}
		return
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := train(ctx, cfg, os.Stdout); err != nil {
		log.Fatal(err)
	}
}

// splitProblems returns the training and held-out problems of cfg.
func splitProblems(cfg config) (train, val []Problem) {
	if cfg.problems == "products" {
		all := ProductProblems(cfg.Seed, cfg.trainSize+cfg.valSize)
		return all[:cfg.trainSize], all[cfg.trainSize:]
	}
	return SplitProblems(cfg.Seed, cfg.trainSize, cfg.valSize)
}

func train(ctx context.Context, cfg config, stdout io.Writer) error {
	trainSet, valSet := splitProblems(cfg)
	backend := local.New(local.Options{Quiet: cfg.Quiet, Seed: cfg.Seed})
	defer backend.Close()
	model := &art.TrainableModel{
		Model:     art.Model{Name: cfg.Name, Project: cfg.Project, BasePath: cfg.Path},
		BaseModel: cfg.BaseModel,
		LoRA:      art.LoRAConfig{Rank: cfg.loraRank, Alpha: 2 * float64(cfg.loraRank)},
	}
	if err := model.Register(ctx, backend); err != nil {
		return err
	}
	client, err := model.OpenAIClient()
	if err != nil {
		return err
	}
	opt := RolloutOptions{MaxTurns: cfg.maxTurns, MaxTokens: cfg.maxTokens, CallTimeout: cfg.CallTimeout,
		System: cfg.system, CompactTool: cfg.compactTool}
	gather := func(ctx context.Context, step int, problems []Problem, size int, desc string, seeded bool) ([]art.TrajectoryGroup, error) {
		name := model.InferenceName(step)
		return art.GatherGroups(ctx, problems, size, func(ctx context.Context, p Problem) (art.Trajectory, error) {
			o := opt
			if seeded { // the same samples for the same checkpoint: a fair before/after
				ss := hashID(p.ID) * 64
				o.SampleSeed = &ss
			}
			return Rollout(ctx, client, name, p, o)
		}, cfg.GatherOptions(desc))
	}
	var heldOut experiment.HeldOut // the first --eval problems, seeded, or the whole held-out set
	if len(valSet) > 0 {
		heldOut = func(ctx context.Context, step int) ([]art.TrajectoryGroup, error) {
			if cfg.Eval > 0 {
				return gather(ctx, step, valSet[:cfg.Eval], 1, fmt.Sprintf("val step %d", step), true)
			}
			return gather(ctx, step, valSet, 1, fmt.Sprintf("val step %d", step), false)
		}
	}
	run := experiment.NewRun("calculator", cfg.Flags, model, heldOut, stdout)
	run.Unit, run.Metrics, run.EvalEvery = "problem", []string{"correct", "tool_calls"}, cfg.evalEvery
	maps.Copy(run.Report.Config, map[string]any{"problems": cfg.problems, "max_turns": cfg.maxTurns, "max_tokens": cfg.maxTokens,
		"system": cfg.system, "compact_tool": cfg.compactTool, "lora_rank": cfg.loraRank, "sft_noise": cfg.sftNoise})

	start, err := model.Step(ctx) // resume where the last run stopped
	if err != nil {
		return err
	}
	if start == 0 && cfg.SFTWarmup > 0 && cfg.Steps > 0 {
		trajs := TeacherTranscripts(trainSet, cfg.SFTWarmup, cfg.sftNoise, cfg.Seed, opt.system(), CalculatorTool(cfg.compactTool))
		if start, err = run.Warmup(ctx, trajs, "teacher transcripts"); err != nil {
			return err
		}
	}
	if err := run.Begin(ctx, start); err != nil {
		return err
	}
	// Enough epochs to reach cfg.Steps; IterateDataset resumes at start.
	epochs := int(math.Ceil(float64(cfg.Steps) / float64(art.DatasetSteps(len(trainSet), cfg.Groups, 1))))
	batches, err := art.IterateDataset(trainSet, cfg.Groups, epochs, start, int64(cfg.Seed))
	if err != nil {
		return err
	}
	for batch := range batches {
		if batch.Step >= cfg.Steps {
			break
		}
		groups, err := gather(ctx, batch.Step, batch.Items, cfg.GroupSize, fmt.Sprintf("train step %d", batch.Step), false)
		if err != nil {
			return err
		}
		res, err := model.Train(ctx, groups, cfg.TrainConfig())
		if err != nil {
			return err
		}
		if err := run.Step(ctx, groups, res); err != nil {
			return err
		}
	}
	return run.Finish(ctx)
}

// hashID hashes a problem id (FNV-1a), to seed its evaluation samples.
func hashID(id string) uint64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(id); i++ {
		h = (h ^ uint64(id[i])) * 1099511628211
	}
	return h >> 8
}
