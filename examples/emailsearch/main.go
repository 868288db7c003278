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
//
// --sft-warmup N first trains by SFT (one TrainSFT call, checkpoint 1) on N
// scripted episodes of training questions: search_inbox with words of the
// subject, read_email of the mail, return_final_answer. --eval N runs N
// held-out questions before and after training with seeded sampling and
// prints the mean reward; --report FILE writes a JSON summary.
//
// --compact is the benchmark configuration for tiny models trained from
// scratch: the same inbox, tools and reward, but search_inbox shows three
// results (a short id, the mail's row in the index, and the start of the
// subject), read_email shows only the sender's address and the day, and
// only the sender and date questions are asked, in a few words (see
// CompactQuestions); the scripted teacher searches for the whole subject.
// A scripted episode is then ~380 bytes of messages instead of ~3,400.
//
// --write-teacher FILE --teacher N writes N scripted episodes of training
// questions (as --sft-warmup trains on) to FILE as JSONL, one
// art.Trajectory a line, and exits: the data to build a base model from
// with `art pretrain`. Give it the --seed, --val-size/--eval, --compact and
// --system of the training run, so that the held-out questions stay
// unseen and the prompts match. --teacher-retry P makes up to a fraction P
// of the scripted episodes recovery episodes: the teacher first searches
// with a miscopied subject (a few random character edits) that misses the
// mail, gets that search's real result ([] or other mails; compact search
// matches any of the subject's words, so it often finds the mail anyway and
// the episode stays the usual one), then searches again with the right subject and
// goes on as usual (or answers "I don't know" if that finds nothing), so
// that a model taught by them has seen what to do after an empty search.
package main

