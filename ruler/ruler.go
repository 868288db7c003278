// Package ruler scores trajectories with an LLM judge instead of a
// hand-written reward function: RULER (Relative Universal LLM-Elicited
// Rewards), as OpenPipe ART has it. The judge sees a whole group of
// attempts at one task at once and scores each from 0 to 1 relative to the
// others, which is what GRPO needs: only the differences within a group
// matter.
//
//	judge, err := ruler.NewJudge("openai/o3", "", "")        // or ruler.FromEndpoint(ep)
//	groups, err := art.GatherGroups(ctx, scenarios, 8, rollout, art.GatherOptions{
//		AfterEach: ruler.AfterEach(judge, ruler.Options{}),   // score each group as it completes
//	})
//
// One judge call per group: the messages every trajectory shares are sent
// once as context, each trajectory is a numbered block, and the answer is
// JSON ({"scores":[{"trajectory_id","explanation","score"}]}) requested
// with response_format json_schema. Unlike the original it never fails
// silently: a malformed answer (not JSON, the wrong number of scores, a
// score outside [0, 1]) is retried a bounded number of times and then is
// an error naming the judge, the group and what came back; a dropped group
// (Options.SwallowErrors) is logged and counted; every call is bounded in
// time; and a group is never returned partly scored. Trajectories with
// additional histories are scored too (the original refuses them).
package ruler

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"

	"github.com/artgo/art"
	"github.com/artgo/art/internal/tracing"
)

// Options configure scoring. The zero value is ready to use.
type Options struct {
	// Rubric replaces DefaultRubric, e.g. a task's own criteria.
	Rubric string
	// Timeout bounds each judge call; 0 means 3 minutes.
	Timeout time.Duration
	// MaxRetries is how many times a malformed answer is asked again
	// (with what was wrong); 0 means 2, < 0 none.
	MaxRetries int
	// MaxExplanation, if > 0, bounds each explanation's length in the
	// answer's schema (for small judges under constrained decoding).
	MaxExplanation int
	// SwallowErrors drops a group whose scoring fails instead of failing:
	// ScoreGroup returns nil, the failure is logged and counted in Stats.
	SwallowErrors bool
	// CacheDir holds judge answers ("" means the user cache directory,
	// art/ruler); NoCache turns the cache off.
	CacheDir string
	NoCache  bool
	// Concurrency bounds the judge calls ScoreGroups makes at once; 0
	// means 4.
	Concurrency int
	// Stats, if set, accumulates counts, tokens and cost.
	Stats *Stats
	// Logger receives warnings (nil: slog.Default()).
	Logger *slog.Logger
}

// check rejects what no judge call can use, before any (and whatever
// SwallowErrors says: a mistake in the program is not a failed call).
func check(ctx context.Context, judge Judge, opts Options) error {
	if ctx == nil {
		return errors.New("ruler: nil context (use context.Background())")
	}
	if err := opts.validate(); err != nil {
		return err
	}
	return judge.Validate()
}

// validate rejects negative durations and counts, which would otherwise
// read as the defaults.
func (o *Options) validate() error {
	switch {
	case o.Timeout < 0:
		return fmt.Errorf("ruler: Options.Timeout = %v: must be >= 0 (0 means 3 minutes)", o.Timeout)
	case o.Concurrency < 0:
		return fmt.Errorf("ruler: Options.Concurrency = %d: must be >= 0 (0 means 4)", o.Concurrency)
	case o.MaxExplanation < 0:
		return fmt.Errorf("ruler: Options.MaxExplanation = %d: must be >= 0 (0 means no bound)", o.MaxExplanation)
	}
	return nil
}

func (o *Options) logger() *slog.Logger {
	if o.Logger != nil {
		return o.Logger
	}
	return slog.Default()
}

func (o *Options) stats() *Stats {
	if o.Stats != nil {
		return o.Stats
	}
	return &Stats{}
}

// Score asks judge to score trajectories given as their main histories, in
// one call, and returns one score per history in order. All-identical
// histories are scored once and the score copied.
func Score(ctx context.Context, histories []art.History, judge Judge, opts Options) ([]TrajectoryScore, error) {
	if err := check(ctx, judge, opts); err != nil {
		return nil, err
	}
	subjects := make([][]art.History, len(histories))
	for i, h := range histories {
		subjects[i] = []art.History{h}
	}
	return score(ctx, subjects, judge, opts, "histories")
}

