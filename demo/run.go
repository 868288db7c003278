package demo

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"time"

	"github.com/artgo/art"
	"github.com/artgo/art/backend/local"
	"github.com/artgo/art/chart"
	"github.com/artgo/art/engine/hfmodel"
	"github.com/artgo/art/engine/lora"
	"github.com/artgo/art/engine/model"
	"github.com/artgo/art/experiment"
	"github.com/artgo/art/games/tictactoe"
)

// Options configure Run. Zero fields take the defaults of DefaultOptions;
// Run rejects negative counts and learning rates with an error.
type Options struct {
	Path          string // store root (".art")
	BaseModel     string // a Hugging Face folder to use instead of building one
	Base          BaseOptions
	RLSteps       int
	GroupsPerStep int
	GroupSize     int
	LearningRate  float64
	// InvalidPenalty is subtracted from the reward of games lost to an
	// invalid move, for training only (the reported rewards stay 0–1).
	// 0 means DefaultOptions' value; < 0 means no penalty.
	InvalidPenalty float64
	// EntropyBonus is the training config's EntropyCoef: it keeps the
	// policy sampling moves it is not yet sure of, where without it GRPO
	// freezes onto a wrong move in boards it rarely meets. 0 means
	// DefaultOptions' value; < 0 means none.
	EntropyBonus float64
	EvalGames    int
	// EvalEvery is the number of RL steps between held-out evaluations
	// (logged as val/reward; default 25). The first and last step are
	// always evaluated.
	EvalEvery int
	Seed      uint64
	Out       io.Writer // progress lines (nil: os.Stderr)
	Quiet     bool      // no progress bars

	// ModelName names the trained model ("" means "tictactoe"); its
	// folder is emptied when the run starts.
	ModelName string
	// Outcome appends each game's result as a last context message
	// (tictactoe.RolloutOptions.Outcome), for a judge to read.
	Outcome bool
	// Score, if set, replaces the training groups' rewards as each group
	// completes (GatherOptions.AfterEach), e.g. ruler.AfterEach: the
	// reward then comes from it alone (set InvalidPenalty < 0). Held-out
	// evaluation always uses the game's own reward.
	Score func(context.Context, art.TrajectoryGroup) ([]art.TrajectoryGroup, error)

	// Knobs of the learning diagnosis (diagnose_test.go), not offered to
	// users: the adapter's config (zero: rank 8, alpha 16), changes to the
	// training config, and a learning rate per step.
	lora art.LoRAConfig
	tune func(*art.TrainConfig)
	lrAt func(step int) float64
	// winSooner is subtracted from a won game's training reward for each
	// move the agent made beyond the fewest a win takes (3), so that among
	// games that all win the quicker ones still stand out.
	winSooner float64
	// openings > 0 starts each training group from a random opening of
	// up to openings move pairs (tictactoe.Opening; the group's scenario
	// picks 0..openings): exploring starts. Held-out games start empty.
	openings int
	// branch > 0 starts each training group, whose scenario picks k in
	// 0..branch, from the board the current policy faces at its (k+1)-th
	// move of a probe game: GRPO then compares moves on boards its own play
	// reaches, several moves in.
	branch int
	// sharp is the training opponent's sharpness (tictactoe.RolloutOptions.Sharp):
	// how often it wins or blocks when it can. Held-out games keep the
	// random opponent.
	sharp float64
	// tactics is subtracted from a game's training reward for each of the
	// agent's blunders (tictactoe.Board.Blunder: a missed immediate win or
	// block), which the random opponent often leaves unpunished.
	tactics float64
	// temperature, if > 0, is the agent's sampling temperature in the
	// training games (held-out games stay at 1).
	temperature float64
	// perMove trains each move against the other moves made on the same
	// board in its group's games (splitByBoard) instead of each game
	// against the group's other games.
	perMove bool
}

// DefaultOptions sizes the demo to finish within a few minutes on 2 cores.
func DefaultOptions() Options {
	return Options{Path: ".art", RLSteps: 500, GroupsPerStep: 8, GroupSize: 8, LearningRate: 1e-3, InvalidPenalty: 1,
		EntropyBonus: 0.03, EvalGames: 400, EvalEvery: 25, Seed: 1}
}

