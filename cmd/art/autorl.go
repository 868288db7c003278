package main

import (
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/spf13/cobra"

	"github.com/artgo/art"
	"github.com/artgo/art/autorl"
	"github.com/artgo/art/backend/local"
	"github.com/artgo/art/ruler"
)

// newAutoRLCmd returns `art autorl`, which trains a model for a task
// described in one sentence (package autorl).
func newAutoRLCmd() *cobra.Command {
	var (
		baseModel, path, project, name                string
		judgeSpec, judgeURL, judgeKeyEnv              string
		genSpec, genURL, genKeyEnv                    string
		trainInputs, testInputs, groupsPerStep, group int
		epochs, maxTokens, maxLength, maxExplanation  int
		judgeMaxTokens                                int
		learningRate                                  float64
		timeout                                       time.Duration
		seed                                          int64
		quiet                                         bool
	)
	cmd := &cobra.Command{
		Use:   `autorl "TASK DESCRIPTION" --base-model DIR --judge PROVIDER/MODEL`,
		Short: "Train a model for a task described in plain language: generated inputs, RULER rewards, a before → after table",
		Long: `autorl trains a LoRA adapter on --base-model for the task you describe, with
no data and no reward function, as OpenPipe ART's AutoRL: the generator
writes training inputs and a system prompt, the model answers each input
--group-size times, the RULER judge scores the answers relative to each
other, and GRPO trains on the scores for --epochs passes. Then the model
before and after training answers freshly generated inputs side by side,
the judge scores each pair, and a before → after table is printed.

The judge and the generator are LiteLLM-style provider/model strings
(openai/o4-mini, openrouter/..., ollama/..., vllm/...) with the key from the
provider's usual variable, or any OpenAI-compatible endpoint with a base
URL (an "art serve" model: --judge judge@0 --judge-base-url
http://127.0.0.1:7999/v1). The generator defaults to the judge. Checkpoints
and logs go under --path/--project/models/--name.`,
		Example: `  art autorl "Answer questions about a bike shop's opening hours" --base-model ./Qwen2.5-0.5B-Instruct --judge openai/o4-mini
  art autorl "Summarise a support ticket in one line" --base-model ./model --judge judge@0 --judge-base-url http://127.0.0.1:7999/v1`,
		Args: oneArg(`"TASK", the task described in one quoted argument`),
		RunE: func(cmd *cobra.Command, args []string) error {
			if baseModel == "" || judgeSpec == "" {
				return fmt.Errorf("autorl: --base-model and --judge are required")
			}
			if strings.TrimSpace(args[0]) == "" {
				return fmt.Errorf("autorl: the task description is empty: describe in a sentence what the model should learn")
			}
			// Checked before the model loads. The library reads 0 as its
			// default, which a flag given 0 must not silently get.
			if err := atLeast("autorl",
				intFlag{"--train-inputs", trainInputs, 1}, intFlag{"--test-inputs", testInputs, 1}, intFlag{"--groups-per-step", groupsPerStep, 1},
				intFlag{"--epochs", epochs, 1}, intFlag{"--max-tokens", maxTokens, 1},
				intFlag{"--judge-max-tokens", judgeMaxTokens, 0}, intFlag{"--max-input-length", maxLength, 0}, intFlag{"--max-explanation", maxExplanation, 0}); err != nil {
				return err
			}
			if group < 2 {
				return fmt.Errorf("autorl: --group-size must be >= 2 (the judge scores an input's answers against each other), got %d", group)
			}
			if !(learningRate > 0) || math.IsInf(learningRate, 0) {
				return fmt.Errorf("autorl: --learning-rate must be > 0, got %v", learningRate)
			}
			if timeout <= 0 {
				return fmt.Errorf("autorl: --timeout must be > 0, got %v", timeout)
			}
			judge, err := judgeFromFlags(judgeSpec, judgeURL, judgeKeyEnv, "--judge-api-key-env")
			if err != nil {
				return fmt.Errorf("autorl: --judge: %w", err)
			}
			gen := judge
			if genSpec != "" {
				if gen, err = judgeFromFlags(genSpec, genURL, genKeyEnv, "--generator-api-key-env"); err != nil {
					return fmt.Errorf("autorl: --generator: %w", err)
				}
			}
			if judgeMaxTokens > 0 {
				judge.MaxTokens, gen.MaxTokens = judgeMaxTokens, judgeMaxTokens
			}
			ctx := cmd.Context()
			b := local.New(local.Options{Path: path, Quiet: quiet})
			defer b.Close()
			model := &art.TrainableModel{Model: art.Model{Name: name, Project: project, BasePath: path}, BaseModel: baseModel}
			if err := model.Register(ctx, b); err != nil {
				return commandError("autorl", err)
			}
			res, err := autorl.Run(ctx, model, autorl.Config{
				Task: args[0], Generator: gen, Judge: judge,
				TrainInputs: trainInputs, TestInputs: testInputs, GroupsPerStep: groupsPerStep, GroupSize: group,
				Epochs: epochs, LearningRate: learningRate, Seed: seed,
				Params:   openai.ChatCompletionNewParams{MaxTokens: openai.Int(int64(maxTokens))},
				Plan:     autorl.PlanOptions{MaxLength: maxLength, Timeout: timeout},
				Ruler:    ruler.Options{Timeout: timeout, MaxExplanation: maxExplanation},
				Progress: cmd.ErrOrStderr(), Quiet: quiet,
			})
			if err != nil {
				return commandError("autorl", err)
			}
			return res.WriteTable(cmd.OutOrStdout())
		},
	}
	f := cmd.Flags()
	f.StringVar(&baseModel, "base-model", "", "the Hugging Face model folder to train a LoRA adapter on")
	f.StringVar(&path, "path", ".art", "where checkpoints and logs go")
	f.StringVar(&project, "project", "autorl", "the project name")
	f.StringVar(&name, "name", "autorl", "the model name (its checkpoints are served as NAME@STEP)")
	f.StringVar(&judgeSpec, "judge", "", "the RULER judge: provider/model, or a model id with --judge-base-url")
	f.StringVar(&judgeURL, "judge-base-url", "", "the judge's OpenAI-compatible base URL (…/v1)")
	f.StringVar(&judgeKeyEnv, "judge-api-key-env", "", "the environment variable holding the judge's API key (default: the provider's)")
	f.StringVar(&genSpec, "generator", "", "the model writing inputs and the system prompt (default: the judge)")
	f.StringVar(&genURL, "generator-base-url", "", "the generator's OpenAI-compatible base URL (…/v1)")
	f.StringVar(&genKeyEnv, "generator-api-key-env", "", "the environment variable holding the generator's API key")
	f.IntVar(&trainInputs, "train-inputs", 25, "training inputs to generate")
	f.IntVar(&testInputs, "test-inputs", 10, "fresh inputs for the before → after table")
	f.IntVar(&groupsPerStep, "groups-per-step", 2, "inputs per training step")
	f.IntVar(&group, "group-size", 3, "answers per input, compared by the judge")
	f.IntVar(&epochs, "epochs", 3, "passes over the training inputs")
	f.Float64Var(&learningRate, "learning-rate", 1e-5, "the learning rate")
	f.IntVar(&maxTokens, "max-tokens", 256, "bound on each answer of the trained model, in tokens")
	f.IntVar(&judgeMaxTokens, "judge-max-tokens", 0, "bound on the judge's and generator's answers in tokens (0: the endpoint's default)")
	f.IntVar(&maxLength, "max-input-length", 0, "bound each generated input's length in the schema (small local generators; 0: none)")
	f.IntVar(&maxExplanation, "max-explanation", 0, "bound each judge explanation's length in the schema (small local judges; 0: none)")
	f.DurationVar(&timeout, "timeout", 5*time.Minute, "bound on each judge and generator call")
	f.Int64Var(&seed, "seed", 0, "orders the training inputs")
	f.BoolVar(&quiet, "quiet", false, "no progress lines or bars")
	return cmd
}