import (
	"bufio"
	"context"
	"encoding/json"
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
	"github.com/artgo/art/examples/benchmark"
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
	system                    string
	gradAccum                 int
	sftWarmup, sftBatch       int
	sftLR                     float64
	eval                      int
	report                    string
	concurrency               int
	callTimeout               time.Duration
	maxExceptions             float64
	quiet                     bool
	compact                   bool
	writeTeacher              string
	teacher                   int
	teacherRetry              float64
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
	fs.StringVar(&c.system, "system", "", "system message (default: the task instructions)")
	fs.IntVar(&c.gradAccum, "grad-accum", 0, "episodes per optimizer step (0: one per episode, ART's default)")
	fs.IntVar(&c.sftWarmup, "sft-warmup", 0, "at step 0, first train by SFT on this many scripted episodes (search, read, answer)")
	fs.IntVar(&c.sftBatch, "sft-batch", 8, "episodes per SFT optimizer step")
	fs.Float64Var(&c.sftLR, "sft-lr", 6e-3, "SFT learning rate")
	fs.IntVar(&c.eval, "eval", 0, "held-out questions run before and after training, with seeded sampling (0: none; the held-out set grows to at least this size)")
	fs.StringVar(&c.report, "report", "", "write a JSON summary of the run to this file")
	fs.IntVar(&c.concurrency, "concurrency", 16, "episodes run at once")
	fs.DurationVar(&c.callTimeout, "call-timeout", 3*time.Minute, "bound on each chat completion")
	fs.Float64Var(&c.maxExceptions, "max-exceptions", 0.1, "failed rollouts (errors, timeouts) a gather tolerates: a fraction in (0, 1) or a count")
	fs.BoolVar(&c.quiet, "quiet", false, "no progress bars")
	fs.BoolVar(&c.compact, "compact", false, "compact mode: short tool results and mail ids, sender and date questions only (episodes of a few hundred bytes)")
	fs.StringVar(&c.writeTeacher, "write-teacher", "", "write --teacher scripted episodes of training questions to this JSONL file (one art.Trajectory a line) and exit")
	fs.IntVar(&c.teacher, "teacher", 1000, "scripted episodes --write-teacher writes (fewer if the teacher finds fewer training questions' mails)")
	fs.Float64Var(&c.teacherRetry, "teacher-retry", 0, "fraction of scripted episodes (--write-teacher, --sft-warmup) that first search with a miscopied subject, get its real (empty or wrong) result, then search again correctly (drawn episodes whose miscopied search still finds the mail stay plain)")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	switch {
	case fs.NArg() > 0:
		return c, fmt.Errorf("unexpected arguments %q", fs.Args())
	case c.base == "" && c.writeTeacher == "":
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
	if c.gradAccum < 0 || c.sftWarmup < 0 || c.sftBatch < 1 || !(c.sftLR > 0) || c.eval < 0 || c.teacher < 1 {
		return c, errors.New("--grad-accum, --sft-warmup and --eval must be >= 0, --sft-batch and --teacher >= 1 and --sft-lr > 0")
	}
	if !(c.teacherRetry >= 0 && c.teacherRetry <= 1) {
		return c, errors.New("--teacher-retry must be in [0, 1]")
	}
	c.valSize = max(c.valSize, c.eval)
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
	t0 := time.Now()
	rep := benchmark.Report{Example: "emailsearch", Seed: cfg.seed, EvalScenarios: cfg.eval, Config: map[string]any{
		"groups": cfg.groups, "group_size": cfg.groupSize, "lr": cfg.lr, "grad_accum": cfg.gradAccum,
		"max_turns": cfg.maxTurns, "max_tokens": cfg.maxTokens, "system": cfg.system,
		"sft_lr": cfg.sftLR, "sft_batch": cfg.sftBatch, "compact": cfg.compact, "teacher_retry": cfg.teacherRetry}}
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
	questions := GenerateQuestions(headers)
	if cfg.compact {
		questions = CompactQuestions(headers)
	}
	trainSet, valSet := SplitQuestions(questions, cfg.seed, cfg.valSize)
	if len(trainSet) == 0 {
		return fmt.Errorf("emailsearch: no training questions (%d mails, %d held out)", len(headers), len(valSet))
	}
	fmt.Fprintf(stdout, "%d mails, %d training and %d held-out questions\n", len(headers), len(trainSet), len(valSet))
	opt := RolloutOptions{MaxTurns: cfg.maxTurns, MaxTokens: cfg.maxTokens, CallTimeout: cfg.callTimeout, System: cfg.system, Compact: cfg.compact}
	if cfg.writeTeacher != "" {
		return writeTeacher(ctx, cfg, inbox, trainSet, opt, stdout)
	}

	backend := local.New(local.Options{Quiet: cfg.quiet, Seed: cfg.seed})
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
	gather := func(ctx context.Context, step int, qs []Question, size int, desc string, seeded bool) ([]art.TrajectoryGroup, error) {
		name := model.InferenceName(step)
		return art.GatherGroups(ctx, qs, size, func(ctx context.Context, q Question) (art.Trajectory, error) {
			o := opt
			if seeded { // the same samples for the same checkpoint: a fair before/after
				ss := hash64(cfg.seed, q.ID) >> 8
				o.SampleSeed = &ss
			}
			return Rollout(ctx, client, name, inbox, q, o)
		}, art.GatherOptions{Concurrency: cfg.concurrency, MaxExceptions: cfg.maxExceptions, Quiet: cfg.quiet, Description: desc})
	}
	lastEval := -1
	var firstEval, latestEval []art.TrajectoryGroup // held-out groups, for the paired error
	// evaluate runs the held-out set at step when forced (the first and
	// last step of an --eval run) or every --eval-every steps.
	evaluate := func(step int, force bool) (mean, stderr float64, metrics map[string]float64, err error) {
		if step == lastEval || len(valSet) == 0 || !force && (cfg.evalEvery == 0 || step%cfg.evalEvery != 0) {
			return 0, 0, nil, nil
		}
		lastEval = step
		t := time.Now()
		defer func() { rep.EvalSeconds += time.Since(t).Seconds() }()
		set := valSet
		if cfg.eval > 0 {
			set = valSet[:cfg.eval]
		}
		groups, err := gather(ctx, step, set, 1, fmt.Sprintf("val step %d", step), cfg.eval > 0)
		if err != nil {
			return 0, 0, nil, err
		}
		if err := model.Log(ctx, groups, art.LogOptions{Split: "val", Step: &step}); err != nil {
			return 0, 0, nil, err
		}
		if firstEval == nil {
			firstEval = groups
		}
		latestEval = groups
		mean, stderr, metrics = benchmark.Summarize(groups)
		fmt.Fprintf(stdout, "val step %d: reward %.3f ± %.3f correct %.3f format_error %.3f searches %.2f\n", step, mean, stderr,
			metrics["correct"], metrics["format_error"], metrics["searches"])
		return mean, stderr, metrics, nil
	}

	start, err := model.Step(ctx) // resume where the last run stopped
	if err != nil {
		return err
	}
	if start >= cfg.steps {
		return nil
	}
	if start == 0 && cfg.sftWarmup > 0 {
		t := time.Now()
		trajs, err := TeacherTranscripts(ctx, inbox, trainSet, cfg.sftWarmup, opt, cfg.seed, cfg.teacherRetry)
		if err != nil {
			return err
		}
		if len(trajs) == 0 {
			return errors.New("emailsearch: the teacher found no training question's mail")
		}
		res, err := model.TrainSFT(ctx, trajs, art.TrainSFTConfig{LearningRate: cfg.sftLR, BatchSize: cfg.sftBatch})
		if err != nil {
			return err
		}
		start = res.Step
		rep.SFTTrajectories, rep.SFTSeconds = len(trajs), time.Since(t).Seconds()
		fmt.Fprintf(stdout, "sft warm-up: %d scripted episodes, %.0f tokens, loss %.4f, %.1fs\n", len(trajs),
			res.Metrics["data/step_trainer_tokens"], res.Metrics["loss/train"], rep.SFTSeconds)
	}
	rep.StartStep, rep.FinalStep = start, start
	if start == 0 || cfg.eval > 0 { // the score before training
		if rep.Before, rep.BeforeStderr, rep.BeforeMetrics, err = evaluate(start, cfg.eval > 0); err != nil {
			return err
		}
	}
	tRL := time.Now()
	evalBefore := rep.EvalSeconds
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
		groups, err := gather(ctx, step, batch.Items, cfg.groupSize, fmt.Sprintf("train step %d", step), false)
		if err != nil {
			return err
		}
		res, err := model.Train(ctx, groups, art.TrainConfig{LearningRate: cfg.lr, GradAccumulationSequences: cfg.gradAccum})
		if err != nil {
			return err
		}
		rep.Steps++
		rep.FinalStep = res.Step
		fmt.Fprintf(stdout, "step %d: reward %.3f correct %.3f searches %.2f loss %.4f skipped=%v %s\n", res.Step,
			mean(groups, "reward"), mean(groups, "correct"), mean(groups, "searches"),
			res.Metrics["loss/train"], res.Skipped, res.SkipReason)
		if res.Step < cfg.steps || cfg.eval == 0 {
			if _, _, _, err := evaluate(res.Step, false); err != nil {
				return err
			}
		}
	}
	rep.RLSeconds = time.Since(tRL).Seconds() - (rep.EvalSeconds - evalBefore)
	if cfg.eval > 0 && rep.Steps > 0 {
		if rep.After, rep.AfterStderr, rep.AfterMetrics, err = evaluate(rep.FinalStep, true); err != nil {
			return err
		}
		rep.DiffStderr = benchmark.PairedStderr(firstEval, latestEval)
		fmt.Fprintf(stdout, "held-out reward %.3f → %.3f (± %.3f paired by question, %d questions) after %d steps\n", rep.Before, rep.After,
			rep.DiffStderr, cfg.eval, rep.Steps)
	}
	rep.TotalSeconds = time.Since(t0).Seconds()
	if cfg.report != "" {
		return benchmark.WriteReport(cfg.report, rep)
	}
	return nil
}