// validate rejects options Run cannot use, before anything is built or
// removed: negative counts, a group of one game (GRPO compares a group's
// games), a learning rate that is negative or not finite, a coefficient
// that is not a number, and a BaseModel folder without a config.json.
// Zero values are left for defaults.
func (o *Options) validate() error {
	d := DefaultOptions()
	for _, f := range []struct {
		name   string
		v, def int
	}{
		{"RLSteps", o.RLSteps, d.RLSteps}, {"GroupsPerStep", o.GroupsPerStep, d.GroupsPerStep},
		{"EvalGames", o.EvalGames, d.EvalGames}, {"EvalEvery", o.EvalEvery, d.EvalEvery},
	} {
		if f.v < 0 {
			return fmt.Errorf("demo: %s = %d: must be >= 0 (0 means %d)", f.name, f.v, f.def)
		}
	}
	if o.GroupSize < 0 || o.GroupSize == 1 {
		return fmt.Errorf("demo: GroupSize = %d: must be >= 2, the games GRPO compares (0 means %d)", o.GroupSize, d.GroupSize)
	}
	if !(o.LearningRate >= 0) || math.IsInf(o.LearningRate, 0) {
		return fmt.Errorf("demo: LearningRate = %v: must be > 0 (0 means %v)", o.LearningRate, d.LearningRate)
	}
	for _, f := range []struct {
		name string
		v    float64
	}{{"InvalidPenalty", o.InvalidPenalty}, {"EntropyBonus", o.EntropyBonus}} {
		if math.IsNaN(f.v) || math.IsInf(f.v, 0) {
			return fmt.Errorf("demo: %s = %v: must be a finite number (0 means the default, < 0 none)", f.name, f.v)
		}
	}
	if o.BaseModel != "" {
		// Its config, tokenizer and chat template read now, before a
		// previous run's checkpoints are replaced (the weights are read
		// when the model is registered).
		if _, err := hfmodel.OpenText(o.BaseModel); err != nil {
			return fmt.Errorf("demo: base model %s: want a Hugging Face model folder: %w", o.BaseModel, err)
		}
		return nil // the base options are not used
	}
	return o.Base.validate()
}

func (o *Options) defaults() {
	d := DefaultOptions()
	if o.Path == "" {
		o.Path = d.Path
	}
	if o.RLSteps == 0 {
		o.RLSteps = d.RLSteps
	}
	if o.GroupsPerStep == 0 {
		o.GroupsPerStep = d.GroupsPerStep
	}
	if o.GroupSize == 0 {
		o.GroupSize = d.GroupSize
	}
	if o.LearningRate == 0 {
		o.LearningRate = d.LearningRate
	}
	o.InvalidPenalty = defaultOrNone(o.InvalidPenalty, d.InvalidPenalty)
	o.EntropyBonus = defaultOrNone(o.EntropyBonus, d.EntropyBonus)
	if o.EvalEvery == 0 {
		o.EvalEvery = d.EvalEvery
	}
	if o.EvalGames == 0 {
		o.EvalGames = d.EvalGames
	}
	if o.Out == nil {
		o.Out = os.Stderr
	}
}

// defaultOrNone reads a coefficient whose zero value means the default:
// 0 gives def, a negative value none (0).
func defaultOrNone(v, def float64) float64 {
	switch {
	case v == 0:
		return def
	case v < 0:
		return 0
	}
	return v
}

// trainConfig is the training config of every GRPO step: a few optimizer
// steps per training step (one per 32 move sequences; a step's 64 games
// hold about 220 moves).
func (o *Options) trainConfig() art.TrainConfig {
	cfg := art.TrainConfig{LearningRate: o.LearningRate, GradAccumulationSequences: 32, EntropyCoef: o.EntropyBonus}
	if o.tune != nil {
		o.tune(&cfg)
	}
	return cfg
}

// Report is what a demo run measured.
type Report struct {
	BaseModel      string
	Before, After  float64 // mean held-out reward
	InvalidBefore  float64
	InvalidAfter   float64
	Steps          int // GRPO steps
	SFTSteps       int // SFT steps of the base model (0 when given one)
	ModelDir       string
	Chart          string
	BuildBase, RL  time.Duration
	TrainedSkipped int // steps that advanced without training
	// Expected* are exact expectations over the game tree against the
	// random opponent (sampled at temperature 1), computed for the demo's
	// own base model only (NaN otherwise).
	ExpectedBefore, ExpectedAfter               float64
	ExpectedInvalidBefore, ExpectedInvalidAfter float64
	// BeforeGames and AfterGames are the held-out games' rewards in the
	// order of their (fixed) seeds, so before and after pair up.
	BeforeGames, AfterGames []float64
	// Evals are the held-out evaluations in step order, the first before
	// RL and the last after it.
	Evals []Eval
}

