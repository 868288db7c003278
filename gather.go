package art

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"os"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/schollz/progressbar/v3"
	"go.opentelemetry.io/otel/attribute"
	"golang.org/x/term"

	"github.com/artgo/art/internal/tracing"
)

// Rollout runs one episode and returns its trajectory. It should return
// soon after ctx is cancelled. A Rollout that returns an error or panics is
// recorded as an exception of its group rather than failing the gather (see
// GatherOptions.MaxExceptions).
type Rollout func(ctx context.Context) (Trajectory, error)

// GroupSpec describes one group for GatherTrajectoryGroups: either a list of
// Rollouts, each producing one trajectory of the group (they may differ, by
// a sampling seed say), or a Run function producing the whole group at once
// (a multi-agent game, say). Run wins when both are set.
type GroupSpec struct {
	Rollouts []Rollout
	Run      func(ctx context.Context) (TrajectoryGroup, error)
	// Metadata becomes the group's metadata (for Run, only if the returned
	// group has none).
	Metadata map[string]any
}

// GatherOptions configures GatherGroups and GatherTrajectoryGroups. The zero value runs every
// rollout at once, tolerates no exception, and shows a progress bar on
// stderr when it is a terminal.
type GatherOptions struct {
	// Concurrency caps the number of rollouts (and Run functions) running
	// at the same time; 0 means no cap.
	Concurrency int

	// MaxExceptions is the number of failed rollouts tolerated: a whole
	// number, or a fraction in (0, 1) of all rollouts (a Run function
	// counts as one), or +Inf for no limit. 0 tolerates none. As soon as
	// the count exceeds the budget, the gather cancels the remaining
	// rollouts and fails with ErrTooManyExceptions.
	MaxExceptions float64

	// AfterEach, if set, runs on each group as soon as it is complete
	// (typically to score it with an LLM judge), including groups whose
	// rollouts all failed. It returns the groups
	// that replace it: one (possibly modified), none (drop it) or several
	// (split it). An error, or a panic, fails the whole gather; to drop a
	// group whose scoring failed, return no groups and no error.
	// AfterEach calls run concurrently and do not count toward Concurrency.
	AfterEach func(ctx context.Context, g TrajectoryGroup) ([]TrajectoryGroup, error)

	// Quiet turns the progress bar off. It is off anyway when
	// ProgressWriter is not a terminal.
	Quiet bool
	// ProgressWriter receives the progress bar; nil means os.Stderr.
	ProgressWriter io.Writer
	// Description labels the progress bar; "" means "gather".
	Description string

	// Seed is the run's seed. Each rollout's context carries its identity
	// (Seed, its group, its index in the group), from which the SDK's
	// clients (Model.OpenAIClient, Recorder) seed every chat request the
	// rollout makes without a seed of its own, so the same program samples
	// the same tokens run after run (see RolloutSeed for the rollout's own
	// randomness). Two gathers of the same scenarios at the same step with
	// the same Seed sample the same: give each a different Seed to draw
	// afresh. A Run function's requests are seeded as its group's rollout 0.
	Seed int64
}

// ErrTooManyExceptions is wrapped by the error of a gather whose failed
// rollouts exceed GatherOptions.MaxExceptions. The same error also wraps the
// first rollout error.
var ErrTooManyExceptions = errors.New("art: too many failed rollouts")

// PanicError is the error recorded for a rollout (or AfterEach call) that
// panicked.
type PanicError struct {
	Value any    // the value passed to panic
	Stack []byte // the goroutine's stack at the panic
}

// Error returns "panic: " and the panic value.
func (e *PanicError) Error() string { return fmt.Sprintf("panic: %v", e.Value) }

// Unwrap returns the panic value if it is an error.
func (e *PanicError) Unwrap() error {
	err, _ := e.Value.(error)
	return err
}