// score builds the prompt, calls the judge (with retries and the cache)
// and maps the answer onto the trajectories. what names them in errors.
func score(ctx context.Context, subjects [][]art.History, judge Judge, opts Options, what string) (_ []TrajectoryScore, err error) {
	if len(subjects) == 0 {
		return nil, nil
	}
	ctx, span := tracing.Start(ctx, "ruler.score", attribute.String("ruler.judge", judge.name()),
		attribute.String("ruler.group", what), attribute.Int("ruler.trajectories", len(subjects)))
	defer func() { tracing.End(span, err) }()
	p, err := NewPrompt(subjects, opts.Rubric)
	if err != nil {
		return nil, err
	}
	if p.Identical && len(subjects) > 1 {
		opts.logger().InfoContext(ctx, "ruler: every trajectory is identical; scoring one and copying its score", "judge", judge.name(), "group", what)
	}
	timeout := opts.Timeout
	if timeout <= 0 {
		timeout = 3 * time.Minute
	}
	retries := opts.MaxRetries
	switch {
	case retries == 0:
		retries = 2
	case retries < 0:
		retries = 0
	}
	st := opts.stats()
	schema := ResponseSchema(p.Expected, opts.MaxExplanation)
	var c *cache
	key := ""
	if !opts.NoCache {
		dir := opts.CacheDir
		if dir == "" {
			if dir, err = defaultCacheDir(); err != nil {
				return nil, err
			}
		}
		c, key = &cache{dir: dir}, cacheKey(judge, p.Messages, schema)
		if a, ok := c.get(key); ok {
			if scores, err := ParseAnswer(a.Content, p.Expected); err == nil {
				st.cacheHits.Add(1)
				span.SetAttributes(attribute.Bool("ruler.cache_hit", true))
				return expand(scores, len(subjects)), nil
			}
		}
	}
	msgs := p.Messages
	var last error
	for attempt := 0; attempt <= retries; attempt++ {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("ruler: scoring %s with %s: %w", what, judge.name(), err)
		}
		if attempt > 0 {
			st.retries.Add(1)
		}
		st.calls.Add(1)
		a, err := judge.call(ctx, st, msgs, schema, timeout, attempt)
		if err != nil {
			if errors.Is(err, ErrUnreachable) {
				return nil, fmt.Errorf("ruler: scoring %s with %s at %s: %w", what, judge.name(), judge.BaseURL, err)
			}
			last = err
			continue
		}
		scores, err := ParseAnswer(a.Content, p.Expected)
		if err != nil {
			if a.FinishReason == "length" {
				err = fmt.Errorf("%w (the answer was cut by the token limit)", err)
			}
			last = fmt.Errorf("%w; the judge answered %q", err, excerpt(a.Content))
			opts.logger().WarnContext(ctx, "ruler: malformed judge answer", "judge", judge.name(), "group", what, "attempt", attempt+1, "err", last)
			msgs = append(p.Messages[:len(p.Messages):len(p.Messages)], art.AssistantMsg(a.Content),
				art.UserMsg(fmt.Sprintf("That answer is invalid: %v. Answer again with only the JSON object: exactly %d scores, one per trajectory, trajectory_id \"1\" to \"%d\", each score from 0 to 1.", err, p.Expected, p.Expected)))
			continue
		}
		if c != nil {
			if err := c.put(key, a); err != nil {
				opts.logger().WarnContext(ctx, "ruler: could not cache the judge's answer", "err", err)
			}
		}
		return expand(scores, len(subjects)), nil
	}
	return nil, fmt.Errorf("ruler: scoring %s with %s: no valid answer after %d attempts: %w", what, judge.name(), retries+1, last)
}

// expand copies the one score of identical trajectories to all of them.
func expand(scores []TrajectoryScore, n int) []TrajectoryScore {
	if len(scores) == n {
		return scores
	}
	out := make([]TrajectoryScore, n)
	for i := range out {
		out[i] = scores[0]
	}
	return out
}

func excerpt(s string) string {
	const max = 300
	if len(s) > max {
		return s[:max] + "…"
	}
	return s
}

// ScoreGroup scores a group's trajectories (with their additional
// histories) and returns a new group: each trajectory's reward is its
// score, with metrics "ruler_score" and "independent_reward" (the reward it
// had) and the log line "RULER explanation: …". The input is not changed.
// A group without trajectories is returned as it is.
//
// On failure it returns an error, or, with opts.SwallowErrors, nil and no
// error after logging and counting the drop.
func ScoreGroup(ctx context.Context, group art.TrajectoryGroup, judge Judge, opts Options) (*art.TrajectoryGroup, error) {
	if err := check(ctx, judge, opts); err != nil {
		return nil, err
	}
	what := groupName(group, -1)
	return scoreGroup(ctx, group, judge, opts, what)
}

