package art

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/artgo/art/store"
)

// DefaultSplit is the split Log uses when given none, as in ART.
const DefaultSplit = "val"

// LogOptions configures Model.Log and TrainableModel.Log.
type LogOptions struct {
	// Split names the data split: "train", "val" (the default), "test" or
	// any other valid name.
	Split string
	// Step is the step to log at; nil means the model's current step.
	Step *int
	// Metrics are logged along with the groups' aggregates and override
	// them; typically TrainResult.Metrics. Keys are prefixed with the split
	// unless they already start with a metric section or a split.
	Metrics map[string]float64
	// CallID, if set, names this call so that it is done at most once: a
	// Log with the CallID of one that completed on this model logs nothing
	// and returns nil (a retry whose first answer was lost). 1 to 128
	// letters, digits and . _ : -; the model remembers its last 256. The
	// remote backend sends one with every Log, so that it can retry a
	// request whose answer was lost.
	CallID string
}

// processStart anchors "time/wall_clock_sec": seconds since this process
// started logging.
var processStart = time.Now()

// Log records groups at a step: it adds them to
// trajectories/<split>/<step:04d>.parquet (when there are any) and appends
// one row of aggregate metrics to history.jsonl. A second Log at the same
// split and step (after Train, say, or an evaluation logged in parts) keeps
// the groups already in the file and adds its own after them, their
// group_index continuing after the file's (see store.AppendTrajectories);
// its history row holds the aggregates of its own groups:
//
//	<split>/reward            mean reward over trajectories
//	<split>/exception_rate    exceptions / (trajectories + exceptions)
//	<split>/reward_std_dev    mean of the within-group population std
//	<split>/<metric>          mean of each trajectory metric over the trajectories that have it
//	<split>/group_<metric>    mean of each group metric over groups with trajectories
//	the keys of opts.Metrics, training_step, time/wall_clock_sec, step, recorded_at
//
// A "train" log with groups adds ART's data metrics: data/step_num_scenarios
// (distinct metadata scenario_id values), data/step_actor_tokens (sampled
// tokens), and running totals of every data/step_* and time/step_* metric
// as data/cum/* and time/cum/* (data/cum/num_unique_scenarios too), kept in
// state.json across restarts.
//
// A prompted Model logs at step 0 unless opts.Step says otherwise. Log works
// without groups to record only opts.Metrics.
//
// Log is safe to retry: a call that failed part-way (a full disk, a damaged
// state.json) leaves a note in state.json, and the same call made again
// (same split, step, groups and metrics) completes what is missing without
// writing any of it twice. A call that completed is done again unless it
// carries opts.CallID. Log calls of one model run one at a time, across
// goroutines and processes.
func (m *Model) Log(ctx context.Context, groups []TrajectoryGroup, opts LogOptions) error {
	if ctx == nil {
		return errNilContext("log")
	}
	step := 0
	if opts.Step != nil {
		step = *opts.Step
	}
	return m.log(ctx, groups, opts, step)
}

// Log is Model.Log with the step defaulting to the latest checkpoint step.
func (m *TrainableModel) Log(ctx context.Context, groups []TrajectoryGroup, opts LogOptions) error {
	if ctx == nil {
		return errNilContext("log")
	}
	var step int
	if opts.Step != nil {
		step = *opts.Step
	} else {
		var err error
		if step, err = m.Step(ctx); err != nil {
			return err
		}
	}
	return m.Model.log(ctx, groups, opts, step)
}

// errNilContext is the error of a call given a nil context, which would
// otherwise panic deep inside (tracing, HTTP).
func errNilContext(what string) error {
	return fmt.Errorf("art: %s: nil context (use context.Background())", what)
}

