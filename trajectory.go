package art

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"time"
)

// History is one conversation: its messages and choices in order, and the
// tools offered to the model.
type History struct {
	MessagesAndChoices []MessageOrChoice `json:"messages_and_choices"`
	Tools              []Tool            `json:"tools"`
}

// Messages returns the history as chat messages, each Choice replaced by its
// message: the form to send back to a chat completions API.
func (h History) Messages() []Message { return messagesOf(h.MessagesAndChoices) }

// AddMessage appends context messages.
func (h *History) AddMessage(ms ...Message) {
	h.MessagesAndChoices = appendMessages(h.MessagesAndChoices, ms)
}

// AddChoice appends a sampled turn.
func (h *History) AddChoice(c Choice) {
	h.MessagesAndChoices = append(h.MessagesAndChoices, MessageOrChoice{Choice: &c})
}

// MarshalJSON encodes h with empty lists as [] and no tools as null, as ART.
func (h History) MarshalJSON() ([]byte, error) {
	type history History
	if h.MessagesAndChoices == nil {
		h.MessagesAndChoices = []MessageOrChoice{}
	}
	return json.Marshal(history(h))
}

func appendMessages(items []MessageOrChoice, ms []Message) []MessageOrChoice {
	for _, m := range ms {
		items = append(items, MessageOrChoice{Message: &m})
	}
	return items
}

func messagesOf(items []MessageOrChoice) []Message {
	out := make([]Message, len(items))
	for i, it := range items {
		out[i] = it.AsMessage()
	}
	return out
}

// Trajectory is one rollout: the conversation the agent had, the reward it
// earned, and what else the rollout wants to record.
//
// AdditionalHistories holds further token sequences that share the reward
// (sub-agents, compacted contexts). Metadata values must be scalars (string,
// bool, number or nil); Reward and Metrics must be finite. Validate checks
// both, and encoding to JSON fails with a clear error otherwise.
//
// A Trajectory is not safe for concurrent mutation.
type Trajectory struct {
	MessagesAndChoices   []MessageOrChoice  `json:"messages_and_choices"`
	Tools                []Tool             `json:"tools"`
	AdditionalHistories  []History          `json:"additional_histories"`
	Reward               float64            `json:"reward"`
	InitialPolicyVersion *int               `json:"initial_policy_version"`
	FinalPolicyVersion   *int               `json:"final_policy_version"`
	Metrics              map[string]float64 `json:"metrics"`
	Metadata             map[string]any     `json:"metadata"`
	Logs                 []string           `json:"logs"`

	// StartTime is when the rollout began; Finish measures the duration from
	// it. If zero, AddMessage, AddChoice and Logf set it to the current
	// time. It is not encoded.
	StartTime time.Time `json:"-"`
}

// History returns the main history of t.
func (t *Trajectory) History() History {
	return History{MessagesAndChoices: t.MessagesAndChoices, Tools: t.Tools}
}

// Histories returns every history of t: the main one, then the additional
// ones. Each is trained as its own sequence.
func (t *Trajectory) Histories() []History {
	return append([]History{t.History()}, t.AdditionalHistories...)
}

// Messages returns the main history as chat messages (see History.Messages).
func (t *Trajectory) Messages() []Message { return messagesOf(t.MessagesAndChoices) }

// AddMessage appends context messages to the main history.
func (t *Trajectory) AddMessage(ms ...Message) {
	t.start()
	t.MessagesAndChoices = appendMessages(t.MessagesAndChoices, ms)
}

// AddChoice appends a sampled turn to the main history.
func (t *Trajectory) AddChoice(c Choice) {
	t.start()
	t.MessagesAndChoices = append(t.MessagesAndChoices, MessageOrChoice{Choice: &c})
}

