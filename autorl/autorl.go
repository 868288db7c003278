// Package autorl trains a model for a task described in one sentence, with
// no data and no reward function, as OpenPipe ART's AutoRL notebook does:
// a generator model writes training inputs and a system prompt for the
// task, the model answers each input several times, a RULER judge scores
// the answers relative to each other, and GRPO trains on the scores. At
// the end the model before and after training answers freshly generated
// inputs side by side and the judge scores each pair: the before → after
// comparison.
//
//	res, err := autorl.Run(ctx, model, autorl.Config{
//		Task:      "Answer customer questions about a bike shop's opening hours",
//		Generator: generator, // a ruler.Judge: any OpenAI-compatible endpoint with structured outputs
//		Judge:     judge,
//	})
//	res.WriteTable(os.Stdout)
package autorl

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"strings"
	"time"

	"github.com/openai/openai-go/v3"

	"github.com/artgo/art"
	"github.com/artgo/art/ruler"
)

// Plan is what the generator writes for a task: a system prompt for the
// model and the inputs it will be given.
type Plan struct {
	SystemPrompt string   `json:"system_prompt"`
	Inputs       []string `json:"inputs"`
}

// PlanOptions configure GeneratePlan.
type PlanOptions struct {
	// MaxRetries is how many times an unusable answer is asked again; 0
	// means 4 (five tries, as the notebook), < 0 none.
	MaxRetries int
	// Timeout bounds each call; 0 means 5 minutes.
	Timeout time.Duration
	// MaxLength, if > 0, bounds each input's and the system prompt's
	// length in the answer's schema (small generators under constrained
	// decoding).
	MaxLength int
	// Logger receives warnings (nil: slog.Default()).
	Logger *slog.Logger
}

// GeneratePlan asks generator, in one structured-output call, for exactly
// n diverse inputs for task and a system prompt that tells a model how to
// handle them. A wrong count or an empty input is asked again (bounded by
// opts.MaxRetries), then is an error.
func GeneratePlan(ctx context.Context, generator ruler.Judge, task string, n int, opts PlanOptions) (Plan, error) {
	if strings.TrimSpace(task) == "" {
		return Plan{}, errors.New("autorl: the task description is empty")
	}
	if n <= 0 {
		return Plan{}, fmt.Errorf("autorl: asked for %d inputs; want at least 1", n)
	}
	str := map[string]any{"type": "string", "minLength": 1}
	if opts.MaxLength > 0 {
		str["maxLength"] = opts.MaxLength
	}
	schema, _ := json.Marshal(map[string]any{
		"type": "object", "additionalProperties": false, "required": []string{"system_prompt", "inputs"},
		"properties": map[string]any{
			"system_prompt": str,
			"inputs":        map[string]any{"type": "array", "minItems": n, "maxItems": n, "items": str},
		},
	})
	msgs := []art.Message{
		art.SystemMsg("You design training data for AI models. You answer with JSON only."),
		art.UserMsg(fmt.Sprintf(`A model will be trained for this task:

%s

Write exactly %d diverse, realistic inputs the model could receive for this task (varied in topic, length and difficulty; each one complete on its own), and a system prompt that tells the model what to do with such an input.
Answer with a JSON object {"system_prompt": ..., "inputs": [...]} holding exactly %d inputs.`, task, n, n)),
	}
	retries := opts.MaxRetries
	if retries == 0 {
		retries = 4
	}
	var plan Plan
	err := ruler.AskJSON(ctx, generator, msgs, "autorl_plan", schema,
		ruler.AskOptions{MaxRetries: retries, Timeout: opts.Timeout, Logger: opts.Logger, What: fmt.Sprintf("%d inputs", n)},
		func(content string) (string, error) {
			var p Plan
			if err := json.Unmarshal([]byte(content), &p); err != nil {
				return `Answer with only the JSON object {"system_prompt": ..., "inputs": [...]}.`, fmt.Errorf("the answer is not the JSON object asked for: %v", err)
			}
			if len(p.Inputs) != n {
				return fmt.Sprintf("Answer again with exactly %d inputs.", n), fmt.Errorf("the answer has %d inputs, not %d", len(p.Inputs), n)
			}
			for i, in := range p.Inputs {
				if strings.TrimSpace(in) == "" {
					return "Every input must be non-empty.", fmt.Errorf("input %d is empty", i+1)
				}
			}
			if strings.TrimSpace(p.SystemPrompt) == "" {
				return "The system prompt must be non-empty.", errors.New("the system prompt is empty")
			}
			plan = p
			return "", nil
		})
	if err != nil {
		return Plan{}, fmt.Errorf("autorl: %w", err)
	}
	return plan, nil
}

