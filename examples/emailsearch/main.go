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
	"maps"
	"math"
	"os"
	"os/signal"
	"path/filepath"

	"github.com/artgo/art"
	"github.com/artgo/art/backend/local"
	"github.com/artgo/art/experiment"
)

// config is the command line: the flags the examples share and the task's.
type config struct {
	experiment.Flags
	corpus, index       string
	valSize, evalEvery  int
	maxTurns, maxTokens int
	system              string
	compact             bool
	writeTeacher        string
	teacher             int
	teacherRetry        float64
}

func parseFlags(args []string, stderr io.Writer) (config, error) {
	c := config{Flags: experiment.Defaults("emailsearch")}
	c.SFTBatch = 8
	fs := flag.NewFlagSet("emailsearch", flag.ContinueOnError)
	fs.SetOutput(stderr)
	c.Register(fs)
	c.RegisterWarmup(fs)
	fs.StringVar(&c.corpus, "corpus", ".assets/spam_assassin", "folder of raw mails (*.txt), as scripts/fetch-assets.sh installs it")
	fs.StringVar(&c.index, "index", "", "search index cache file (default <path>/cache/emailsearch-index.db)")
	fs.IntVar(&c.valSize, "val-size", 50, "held-out questions (at least --eval)")
	fs.IntVar(&c.evalEvery, "eval-every", 10, "evaluate the held-out set every this many steps (0: never)")
	fs.IntVar(&c.maxTurns, "max-turns", 10, "model calls per episode")
	fs.IntVar(&c.maxTokens, "max-tokens", 256, "completion tokens per model call")
	fs.StringVar(&c.system, "system", "", "system message (default: the task instructions)")
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
	case c.valSize < 0 || c.evalEvery < 0:
		return c, errors.New("--val-size and --eval-every must be >= 0")
	case c.maxTurns < 1 || c.maxTokens < 1 || c.teacher < 1:
		return c, errors.New("--max-turns, --max-tokens and --teacher must be >= 1")
	case !(c.teacherRetry >= 0 && c.teacherRetry <= 1):
		return c, errors.New("--teacher-retry must be in [0, 1]")
	}
	c.valSize = max(c.valSize, c.Eval)
	if c.index == "" {
		c.index = filepath.Join(c.Path, "cache", "emailsearch-index.db")
	}
	return c, c.Check(c.writeTeacher == "")
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
	questions := GenerateQuestions(headers)
	if cfg.compact {
		questions = CompactQuestions(headers)
	}
	trainSet, valSet := SplitQuestions(questions, cfg.Seed, cfg.valSize)
	if len(trainSet) == 0 {
		return fmt.Errorf("emailsearch: no training questions (%d mails, %d held out)", len(headers), len(valSet))
	}
	fmt.Fprintf(stdout, "%d mails, %d training and %d held-out questions\n", len(headers), len(trainSet), len(valSet))
	opt := RolloutOptions{MaxTurns: cfg.maxTurns, MaxTokens: cfg.maxTokens, CallTimeout: cfg.CallTimeout, System: cfg.system, Compact: cfg.compact}
	if cfg.writeTeacher != "" {
		return writeTeacher(ctx, cfg, inbox, trainSet, opt, stdout)
	}

	backend := local.New(local.Options{Quiet: cfg.Quiet, Seed: cfg.Seed})
	defer backend.Close()
	model := &art.TrainableModel{
		Model:     art.Model{Name: cfg.Name, Project: cfg.Project, BasePath: cfg.Path},
		BaseModel: cfg.BaseModel,
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
				ss := hash64(cfg.Seed, q.ID) >> 8
				o.SampleSeed = &ss
			}
			return Rollout(ctx, client, name, inbox, q, o)
		}, cfg.GatherOptions(desc))
	}
	var heldOut experiment.HeldOut // the first --eval questions, seeded, or the whole held-out set
	if len(valSet) > 0 {
		heldOut = func(ctx context.Context, step int) ([]art.TrajectoryGroup, error) {
			if cfg.Eval > 0 {
				return gather(ctx, step, valSet[:cfg.Eval], 1, fmt.Sprintf("val step %d", step), true)
			}
			return gather(ctx, step, valSet, 1, fmt.Sprintf("val step %d", step), false)
		}
	}
	run := experiment.NewRun("emailsearch", cfg.Flags, model, heldOut, stdout)
	run.Unit, run.Metrics, run.EvalEvery = "question", []string{"correct", "format_error", "searches"}, cfg.evalEvery
	maps.Copy(run.Report.Config, map[string]any{"max_turns": cfg.maxTurns, "max_tokens": cfg.maxTokens, "system": cfg.system,
		"compact": cfg.compact, "teacher_retry": cfg.teacherRetry})

	start, err := model.Step(ctx) // resume where the last run stopped
	if err != nil {
		return err
	}
	if start == 0 && cfg.SFTWarmup > 0 && cfg.Steps > 0 {
		trajs, err := TeacherTranscripts(ctx, inbox, trainSet, cfg.SFTWarmup, opt, cfg.Seed, cfg.teacherRetry)
		if err != nil {
			return err
		}
		if len(trajs) == 0 {
			return errors.New("emailsearch: the teacher found no training question's mail")
		}
		if start, err = run.Warmup(ctx, trajs, "scripted episodes"); err != nil {
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

// writeTeacher writes cfg.teacher scripted episodes of training questions
// (TeacherTranscripts, as --sft-warmup trains on) to cfg.writeTeacher, one
// art.Trajectory JSON a line: the data to build a base model from by
// full-parameter SFT (art pretrain). Only training questions are used, so
// a run with the same --seed, --val-size/--eval and --compact never
// evaluates on a question the base was built from. The file is written
// next to its destination and renamed into place, so a failed run leaves
// no partial file.
func writeTeacher(ctx context.Context, cfg config, inbox *Inbox, trainSet []Question, opt RolloutOptions, stdout io.Writer) (err error) {
	trajs, err := TeacherTranscripts(ctx, inbox, trainSet, cfg.teacher, opt, cfg.Seed, cfg.teacherRetry)
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