func (m *Model) log(ctx context.Context, groups []TrajectoryGroup, opts LogOptions, step int) error {
	split := opts.Split
	if split == "" {
		split = DefaultSplit
	}
	if err := store.ValidateName(split); err != nil {
		return fmt.Errorf("art: log: split: %w", err)
	}
	if step < 0 {
		return fmt.Errorf("art: log: negative step %d", step)
	}
	if opts.CallID != "" {
		if err := store.ValidateCallID(opts.CallID); err != nil {
			return fmt.Errorf("art: log: %w", err)
		}
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("art: log: %w", err)
	}
	d, err := m.Dir()
	if err != nil {
		return err
	}
	var rows []store.TrajectoryRow
	if len(groups) > 0 {
		if rows, err = trajectoryRows(groups); err != nil {
			return fmt.Errorf("art: log model %q: %w", m.Name, err)
		}
	}
	if err := m.logOnce(d, split, step, groups, rows, opts.Metrics, opts.CallID); err != nil {
		return fmt.Errorf("art: log model %q: %w", m.Name, err)
	}
	return nil
}

// logOnce writes a Log call through the store's journal (store.LogCall), so
// that the same call retried after a failure completes what is missing
// and repeats nothing: its groups are appended once, its totals added
// once, its history row written once. A call with the same split, step,
// groups and metrics as one that failed part-way is taken for its retry; a
// call with the callID of one that completed does nothing.
func (m *Model) logOnce(d *store.ModelDir, split string, step int, groups []TrajectoryGroup, rows []store.TrajectoryRow, extra map[string]float64, callID string) error {
	unlock, err := d.LockLog()
	if err != nil {
		return err
	}
	defer unlock()
	if callID != "" {
		if _, done, err := d.LoggedCall(callID); err != nil || done {
			return err
		}
	}
	key := logKey(split, step, rows, extra)
	call, found, err := d.PendingLog(key)
	if err != nil {
		return err
	}
	switch {
	case found:
	case len(rows) > 0: // saved before the rows land, to name them
		call, err = d.BeginLog(key)
	default: // saved with the history row
		call, err = store.NewLogCall()
	}
	if err != nil {
		return err
	}
	if len(rows) > 0 {
		if _, err := d.AppendTrajectoriesOnce(split, step, rows, call.ID); err != nil {
			return err
		}
	}
	row := call.Row // a failed attempt's row, saved with its totals
	retried := row != nil
	if row == nil {
		metrics, dropped := logMetrics(groups, split, extra)
		if len(dropped) > 0 {
			m.logger().Warn("art: log: metrics left out: a history row holds no NaN or ±Inf", "model", m.Name, "split", split, "step", step, "metrics", dropped)
		}
		if split == "train" && len(groups) > 0 {
			addDataMetrics(groups, metrics)
		}
		addTiming(groups, split, metrics)
		rollUpCosts(metrics)
		// The totals and the row that shows them are saved together.
		_, err := d.UpdateState(func(state map[string]any) error {
			row = nil
			addTotals(state, groups, split, metrics)
			if len(metrics) == 0 {
				store.DropLogCall(state, key)
				return nil
			}
			row = make(map[string]any, len(metrics)+4)
			for k, v := range metrics {
				row[k] = v
			}
			row["training_step"] = step
			row["time/wall_clock_sec"] = time.Since(processStart).Seconds()
			row["step"] = step
			row["recorded_at"] = time.Now().UTC().Format(time.RFC3339Nano)
			call.Row = row
			return store.PutLogCall(state, key, call)
		})
		if err != nil {
			return err
		}
	}
	if row != nil {
		written := false
		if retried {
			at, _ := row["recorded_at"].(string)
			if written, err = d.HistoryHasRow(at); err != nil {
				return err
			}
		}
		if !written {
			if err := d.AppendHistory(row); err != nil {
				return err
			}
		}
	}
	return d.EndLog(key, callID, step)
}

// logKey names a Log call by its content: split, step, rows and metrics
// (%v prints floats in their shortest exact form, NaN included).
func logKey(split string, step int, rows []store.TrajectoryRow, metrics map[string]float64) string {
	h := sha256.New()
	fmt.Fprintf(h, "%q %d %d %v\n", split, step, len(rows), rows)
	for _, k := range slices.Sorted(maps.Keys(metrics)) {
		fmt.Fprintf(h, "%q %v\n", k, metrics[k])
	}
	return hex.EncodeToString(h.Sum(nil)[:16])
}

// qualifyMetric prefixes key with the split unless its first path element is
// a metric section, a split, or this split.
func qualifyMetric(key, split string) string {
	first, _, ok := strings.Cut(key, "/")
	if !ok {
		return split + "/" + key
	}
	switch first {
	case split,
		// ART's metric sections and splits
		"reward", "loss", "offpolicy", "pipeline", "throughput", "costs", "time", "data",
		"watch", // the collapse watch (see Watch)
		"train", "val", "test":
		return key
	}
	return split + "/" + key
}

