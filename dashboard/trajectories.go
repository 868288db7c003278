package dashboard

import (
	"cmp"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/artgo/art/store"
)

// fileCache keeps the rows of the trajectory files read last: a step of a
// large run (10k trajectories) takes a few hundred milliseconds to decode,
// and the browser asks for pages, sorts and single trajectories of the same
// step one after another. An entry is valid while its file's size and
// modification time are unchanged.
type fileCache struct {
	max     int
	mu      sync.Mutex // guards entries
	entries []*cacheEntry
}

type cacheEntry struct {
	path  string
	size  int64
	mtime time.Time
	ready chan struct{} // closed once rows and err are set
	rows  []store.TrajectoryRow
	err   error
}

func newFileCache(max int) *fileCache { return &fileCache{max: max} }

// rows returns the file's rows, decoding it at most once per version even
// when several requests ask at the same time.
func (c *fileCache) rows(path string) ([]store.TrajectoryRow, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	var e *cacheEntry
	for i, x := range c.entries {
		if x.path == path {
			if x.size == st.Size() && x.mtime.Equal(st.ModTime()) {
				e = x
			}
			c.entries = slices.Delete(c.entries, i, i+1)
			break
		}
	}
	if e == nil {
		e = &cacheEntry{path: path, size: st.Size(), mtime: st.ModTime(), ready: make(chan struct{})}
		go func() {
			e.rows, e.err = store.ReadTrajectoriesFile(path)
			close(e.ready)
		}()
	}
	c.entries = append(c.entries, e) // most recently used last
	if len(c.entries) > c.max {
		c.entries = slices.Delete(c.entries, 0, len(c.entries)-c.max)
	}
	c.mu.Unlock()
	<-e.ready
	return e.rows, e.err
}

// stepRows returns the rows of the trajectory file named by the request's
// run, split and step.
func (d *Dashboard) stepRows(r *http.Request) (rows []store.TrajectoryRow, split string, step int, err error) {
	q := r.URL.Query()
	run, err := d.findRun(q.Get("run"))
	if err != nil {
		return nil, "", 0, err
	}
	split = q.Get("split")
	if err := store.ValidateName(split); err != nil {
		return nil, "", 0, &errAnswer{http.StatusBadRequest, "split: " + err.Error()}
	}
	step, err = strconv.Atoi(q.Get("step"))
	if err != nil || step < 0 {
		return nil, "", 0, &errAnswer{http.StatusBadRequest, fmt.Sprintf("step %q: want a step number", q.Get("step"))}
	}
	all, err := run.Dir.ListTrajectories()
	if err != nil {
		return nil, "", 0, err
	}
	if !slices.Contains(all[split], step) {
		return nil, "", 0, &errAnswer{http.StatusNotFound, fmt.Sprintf("%s has no %s trajectories at step %d (steps with %s trajectories: %s)",
			run.ID(), split, step, split, stepList(all[split]))}
	}
	rows, err = d.cache.rows(run.Dir.TrajectoriesPath(split, step))
	if err != nil {
		return nil, "", 0, fmt.Errorf("cannot read the %s trajectories of step %d: %w", split, step, err)
	}
	return rows, split, step, nil
}

func stepList(steps []int) string {
	if len(steps) == 0 {
		return "none"
	}
	const show = 12
	var parts []string
	for i, s := range steps {
		if i == show/2 && len(steps) > show {
			parts = append(parts, "…")
			steps = steps[len(steps)-show/2:]
			for _, s := range steps {
				parts = append(parts, strconv.Itoa(s))
			}
			break
		}
		parts = append(parts, strconv.Itoa(s))
	}
	return strings.Join(parts, ", ")
}

// trajectorySummary is one line of the trajectory list.
type trajectorySummary struct {
	Index       int                `json:"index"` // row in the file
	Group       int64              `json:"group"`
	Reward      number             `json:"reward"`
	Metrics     map[string]float64 `json:"metrics,omitempty"`
	Messages    int                `json:"messages"`
	Preview     string             `json:"preview"` // the start of the first user message
	HasLogprobs bool               `json:"has_logprobs,omitempty"`
}

