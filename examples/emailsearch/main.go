// Command emailsearch trains an email search agent with GRPO, in the
// manner of OpenPipe ART's ART•E, written the way a user of the SDK would:
// a TrainableModel on the in-process backend, multi-turn rollouts that call
// the model's OpenAI-compatible endpoint with three tools (search_inbox,
// read_email, return_final_answer) over a real inbox, a loop that resumes
// from the model's latest step, and a held-out set evaluated every few
// steps.
//
//	scripts/fetch-assets.sh spam_assassin   # the inbox: 6,046 SpamAssassin mails from 2002
//	go run ./examples/emailsearch --base-model DIR [--steps 50]
//
// The mails are parsed with net/mail and indexed once in SQLite with FTS5
// (modernc.org/sqlite, pure Go) into a cache file that later runs reuse
// (see OpenInbox). The questions are generated from the mails with answers
// read off their headers (see GenerateQuestions) and graded exactly (see
// CheckAnswer); the reward follows ART•E (see Rubric.Reward). Checkpoints
// and logs go to <path>/<project>/models/<name>/.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"math"
	"os"
	"os/signal"
	"path/filepath"
	"time"

	"github.com/artgo/art"
	"github.com/artgo/art/backend/local"
)

// config is the command line.
type config struct {
	base, path, project, name string
	corpus, index             string
	steps, groups, groupSize  int
	lr                        float64
	seed                      uint64
	valSize, evalEvery        int
	maxTurns, maxTokens       int
	concurrency               int
	callTimeout               time.Duration
	maxExceptions             float64
	quiet                     bool
}

func parseFlags(args []string, stderr io.Writer) (config, error) {
	var c config
	fs := flag.NewFlagSet("emailsearch", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&c.base, "base-model", "", "Hugging Face model folder to train (required)")
	fs.StringVar(&c.path, "path", ".art", "root of checkpoints and logs")
	fs.StringVar(&c.project, "project", "examples", "project name")
	fs.StringVar(&c.name, "name", "emailsearch-example", "model name")
	fs.StringVar(&c.corpus, "corpus", ".assets/spam_assassin", "folder of raw mails (*.txt), as scripts/fetch-assets.sh installs it")
	fs.StringVar(&c.index, "index", "", "search index cache file (default <path>/cache/emailsearch-index.db)")
	fs.IntVar(&c.steps, "steps", 50, "training steps to reach")
	fs.IntVar(&c.groups, "groups", 8, "questions per step")
	fs.IntVar(&c.groupSize, "group-size", 8, "attempts per question")
	fs.Float64Var(&c.lr, "lr", 1e-5, "learning rate")
	fs.Uint64Var(&c.seed, "seed", 1, "seed of the train/held-out split and the question order")
	fs.IntVar(&c.valSize, "val-size", 50, "held-out questions")
	fs.IntVar(&c.evalEvery, "eval-every", 10, "evaluate the held-out set every this many steps (0: never)")
	fs.IntVar(&c.maxTurns, "max-turns", 10, "model calls per episode")
	fs.IntVar(&c.maxTokens, "max-tokens", 256, "completion tokens per model call")
	fs.IntVar(&c.concurrency, "concurrency", 16, "episodes run at once")
	fs.DurationVar(&c.callTimeout, "call-timeout", 3*time.Minute, "bound on each chat completion")
	fs.Float64Var(&c.maxExceptions, "max-exceptions", 0.1, "failed rollouts (errors, timeouts) a gather tolerates: a fraction in (0, 1) or a count")
	fs.BoolVar(&c.quiet, "quiet", false, "no progress bars")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	switch {
	case fs.NArg() > 0:
		return c, fmt.Errorf("unexpected arguments %q", fs.Args())
	case c.base == "":
		return c, errors.New("--base-model is required: a Hugging Face model folder (config.json, *.safetensors, tokenizer.json)")
	case c.steps < 0 || c.groups < 1 || c.groupSize < 1 || c.valSize < 0 || c.evalEvery < 0:
		return c, errors.New("--steps, --val-size and --eval-every must be >= 0 and --groups, --group-size >= 1")
	case c.maxTurns < 1 || c.maxTokens < 1 || c.concurrency < 1:
		return c, errors.New("--max-turns, --max-tokens and --concurrency must be >= 1")
	case c.callTimeout <= 0:
		return c, errors.New("--call-timeout must be > 0")
	case c.maxExceptions < 0:
		return c, errors.New("--max-exceptions must be >= 0")
	}
	if c.index == "" {
		c.index = filepath.Join(c.path, "cache", "emailsearch-index.db")
	}
	return c, nil
}