// setQualified copies m into out under qualified keys. When a key without a
// prefix and one with it collide ("n" and "val/n"), the explicit one wins.
func setQualified(out, m map[string]float64, split string) {
	for k, v := range m {
		if q := qualifyMetric(k, split); q != k {
			out[q] = v
		}
	}
	for k, v := range m {
		if qualifyMetric(k, split) == k {
			out[k] = v
		}
	}
}

// mean accumulates an average.
type mean struct{ sum, n float64 }

func (a *mean) add(v float64) { a.sum += v; a.n++ }

// logMetrics computes the history row's metrics for groups (see Log), with
// extra merged in last. Non-finite values are left out; dropped names
// them, sorted.
func logMetrics(groups []TrajectoryGroup, split string, extra map[string]float64) (out map[string]float64, dropped []string) {
	out = map[string]float64{}
	if len(groups) > 0 {
		var reward, exceptionRate, stdDev mean
		traj := map[string]*mean{}
		group := map[string]*mean{}
		addTo := func(m map[string]*mean, k string, v float64) {
			a := m[k]
			if a == nil {
				a = &mean{}
				m[k] = a
			}
			a.add(v)
		}
		for _, g := range groups {
			for range g.Exceptions {
				exceptionRate.add(1)
			}
			if len(g.Trajectories) == 0 {
				continue
			}
			for _, t := range g.Trajectories {
				exceptionRate.add(0)
				reward.add(t.Reward)
				for k, v := range t.Metrics {
					addTo(traj, k, v)
				}
			}
			for k, v := range g.Metrics {
				addTo(group, k, v)
			}
			if len(g.Trajectories) > 1 {
				stdDev.add(rewardStdDev(g.Trajectories))
			}
		}
		means := make(map[string]float64, len(traj))
		for k, a := range traj {
			means[k] = a.sum / a.n
		}
		setQualified(out, means, split)
		for k, a := range group {
			out[split+"/group_"+k] = a.sum / a.n
		}
		if reward.n > 0 {
			out[split+"/reward"] = reward.sum / reward.n
		}
		if exceptionRate.n > 0 {
			out[split+"/exception_rate"] = exceptionRate.sum / exceptionRate.n
		}
		out[split+"/reward_std_dev"] = 0
		if stdDev.n > 0 {
			out[split+"/reward_std_dev"] = stdDev.sum / stdDev.n
		}
	}
	setQualified(out, extra, split)
	for k, v := range out {
		if !isFinite(v) {
			delete(out, k)
			dropped = append(dropped, k)
		}
	}
	slices.Sort(dropped)
	return out, dropped
}

// addDataMetrics adds ART's data metrics of a training step to metrics:
// data/step_num_scenarios (distinct metadata "scenario_id" values of
// trajectories or groups; the number of groups when none has one) and
// data/step_actor_tokens (sampled tokens of the choices).
func addDataMetrics(groups []TrajectoryGroup, metrics map[string]float64) {
	ids := scenarioIDs(groups)
	groupsWithTrajectories, actorTokens := 0, 0
	for _, g := range groups {
		if len(g.Trajectories) > 0 {
			groupsWithTrajectories++
		}
		for _, t := range g.Trajectories {
			for _, h := range t.Histories() {
				for _, mc := range h.MessagesAndChoices {
					if mc.Choice != nil {
						actorTokens += len(mc.Choice.Logprobs)
					}
				}
			}
		}
	}
	metrics["data/step_num_scenarios"] = float64(groupsWithTrajectories)
	if len(ids) > 0 {
		metrics["data/step_num_scenarios"] = float64(len(ids))
	}
	metrics["data/step_actor_tokens"] = float64(actorTokens)
}

// scenarioIDs returns the distinct metadata "scenario_id" values of the
// groups and their trajectories.
func scenarioIDs(groups []TrajectoryGroup) map[string]bool {
	ids := map[string]bool{}
	for _, g := range groups {
		if id, ok := g.Metadata["scenario_id"]; ok && id != nil {
			ids[fmt.Sprint(id)] = true
		}
		for _, t := range g.Trajectories {
			if id, ok := t.Metadata["scenario_id"]; ok && id != nil {
				ids[fmt.Sprint(id)] = true
			}
		}
	}
	return ids
}