const (
	defaultPage = 50
	maxPage     = 500
	previewLen  = 140
)

// handleTrajectories lists a step's trajectories, filtered (min, max reward;
// q, a case-insensitive text in any message), sorted (sort=reward, -reward
// or index) and paged (offset, limit).
func (d *Dashboard) handleTrajectories(w http.ResponseWriter, r *http.Request) {
	rows, _, _, err := d.stepRows(r)
	if err != nil {
		answer(w, err)
		return
	}
	q := r.URL.Query()
	bound := func(name string, def float64) (float64, bool) {
		s := q.Get(name)
		if s == "" {
			return def, true
		}
		v, err := strconv.ParseFloat(s, 64)
		if err != nil {
			writeError(w, http.StatusBadRequest, fmt.Sprintf("%s %q: want a number", name, s))
			return 0, false
		}
		return v, true
	}
	lo, ok1 := bound("min", -1e308)
	if !ok1 {
		return
	}
	hi, ok2 := bound("max", 1e308)
	if !ok2 {
		return
	}
	count := func(name string) (int, bool) {
		s := q.Get(name)
		if s == "" {
			return 0, true
		}
		n, err := strconv.Atoi(s)
		if err != nil || n < 0 {
			writeError(w, http.StatusBadRequest, fmt.Sprintf("%s %q: want a whole number ≥ 0", name, s))
			return 0, false
		}
		return n, true
	}
	offset, ok3 := count("offset")
	if !ok3 {
		return
	}
	limit, ok4 := count("limit")
	if !ok4 {
		return
	}
	if limit == 0 {
		limit = defaultPage
	}
	limit = min(limit, maxPage)
	text := strings.ToLower(q.Get("q"))

	var idx []int
	var sum, lowest, highest float64
	for i := range rows {
		rw := rows[i].Reward
		if i == 0 || rw < lowest {
			lowest = rw
		}
		if i == 0 || rw > highest {
			highest = rw
		}
		sum += rw
		if rw < lo || rw > hi || text != "" && !mentions(&rows[i], text) {
			continue
		}
		idx = append(idx, i)
	}
	switch sort := q.Get("sort"); sort {
	case "", "index":
	case "reward", "-reward":
		sign := 1
		if sort == "-reward" {
			sign = -1
		}
		slices.SortStableFunc(idx, func(a, b int) int { return sign * cmp.Compare(rows[a].Reward, rows[b].Reward) })
	default:
		writeError(w, http.StatusBadRequest, fmt.Sprintf("sort %q: want index, reward or -reward", sort))
		return
	}
	matched := len(idx)
	offset = max(0, min(offset, matched))
	idx = idx[offset:min(matched, offset+limit)]
	items := make([]trajectorySummary, len(idx))
	for k, i := range idx {
		row := &rows[i]
		s := trajectorySummary{Index: i, Group: row.GroupIndex, Reward: number(row.Reward), Messages: len(row.Messages)}
		json.Unmarshal([]byte(row.Metrics), &s.Metrics) // a malformed column shows as no metrics here
		for _, m := range row.Messages {
			if s.Preview == "" && m.Role == "user" {
				s.Preview = preview(m.Content)
			}
			s.HasLogprobs = s.HasLogprobs || len(m.Logprobs) > 0
		}
		if s.Preview == "" && len(row.Messages) > 0 {
			s.Preview = preview(row.Messages[0].Content)
		}
		items[k] = s
	}
	out := map[string]any{"total": len(rows), "matched": matched, "offset": offset, "items": items}
	if len(rows) > 0 {
		out["reward"] = map[string]number{"min": number(lowest), "max": number(highest), "mean": number(sum / float64(len(rows)))}
	}
	writeJSON(w, r, out)
}

// mentions reports whether any message of row contains text (lower case).
func mentions(row *store.TrajectoryRow, text string) bool {
	for _, m := range row.Messages {
		if containsFold(m.Content, text) || containsFold(m.ToolCalls, text) {
			return true
		}
	}
	return false
}

