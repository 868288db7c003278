// Command mcp trains an agent on a real MCP server's tools, end to end, as
// OpenPipe ART's MCP•RL: the knowledge-graph server
// @modelcontextprotocol/server-memory from npm (installed by
// scripts/install-mcp-servers.sh), one server per concurrent rollout, its
// graph file emptied before each, so each episode starts empty and its
// reward is read from the server's resulting state (see grade): 1 when the
// graph holds the person the task names with the fact as an observation,
// 0.5 when it holds the person without the fact, 0 otherwise. Calling
// complete_task earns nothing by itself: only what was stored counts.
//
//	go run ./examples/mcp --base-model DIR [--steps 50] [--eval N]
//
// The rollout is mcprl.Agent: the server's tools as OpenAI function tools
// plus complete_task, up to --max-turns turns, tool errors fed back to the
// model, every turn recorded as a trainable Choice. The tasks are built
// from --seed ("Remember that Ada likes tea.", 24 people × 12 facts); the
// held-out tasks are the third of the person–fact pairs that no training
// task or teacher transcript uses. With --generator (a provider/model or
// an endpoint, as RULER judges are given) the tasks are generated from the
// server's tools by mcprl.Generate instead, and rewarded by the --judge
// (RULER) rather than by the graph. --eval N runs N held-out tasks before
// and after training (and every --eval-every steps) and prints the mean
// reward with its paired standard error (--report writes the run's
// summary). Every held-out episode samples with its own seed, the same
// before and after; --eval-repeats R runs each task R times, with R seeds,
// and pairs the mean of its episodes before and after, so that the error
// reflects the policy more than the luck of one sample per task.
// Checkpoints and logs go to <path>/<project>/models/<name>/.
//
// A tiny base that can use the tools is built from teacher transcripts:
// --write-teacher FILE --teacher N writes N episodes (the real server's
// answers; with --sft-noise P a fraction P of them err) for `art pretrain`,
// as bench/learning does (-examples mcp). The teacher makes both calls in
// one turn (create_entities, then complete_task), the shortest episode
// that does the task, so that a byte-level model learns it in minutes.
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
	"math/rand/v2"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"

	"github.com/openai/openai-go/v3"

	"github.com/artgo/art"
	"github.com/artgo/art/backend/local"
	"github.com/artgo/art/experiment"
	"github.com/artgo/art/mcprl"
	"github.com/artgo/art/ruler"
)

type config struct {
	experiment.Flags
	serverDir            string
	maxTurns, maxTokens  int
	system               string
	generator, judge     string
	generatorURL, keyEnv string
	tools                string
	writeTeacher         string
	teacher              int
	sftNoise             float64
	evalEvery            int
	evalRepeats          int
}

func parseFlags(args []string, stderr io.Writer) (config, error) {
	c := config{Flags: experiment.Defaults("mcp")}
	fs := flag.NewFlagSet("mcp", flag.ContinueOnError)
	fs.SetOutput(stderr)
	c.Register(fs)
	fs.StringVar(&c.serverDir, "server-dir", ".assets/mcp-servers", "the folder scripts/install-mcp-servers.sh installed the servers in")
	fs.StringVar(&c.tools, "tools", "", "offer only these tools, comma-separated (default: all the server's; a small model's context may not hold them all)")
	fs.IntVar(&c.maxTurns, "max-turns", 4, "bound on the agent's turns per task")
	fs.IntVar(&c.maxTokens, "max-tokens", 256, "bound on each turn, in tokens")
	fs.StringVar(&c.system, "system", "", "the agent's system prompt (default: mcprl.DefaultSystemPrompt)")
	fs.StringVar(&c.generator, "generator", "", "generate the tasks with this model (provider/model, or a model id with --generator-base-url) and reward with --judge")
	fs.StringVar(&c.generatorURL, "generator-base-url", "", "the generator's and judge's OpenAI-compatible base URL")
	fs.StringVar(&c.keyEnv, "api-key-env", "", "the environment variable holding the generator's and judge's API key (default: the provider's)")
	fs.StringVar(&c.judge, "judge", "", "the RULER judge for generated tasks (default: the generator)")
	fs.StringVar(&c.writeTeacher, "write-teacher", "", "write --teacher teacher transcripts to this JSONL file (for art pretrain) and exit")
	fs.IntVar(&c.teacher, "teacher", 2000, "transcripts --write-teacher writes")
	fs.Float64Var(&c.sftNoise, "sft-noise", 0, "fraction of teacher transcripts that err: half leave the fact out, half store nothing")
	fs.IntVar(&c.evalEvery, "eval-every", 0, "also evaluate the held-out tasks every this many steps (0: only before and after)")
	fs.IntVar(&c.evalRepeats, "eval-repeats", 1, "run each held-out task this many times, each with its own sampling seed (the same seeds before and after); the paired standard error is over tasks")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	switch {
	case c.writeTeacher != "" && c.teacher < 1:
		return c, errors.New("--teacher must be at least 1")
	case !(c.sftNoise >= 0 && c.sftNoise <= 1):
		return c, errors.New("--sft-noise must be in [0, 1]")
	case c.evalEvery < 0:
		return c, errors.New("--eval-every must be >= 0")
	case c.evalRepeats < 1:
		return c, errors.New("--eval-repeats must be at least 1")
	case c.generator == "" && c.Eval > len(heldOutPairs()):
		return c, fmt.Errorf("--eval %d: there are only %d held-out tasks (person–fact pairs never trained on)", c.Eval, len(heldOutPairs()))
	}
	return c, c.Check(c.writeTeacher == "")
}