// addTiming adds how long the groups' gather took, as ART's metrics
// builder does, unless metrics already say: time/step_actor_s for split
// "train" (with throughput/avg_actor_tok_per_s, the sampled tokens per
// second of it), time/step_eval_s for any other split. Groups that no
// gather function produced add nothing.
func addTiming(groups []TrajectoryGroup, split string, metrics map[string]float64) {
	secs, ok := gatherSeconds(groups)
	if !ok {
		return
	}
	key := "time/step_eval_s"
	if split == "train" {
		key = "time/step_actor_s"
	}
	if _, set := metrics[key]; !set {
		metrics[key] = secs
	}
	if tokens, ok := metrics["data/step_actor_tokens"]; ok && split == "train" && metrics[key] > 0 {
		if _, set := metrics["throughput/avg_actor_tok_per_s"]; !set {
			metrics["throughput/avg_actor_tok_per_s"] = tokens / metrics[key]
		}
	}
}

// rollUpCosts adds ART's cost roll-ups: costs/train and costs/eval, the
// sums of the costs/train/... and costs/eval/... metrics, and costs/all,
// the sum of every cost (costs/gpu included). A roll-up that metrics
// already hold is kept, and counts in costs/all in place of its parts.
func rollUpCosts(metrics map[string]float64) {
	sections := map[string]float64{} // "costs/<section>" → its total
	for k, v := range metrics {
		rest, ok := strings.CutPrefix(k, "costs/")
		if !ok {
			continue
		}
		section, _, _ := strings.Cut(rest, "/")
		if section != "all" && section != "cum" && k != "costs/train" && k != "costs/eval" {
			sections["costs/"+section] += v
		}
	}
	for _, k := range []string{"costs/train", "costs/eval"} {
		if v, ok := metrics[k]; ok {
			sections[k] = v
		} else if v, ok := sections[k]; ok {
			metrics[k] = v
		}
	}
	if _, ok := metrics["costs/all"]; !ok && len(sections) > 0 {
		var all float64
		for _, v := range sections {
			all += v
		}
		metrics["costs/all"] = all
	}
}

// addTotals adds the running totals of a log's metrics to state (state.json
// being updated), so that they survive restarts: data/cum/* and time/cum/*
// for every data/step_* and time/step_* metric, costs/cum/{train,eval,all}
// for the cost roll-ups, and, for a "train" log with groups,
// data/cum/num_unique_scenarios. A "train" log with groups shows every
// total; other logs show the totals they changed.
func addTotals(state map[string]any, groups []TrajectoryGroup, split string, metrics map[string]float64) {
	train := split == "train" && len(groups) > 0
	changed := map[string]float64{}
	for k, v := range metrics {
		if cum := cumulativeKey(k); cum != "" {
			changed[cum] = v
		}
	}
	if !train && len(changed) == 0 {
		return
	}
	totals, _ := state["metric_totals"].(map[string]any)
	if totals == nil {
		totals = map[string]any{}
	}
	for cum, v := range changed {
		total, _ := totals[cum].(float64)
		totals[cum] = total + v
		metrics[cum] = total + v
	}
	if train {
		for k, v := range totals {
			if f, ok := v.(float64); ok {
				metrics[k] = f
			}
		}
	}
	state["metric_totals"] = totals
	ids := scenarioIDs(groups)
	if train && len(ids) > 0 {
		seen, _ := state["scenario_ids"].([]any)
		known := make(map[string]bool, len(seen))
		for _, v := range seen {
			known[fmt.Sprint(v)] = true
		}
		for id := range ids {
			if !known[id] {
				known[id] = true
				seen = append(seen, id)
			}
		}
		state["scenario_ids"] = seen
		metrics["data/cum/num_unique_scenarios"] = float64(len(seen))
	}
}