func (o *GatherOptions) validate() error {
	switch f := o.MaxExceptions; {
	case math.IsNaN(f) || f < 0:
		return fmt.Errorf("art: gather: MaxExceptions = %v: must be >= 0", f)
	case f >= 1 && !math.IsInf(f, 1) && f != math.Trunc(f):
		return fmt.Errorf("art: gather: MaxExceptions = %v: must be a whole count, a fraction in (0, 1), or +Inf", f)
	}
	if o.Concurrency < 0 {
		return fmt.Errorf("art: gather: Concurrency = %d: must be >= 0 (0 means no limit)", o.Concurrency)
	}
	return nil
}

// exceptionBudget returns how many exceptions are tolerated out of total.
func (o *GatherOptions) exceptionBudget(total int) float64 {
	if f := o.MaxExceptions; f > 0 && f < 1 {
		return f * float64(total)
	}
	return o.MaxExceptions
}

// GatherTrajectoryGroups is the general form of GatherGroups, for groups
// that are not groupSize runs of one rollout function: a group whose
// rollouts differ, or one produced at once by a Run function. It runs the
// rollouts of every group, each on its own
// goroutine (at most opts.Concurrency at a time), and returns the groups in
// the order of groups, whatever the order in which they complete.
// Trajectories within a group keep the order of their rollouts.
//
// A rollout that fails (an error, a panic, or an invalid trajectory: see
// Trajectory.Validate) becomes an Exception of its group; a failed Run
// function yields a group holding only its exception. Each trajectory that
// has choices with logprobs gets the metric "completion_tokens": the mean
// number of sampled tokens per such choice, as in ART.
//
// GatherTrajectoryGroups returns an error when the exceptions exceed
// opts.MaxExceptions (wrapping ErrTooManyExceptions and the first rollout
// error), when AfterEach fails, or when ctx is cancelled (wrapping
// ctx.Err()). In every such case it returns at once, without waiting for
// rollouts still running: they see their context cancelled, and whatever
// they return later is discarded. A rollout that ignores its context keeps
// its goroutine until it returns.
func GatherTrajectoryGroups(ctx context.Context, groups []GroupSpec, opts GatherOptions) (_ []TrajectoryGroup, err error) {
	if ctx == nil {
		return nil, errNilContext("gather")
	}
	if err := opts.validate(); err != nil {
		return nil, err
	}
	start := time.Now()
	ctx, span := startSpan(ctx, "art.gather", attribute.Int("art.groups", len(groups)))
	defer func() { tracing.End(span, err) }()
	var tasks []task
	states := make([]groupState, len(groups))
	for gi, spec := range groups {
		if spec.Run != nil {
			tasks = append(tasks, task{gi, -1})
			states[gi].left = 1
			continue
		}
		for ri, r := range spec.Rollouts {
			if r == nil {
				return nil, fmt.Errorf("art: gather: group %d: rollout %d is nil", gi, ri)
			}
			tasks = append(tasks, task{gi, ri})
		}
		states[gi] = groupState{
			trajs: make([]*Trajectory, len(spec.Rollouts)),
			excs:  make([]*Exception, len(spec.Rollouts)),
			left:  len(spec.Rollouts),
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("art: gather: %w", err)
	}

	runCtx, cancel := context.WithCancel(ctx)
	// Returning cancels runCtx: the launcher stops and stragglers are told
	// to give up. The buffers let every sender finish without a receiver.
	defer cancel()
	results := make(chan taskResult, len(tasks))
	after := make(chan afterResult, len(groups))
	// A slot of sem is taken to start a task and given back only once its
	// result has been recorded, so no task starts after a failure that
	// exceeds the budget.
	var sem chan struct{}
	if opts.Concurrency > 0 {
		sem = make(chan struct{}, opts.Concurrency)
	}
	go launch(runCtx, opts.Seed, groups, tasks, sem, results)

	ga := &gatherer{
		specs:  groups,
		states: states,
		prog:   newProgress(opts, len(tasks)),
		total:  len(tasks),
		budget: opts.exceptionBudget(len(tasks)),
	}
	outputs := make([][]TrajectoryGroup, len(groups))
	pending := len(groups)
	complete := func(gi int, g TrajectoryGroup) {
		if opts.AfterEach == nil {
			outputs[gi] = []TrajectoryGroup{g}
			pending--
			return
		}
		go func() { after <- callAfterEach(runCtx, opts.AfterEach, gi, g) }()
	}
	for gi := range groups {
		if states[gi].left == 0 {
			complete(gi, states[gi].group(groups[gi]))
		}
	}

	for pending > 0 {
		select {
		case <-runCtx.Done(): // only ctx can cancel runCtx before we return
			ga.prog.abort()
			return nil, fmt.Errorf("art: gather: canceled with %d of %d rollouts done: %w", ga.done, ga.total, ctx.Err())

		case r := <-results:
			g, full, err := ga.record(r)
			if err != nil {
				ga.prog.abort()
				return nil, err
			}
			if sem != nil {
				<-sem
			}
			if full {
				complete(r.group, g)
			}

		case a := <-after:
			if a.err != nil {
				ga.prog.abort()
				return nil, fmt.Errorf("art: gather: AfterEach on group %d: %w", a.group, a.err)
			}
			outputs[a.group] = a.groups
			pending--
		}
	}
	ga.prog.finish()
	out := slices.Concat(outputs...)
	stampGathered(out, start, time.Now())
	span.SetAttributes(attribute.Int("art.rollouts", ga.total), attribute.Int("art.exceptions", ga.exceptions))
	return out, nil
}

// gatherer holds the bookkeeping of one gather. Only the goroutine running
// GatherTrajectoryGroups uses it.
type gatherer struct {
	specs  []GroupSpec
	states []groupState
	prog   *progress
	total  int     // tasks
	budget float64 // exceptions tolerated

	done       int
	exceptions int
	firstErr   error
}

// record takes in one finished task. It returns the task's group when the
// task completed it, and an error when the exception budget is exceeded.
func (ga *gatherer) record(r taskResult) (g TrajectoryGroup, full bool, err error) {
	ga.done++
	spec, st := ga.specs[r.group], &ga.states[r.group]
	if r.err == nil {
		if r.index < 0 {
			r.err = r.grp.Validate()
		} else {
			r.err = r.traj.Validate()
		}
		if r.err != nil {
			r.err = fmt.Errorf("invalid result: %w", r.err)
		}
	}
	switch {
	case r.err != nil:
		ga.exceptions++
		exc := newException(r.err)
		if ga.firstErr == nil {
			ga.firstErr = fmt.Errorf("group %d%s: %w", r.group, r.where(), r.err)
		}
		if r.index < 0 {
			g = TrajectoryGroup{Exceptions: []Exception{exc}, Metadata: spec.Metadata}
		} else {
			st.excs[r.index] = &exc
		}
		ga.prog.exception()
	case r.index < 0:
		g = r.grp
		if g.Metadata == nil {
			g.Metadata = spec.Metadata
		}
		for i := range g.Trajectories {
			recordCompletionTokens(&g.Trajectories[i])
			ga.prog.trajectory(&g.Trajectories[i])
		}
	default:
		recordCompletionTokens(&r.traj)
		ga.prog.trajectory(&r.traj)
		st.trajs[r.index] = &r.traj
	}
	ga.prog.advance()
	if float64(ga.exceptions) > ga.budget {
		return g, false, fmt.Errorf("art: gather: %w: %d of %d rollouts failed, budget %v; first: %w",
			ErrTooManyExceptions, ga.exceptions, ga.total, ga.budget, ga.firstErr)
	}
	if st.left--; st.left > 0 {
		return g, false, nil
	}
	if r.index >= 0 {
		g = st.group(spec)
	}
	return g, true, nil
}

// GatherGroups gathers one group of groupSize rollouts per scenario, each
// calling rollout with its scenario, as ART's gather_trajectory_groups does
// with one TrajectoryGroup per scenario. It is the usual way to gather: the
// rollout is one function of a scenario, and GRPO compares the rollouts of
// the same scenario. The i-th group belongs to scenarios[i] (unless
// AfterEach drops or splits groups). Failures, exceptions, metrics and
// cancellation behave as in GatherTrajectoryGroups, the general form.
// MaxGroupSize bounds GatherGroups' group size: GRPO compares a scenario's
// rollouts, usually 4 to 64 of them; a size past this is a mistake, not a
// group, and would only exhaust memory.
const MaxGroupSize = 1 << 14

func GatherGroups[S any](ctx context.Context, scenarios []S, groupSize int, rollout func(context.Context, S) (Trajectory, error), opts GatherOptions) ([]TrajectoryGroup, error) {
	if groupSize < 1 || groupSize > MaxGroupSize {
		return nil, fmt.Errorf("art: gather: group size %d: must be between 1 and %d", groupSize, MaxGroupSize)
	}
	if rollout == nil {
		return nil, errors.New("art: gather: nil rollout")
	}
	specs := make([]GroupSpec, len(scenarios))
	for i, s := range scenarios {
		rs := make([]Rollout, groupSize)
		for j := range rs {
			rs[j] = func(ctx context.Context) (Trajectory, error) { return rollout(ctx, s) }
		}
		specs[i] = GroupSpec{Rollouts: rs}
	}
	return GatherTrajectoryGroups(ctx, specs, opts)
}

type task struct {
	group, index int // index is -1 for a Run function
}

type taskResult struct {
	task
	traj Trajectory
	grp  TrajectoryGroup
	err  error
}

func (r *taskResult) where() string {
	if r.index < 0 {
		return ""
	}
	return " rollout " + strconv.Itoa(r.index)
}

type afterResult struct {
	group  int
	groups []TrajectoryGroup
	err    error
}

// groupState collects the results of one group's rollouts by index.
type groupState struct {
	trajs []*Trajectory
	excs  []*Exception
	left  int
}

func (st *groupState) group(spec GroupSpec) TrajectoryGroup {
	g := TrajectoryGroup{Metadata: spec.Metadata}
	for _, t := range st.trajs {
		if t != nil {
			g.Trajectories = append(g.Trajectories, *t)
		}
	}
	for _, e := range st.excs {
		if e != nil {
			g.Exceptions = append(g.Exceptions, *e)
		}
	}
	return g
}

// launch starts the tasks in order, each after taking a slot of sem (all at
// once if sem is nil), and stops launching when ctx is done. Every started
// task sends exactly one result; the receiver gives the slot back.
func launch(ctx context.Context, seed int64, specs []GroupSpec, tasks []task, sem chan struct{}, results chan<- taskResult) {
	for _, tk := range tasks {
		if sem != nil {
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
				return
			}
		} else if ctx.Err() != nil {
			return
		}
		go func() {
			r := taskResult{task: tk}
			returned := false
			ctx, span := startRollout(ctx, tk)
			defer func() {
				if v := recover(); v != nil {
					r.err = &PanicError{Value: v, Stack: debug.Stack()}
				} else if !returned {
					r.err = errors.New("rollout goroutine exited without returning (runtime.Goexit)")
				}
				tracing.End(span, r.err)
				results <- r
			}()
			spec := specs[tk.group]
			rctx := withRollout(ctx, seed, tk.group, max(tk.index, 0))
			if tk.index < 0 {
				r.grp, r.err = spec.Run(rctx)
			} else {
				r.traj, r.err = spec.Rollouts[tk.index](rctx)
			}
			returned = true
		}()
	}
}