// Eval is one held-out evaluation of a demo run.
type Eval struct {
	Step int
	// Elapsed is the time from the start of Run (the base model's build
	// included) to the start of this evaluation; Evaluating is the part of
	// it spent in earlier evaluations.
	Elapsed, Evaluating time.Duration
	Reward              float64 // mean held-out reward
	Invalid             float64 // share of held-out games lost to an invalid move
}

// evalSeedBase starts the held-out opponent seeds, far from training seeds.
const evalSeedBase = 10_000_000

// Run builds (or reuses) the base model and trains the agent with GRPO
// through the public SDK, evaluating before and after.
func Run(ctx context.Context, opt Options) (Report, error) {
	if err := opt.validate(); err != nil {
		return Report{}, err
	}
	opt.defaults()
	start := time.Now()
	rep := Report{BaseModel: opt.BaseModel}
	nan := math.NaN()
	rep.ExpectedBefore, rep.ExpectedAfter, rep.ExpectedInvalidBefore, rep.ExpectedInvalidAfter = nan, nan, nan, nan
	built := rep.BaseModel == ""
	if built {
		rep.BaseModel = filepath.Join(opt.Path, "demo", "base-tictactoe")
		b := opt.Base
		b.Seed = opt.Seed
		if info, ok := readBaseInfo(rep.BaseModel, b); ok {
			rep.SFTSteps = info.Steps
			logf(opt.Out, start, "reusing the base model in %s (%d SFT steps; expected reward %.3f, invalid moves in %.0f%% of games)",
				rep.BaseModel, info.Steps, info.Reward, 100*info.Invalid)
		} else {
			logf(opt.Out, start, "building the base model: full-parameter SFT of a tiny Qwen2-shaped model (2 layers, width 64) on random legal moves")
			b.Progress = func(step, total int, loss float64) {
				rep.SFTSteps = step
			}
			b.Eval = func(step int, reward, invalid float64) {
				logf(opt.Out, start, "  sft step %d: expected reward %.3f, invalid moves in %.0f%% of games", step, reward, 100*invalid)
			}
			if err := BuildBase(ctx, rep.BaseModel, b); err != nil {
				return rep, err
			}
		}
	}
	rep.BuildBase = time.Since(start)
	// A model given by the user has not seen the game's format: tell it
	// the rules. The demo's own base learned them from data.
	system := ""
	if !built {
		system = tictactoe.Instructions
	}

	rlStart := time.Now()
	// The demo prints its own summary every few steps; the backend and the
	// model only speak up for warnings (one line per step would drown it).
	logger := slog.New(slog.NewTextHandler(opt.Out, &slog.HandlerOptions{Level: slog.LevelWarn}))
	backend := local.New(local.Options{Seed: opt.Seed, Quiet: opt.Quiet, ProgressWriter: opt.Out, Logger: logger})
	defer backend.Close()
	name := opt.ModelName
	if name == "" {
		name = "tictactoe"
	}
	model := &art.TrainableModel{
		Model:     art.Model{Name: name, Project: "demo", BasePath: opt.Path, Logger: logger},
		BaseModel: rep.BaseModel,
		LoRA:      art.LoRAConfig{Rank: 8, Alpha: 16},
	}
	if opt.lora.Rank != 0 {
		model.LoRA = opt.lora
	}
	dir, err := model.Dir()
	if err != nil {
		return rep, err
	}
	rep.ModelDir = dir.Path()
	// Each demo run starts fresh: say so before the last run's checkpoints
	// and logs go, so that nobody looks for them afterwards (model.Dir
	// creates the folder, so only one with files in it held a run).
	if entries, err := os.ReadDir(rep.ModelDir); err == nil && len(entries) > 0 {
		logf(opt.Out, start, "replacing the previous run in %s (each demo run starts fresh; --path keeps runs apart)", rep.ModelDir)
	}
	if err := os.RemoveAll(rep.ModelDir); err != nil {
		return rep, fmt.Errorf("demo: %w", err)
	}
	if err := model.Register(ctx, backend); err != nil {
		return rep, err
	}
	client, err := model.OpenAIClient()
	if err != nil {
		return rep, err
	}
	rollOpts := func(seed *uint64) tictactoe.RolloutOptions {
		return tictactoe.RolloutOptions{SampleSeed: seed, System: system, Outcome: opt.Outcome}
	}
	var games []float64          // the last evaluation's rewards, by seed
	var evaluating time.Duration // spent in evaluations so far
	evaluate := func(step int) (float64, float64, error) {
		evalStart := time.Now()
		defer func() { evaluating += time.Since(evalStart) }()
		seeds := make([]uint64, opt.EvalGames)
		for i := range seeds {
			seeds[i] = evalSeedBase + uint64(i)
		}
		name := model.InferenceName(step)
		groups, err := art.GatherGroups(ctx, seeds, 1, func(ctx context.Context, seed uint64) (art.Trajectory, error) {
			ss := sampleSeed(opt.Seed, 0, seed-evalSeedBase)
			return tictactoe.RolloutWith(ctx, client, name, seed, rollOpts(&ss))
		}, art.GatherOptions{Concurrency: 32, Quiet: opt.Quiet, ProgressWriter: opt.Out, Description: "eval"})
		if err != nil {
			return 0, 0, err
		}
		var reward, invalid float64
		games = games[:0:0]
		for _, g := range groups {
			for _, t := range g.Trajectories {
				reward += t.Reward
				invalid += t.Metrics["invalid_move"]
				games = append(games, t.Reward)
			}
		}
		n := float64(len(groups))
		rep.Evals = append(rep.Evals, Eval{Step: step, Elapsed: evalStart.Sub(start), Evaluating: evaluating, Reward: reward / n, Invalid: invalid / n})
		stepCopy := step
		if err := model.Log(ctx, groups, art.LogOptions{Split: "val", Step: &stepCopy}); err != nil {
			return 0, 0, err
		}
		return reward / n, invalid / n, nil
	}
	if rep.Before, rep.InvalidBefore, err = evaluate(0); err != nil {
		return rep, err
	}
	rep.BeforeGames = games
	logf(opt.Out, start, "held-out reward before RL: %.3f (invalid moves in %.0f%% of games)", rep.Before, 100*rep.InvalidBefore)

	cfg := opt.trainConfig()
	var window rlWindow
	var step int
	for step = 0; step < opt.RLSteps; step++ {
		// A group shares one opponent seed; each game samples with its own seed.
		name := model.InferenceName(step)
		specs := make([]art.GroupSpec, opt.GroupsPerStep)
		for g := range specs {
			scenario := 1000 + uint64(step*opt.GroupsPerStep+g)
			start, err := groupStart(opt, scenario, func() (art.Trajectory, error) {
				ss := sampleSeed(opt.Seed, uint64(1+step), uint64(1<<20+g))
				return tictactoe.RolloutWith(ctx, client, name, scenario, rollOpts(&ss))
			})
			if err != nil {
				return rep, err
			}
			rs := make([]art.Rollout, opt.GroupSize)
			for i := range rs {
				ss := sampleSeed(opt.Seed, uint64(1+step), uint64(g*opt.GroupSize+i))
				ro := rollOpts(&ss)
				ro.Start = start
				ro.Sharp = opt.sharp
				ro.Temperature = opt.temperature
				rs[i] = func(ctx context.Context) (art.Trajectory, error) {
					return tictactoe.RolloutWith(ctx, client, name, scenario, ro)
				}
			}
			specs[g] = art.GroupSpec{Rollouts: rs}
		}
		groups, err := art.GatherTrajectoryGroups(ctx, specs, art.GatherOptions{Concurrency: 32, Quiet: true, AfterEach: opt.Score})
		if err != nil {
			return rep, err
		}
		if opt.lrAt != nil {
			cfg.LearningRate = opt.lrAt(step)
		}
		train := penalizeBlunders(winSooner(experiment.PenalizeInvalid(groups, opt.InvalidPenalty), opt.winSooner), opt.tactics)
		if opt.perMove {
			train = splitByBoard(train)
		}
		res, err := model.Train(ctx, train, cfg, art.LogGroups(groups)) // logged with the real rewards
		if err != nil {
			return rep, err
		}
		if res.Skipped {
			rep.TrainedSkipped++
		}
		window.add(groups, res)
		if res.Step%logEvery == 0 || step == opt.RLSteps-1 {
			logf(opt.Out, start, "  rl step %d/%d: %s", res.Step, opt.RLSteps, window.flush())
		}
		if res.Step%opt.EvalEvery == 0 && step < opt.RLSteps-1 {
			r, inv, err := evaluate(res.Step)
			if err != nil {
				return rep, err
			}
			logf(opt.Out, start, "  held-out reward at step %d: %.3f (invalid moves in %.0f%% of games)", res.Step, r, 100*inv)
		}
	}
	rep.Steps = step
	if rep.After, rep.InvalidAfter, err = evaluate(step); err != nil {
		return rep, err
	}
	rep.AfterGames = games
	logf(opt.Out, start, "held-out reward after %d RL steps: %.3f (invalid moves in %.0f%% of games); before: %.3f (%.0f%%)",
		step, rep.After, 100*rep.InvalidAfter, rep.Before, 100*rep.InvalidBefore)
	if built {
		// The tiny model is cheap enough to score exactly: the expected
		// reward over the whole game tree, free of sampling noise.
		if err := exactBeforeAfter(&rep, step); err != nil {
			return rep, err
		}
		logf(opt.Out, start, "expected reward (exact, over the game tree): %.3f → %.3f; invalid moves %.0f%% → %.0f%%",
			rep.ExpectedBefore, rep.ExpectedAfter, 100*rep.ExpectedInvalidBefore, 100*rep.ExpectedInvalidAfter)
	}
	rep.Chart = filepath.Join(rep.ModelDir, "reward.png")
	if err := drawChart(model, rep.Chart); err != nil {
		return rep, err
	}
	logf(opt.Out, start, "reward curve: %s", rep.Chart)
	rep.RL = time.Since(rlStart)
	return rep, nil
}