// writeTeacher writes cfg.teacher scripted episodes of training questions
// (TeacherTranscripts, as --sft-warmup trains on) to cfg.writeTeacher, one
// art.Trajectory JSON a line: the data to build a base model from by
// full-parameter SFT (art pretrain). Only training questions are used, so
// a run with the same --seed, --val-size/--eval and --compact never
// evaluates on a question the base was built from. The file is written
// next to its destination and renamed into place, so a failed run leaves
// no partial file.
func writeTeacher(ctx context.Context, cfg config, inbox *Inbox, trainSet []Question, opt RolloutOptions, stdout io.Writer) (err error) {
	trajs, err := TeacherTranscripts(ctx, inbox, trainSet, cfg.teacher, opt, cfg.seed, cfg.teacherRetry)
	if err != nil {
		return err
	}
	if len(trajs) == 0 {
		return fmt.Errorf("emailsearch: --write-teacher: the teacher finds the mail of none of the %d training questions", len(trainSet))
	}
	if len(trajs) < cfg.teacher { // every question at most once: no duplicates to make up the count
		fmt.Fprintf(stdout, "the teacher finds the mail of only %d of the %d training questions\n", len(trajs), len(trainSet))
	}
	if dir := filepath.Dir(cfg.writeTeacher); dir != "" {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("emailsearch: --write-teacher: %w", err)
		}
	}
	f, err := os.CreateTemp(filepath.Dir(cfg.writeTeacher), filepath.Base(cfg.writeTeacher)+".*.tmp")
	if err != nil {
		return fmt.Errorf("emailsearch: --write-teacher: %w", err)
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	w := bufio.NewWriter(f)
	var total int
	for _, t := range trajs {
		b, err := json.Marshal(t)
		if err != nil {
			return fmt.Errorf("emailsearch: --write-teacher: encode %v: %w", t.Metadata["scenario_id"], err)
		}
		w.Write(b)
		w.WriteByte('\n')
		total += episodeBytes(t)
	}
	if err := w.Flush(); err != nil {
		return fmt.Errorf("emailsearch: --write-teacher: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("emailsearch: --write-teacher: %w", err)
	}
	if err := os.Rename(f.Name(), cfg.writeTeacher); err != nil {
		return fmt.Errorf("emailsearch: --write-teacher: %w", err)
	}
	fmt.Fprintf(stdout, "wrote %d teacher transcripts (%.0f bytes of messages each on average) to %s\n", len(trajs),
		float64(total)/float64(len(trajs)), cfg.writeTeacher)
	return nil
}

// episodeBytes is the length of an episode's message texts and tool call
// arguments: roughly its token count for a byte-level model, before the
// chat template's markup.
func episodeBytes(t art.Trajectory) int {
	n := 0
	for _, m := range t.Messages() {
		n += len(m.Content.String())
		for _, tc := range m.ToolCalls {
			n += len(tc.Function.Name) + len(tc.Function.Arguments)
		}
	}
	return n
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