func main() {
	cfg, err := parseFlags(os.Args[1:], os.Stderr)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return
		}
		log.Fatal(err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if cfg.writeTeacher != "" {
		err = writeTeacher(ctx, cfg, os.Stdout)
	} else {
		err = train(ctx, cfg, os.Stdout)
	}
	if err != nil {
		log.Fatal(err)
	}
}

// task is one training task and what the graph must hold after it.
type task struct {
	Text         string
	Person, Fact string // empty for generated tasks (judged by RULER)
	// Seed seeds every request of a held-out episode; 0 leaves training
	// rollouts to the seeds the gather gives them.
	Seed int64
}

var (
	people = []string{"Ada", "Grace", "Alan", "Edsger", "Barbara", "Donald", "Margaret", "Ken", "Frances", "John", "Radia", "Niklaus",
		"Tony", "Leslie", "Alonzo", "Kurt", "Emmy", "Sophie", "Hedy", "Claude", "Linus", "Dennis", "Bjarne", "Guido"}
	facts = []string{"likes tea", "owns a red bike", "lives in Paris", "plays chess", "speaks Welsh", "keeps bees", "runs marathons",
		"collects stamps", "sings opera", "grows roses", "knits socks", "rides horses"}
)

// pair is a person and a fact, as indexes into people and facts.
type pair struct{ person, fact int }

// isHeldOut says whether a pair is kept for evaluation: a third of them,
// spread so that every person and every fact also appears in training
// pairs. The agent must copy names and facts it has seen, but never this
// combination.
func (p pair) isHeldOut() bool { return (p.person+p.fact)%3 == 0 }

func (p pair) task() task {
	return task{Text: fmt.Sprintf("Remember that %s %s.", people[p.person], facts[p.fact]), Person: people[p.person], Fact: facts[p.fact]}
}

// pairs returns the pairs that are (held) or are not held out.
func pairs(held bool) []pair {
	var out []pair
	for i := range people {
		for j := range facts {
			if p := (pair{i, j}); p.isHeldOut() == held {
				out = append(out, p)
			}
		}
	}
	return out
}

func heldOutPairs() []pair { return pairs(true) }

// makeTasks draws n training tasks (never a held-out pair) from seed.
func makeTasks(n int, seed uint64) []task {
	r := rand.New(rand.NewPCG(seed, 1))
	train := pairs(false)
	out := make([]task, n)
	for i := range out {
		out[i] = train[r.IntN(len(train))].task()
	}
	return out
}

// heldOutTasks returns n distinct held-out tasks in an order drawn from
// seed (n is at most len(heldOutPairs())).
func heldOutTasks(n int, seed uint64) []task {
	held := heldOutPairs()
	rand.New(rand.NewPCG(seed, 2)).Shuffle(len(held), func(i, j int) { held[i], held[j] = held[j], held[i] })
	out := make([]task, min(n, len(held)))
	for i := range out {
		out[i] = held[i].task()
	}
	return out
}