// drawChart draws the model's reward curve from its history.jsonl.
func drawChart(model *art.TrainableModel, png string) error {
	d, err := model.Dir()
	if err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	rows, err := d.ReadHistory()
	if err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	return chart.WriteFile(png, chart.FromHistory(rows), "art demo: tic-tac-toe agent (GRPO)")
}

// logEvery is the number of RL steps summarised by one progress line.
const logEvery = 10

// rlWindow accumulates the training metrics of the last few steps.
type rlWindow struct {
	steps, skipped      int
	games               int
	reward, invalid     float64
	loss, gradNorm      float64
	trained, optimSteps int
}

func (w *rlWindow) add(groups []art.TrajectoryGroup, res art.TrainResult) {
	w.steps++
	for _, g := range groups {
		for _, t := range g.Trajectories {
			w.games++
			w.reward += t.Reward
			w.invalid += t.Metrics["invalid_move"]
		}
	}
	if res.Skipped {
		w.skipped++
		return
	}
	w.trained++
	w.loss += res.Metrics["loss/train"]
	w.gradNorm += res.Metrics["loss/grad_norm"]
	w.optimSteps += int(res.Metrics["data/step_num_gradient_steps"])
}

func (w *rlWindow) flush() string {
	s := fmt.Sprintf("train reward %.3f, invalid moves in %.0f%% of games", w.reward/float64(max(w.games, 1)), 100*w.invalid/float64(max(w.games, 1)))
	if w.trained > 0 {
		s += fmt.Sprintf(", loss %.3f, grad norm %.2f, %d optimizer steps", w.loss/float64(w.trained), w.gradNorm/float64(w.trained), w.optimSteps)
	}
	if w.skipped > 0 {
		s += fmt.Sprintf(" (%d of %d steps had nothing to train: all games of every group scored the same)", w.skipped, w.steps)
	}
	*w = rlWindow{}
	return s
}

