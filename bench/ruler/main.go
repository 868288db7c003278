// Command ruler measures whether an agent learns from RULER scores alone:
// the tic-tac-toe agent of `art demo` trained with GRPO once on the game's
// own reward and once on the scores of an LLM judge (package ruler), on the
// same base model, budget and seeds, both evaluated on the same held-out
// games by the game's code.
//
// No pretrained LLM can be fetched here, so the judge is built here: a
// small random model taught by full-parameter SFT (package pretrain) to
// answer RULER's prompt for groups of games played by random policies,
// with the scores the game's rules and a one-line rubric give. It is served
// by the in-process backend's OpenAI-compatible server and called through
// ruler.AfterEach with structured outputs (response_format json_schema,
// grammar-constrained), exactly as a user would point RULER at o3.
//
//	go run ./bench/ruler [-steps 300] [-groups 32] [-group-size 2] [-seed 1] [-arms hand,ruler]
//
// It prints the judge's agreement with the game's reward on held-out groups
// and a markdown table for BENCHMARKS.md.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"math/rand/v2"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/artgo/art"
	"github.com/artgo/art/backend/local"
	"github.com/artgo/art/demo"
	"github.com/artgo/art/ruler"
)

func main() {
	path := flag.String("path", ".art/bench-ruler", "store root (the demo base and the judge are cached here)")
	steps := flag.Int("steps", 300, "GRPO steps per arm")
	groups := flag.Int("groups", 32, "groups per step")
	groupSize := flag.Int("group-size", 2, "games per group (RULER judges a group at once; the tiny judge learns groups of 2, not 4: BENCHMARKS.md)")
	evalGames := flag.Int("eval-games", 400, "held-out games before and after")
	seed := flag.Uint64("seed", 1, "seed of the base model, the runs and the judge")
	judgeShape := flag.String("judge-shape", "tiny", "the judge's model shape (art init-model shapes)")
	judgeGroups := flag.Int("judge-groups", 3000, "groups of games the judge is trained on")
	judgeEpochs := flag.Int("judge-epochs", 2, "passes over the judge's transcripts")
	judgeLR := flag.Float64("judge-lr", 3e-3, "the judge's SFT learning rate")
	agreeGroups := flag.Int("agreement-groups", 200, "held-out groups for the judge's agreement")
	arms := flag.String("arms", "hand,ruler", "which arms to run: hand, ruler or both")
	judgeFrom := flag.String("judge-from", "", "keep training this judge folder (on fresh games) instead of a random model")
	judgeRound := flag.Uint64("judge-round", 0, "with -judge-from: which round of fresh games (1, 2, ...)")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	start := time.Now()
	logf := func(format string, a ...any) {
		fmt.Fprintf(os.Stderr, "[%6.0fs] %s\n", time.Since(start).Seconds(), fmt.Sprintf(format, a...))
	}
	if err := run(ctx, config{path: *path, steps: *steps, groups: *groups, groupSize: *groupSize, evalGames: *evalGames, seed: *seed,
		judge: judgeOptions{Shape: *judgeShape, Groups: *judgeGroups, GroupSize: *groupSize, Epochs: *judgeEpochs, LR: *judgeLR, Seed: *seed,
			From: *judgeFrom, Round: *judgeRound},
		agreeGroups: *agreeGroups, arms: *arms, out: os.Stdout}, logf); err != nil {
		logf("error: %v", err)
		os.Exit(1)
	}
}

type config struct {
	path                     string
	steps, groups, groupSize int
	evalGames                int
	seed                     uint64
	judge                    judgeOptions
	agreeGroups              int
	arms                     string
	out                      io.Writer
	quiet                    bool
}

// armResult is one arm's outcome.
type armResult struct {
	name           string
	rep            demo.Report
	judgeCalls     float64
	judgeRetries   float64
	dropped        float64
	judgeTokens    float64
	agreeWithRules float64 // fraction of training games the judge scored as the rules would
}

