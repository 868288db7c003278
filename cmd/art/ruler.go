package main

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/artgo/art"
	"github.com/artgo/art/ruler"
)

// newRulerCmd returns `art ruler`, which scores logged trajectories with a
// RULER judge, so a judge can be checked before training with it.
func newRulerCmd() *cobra.Command {
	var judgeSpec, baseURL, keyEnv, rubricFile string
	var asJSON, noCache bool
	var timeout time.Duration
	var maxExplanation, maxTokens int
	cmd := &cobra.Command{
		Use:   "ruler FILE.parquet --judge PROVIDER/MODEL",
		Short: "Score logged trajectories with a RULER judge and print the scores and explanations",
		Long: `ruler reads a trajectories parquet file that model.Log wrote
(<model dir>/trajectories/<split>/<step>.parquet), scores each group with an
LLM judge as RULER does during training, and prints, per group, each
trajectory's logged reward beside the judge's score and explanation. The
parquet log keeps only main histories, so additional histories are not
judged here.

The judge is a LiteLLM-style provider/model string (openai/o3,
openrouter/..., anthropic/..., ollama/..., vllm/...) with the key from the
provider's usual variable (OPENAI_API_KEY, ...), or any OpenAI-compatible
endpoint with --base-url (an "art serve" model: --judge judge@0 --base-url
http://127.0.0.1:7999/v1). Answers are cached on disk (--no-cache to ask
again); each judge call is bounded by --timeout.`,
		Example: `  art ruler .art/p/models/agent/trajectories/val/0010.parquet --judge openai/o4-mini
  art ruler run.parquet --judge judge@0 --base-url http://127.0.0.1:7999/v1 --api-key-env ART_API_KEY --json`,
		Args: oneArg(trajectoriesFileArg),
		RunE: func(cmd *cobra.Command, args []string) error {
			if judgeSpec == "" {
				return fmt.Errorf("ruler: --judge is required (for example openai/o4-mini)")
			}
			// ruler.Options reads a zero timeout as its default, which a
			// flag given 0 must not silently get.
			if err := atLeast("ruler", intFlag{"--max-explanation", maxExplanation, 0}, intFlag{"--max-tokens", maxTokens, 0}); err != nil {
				return err
			}
			if timeout <= 0 {
				return fmt.Errorf("ruler: --timeout must be > 0, got %v", timeout)
			}
			judge, err := judgeFromFlags(judgeSpec, baseURL, keyEnv, "--api-key-env")
			if err != nil {
				if strings.HasPrefix(err.Error(), "ruler: ") { // package ruler's errors name themselves
					return err
				}
				return fmt.Errorf("ruler: %w", err)
			}
			judge.MaxTokens = maxTokens
			opts := ruler.Options{Timeout: timeout, NoCache: noCache, Stats: &ruler.Stats{}, MaxExplanation: maxExplanation}
			if rubricFile != "" {
				b, err := os.ReadFile(rubricFile)
				if err != nil {
					return fmt.Errorf("ruler: --rubric: %w", err)
				}
				opts.Rubric = strings.TrimSpace(string(b))
			}
			groups, err := art.ReadTrajectoryGroups(args[0])
			if err != nil {
				return err
			}
			if len(groups) == 0 {
				return fmt.Errorf("ruler: %s holds no trajectories", args[0])
			}
			scored, err := ruler.ScoreGroups(cmd.Context(), groups, judge, opts)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			for gi, g := range scored {
				if asJSON {
					type row struct {
						Reward      float64 `json:"reward"`
						Score       float64 `json:"score"`
						Explanation string  `json:"explanation"`
					}
					rec := struct {
						Group        int   `json:"group"`
						Trajectories []row `json:"trajectories"`
					}{Group: gi}
					for _, t := range g.Trajectories {
						rec.Trajectories = append(rec.Trajectories, row{t.Metrics["independent_reward"], t.Reward, explanation(t)})
					}
					if err := json.NewEncoder(out).Encode(rec); err != nil {
						return err
					}
					continue
				}
				fmt.Fprintf(out, "group %d (%d trajectories)\n", gi, len(g.Trajectories))
				for ti, t := range g.Trajectories {
					fmt.Fprintf(out, "  #%d  reward %7.3f  score %.3f  %s\n", ti+1, t.Metrics["independent_reward"]+0, t.Reward+0, explanation(t)) // +0: a -0 prints as 0.000
				}
			}
			m := opts.Stats.Take("eval")
			fmt.Fprintf(cmd.ErrOrStderr(), "%d groups scored by %s: %.0f judge calls (%.0f retries, %.0f from the cache), %.0f prompt + %.0f completion tokens\n",
				len(scored), judgeSpec, m["ruler/judge_calls"], m["ruler/judge_retries"], m["ruler/cache_hits"], m["ruler/judge_prompt_tokens"], m["ruler/judge_completion_tokens"])
			if usd, ok := m["costs/eval/judge/ruler"]; ok {
				fmt.Fprintf(cmd.ErrOrStderr(), "judge cost: $%.4f (list prices)\n", usd)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&judgeSpec, "judge", "", "the judge: provider/model, or a model id with --base-url")
	cmd.Flags().StringVar(&baseURL, "base-url", "", "the judge's OpenAI-compatible base URL (…/v1), overriding the provider's")
	cmd.Flags().StringVar(&keyEnv, "api-key-env", "", "the environment variable holding the judge's API key (default: the provider's)")
	cmd.Flags().StringVar(&rubricFile, "rubric", "", "a file holding the rubric (default: RULER's)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print one JSON object per group")
	cmd.Flags().BoolVar(&noCache, "no-cache", false, "ask the judge again instead of reusing cached answers")
	cmd.Flags().DurationVar(&timeout, "timeout", 3*time.Minute, "bound on each judge call")
	cmd.Flags().IntVar(&maxExplanation, "max-explanation", 0, "bound each explanation's length in the answer's schema (small local judges; 0: none)")
	cmd.Flags().IntVar(&maxTokens, "max-tokens", 0, "bound the judge's answer in tokens (0: the endpoint's default)")
	return cmd
}

// explanation is the judge's explanation RULER logged on t.
func explanation(t art.Trajectory) string {
	for i := len(t.Logs) - 1; i >= 0; i-- {
		if e, ok := strings.CutPrefix(t.Logs[i], "RULER explanation: "); ok {
			return e
		}
	}
	return ""
}

// judgeFromFlags builds a judge-style endpoint from a provider/model spec,
// an optional base URL and the name of an environment variable holding
// its key (keyFlag names that flag in errors).
func judgeFromFlags(spec, baseURL, keyEnv, keyFlag string) (ruler.Judge, error) {
	key := ""
	if keyEnv != "" {
		if key = os.Getenv(keyEnv); key == "" {
			return ruler.Judge{}, fmt.Errorf("%s %s: the variable is empty or unset", keyFlag, keyEnv)
		}
	}
	return ruler.NewJudge(spec, baseURL, key)
}