// exactBeforeAfter fills the exact expected rewards of the built base model
// and of the final checkpoint.
func exactBeforeAfter(rep *Report, step int) error {
	m, err := model.Load(rep.BaseModel)
	if err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	enc, err := newPromptEncoder(rep.BaseModel)
	if err != nil {
		return err
	}
	ad, err := lora.Load(filepath.Join(rep.ModelDir, "checkpoints", fmt.Sprintf("%04d", step)), m.Config)
	if err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	if rep.ExpectedBefore, rep.ExpectedInvalidBefore, err = tictactoe.Expected(enginePolicy(m, nil, enc)); err != nil {
		return err
	}
	if rep.ExpectedAfter, rep.ExpectedInvalidAfter, err = tictactoe.Expected(enginePolicy(m, ad, enc)); err != nil {
		return err
	}
	return nil
}

// sampleSeed derives the sampling seed of one game: phase 0 is evaluation,
// 1+step a training step. Moves take consecutive seeds, so games are
// spaced apart.
func sampleSeed(seed, phase, game uint64) uint64 {
	return seed*1_000_000_007 + phase*100_003*16 + game*16
}

// groupStart is the board a training group's games start from: nil (the
// empty board) unless a diagnosis knob asks for a random opening
// (Options.openings) or a board of the policy's own probe game
// (Options.branch), the scenario picking how far in. probe plays that
// game with the current policy.
func groupStart(opt Options, scenario uint64, probe func() (art.Trajectory, error)) (*tictactoe.Board, error) {
	if opt.openings > 0 {
		b := tictactoe.Opening(scenario, int(scenario%uint64(opt.openings+1)))
		return &b, nil
	}
	k := int(scenario % uint64(opt.branch+1))
	if k == 0 {
		return nil, nil
	}
	game, err := probe()
	if err != nil {
		return nil, err
	}
	if turns := tictactoe.Turns(&game); k < len(turns) {
		if b, ok := tictactoe.ParseBoard(turns[k].Board); ok {
			return &b, nil
		}
	}
	return nil, nil // the probe ended sooner: the empty board
}