func main() {
	cfg, err := parseFlags(os.Args[1:], os.Stderr)
	if errors.Is(err, flag.ErrHelp) {
		return
	} else if err != nil {
		log.Fatal(err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := train(ctx, cfg, os.Stdout); err != nil {
		log.Fatal(err)
	}
}

func train(ctx context.Context, cfg config, stdout io.Writer) error {
	if _, err := os.Stat(cfg.corpus); err != nil {
		return fmt.Errorf("emailsearch: no corpus at %s (run scripts/fetch-assets.sh spam_assassin, or pass --corpus): %w", cfg.corpus, err)
	}
	inbox, built, err := OpenInbox(ctx, cfg.corpus, cfg.index)
	if err != nil {
		return err
	}
	defer inbox.Close()
	if built {
		fmt.Fprintf(stdout, "built the search index %s\n", cfg.index)
	}
	headers, err := inbox.headers(ctx)
	if err != nil {
		return err
	}
	trainSet, valSet := SplitQuestions(GenerateQuestions(headers), cfg.seed, cfg.valSize)
	if len(trainSet) == 0 {
		return fmt.Errorf("emailsearch: no training questions (%d mails, %d held out)", len(headers), len(valSet))
	}
	fmt.Fprintf(stdout, "%d mails, %d training and %d held-out questions\n", len(headers), len(trainSet), len(valSet))

	backend := local.New(local.Options{Quiet: cfg.quiet})
	defer backend.Close()
	model := &art.TrainableModel{
		Model:     art.Model{Name: cfg.name, Project: cfg.project, BasePath: cfg.path},
		BaseModel: cfg.base,
	}
	if err := model.Register(ctx, backend); err != nil {
		return err
	}
	client, err := model.OpenAIClient()
	if err != nil {
		return err
	}
	opt := RolloutOptions{MaxTurns: cfg.maxTurns, MaxTokens: cfg.maxTokens, CallTimeout: cfg.callTimeout}
	gather := func(ctx context.Context, step int, qs []Question, size int, desc string) ([]art.TrajectoryGroup, error) {
		name := model.InferenceName(step)
		return art.GatherGroups(ctx, qs, size, func(ctx context.Context, q Question) (art.Trajectory, error) {
			return Rollout(ctx, client, name, inbox, q, opt)
		}, art.GatherOptions{Concurrency: cfg.concurrency, MaxExceptions: cfg.maxExceptions, Quiet: cfg.quiet, Description: desc})
	}
	evaluate := func(step int) error {
		if cfg.evalEvery == 0 || len(valSet) == 0 || step%cfg.evalEvery != 0 {
			return nil
		}
		groups, err := gather(ctx, step, valSet, 1, fmt.Sprintf("val step %d", step))
		if err != nil {
			return err
		}
		if err := model.Log(ctx, groups, art.LogOptions{Split: "val", Step: &step}); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "val step %d: reward %.3f correct %.3f\n", step, mean(groups, "reward"), mean(groups, "correct"))
		return nil
	}

	start, err := model.Step(ctx) // resume where the last run stopped
	if err != nil {
		return err
	}
	if start >= cfg.steps {
		return nil
	}
	if start == 0 {
		if err := evaluate(0); err != nil { // the base model's score
			return err
		}
	}
	// Enough epochs to reach cfg.steps; IterateDataset resumes at start.
	epochs := int(math.Ceil(float64(cfg.steps) / float64(art.DatasetSteps(len(trainSet), cfg.groups, 1))))
	batches, err := art.IterateDataset(trainSet, cfg.groups, epochs, start, int64(cfg.seed))
	if err != nil {
		return err
	}
	for batch := range batches {
		step := batch.Step
		if step >= cfg.steps {
			break
		}
		groups, err := gather(ctx, step, batch.Items, cfg.groupSize, fmt.Sprintf("train step %d", step))
		if err != nil {
			return err
		}
		res, err := backend.Train(ctx, model, groups, art.TrainConfig{LearningRate: cfg.lr})
		if err != nil {
			return err
		}
		if err := model.Log(ctx, groups, res.LogOptions()); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "step %d: reward %.3f correct %.3f searches %.2f loss %.4f skipped=%v %s\n", res.Step,
			mean(groups, "reward"), mean(groups, "correct"), mean(groups, "searches"),
			res.Metrics["loss/train"], res.Skipped, res.SkipReason)
		if err := evaluate(res.Step); err != nil {
			return err
		}
	}
	return nil
}

// mean averages the reward (key "reward") or a metric over the
// trajectories of groups, 0 if there are none.
func mean(groups []art.TrajectoryGroup, key string) float64 {
	var sum float64
	n := 0
	for _, g := range groups {
		for _, t := range g.Trajectories {
			if key == "reward" {
				sum += t.Reward
			} else {
				sum += t.Metrics[key]
			}
			n++
		}
	}
	if n == 0 {
		return 0
	}
	return sum / float64(n)
}