// callAfterEach runs f on g, turning a panic into an error and checking the
// groups it returns.
func callAfterEach(ctx context.Context, f func(context.Context, TrajectoryGroup) ([]TrajectoryGroup, error), gi int, g TrajectoryGroup) (r afterResult) {
	r.group = gi
	returned := false
	defer func() {
		if v := recover(); v != nil {
			r.groups, r.err = nil, &PanicError{Value: v, Stack: debug.Stack()}
		} else if !returned {
			r.groups, r.err = nil, errors.New("AfterEach exited its goroutine without returning (runtime.Goexit)")
		}
	}()
	r.groups, r.err = f(ctx, g)
	returned = true
	if r.err == nil {
		for i := range r.groups {
			if err := r.groups[i].Validate(); err != nil {
				r.groups, r.err = nil, fmt.Errorf("returned an invalid group %d: %w", i, err)
				break
			}
		}
	}
	return r
}

func newException(err error) Exception {
	e := Exception{Type: fmt.Sprintf("%T", err), Message: err.Error(), Err: err}
	if pe := (*PanicError)(nil); errors.As(err, &pe) {
		e.Type, e.Stack = "panic", string(pe.Stack)
	}
	return e
}

// recordCompletionTokens sets the metric "completion_tokens" of t to the
// mean number of sampled tokens per choice with logprobs, as ART's gather
// does, when t has such choices.
func recordCompletionTokens(t *Trajectory) {
	var choices, tokens int
	for _, it := range t.MessagesAndChoices {
		if it.Choice != nil && it.Choice.Logprobs != nil {
			choices++
			tokens += len(it.Choice.Logprobs)
		}
	}
	if choices > 0 {
		t.SetMetric("completion_tokens", float64(tokens)/float64(choices))
	}
}