// winSooner returns groups with each won game's reward lowered by per for
// every agent move beyond 3 (Options.winSooner); groups is not changed.
func winSooner(groups []art.TrajectoryGroup, per float64) []art.TrajectoryGroup {
	if per == 0 {
		return groups
	}
	return experiment.Rescore(groups, func(t *art.Trajectory) {
		if t.Metrics["win"] == 1 {
			t.Reward -= per * max(t.Metrics["num_moves"]-3, 0)
		}
	})
}

// penalizeBlunders returns groups with each game's reward lowered by per
// for every blunder of the agent (Options.tactics); groups is not changed.
func penalizeBlunders(groups []art.TrajectoryGroup, per float64) []art.TrajectoryGroup {
	if per == 0 {
		return groups
	}
	return experiment.Rescore(groups, func(t *art.Trajectory) {
		t.Reward -= per * float64(blunders(t))
	})
}

// blunders counts the moves of a game's trajectory that were blunders.
func blunders(t *art.Trajectory) int {
	n := 0
	for _, turn := range tictactoe.Turns(t) {
		board, ok := tictactoe.ParseBoard(turn.Board)
		if !ok {
			continue
		}
		if cell, ok := tictactoe.ParseMove(&board, turn.Reply); ok && board.Blunder(cell) {
			n++
		}
	}
	return n
}

// splitByBoard regroups the moves of each group's games by the board they
// were made on: a new group per board that at least two games met and on
// which they did not all make the same move, each move a trajectory of its
// own with its game's reward. GRPO's advantage of a move is then its game's
// reward against the mean of the games that stood on the same board, so a
// move is credited only with what followed it, never with the moves that
// led there; the games of a group face one opponent seed, whose replies to
// the same board are the same, so the comparison is between the agent's
// own choices. Moves on a board no other game met carry no comparison and
// are left out, as are boards where every game chose alike (their
// advantages would cancel).
func splitByBoard(groups []art.TrajectoryGroup) []art.TrajectoryGroup {
	type board struct {
		moves   []art.Trajectory
		replies map[string]bool
	}
	var out []art.TrajectoryGroup
	for _, g := range groups {
		byBoard := map[string]*board{}
		var order []*board
		for i := range g.Trajectories {
			t := &g.Trajectories[i]
			hs, turns := t.Histories(), tictactoe.Turns(t)
			if len(hs) != len(turns) {
				continue // not a game as RolloutWith records it
			}
			for k, h := range hs {
				b := byBoard[turns[k].Board]
				if b == nil {
					b = &board{replies: map[string]bool{}}
					byBoard[turns[k].Board] = b
					order = append(order, b)
				}
				b.moves = append(b.moves, art.Trajectory{MessagesAndChoices: h.MessagesAndChoices, Tools: h.Tools, Reward: t.Reward})
				b.replies[turns[k].Reply] = true
			}
		}
		for _, b := range order {
			if len(b.moves) >= 2 && len(b.replies) >= 2 {
				out = append(out, art.TrajectoryGroup{Trajectories: b.moves})
			}
		}
	}
	return out
}