// cumulativeKey names the running total of metric k, or returns "" if k
// has none.
func cumulativeKey(k string) string {
	if rest, ok := strings.CutPrefix(k, "data/step_"); ok {
		return "data/cum/" + rest
	}
	if rest, ok := strings.CutPrefix(k, "time/step_"); ok {
		return "time/cum/" + rest
	}
	switch k {
	case "costs/train", "costs/eval", "costs/all":
		return "costs/cum/" + strings.TrimPrefix(k, "costs/")
	}
	return ""
}

// rewardStdDev returns the population standard deviation of the rewards.
func rewardStdDev(ts []Trajectory) float64 {
	var mu float64
	for _, t := range ts {
		mu += t.Reward
	}
	mu /= float64(len(ts))
	var ss float64
	for _, t := range ts {
		ss += (t.Reward - mu) * (t.Reward - mu)
	}
	return math.Sqrt(ss / float64(len(ts)))
}

// trajectoryRows converts groups to parquet rows, one per trajectory, with
// ART's columns. Exceptions and additional histories are not stored, as in
// ART; a choice keeps its sampled tokens (id, text, logprob) in our own
// optional logprobs column, for the dashboard's per-token view.
func trajectoryRows(groups []TrajectoryGroup) ([]store.TrajectoryRow, error) {
	var rows []store.TrajectoryRow
	for gi, g := range groups {
		if err := g.Validate(); err != nil {
			return nil, fmt.Errorf("group %d: %w", gi, err)
		}
		groupMetadata, err := jsonOrEmpty(len(g.Metadata), g.Metadata)
		if err != nil {
			return nil, err
		}
		groupMetrics, err := jsonOrEmpty(len(g.Metrics), g.Metrics)
		if err != nil {
			return nil, err
		}
		for ti := range g.Trajectories {
			t := &g.Trajectories[ti]
			row := store.TrajectoryRow{
				GroupIndex:    int64(gi),
				GroupMetadata: groupMetadata,
				GroupMetrics:  groupMetrics,
				GroupLogs:     nilIfEmpty(g.Logs),
				Reward:        t.Reward,
				Logs:          nilIfEmpty(t.Logs),
			}
			if row.Metrics, err = jsonOrEmpty(len(t.Metrics), t.Metrics); err != nil {
				return nil, err
			}
			if row.Metadata, err = jsonOrEmpty(len(t.Metadata), t.Metadata); err != nil {
				return nil, err
			}
			if row.Tools, err = jsonOrEmpty(len(t.Tools), t.Tools); err != nil {
				return nil, err
			}
			for _, it := range t.MessagesAndChoices {
				mr, err := messageRow(it)
				if err != nil {
					return nil, fmt.Errorf("group %d trajectory %d: %w", gi, ti, err)
				}
				row.Messages = append(row.Messages, mr)
			}
			rows = append(rows, row)
		}
	}
	return rows, nil
}

func messageRow(it MessageOrChoice) (store.MessageRow, error) {
	m := it.AsMessage()
	r := store.MessageRow{Role: m.Role, Trainable: it.Choice != nil}
	if m.Content.Parts != nil {
		b, err := json.Marshal(m.Content.Parts)
		if err != nil {
			return r, err
		}
		r.Content = string(b)
	} else {
		r.Content = m.Content.Text
	}
	if len(m.ToolCalls) > 0 {
		b, err := json.Marshal(m.ToolCalls)
		if err != nil {
			return r, err
		}
		r.ToolCalls = string(b)
	}
	if it.Choice == nil {
		r.ToolCallID = m.ToolCallID
	} else if len(it.Choice.Logprobs) > 0 {
		r.Logprobs = make([]store.TokenRow, len(it.Choice.Logprobs))
		for i, lp := range it.Choice.Logprobs {
			token := lp.Token
			if token == "" && lp.Bytes != nil {
				token = string(lp.Bytes)
			}
			r.Logprobs[i] = store.TokenRow{TokenID: int64(lp.TokenID), Token: token, Logprob: lp.Logprob}
		}
	}
	return r, nil
}

// jsonOrEmpty encodes v, or returns "" (stored as null) when n, its length,
// is 0.
func jsonOrEmpty(n int, v any) (string, error) {
	if n == 0 {
		return "", nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return "", err
	}
	return string(b), nil
}

func nilIfEmpty(s []string) []string {
	if len(s) == 0 {
		return nil
	}
	return s
}