func scoreGroup(ctx context.Context, group art.TrajectoryGroup, judge Judge, opts Options, what string) (*art.TrajectoryGroup, error) {
	out := group
	out.Trajectories = make([]art.Trajectory, len(group.Trajectories))
	copy(out.Trajectories, group.Trajectories)
	if len(out.Trajectories) == 0 {
		return &out, nil
	}
	subjects := make([][]art.History, len(group.Trajectories))
	for i := range group.Trajectories {
		subjects[i] = group.Trajectories[i].Histories()
	}
	scores, err := score(ctx, subjects, judge, opts, what)
	if err != nil {
		if opts.SwallowErrors && ctx.Err() == nil {
			opts.stats().dropped.Add(1)
			opts.logger().ErrorContext(ctx, "ruler: group dropped: its scoring failed", "judge", judge.name(), "group", what, "err", err)
			return nil, nil
		}
		opts.stats().failed.Add(1)
		return nil, err
	}
	for i, s := range scores {
		t := &out.Trajectories[i]
		t.Metrics = cloneMetrics(t.Metrics)
		t.Metrics["independent_reward"] = t.Reward
		t.Metrics["ruler_score"] = s.Score
		t.Logs = append(t.Logs[:len(t.Logs):len(t.Logs)], "RULER explanation: "+s.Explanation)
		t.Reward = s.Score
	}
	return &out, nil
}

func cloneMetrics(m map[string]float64) map[string]float64 {
	out := make(map[string]float64, len(m)+2)
	for k, v := range m {
		out[k] = v
	}
	return out
}

// groupName names a group in messages: its scenario id when its metadata
// or its first trajectory's has one, and its index when known.
func groupName(g art.TrajectoryGroup, index int) string {
	id := g.Metadata["scenario_id"]
	if id == nil && len(g.Trajectories) > 0 {
		id = g.Trajectories[0].Metadata["scenario_id"]
	}
	switch {
	case id != nil && index >= 0:
		return fmt.Sprintf("group %d (scenario %v)", index, id)
	case id != nil:
		return fmt.Sprintf("group of scenario %v", id)
	case index >= 0:
		return fmt.Sprintf("group %d", index)
	}
	return "group"
}

// ScoreGroups scores groups concurrently (opts.Concurrency at a time) and
// returns the scored groups in order, leaving out the ones dropped under
// SwallowErrors. It fails with the first error otherwise, cancelling the
// calls still running.
func ScoreGroups(ctx context.Context, groups []art.TrajectoryGroup, judge Judge, opts Options) ([]art.TrajectoryGroup, error) {
	if err := check(ctx, judge, opts); err != nil {
		return nil, err
	}
	n := opts.Concurrency
	if n <= 0 {
		n = 4
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	out := make([]*art.TrajectoryGroup, len(groups))
	errs := make([]error, len(groups))
	sem := make(chan struct{}, n)
	var wg sync.WaitGroup
	for i := range groups {
		wg.Add(1)
		go func() {
			defer wg.Done()
			select {
			case sem <- struct{}{}:
				defer func() { <-sem }()
			case <-ctx.Done():
				errs[i] = ctx.Err()
				return
			}
			out[i], errs[i] = scoreGroup(ctx, groups[i], judge, opts, groupName(groups[i], i))
			if errs[i] != nil {
				cancel()
			}
		}()
	}
	wg.Wait()
	for _, err := range errs { // the first real error, not the cancellations it caused
		if err != nil && !errors.Is(err, context.Canceled) {
			return nil, err
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	var scored []art.TrajectoryGroup
	for _, g := range out {
		if g != nil {
			scored = append(scored, *g)
		}
	}
	return scored, nil
}

// AfterEach returns a GatherOptions.AfterEach hook that scores each group
// as soon as its rollouts finish. With opts.SwallowErrors a group whose
// scoring fails is dropped (zero groups); otherwise the gather fails.
func AfterEach(judge Judge, opts Options) func(context.Context, art.TrajectoryGroup) ([]art.TrajectoryGroup, error) {
	return func(ctx context.Context, g art.TrajectoryGroup) ([]art.TrajectoryGroup, error) {
		scored, err := ScoreGroup(ctx, g, judge, opts)
		if err != nil || scored == nil {
			return nil, err
		}
		return []art.TrajectoryGroup{*scored}, nil
	}
}