func containsFold(s, lowerText string) bool {
	return strings.Contains(strings.ToLower(s), lowerText)
}

func preview(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > previewLen {
		return string(r[:previewLen]) + "…"
	}
	return s
}

// messageView is one message as the page shows it.
type messageView struct {
	Role       string          `json:"role"`
	Content    string          `json:"content,omitempty"`
	ToolCalls  json.RawMessage `json:"tool_calls,omitempty"`
	ToolCallID string          `json:"tool_call_id,omitempty"`
	Trainable  bool            `json:"trainable,omitempty"`
	// Tokens are the sampled tokens of a trainable turn as [text, logprob]
	// (a non-finite logprob as the string "-Infinity", "Infinity" or "NaN",
	// which JavaScript's Number reads).
	Tokens [][2]any `json:"tokens,omitempty"`
}

// handleTrajectory returns one trajectory of a step (index: its row).
func (d *Dashboard) handleTrajectory(w http.ResponseWriter, r *http.Request) {
	rows, split, step, err := d.stepRows(r)
	if err != nil {
		answer(w, err)
		return
	}
	i, err := strconv.Atoi(r.URL.Query().Get("index"))
	if err != nil {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("index %q: want a trajectory's number (its row, from 0)", r.URL.Query().Get("index")))
		return
	}
	if i < 0 || i >= len(rows) {
		writeError(w, http.StatusNotFound, fmt.Sprintf("no trajectory %q at %s step %d (it has %d, numbered from 0)", r.URL.Query().Get("index"), split, step, len(rows)))
		return
	}
	row := &rows[i]
	var warnings []string
	raw := func(name, s string) json.RawMessage {
		if s == "" {
			return nil
		}
		if !json.Valid([]byte(s)) {
			warnings = append(warnings, name+" is not valid JSON")
			b, _ := json.Marshal(s)
			return b
		}
		return json.RawMessage(s)
	}
	msgs := make([]messageView, len(row.Messages))
	for k, m := range row.Messages {
		v := messageView{Role: m.Role, Content: m.Content, ToolCallID: m.ToolCallID, Trainable: m.Trainable,
			ToolCalls: raw(fmt.Sprintf("message %d tool_calls", k), m.ToolCalls)}
		for _, t := range m.Logprobs {
			v.Tokens = append(v.Tokens, [2]any{t.Token, logprob(t.Logprob)})
		}
		msgs[k] = v
	}
	writeJSON(w, r, map[string]any{
		"index": i, "split": split, "step": step, "group": row.GroupIndex, "reward": number(row.Reward),
		"metrics": raw("metrics", row.Metrics), "metadata": raw("metadata", row.Metadata),
		"group_metrics": raw("group_metrics", row.GroupMetrics), "group_metadata": raw("group_metadata", row.GroupMetadata),
		"tools": raw("tools", row.Tools), "logs": row.Logs, "group_logs": row.GroupLogs,
		"messages": msgs, "warnings": warnings,
	})
}

// number is a float64 whose non-finite values (a reward of -Inf is
// possible in a file) encode as null instead of failing the answer.
type number float64

// MarshalJSON writes null for NaN and ±Inf.
func (n number) MarshalJSON() ([]byte, error) {
	if math.IsNaN(float64(n)) || math.IsInf(float64(n), 0) {
		return []byte("null"), nil
	}
	return json.Marshal(float64(n))
}

// logprob is a token's log probability: a number, or, when it is not
// finite (a token sampled at probability 0 has -Inf), the string JavaScript's
// Number reads as that value, so the page shows it rather than the whole
// answer failing to encode.
type logprob float64

// MarshalJSON writes a finite value as a number, others as "-Infinity",
// "Infinity" or "NaN".
func (l logprob) MarshalJSON() ([]byte, error) {
	switch f := float64(l); {
	case math.IsNaN(f):
		return []byte(`"NaN"`), nil
	case math.IsInf(f, -1):
		return []byte(`"-Infinity"`), nil
	case math.IsInf(f, 1):
		return []byte(`"Infinity"`), nil
	}
	return json.Marshal(float64(l))
}