// evalEpisodes returns the held-out episodes: each task repeats times,
// each episode with its own sampling seed drawn from seed (all tasks once,
// then all again, so that the first len(held) are the episodes of one
// repeat). Seeds that differ from task to task keep the episodes
// independent: with one seed for all, every episode would draw the same
// random numbers at the same positions of its reply, and the tasks' names
// sit at the same positions.
func evalEpisodes(held []task, repeats int, seed uint64) []task {
	r := rand.New(rand.NewPCG(seed, 3))
	out := make([]task, 0, len(held)*repeats)
	for range repeats {
		for _, t := range held {
			t.Seed = 1 + r.Int64N(math.MaxInt64-1) // never 0: unseeded
			out = append(out, t)
		}
	}
	return out
}

// setup finds the installed memory server and lists the tools offered.
func setup(ctx context.Context, cfg config, dir string) (*memoryPool, []mcprl.Tool, error) {
	script := filepath.Join(cfg.serverDir, "node_modules", "@modelcontextprotocol", "server-memory", "dist", "index.js")
	if _, err := os.Stat(script); err != nil {
		return nil, nil, fmt.Errorf("the memory server is not installed: run scripts/install-mcp-servers.sh (%w)", err)
	}
	pool := &memoryPool{script: script, dir: dir, opts: mcprl.Options{CallTimeout: cfg.CallTimeout}}
	srv, err := pool.get(ctx)
	if err != nil {
		return nil, nil, err
	}
	tools, err := srv.Tools(ctx)
	pool.put(srv, err == nil)
	if err != nil {
		pool.close()
		return nil, nil, err
	}
	if tools, err = selectTools(tools, cfg.tools); err != nil {
		pool.close()
		return nil, nil, err
	}
	return pool, tools, nil
}