// progress shows a tqdm-like bar with running means. A progress with a nil
// bar does nothing.
type progress struct {
	bar        *progressbar.ProgressBar
	desc       string
	keys       []string // metric names in order of first appearance
	sums       map[string]float64
	counts     map[string]int
	exceptions int
}

func newProgress(opts GatherOptions, total int) *progress {
	w := opts.ProgressWriter
	if w == nil {
		w = os.Stderr
	}
	if opts.Quiet || total == 0 || !isTerminal(w) {
		return &progress{}
	}
	desc := opts.Description
	if desc == "" {
		desc = "gather"
	}
	return newProgressBar(w, desc, total)
}

func newProgressBar(w io.Writer, desc string, total int) *progress {
	return &progress{
		desc:   desc,
		sums:   map[string]float64{},
		counts: map[string]int{},
		bar: progressbar.NewOptions(total,
			progressbar.OptionSetWriter(w),
			progressbar.OptionSetDescription(desc),
			progressbar.OptionShowCount(),
			progressbar.OptionSetElapsedTime(true),
			progressbar.OptionSetPredictTime(true),
			progressbar.OptionThrottle(100*time.Millisecond),
			progressbar.OptionFullWidth(),
			progressbar.OptionSetRenderBlankState(true),
			progressbar.OptionOnCompletion(func() { fmt.Fprintln(w) }),
		),
	}
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(interface{ Fd() uintptr })
	return ok && term.IsTerminal(int(f.Fd()))
}

