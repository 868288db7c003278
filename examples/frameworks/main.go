// Command frameworks trains an agent written with an existing Go agent
// framework, unchanged: the framework's HTTP client is an art.Recorder,
// which records every chat completion the agent makes (token ids and
// logprobs included) into a trajectory, and GRPO trains on those.
//
//	go run ./examples/frameworks --framework langchaingo --base-model DIR [--steps 10]
//	go run ./examples/frameworks --framework go-openai --base-model DIR
//
// The agent answers "What is the weather in <city>?" with a get_weather
// tool, in two turns: the model's call, the tool's answer, the model's
// reply. The reward is 1 for calling get_weather with the city, otherwise
// the share of the city's letters that the reply contains (a graded signal
// a random model already varies on). The model is served by the in-process
// backend on loopback; checkpoints and logs go to <path>/examples/models/
// frameworks-<framework>/.
//
// Only the client construction differs between frameworks (see
// rollout_langchaingo.go and rollout_goopenai.go): give the framework
// recorder.Client() as its HTTP client, run the agent, take
// recorder.Trajectory().
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"time"

	"github.com/artgo/art"
	"github.com/artgo/art/backend/local"
)

// config is the command line.
type config struct {
	Framework   string
	BaseModel   string
	Path        string
	Steps       int
	Groups      int
	GroupSize   int
	MaxTokens   int
	Seed        uint64
	CallTimeout time.Duration
	Quiet       bool
}

func parseFlags(args []string, errOut io.Writer) (config, error) {
	var c config
	fs := flag.NewFlagSet("frameworks", flag.ContinueOnError)
	fs.SetOutput(errOut)
	fs.StringVar(&c.Framework, "framework", "langchaingo", "the agent framework: "+strings.Join(frameworkNames(), " or "))
	fs.StringVar(&c.BaseModel, "base-model", "", "the base model folder (required)")
	fs.StringVar(&c.Path, "path", ".art", "the data folder")
	fs.IntVar(&c.Steps, "steps", 10, "train until this step")
	fs.IntVar(&c.Groups, "groups", 2, "questions per step")
	fs.IntVar(&c.GroupSize, "group-size", 4, "rollouts per question")
	fs.IntVar(&c.MaxTokens, "max-tokens", 64, "tokens per model turn")
	fs.Uint64Var(&c.Seed, "seed", 1, "seed of the questions and the trainer")
	fs.DurationVar(&c.CallTimeout, "call-timeout", 2*time.Minute, "bound on one model call")
	fs.BoolVar(&c.Quiet, "quiet", false, "no progress bars")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if c.BaseModel == "" {
		return c, errors.New("--base-model is required (a Hugging Face model folder, or one from `art init-model`)")
	}
	if _, ok := frameworks[c.Framework]; !ok {
		return c, fmt.Errorf("--framework %q: use %s", c.Framework, strings.Join(frameworkNames(), " or "))
	}
	if c.Steps < 0 || c.Groups < 1 || c.GroupSize < 2 || c.MaxTokens < 1 {
		return c, errors.New("--steps must be >= 0, --groups >= 1, --group-size >= 2 and --max-tokens >= 1")
	}
	return c, nil
}

// agent runs the weather agent once with a framework whose HTTP client is
// hc, and returns the model's final reply and the arguments of its
// get_weather call ("" when it made none).
type agent func(ctx context.Context, hc *http.Client, ep art.Endpoint, question string, maxTokens int) (reply, callArgs string, err error)

// frameworks are the agents, one per framework.
var frameworks = map[string]agent{
	"langchaingo": langchaingoAgent,
	"go-openai":   goOpenAIAgent,
}

func frameworkNames() []string { return []string{"langchaingo", "go-openai"} }

var cities = []string{"Paris", "Lima", "Oslo", "Cairo", "Tokyo", "Quito", "Rome", "Dakar"}

const weatherParams = `{"type":"object","properties":{"city":{"type":"string","description":"the city"}},"required":["city"]}`

// weather is the tool: a fixed forecast per city.
func weather(city string) string {
	return fmt.Sprintf("%s: sunny, %d°C", city, 10+len(city)*2)
}

// rollout runs the agent through a Recorder and grades the trajectory.
func rollout(ctx context.Context, run agent, ep art.Endpoint, city string, cfg config) (art.Trajectory, error) {
	ctx, cancel := context.WithTimeout(ctx, cfg.CallTimeout)
	defer cancel()
	rec := art.NewRecorder(nil)
	reply, args, err := run(ctx, rec.Client(), ep, "What is the weather in "+city+"?", cfg.MaxTokens)
	if err != nil {
		return art.Trajectory{}, err
	}
	if err := rec.Err(); err != nil {
		return art.Trajectory{}, err
	}
	tr := rec.Trajectory()
	tr.Reward = grade(city, reply, args)
	tr.Metrics = map[string]float64{"called_tool": b2f(args != "")}
	return tr, nil
}

// grade is 1 for a get_weather call naming the city, else the share of the
// city's letters found in the reply.
func grade(city, reply, callArgs string) float64 {
	if callArgs != "" && strings.Contains(strings.ToLower(callArgs), strings.ToLower(city)) {
		return 1
	}
	found := 0
	for _, r := range strings.ToLower(city) {
		if strings.ContainsRune(strings.ToLower(reply), r) {
			found++
		}
	}
	return float64(found) / float64(len(city)) / 2
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// train runs the loop: gather groups of rollouts through the framework,
// train a step, log it; resumed from the model's latest step.
func train(ctx context.Context, cfg config, out io.Writer) error {
	backend := local.New(local.Options{Quiet: cfg.Quiet, Seed: cfg.Seed})
	defer backend.Close()
	model := &art.TrainableModel{Model: art.Model{Name: "frameworks-" + cfg.Framework, Project: "examples", BasePath: cfg.Path}, BaseModel: cfg.BaseModel}
	if err := model.Register(ctx, backend); err != nil {
		return err
	}
	run := frameworks[cfg.Framework]
	start, err := model.Step(ctx)
	if err != nil {
		return err
	}
	for step := start; step < cfg.Steps; step++ {
		questions := make([]string, cfg.Groups)
		for i := range questions {
			questions[i] = cities[(step*cfg.Groups+i+int(cfg.Seed))%len(cities)]
		}
		ep := art.Endpoint{BaseURL: model.InferenceBaseURL, APIKey: model.InferenceAPIKey, Model: model.InferenceName(step)}
		groups, err := art.GatherGroups(ctx, questions, cfg.GroupSize, func(ctx context.Context, city string) (art.Trajectory, error) {
			return rollout(ctx, run, ep, city, cfg)
		}, art.GatherOptions{Quiet: cfg.Quiet, Description: fmt.Sprintf("step %d", step)})
		if err != nil {
			return err
		}
		res, err := model.Train(ctx, groups, art.TrainConfig{LearningRate: 1e-4}, art.LogGroups(groups))
		if err != nil {
			return err
		}
		var sum float64
		var n int
		for _, g := range groups {
			for _, t := range g.Trajectories {
				sum += t.Reward
				n++
			}
		}
		fmt.Fprintf(out, "step %d: reward %.3f over %d rollouts (%s)\n", res.Step, sum/float64(max(n, 1)), n, cfg.Framework)
	}
	return nil
}

func main() {
	cfg, err := parseFlags(os.Args[1:], os.Stderr)
	if errors.Is(err, flag.ErrHelp) {
		return
	}
	if err != nil {
		log.Fatal(err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := train(ctx, cfg, os.Stdout); err != nil {
		log.Fatal(err)
	}
}