// writeTeacher writes cfg.teacher teacher transcripts of training tasks as
// JSONL, one art.Trajectory per line, for `art pretrain`.
func writeTeacher(ctx context.Context, cfg config, out io.Writer) error {
	tmp, err := os.MkdirTemp("", "art-mcp-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	pool, tools, err := setup(ctx, cfg, tmp)
	if err != nil {
		return err
	}
	defer pool.close()
	trajs, err := teacherTranscripts(ctx, pool, tools, makeTasks(cfg.teacher, cfg.Seed), cfg.sftNoise, cfg.Seed, cfg.system)
	if err != nil {
		return err
	}
	if err := experiment.WriteTranscripts(cfg.writeTeacher, trajs); err != nil {
		return err
	}
	fmt.Fprintf(out, "wrote %d teacher transcripts to %s\n", len(trajs), cfg.writeTeacher)
	return nil
}

func train(ctx context.Context, cfg config, out io.Writer) error {
	tmp, err := os.MkdirTemp("", "art-mcp-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	pool, tools, err := setup(ctx, cfg, tmp)
	if err != nil {
		return err
	}
	defer pool.close()

	b := local.New(local.Options{Path: cfg.Path, Quiet: cfg.Quiet, Seed: cfg.Seed})
	defer b.Close()
	model := &art.TrainableModel{Model: art.Model{Name: cfg.Name, Project: cfg.Project, BasePath: cfg.Path}, BaseModel: cfg.BaseModel}
	if err := model.Register(ctx, b); err != nil {
		return err
	}
	client, err := model.OpenAIClient()
	if err != nil {
		return err
	}

	// The held-out tasks are person–fact pairs that neither the training
	// tasks nor the teacher's transcripts (the first of the same seed's
	// training tasks) ever use.
	train, held := makeTasks(cfg.Groups*cfg.Steps, cfg.Seed), heldOutTasks(cfg.Eval, cfg.Seed)
	var judge ruler.Judge
	if cfg.generator != "" {
		key := ""
		if cfg.keyEnv != "" {
			key = os.Getenv(cfg.keyEnv)
		}
		gen, err := ruler.NewJudge(cfg.generator, cfg.generatorURL, key)
		if err != nil {
			return err
		}
		judge = gen
		if cfg.judge != "" {
			if judge, err = ruler.NewJudge(cfg.judge, cfg.generatorURL, key); err != nil {
				return err
			}
		}
		scenarios, err := mcprl.Generate(ctx, gen, tools, mcprl.GenerateOptions{Count: len(train) + len(held)})
		if err != nil {
			return err
		}
		fmt.Fprintln(out, scenarios)
		first, rest := scenarios.Split(len(train))
		train, held = tasksOf(first), tasksOf(rest)
	}

	rollout := func(step int) func(context.Context, task) (art.Trajectory, error) {
		return func(ctx context.Context, t task) (art.Trajectory, error) {
			srv, err := pool.get(ctx)
			if err != nil {
				return art.Trajectory{}, err
			}
			params := openai.ChatCompletionNewParams{MaxTokens: openai.Int(int64(cfg.maxTokens))}
			if t.Seed != 0 {
				params.Seed = openai.Int(t.Seed)
			}
			agent := mcprl.Agent{Client: client, Model: model.InferenceName(step), SystemPrompt: cfg.system, MaxTurns: cfg.maxTurns, Params: params}
			traj, err := agent.Run(ctx, srv.Server, tools, t.Text)
			// The held-out tasks are distinct, so the text pairs each
			// task's rewards before and after (experiment.PairedStderr).
			traj.Metadata["scenario_id"] = t.Text
			if err == nil && t.Person != "" {
				// Each call returned after the server saved the graph.
				g := grade(srv.file, t)
				traj.Reward = g.reward()
				traj.SetMetric("stored", b2f(g.fact))
				traj.SetMetric("person", b2f(g.person))
				traj.SetMetric("other_entities", float64(g.others))
			}
			pool.put(srv, err == nil)
			return traj, err
		}
	}
	gopts := cfg.GatherOptions("")
	if cfg.generator != "" {
		gopts.AfterEach = ruler.AfterEach(judge, ruler.Options{})
	}
	var heldOut experiment.HeldOut
	if len(held) > 0 {
		episodes := evalEpisodes(held, cfg.evalRepeats, cfg.Seed)
		heldOut = func(ctx context.Context, step int) ([]art.TrajectoryGroup, error) {
			o := gopts
			o.Description = fmt.Sprintf("eval @%d", step)
			return art.GatherGroups(ctx, episodes, 1, rollout(step), o)
		}
	}
	run := experiment.NewRun("mcp", cfg.Flags, model, heldOut, out)
	run.Unit, run.Metrics, run.EvalEvery = "task", []string{"stored", "person", "other_entities", "completed", "tool_calls", "tool_errors"}, cfg.evalEvery
	run.Report.EvalRepeats = cfg.evalRepeats
	maps.Copy(run.Report.Config, map[string]any{"max_turns": cfg.maxTurns, "max_tokens": cfg.maxTokens, "system": cfg.system,
		"tools": cfg.tools, "generator": cfg.generator, "judge": cfg.judge, "sft_noise": cfg.sftNoise})
	first, err := model.Step(ctx)
	if err != nil {
		return err
	}
	if err := run.Begin(ctx, first); err != nil {
		return err
	}
	for step := first; step < cfg.Steps; step++ {
		batch := train[(step*cfg.Groups)%len(train):][:min(cfg.Groups, len(train)-(step*cfg.Groups)%len(train))]
		o := gopts
		o.Description = fmt.Sprintf("step %d", step+1)
		groups, err := art.GatherGroups(ctx, batch, cfg.GroupSize, rollout(-1), o)
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

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

func tasksOf(s mcprl.Scenarios) []task {
	out := make([]task, len(s))
	for i, sc := range s {
		out[i] = task{Text: sc.Task}
	}
	return out
}

// selectTools keeps the tools named in list (comma-separated); "" keeps all.
func selectTools(tools []mcprl.Tool, list string) ([]mcprl.Tool, error) {
	if list == "" {
		return tools, nil
	}
	var out []mcprl.Tool
	for _, name := range strings.Split(list, ",") {
		i := slices.IndexFunc(tools, func(t mcprl.Tool) bool { return t.Name == strings.TrimSpace(name) })
		if i < 0 {
			names := make([]string, len(tools))
			for j, t := range tools {
				names[j] = t.Name
			}
			return nil, fmt.Errorf("--tools: the server has no tool %q (it has %s)", name, strings.Join(names, ", "))
		}
		out = append(out, tools[i])
	}
	return out, nil
}