func (p *progress) add(key string, v float64) {
	if _, ok := p.sums[key]; !ok {
		p.keys = append(p.keys, key)
	}
	p.sums[key] += v
	p.counts[key]++
}

func (p *progress) trajectory(t *Trajectory) {
	if p.bar == nil {
		return
	}
	p.add("reward", t.Reward)
	for _, k := range slices.Sorted(maps.Keys(t.Metrics)) {
		p.add(k, t.Metrics[k])
	}
}

func (p *progress) exception() {
	if p.bar != nil {
		p.exceptions++
	}
}

// postfix renders the running means, exceptions, then token counts last.
func (p *progress) postfix() string {
	var b strings.Builder
	var last []string
	for _, k := range p.keys {
		if k == "completion_tokens" || k == "prompt_tokens" {
			last = append(last, k)
			continue
		}
		fmt.Fprintf(&b, " %s=%.3g", k, p.sums[k]/float64(p.counts[k]))
	}
	if p.exceptions > 0 {
		fmt.Fprintf(&b, " exceptions=%d", p.exceptions)
	}
	for _, k := range last {
		fmt.Fprintf(&b, " %s=%.3g", k, p.sums[k]/float64(p.counts[k]))
	}
	return b.String()
}

func (p *progress) advance() {
	if p.bar == nil {
		return
	}
	p.bar.Describe(p.desc + p.postfix())
	p.bar.Add(1)
}

func (p *progress) finish() {
	if p.bar != nil {
		p.bar.Finish()
	}
}

func (p *progress) abort() {
	if p.bar != nil {
		p.bar.Exit()
	}
}