// Config configures Run. Task, Generator and Judge are required; the other
// zero values are the notebook's defaults. Run rejects negative counts and
// learning rates, and a GroupSize of 1, with an error.
type Config struct {
	// Task describes in plain language what the model should learn.
	Task string
	// Generator writes the inputs and the system prompt; Judge scores the
	// answers (RULER). Both are any OpenAI-compatible endpoint with
	// structured outputs; they may be the same.
	Generator ruler.Judge
	Judge     ruler.Judge

	TrainInputs   int     // training inputs to generate; 0 means 25
	TestInputs    int     // fresh inputs for the before → after comparison; 0 means 10
	GroupsPerStep int     // inputs per training step; 0 means 2
	GroupSize     int     // answers per input, compared by the judge; 0 means 3
	Epochs        int     // passes over the training inputs; 0 means 3
	LearningRate  float64 // 0 means 1e-5
	Seed          int64   // orders the inputs

	// Params carries the sampling settings of every answer (max tokens,
	// temperature); its Model and Messages are set by Run.
	Params openai.ChatCompletionNewParams
	// Plan bounds the generator's answers (PlanOptions).
	Plan PlanOptions
	// Ruler configures the judge (rubric, timeouts, retries, cache).
	Ruler ruler.Options

	// Progress receives one line per phase and step (nil: os.Stderr), and
	// the gather progress bars when it is a terminal; Quiet silences both.
	Progress io.Writer
	Quiet    bool
}

// validate rejects what Run cannot use: an empty task, negative counts,
// a group of one answer (the judge scores an input's answers against each
// other) and a negative or non-finite learning rate. Zero values are left
// for withDefaults.
func (c Config) validate() error {
	if strings.TrimSpace(c.Task) == "" {
		return errors.New("autorl: the task description is empty")
	}
	def := Config{}.withDefaults()
	for _, f := range []struct {
		name string
		v    int
		def  int
	}{
		{"TrainInputs", c.TrainInputs, def.TrainInputs}, {"TestInputs", c.TestInputs, def.TestInputs},
		{"GroupsPerStep", c.GroupsPerStep, def.GroupsPerStep}, {"Epochs", c.Epochs, def.Epochs},
	} {
		if f.v < 0 {
			return fmt.Errorf("autorl: %s = %d: must be >= 0 (0 means %d)", f.name, f.v, f.def)
		}
	}
	if c.GroupSize < 0 || c.GroupSize == 1 {
		return fmt.Errorf("autorl: GroupSize = %d: must be >= 2, the answers the judge compares (0 means %d)", c.GroupSize, def.GroupSize)
	}
	if !(c.LearningRate >= 0) || math.IsInf(c.LearningRate, 0) {
		return fmt.Errorf("autorl: LearningRate = %v: must be > 0 (0 means 1e-5)", c.LearningRate)
	}
	if err := c.Generator.Validate(); err != nil {
		return fmt.Errorf("autorl: Generator: %w", err)
	}
	if err := c.Judge.Validate(); err != nil {
		return fmt.Errorf("autorl: Judge: %w", err)
	}
	return nil
}

func (c Config) withDefaults() Config {
	def := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	def(&c.TrainInputs, 25)
	def(&c.TestInputs, 10)
	def(&c.GroupsPerStep, 2)
	def(&c.GroupSize, 3)
	def(&c.Epochs, 3)
	if c.LearningRate == 0 {
		c.LearningRate = 1e-5
	}
	if c.Progress == nil {
		c.Progress = os.Stderr
	}
	if c.Quiet {
		c.Progress = io.Discard
	}
	return c
}