// AddHistory adds a conversation to t: as its main history while that is
// empty, otherwise as an additional history. A rollout that holds one chat
// per step (a game whose board is the whole state) adds each chat this way.
func (t *Trajectory) AddHistory(h History) {
	t.start()
	if len(t.MessagesAndChoices) == 0 && len(t.Tools) == 0 {
		t.MessagesAndChoices, t.Tools = h.MessagesAndChoices, h.Tools
		return
	}
	t.AdditionalHistories = append(t.AdditionalHistories, h)
}

// Logf appends a formatted line to Logs.
func (t *Trajectory) Logf(format string, args ...any) {
	t.start()
	t.Logs = append(t.Logs, fmt.Sprintf(format, args...))
}

// SetMetric sets a metric, creating the Metrics map if needed.
func (t *Trajectory) SetMetric(name string, value float64) {
	if t.Metrics == nil {
		t.Metrics = make(map[string]float64)
	}
	t.Metrics[name] = value
}

// Finish records the rollout's duration in seconds since StartTime as the
// metric "duration". It does nothing if StartTime is zero.
func (t *Trajectory) Finish() {
	if t.StartTime.IsZero() {
		return
	}
	t.SetMetric("duration", time.Since(t.StartTime).Seconds())
}

func (t *Trajectory) start() {
	if t.StartTime.IsZero() {
		t.StartTime = time.Now()
	}
}

// Validate reports whether t can be encoded and trained: a finite reward
// and metrics, scalar metadata, and history items with exactly one of
// Message and Choice set. The error names the offending field.
func (t *Trajectory) Validate() error {
	var errs []error
	if !isFinite(t.Reward) {
		errs = append(errs, fmt.Errorf("art: trajectory reward is %v; it must be finite", t.Reward))
	}
	errs = append(errs, validateMetrics("trajectory", t.Metrics))
	errs = append(errs, validateMetadata("trajectory", t.Metadata))
	errs = append(errs, validateItems("trajectory messages_and_choices", t.MessagesAndChoices))
	for i, h := range t.AdditionalHistories {
		errs = append(errs, validateItems(fmt.Sprintf("trajectory additional_histories[%d]", i), h.MessagesAndChoices))
	}
	return errors.Join(errs...)
}

// MarshalJSON encodes t as ART does: empty lists as [], empty maps as {},
// unset tools and policy versions as null. It fails if Validate does.
func (t Trajectory) MarshalJSON() ([]byte, error) {
	if err := t.Validate(); err != nil {
		return nil, err
	}
	type trajectory Trajectory
	if t.MessagesAndChoices == nil {
		t.MessagesAndChoices = []MessageOrChoice{}
	}
	if t.AdditionalHistories == nil {
		t.AdditionalHistories = []History{}
	}
	if t.Metrics == nil {
		t.Metrics = map[string]float64{}
	}
	if t.Metadata == nil {
		t.Metadata = map[string]any{}
	}
	if t.Logs == nil {
		t.Logs = []string{}
	}
	return json.Marshal(trajectory(t))
}

// UnmarshalJSON decodes t and checks that its metadata holds only scalars.
func (t *Trajectory) UnmarshalJSON(data []byte) error {
	type trajectory Trajectory
	var v trajectory
	if err := json.Unmarshal(data, &v); err != nil {
		return err
	}
	if err := validateMetadata("trajectory", v.Metadata); err != nil {
		return err
	}
	*t = Trajectory(v)
	return nil
}

// Exception records a rollout that failed: its error or panic.
type Exception struct {
	Type    string `json:"type"`      // the Go type of the error, or "panic"
	Message string `json:"message"`   // the error text
	Stack   string `json:"traceback"` // the goroutine stack, for panics
	Err     error  `json:"-"`         // the error itself, when known (not encoded)
}

// TrajectoryGroup is a set of trajectories for the same scenario; advantages
// are computed within a group. Exceptions holds the rollouts of the group
// that failed.
type TrajectoryGroup struct {
	Trajectories []Trajectory       `json:"trajectories"`
	Exceptions   []Exception        `json:"exceptions"`
	Metadata     map[string]any     `json:"metadata"`
	Metrics      map[string]float64 `json:"metrics"`
	Logs         []string           `json:"logs"`

	gathered gatherTime // set by the gather functions, for Log's timing metrics
}