func run(ctx context.Context, c config, logf func(string, ...any)) error {
	if err := os.MkdirAll(c.path, 0o755); err != nil {
		return err
	}
	judgeDir := filepath.Join(c.path, "judge-"+c.judge.Shape)
	if c.judge.From != "" {
		judgeDir = fmt.Sprintf("%s-r%d", filepath.Join(c.path, "judge-"+c.judge.Shape), c.judge.Round)
	}
	if err := buildJudge(ctx, judgeDir, c.judge, logf); err != nil {
		return fmt.Errorf("building the judge: %w", err)
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	backend := local.New(local.Options{Path: c.path, Quiet: true, Logger: logger})
	defer backend.Close()
	jm := &art.TrainableModel{Model: art.Model{Name: "judge", Project: "bench-ruler"}, BaseModel: judgeDir}
	if err := jm.Register(ctx, backend); err != nil {
		return err
	}
	ep, err := backend.InferenceEndpoint(ctx, jm, 0)
	if err != nil {
		return err
	}
	judge := ruler.FromEndpoint(ep)
	judge.MaxTokens = 600
	zero := 0.0
	judge.Temperature = &zero // the judge answers greedily: the same group, the same scores
	stats := &ruler.Stats{}
	ropts := ruler.Options{Rubric: rubric, MaxExplanation: 16, NoCache: true, Stats: stats, Logger: logger, Timeout: 2 * time.Minute}

	agreement, exact, err := measureAgreement(ctx, judge, ropts, c, logf)
	if err != nil {
		return err
	}
	stats.Take("eval")
	fmt.Fprintf(c.out, "judge (%s, %d groups × %d epochs): on %d held-out groups of %d, Spearman ρ within groups %.3f (groups where both vary), scores equal to the rubric's %.1f %%\n\n",
		c.judge.Shape, c.judge.Groups, c.judge.Epochs, c.agreeGroups, c.groupSize, agreement, 100*exact)

	var results []armResult
	for _, arm := range []string{"hand", "ruler"} {
		if !slices.Contains(strings.Split(c.arms, ","), arm) {
			continue
		}
		opt := demo.Options{Path: c.path, RLSteps: c.steps, GroupsPerStep: c.groups, GroupSize: c.groupSize, EvalGames: c.evalGames,
			Seed: c.seed, Outcome: true, ModelName: arm, Quiet: c.quiet, Out: os.Stderr}
		res := armResult{name: arm}
		if arm == "ruler" {
			opt.InvalidPenalty = -1 // the reward is the judge's alone
			var agree, games float64
			hook := ruler.AfterEach(judge, ropts)
			opt.Score = func(ctx context.Context, g art.TrajectoryGroup) ([]art.TrajectoryGroup, error) {
				out, err := hook(ctx, g)
				for _, sg := range out {
					for _, t := range sg.Trajectories {
						_, want := verdictOf(t)
						games++
						if t.Reward == want {
							agree++
						}
					}
				}
				return out, err
			}
			rep, err := demo.Run(ctx, opt)
			if err != nil {
				return fmt.Errorf("ruler arm: %w", err)
			}
			res.rep = rep
			m := stats.Take("train")
			res.judgeCalls, res.judgeRetries, res.dropped = m["ruler/judge_calls"], m["ruler/judge_retries"], m["ruler/dropped_groups"]
			res.judgeTokens = m["ruler/judge_prompt_tokens"] + m["ruler/judge_completion_tokens"]
			res.agreeWithRules = agree / max(games, 1)
		} else {
			rep, err := demo.Run(ctx, opt)
			if err != nil {
				return fmt.Errorf("hand arm: %w", err)
			}
			res.rep = rep
		}
		results = append(results, res)
		logf("%s arm: held-out %.3f → %.3f", arm, res.rep.Before, res.rep.After)
	}
	printTable(c, results)
	return nil
}

// verdictOf reads the rubric's score for a logged game from its metrics.
func verdictOf(t art.Trajectory) (string, float64) {
	switch {
	case t.Metrics["invalid_move"] == 1:
		return "invalid move", 0
	case t.Metrics["win"] == 1:
		return "won", 1
	case t.Metrics["draw"] == 1:
		return "draw", 0.5
	}
	return "lost", 0.1
}

// measureAgreement scores held-out groups of random games with the judge
// and compares with the game's reward: Spearman's ρ within each group
// (groups where both sides vary), and how often the judge gives exactly
// the rubric's score.
func measureAgreement(ctx context.Context, judge ruler.Judge, ropts ruler.Options, c config, logf func(string, ...any)) (float64, float64, error) {
	rng := rand.New(rand.NewPCG(c.seed+7, 0x616772656565))
	var groups []art.TrajectoryGroup
	var examples []judgeExample
	for g := range c.agreeGroups {
		ex, err := makeExample(ctx, rng, 90_000_000+uint64(g), c.groupSize)
		if err != nil {
			return 0, 0, err
		}
		examples = append(examples, ex)
		groups = append(groups, ex.group)
	}
	t0 := time.Now()
	scored, err := ruler.ScoreGroups(ctx, groups, judge, ropts)
	if err != nil {
		return 0, 0, err
	}
	if len(scored) != len(groups) {
		return 0, 0, fmt.Errorf("%d of %d groups scored", len(scored), len(groups))
	}
	var rhoSum, rhoN, exact, n float64
	for gi, g := range scored {
		var judged, rules []float64
		for ti, t := range g.Trajectories {
			_, want := verdict(examples[gi].outcomes[ti])
			judged = append(judged, t.Reward)
			rules = append(rules, examples[gi].group.Trajectories[ti].Reward)
			n++
			if t.Reward == want {
				exact++
			}
		}
		if rho, ok := spearman(judged, rules); ok {
			rhoSum += rho
			rhoN++
		}
	}
	logf("judge agreement: %d groups scored in %s", len(scored), time.Since(t0).Round(time.Second))
	return rhoSum / max(rhoN, 1), exact / max(n, 1), nil
}

// spearman is the rank correlation of x and y (average ranks for ties);
// ok is false when either is constant.
func spearman(x, y []float64) (float64, bool) {
	rx, ry := ranks(x), ranks(y)
	return pearson(rx, ry)
}

func ranks(v []float64) []float64 {
	idx := make([]int, len(v))
	for i := range idx {
		idx[i] = i
	}
	slices.SortFunc(idx, func(a, b int) int {
		switch {
		case v[a] < v[b]:
			return -1
		case v[a] > v[b]:
			return 1
		}
		return 0
	})
	r := make([]float64, len(v))
	for i := 0; i < len(idx); {
		j := i
		for j+1 < len(idx) && v[idx[j+1]] == v[idx[i]] {
			j++
		}
		for k := i; k <= j; k++ {
			r[idx[k]] = float64(i+j)/2 + 1
		}
		i = j + 1
	}
	return r
}

func pearson(x, y []float64) (float64, bool) {
	n := float64(len(x))
	var mx, my float64
	for i := range x {
		mx += x[i] / n
		my += y[i] / n
	}
	var sxy, sxx, syy float64
	for i := range x {
		sxy += (x[i] - mx) * (y[i] - my)
		sxx += (x[i] - mx) * (x[i] - mx)
		syy += (y[i] - my) * (y[i] - my)
	}
	if sxx == 0 || syy == 0 {
		return 0, false
	}
	return sxy / math.Sqrt(sxx*syy), true
}

// pairedStderr is the standard error of mean(after − before) over games
// paired by held-out seed.
func pairedStderr(before, after []float64) float64 {
	n := min(len(before), len(after))
	if n < 2 {
		return math.NaN()
	}
	var mean, ss float64
	for i := range n {
		mean += (after[i] - before[i]) / float64(n)
	}
	for i := range n {
		d := after[i] - before[i] - mean
		ss += d * d
	}
	return math.Sqrt(ss / float64(n-1) / float64(n))
}

func printTable(c config, results []armResult) {
	fmt.Fprintf(c.out, "| arm | reward in training | held-out before → after (%d games) | gain ± paired SE | gain / SE | exact expected reward before → after | GRPO wall time | judge calls (retries, dropped groups) |\n", c.evalGames)
	fmt.Fprintln(c.out, "|---|---|---|---|---|---|---|---|")
	var handGain float64
	for _, r := range results {
		gain := r.rep.After - r.rep.Before
		se := pairedStderr(r.rep.BeforeGames, r.rep.AfterGames)
		source, judgeCol := "the game's (win 1, draw 0.5, loss 0, invalid −1)", "—"
		if r.name == "ruler" {
			source = fmt.Sprintf("RULER scores only (judge = the rubric on %.0f %% of games)", 100*r.agreeWithRules)
			judgeCol = fmt.Sprintf("%.0f (%.0f, %.0f)", r.judgeCalls, r.judgeRetries, r.dropped)
		} else {
			handGain = gain
		}
		fmt.Fprintf(c.out, "| %s | %s | %.3f → %.3f | %+.3f ± %.3f | %.1f | %.3f → %.3f | %s | %s |\n", r.name, source, r.rep.Before, r.rep.After,
			gain, se, gain/se, r.rep.ExpectedBefore, r.rep.ExpectedAfter, r.rep.RL.Round(time.Second), judgeCol)
	}
	for _, r := range results {
		if r.name == "ruler" && handGain != 0 {
			fmt.Fprintf(c.out, "\nRULER gain / hand-reward gain: %.0f %%\n", 100*(r.rep.After-r.rep.Before)/handGain)
		}
	}
}