// Comparison is one test input answered before and after training, and
// the judge's scores of the two answers (judged together, as one group).
type Comparison struct {
	Input                     string
	BeforeAnswer, AfterAnswer string
	Before, After             float64
}

// Result is the outcome of Run.
type Result struct {
	Plan                  Plan // the training plan: system prompt and inputs
	BeforeStep, AfterStep int  // the checkpoints compared
	Tests                 []Comparison
}

// Means returns the mean judge score before and after training over the
// test inputs.
func (r Result) Means() (before, after float64) {
	for _, c := range r.Tests {
		before += c.Before
		after += c.After
	}
	if n := float64(len(r.Tests)); n > 0 {
		before, after = before/n, after/n
	}
	return before, after
}

// WriteTable writes the before → after comparison: one row per test input
// and the means, with wins counted where the trained model scored higher.
func (r Result) WriteTable(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "%-48s  %6s → %-6s\n", fmt.Sprintf("test input (step %d → step %d)", r.BeforeStep, r.AfterStep), "before", "after")
	wins, losses := 0, 0
	for _, c := range r.Tests {
		in := strings.Join(strings.Fields(c.Input), " ")
		if len([]rune(in)) > 48 {
			in = string([]rune(in)[:47]) + "…"
		}
		fmt.Fprintf(&b, "%-48s  %6.2f → %-6.2f\n", in, c.Before, c.After)
		switch {
		case c.After > c.Before:
			wins++
		case c.After < c.Before:
			losses++
		}
	}
	before, after := r.Means()
	fmt.Fprintf(&b, "%-48s  %6.2f → %-6.2f\n", "mean", before, after)
	fmt.Fprintf(&b, "the trained model scored higher on %d of %d inputs, lower on %d\n", wins, len(r.Tests), losses)
	_, err := io.WriteString(w, b.String())
	return err
}