// Validate checks every trajectory (see Trajectory.Validate) and the group's
// own metrics and metadata.
func (g *TrajectoryGroup) Validate() error {
	errs := []error{
		validateMetrics("group", g.Metrics),
		validateMetadata("group", g.Metadata),
	}
	for i := range g.Trajectories {
		if err := g.Trajectories[i].Validate(); err != nil {
			errs = append(errs, fmt.Errorf("trajectory %d: %w", i, err))
		}
	}
	return errors.Join(errs...)
}

// MarshalJSON encodes g with empty lists as [] and empty maps as {}. It fails
// if Validate does.
func (g TrajectoryGroup) MarshalJSON() ([]byte, error) {
	if err := validateMetrics("group", g.Metrics); err != nil {
		return nil, err
	}
	if err := validateMetadata("group", g.Metadata); err != nil {
		return nil, err
	}
	type group TrajectoryGroup
	if g.Trajectories == nil {
		g.Trajectories = []Trajectory{}
	}
	if g.Exceptions == nil {
		g.Exceptions = []Exception{}
	}
	if g.Metadata == nil {
		g.Metadata = map[string]any{}
	}
	if g.Metrics == nil {
		g.Metrics = map[string]float64{}
	}
	if g.Logs == nil {
		g.Logs = []string{}
	}
	return json.Marshal(group(g))
}

// UnmarshalJSON decodes g and checks that its metadata holds only scalars.
func (g *TrajectoryGroup) UnmarshalJSON(data []byte) error {
	type group TrajectoryGroup
	var v group
	if err := json.Unmarshal(data, &v); err != nil {
		return err
	}
	if err := validateMetadata("group", v.Metadata); err != nil {
		return err
	}
	*g = TrajectoryGroup(v)
	return nil
}

func isFinite(f float64) bool { return !math.IsNaN(f) && !math.IsInf(f, 0) }

func validateMetrics(owner string, m map[string]float64) error {
	var errs []error
	for _, k := range slices.Sorted(maps.Keys(m)) {
		if v := m[k]; !isFinite(v) {
			errs = append(errs, fmt.Errorf("art: %s metrics[%q] is %v; it must be finite", owner, k, v))
		}
	}
	return errors.Join(errs...)
}

func validateMetadata(owner string, m map[string]any) error {
	var errs []error
	for _, k := range slices.Sorted(maps.Keys(m)) {
		switch x := m[k].(type) {
		case nil, string, bool, json.Number,
			int, int8, int16, int32, int64, uint, uint8, uint16, uint32, uint64:
		case float64:
			if !isFinite(x) {
				errs = append(errs, fmt.Errorf("art: %s metadata[%q] is %v; it must be finite", owner, k, x))
			}
		case float32:
			if !isFinite(float64(x)) {
				errs = append(errs, fmt.Errorf("art: %s metadata[%q] is %v; it must be finite", owner, k, x))
			}
		default:
			errs = append(errs, fmt.Errorf("art: %s metadata[%q] is a %T; it must be a string, bool, number or nil", owner, k, x))
		}
	}
	return errors.Join(errs...)
}

func validateItems(owner string, items []MessageOrChoice) error {
	for i, it := range items {
		if err := it.validate(); err != nil {
			return fmt.Errorf("art: %s[%d]: %w", owner, i, err)
		}
		if it.Choice == nil {
			continue
		}
		for j, lp := range it.Choice.Logprobs {
			if !isFinite(lp.Logprob) {
				return fmt.Errorf("art: %s[%d]: logprobs[%d] is %v; it must be finite", owner, i, j, lp.Logprob)
			}
			for k, top := range lp.TopLogprobs {
				if !isFinite(top.Logprob) {
					return fmt.Errorf("art: %s[%d]: logprobs[%d].top_logprobs[%d] is %v; it must be finite", owner, i, j, k, top.Logprob)
				}
			}
		}
	}
	return nil
}