// Run trains model (registered with a backend) for cfg.Task: it generates
// the plan, trains on it with RULER rewards for Epochs passes, starting
// from the model's latest checkpoint, then compares the checkpoint it started from
// with the last one on freshly generated inputs. An error names the phase
// that failed; training steps already taken stay saved.
func Run(ctx context.Context, model *art.TrainableModel, cfg Config) (Result, error) {
	if model == nil {
		return Result{}, errors.New("autorl: nil model (register an art.TrainableModel first)")
	}
	if err := cfg.validate(); err != nil {
		return Result{}, err
	}
	cfg = cfg.withDefaults()
	out := cfg.Progress
	start, err := model.Step(ctx)
	if err != nil {
		return Result{}, fmt.Errorf("autorl: %w", err)
	}
	fmt.Fprintf(out, "autorl: generating %d training inputs and a system prompt\n", cfg.TrainInputs)
	plan, err := GeneratePlan(ctx, cfg.Generator, cfg.Task, cfg.TrainInputs, cfg.Plan)
	if err != nil {
		return Result{}, err
	}
	fmt.Fprintf(out, "autorl: system prompt: %s\n", plan.SystemPrompt)
	client, err := model.OpenAIClient()
	if err != nil {
		return Result{}, fmt.Errorf("autorl: %w", err)
	}
	answer := func(ctx context.Context, input string, step int) (art.Trajectory, error) {
		var t art.Trajectory
		t.AddMessage(art.SystemMsg(plan.SystemPrompt), art.UserMsg(input))
		t.Metadata = map[string]any{"scenario_id": input}
		p := cfg.Params
		p.Model = model.InferenceName(step)
		p.Messages = nil
		_, err := t.Chat(ctx, client, p)
		return t, err
	}
	steps := art.DatasetSteps(len(plan.Inputs), cfg.GroupsPerStep, cfg.Epochs)
	batches, err := art.IterateDataset(plan.Inputs, cfg.GroupsPerStep, cfg.Epochs, 0, cfg.Seed)
	if err != nil {
		return Result{}, fmt.Errorf("autorl: %w", err)
	}
	for batch := range batches {
		groups, err := art.GatherGroups(ctx, batch.Items, cfg.GroupSize, func(ctx context.Context, in string) (art.Trajectory, error) {
			return answer(ctx, in, -1)
		}, art.GatherOptions{
			AfterEach:      ruler.AfterEach(cfg.Judge, cfg.Ruler),
			Quiet:          cfg.Quiet,
			ProgressWriter: cfg.Progress,
			Description:    fmt.Sprintf("step %d/%d", batch.Step+1, steps),
		})
		if err != nil {
			return Result{}, fmt.Errorf("autorl: step %d/%d: %w", batch.Step+1, steps, err)
		}
		res, err := model.Train(ctx, groups, art.TrainConfig{LearningRate: cfg.LearningRate})
		if err != nil {
			return Result{}, fmt.Errorf("autorl: train step %d/%d: %w", batch.Step+1, steps, err)
		}
		fmt.Fprintf(out, "autorl: step %d/%d (epoch %d): reward %.3f, loss %.4f%s\n", batch.Step+1, steps, batch.Epoch+1,
			meanReward(groups), res.Metrics["loss/train"], skipped(res))
	}
	end, err := model.Step(ctx)
	if err != nil {
		return Result{}, fmt.Errorf("autorl: %w", err)
	}
	fmt.Fprintf(out, "autorl: generating %d fresh test inputs\n", cfg.TestInputs)
	test, err := GeneratePlan(ctx, cfg.Generator, cfg.Task, cfg.TestInputs, cfg.Plan)
	if err != nil {
		return Result{}, err
	}
	result := Result{Plan: plan, BeforeStep: start, AfterStep: end}
	var pairs []art.GroupSpec
	for _, in := range test.Inputs {
		pairs = append(pairs, art.GroupSpec{Rollouts: []art.Rollout{
			func(ctx context.Context) (art.Trajectory, error) { return answer(ctx, in, start) },
			func(ctx context.Context) (art.Trajectory, error) { return answer(ctx, in, end) },
		}})
	}
	groups, err := art.GatherTrajectoryGroups(ctx, pairs, art.GatherOptions{Quiet: cfg.Quiet, ProgressWriter: cfg.Progress, Description: "before → after"})
	if err != nil {
		return Result{}, fmt.Errorf("autorl: answer the test inputs: %w", err)
	}
	scored, err := ruler.ScoreGroups(ctx, groups, cfg.Judge, cfg.Ruler)
	if err != nil {
		return Result{}, fmt.Errorf("autorl: judge the test answers: %w", err)
	}
	// A group the judge dropped (Ruler.SwallowErrors) is missing from
	// scored, so each comparison takes its input from its answers, not
	// from its position.
	for i, g := range scored {
		if len(g.Trajectories) != 2 {
			return Result{}, fmt.Errorf("autorl: test answers %d: %d of them; want 2", i+1, len(g.Trajectories))
		}
		b, a := g.Trajectories[0], g.Trajectories[1]
		in, _ := b.Metadata["scenario_id"].(string)
		result.Tests = append(result.Tests, Comparison{Input: in, BeforeAnswer: lastAnswer(b), AfterAnswer: lastAnswer(a), Before: b.Reward, After: a.Reward})
	}
	return result, nil
}

func meanReward(groups []art.TrajectoryGroup) float64 {
	var sum float64
	var n int
	for _, g := range groups {
		for _, t := range g.Trajectories {
			sum += t.Reward
			n++
		}
	}
	if n == 0 {
		return 0
	}
	return sum / float64(n)
}

func skipped(res art.TrainResult) string {
	if res.Skipped {
		return " (nothing trained: " + res.SkipReason + ")"
	}
	return ""
}

// lastAnswer is the text of the trajectory's last sampled turn.
func lastAnswer(t art.Trajectory) string {
	for i := len(t.MessagesAndChoices) - 1; i >= 0; i-- {
		if c := t.MessagesAndChoices[i].Choice; c != nil {
			return c.Message.Content.String()
		}
	}
	return ""
}
