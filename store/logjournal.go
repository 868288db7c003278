package store

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"time"
)

// A Log call (the SDK's Model.Log) lands in three files: its groups in a
// trajectories parquet file, its running totals in state.json and its
// aggregate row in history.jsonl. A call that fails part-way and is retried
// must not add what already landed a second time, so each call is written
// through a journal kept in state.json under logJournalKey, keyed by the
// call's content (the caller's key): while the model's log lock is held
// (LockLog, so no other call runs), an entry left there can only be an
// earlier call with the same content that did not finish, and the call
// resumes it. The entry's ID names the call in the parquet file's footer
// (AppendTrajectoriesOnce); its Row is the history row, saved in the same
// state.json write as the totals it holds, so a retry writes that row, not
// a recomputed one, and adds no totals twice; the row's recorded_at tells
// whether it reached history.jsonl. EndLog removes the entry.
const (
	logJournalKey = "log_journal"
	// maxLogJournal bounds the entries of calls that failed and were
	// never retried; the oldest go first.
	maxLogJournal = 16
)

// A call may also carry an ID of its caller's (the SDK's LogOptions.CallID;
// the remote backend sends one with every Log), which state.json remembers
// under logDoneKey once the call completes, with its step: the same ID
// again (a retry whose first answer was lost on the way back) logs nothing.
// The last maxLogDone IDs are kept.
const (
	logDoneKey = "log_done"
	maxLogDone = 256
)

// sortableTime is the journal's time layout: RFC 3339 in UTC with all nine
// fractional digits, so that the strings sort as the times do (RFC3339Nano
// drops trailing zeros: "…:28.5Z" sorted after "…:28.51Z").
const sortableTime = "2006-01-02T15:04:05.000000000Z"

// maxCallID bounds a call ID's length.
const maxCallID = 128

// ValidateCallID checks a Log call ID: 1 to 128 characters of letters,
// digits and . _ : -.
func ValidateCallID(id string) error {
	if id == "" || len(id) > maxCallID {
		return fmt.Errorf("call id %q: want 1 to %d characters", id, maxCallID)
	}
	for _, r := range id {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("._:-", r)) {
			return fmt.Errorf("call id %q: want letters, digits and . _ : - only", id)
		}
	}
	return nil
}

// LoggedCall returns the step the Log call with the caller's id logged at,
// if it completed (and is among the last maxLogDone).
func (d *ModelDir) LoggedCall(id string) (step int, found bool, err error) {
	state, err := d.ReadState()
	if err != nil {
		return 0, false, err
	}
	done, _ := state[logDoneKey].(map[string]any)
	e, ok := done[id].(map[string]any)
	if !ok {
		return 0, false, nil
	}
	s, ok := e["step"].(float64)
	if !ok || s < 0 || s != math.Trunc(s) {
		return 0, false, fmt.Errorf("store: %s: %s entry %s is damaged (no step)", StateFile, logDoneKey, id)
	}
	return int(s), true, nil
}

// markLogDone records in state that the call with the caller's id logged
// at step, dropping the oldest records past maxLogDone.
func markLogDone(state map[string]any, id string, step int) {
	done, _ := state[logDoneKey].(map[string]any)
	if done == nil {
		done = map[string]any{}
	}
	done[id] = map[string]any{"step": step, "ended": time.Now().UTC().Format(sortableTime)}
	dropOldest(done, "ended", maxLogDone)
	state[logDoneKey] = done
}

// dropOldest deletes the entries of m (state.json objects) with the
// earliest time field (sortableTime; ties by key) until at most max are
// left.
func dropOldest(m map[string]any, field string, max int) {
	for len(m) > max {
		at := func(k string) string {
			e, _ := m[k].(map[string]any)
			s, _ := e[field].(string)
			return s
		}
		oldest := slices.MinFunc(slices.Collect(maps.Keys(m)), func(a, b string) int {
			if c := strings.Compare(at(a), at(b)); c != 0 {
				return c
			}
			return strings.Compare(a, b)
		})
		delete(m, oldest)
	}
}

// LogCall is a Log call's journal entry.
type LogCall struct {
	ID      string `json:"id"`
	Started string `json:"started"` // RFC 3339, sortableTime
	// Row is the call's history row, once its totals are in state.json
	// (nil before, or when the call has no row to write).
	Row map[string]any `json:"row,omitempty"`
}

// LockLog takes the model's log lock, held for the whole of a Log call so
// that calls of one model, in one process or several, run one at a time,
// and returns its release function.
func (d *ModelDir) LockLog() (unlock func(), err error) {
	return d.lock(logLockFile)
}

// PendingLog returns the journal entry of an unfinished call with the
// content key, if there is one.
func (d *ModelDir) PendingLog(key string) (c LogCall, found bool, err error) {
	state, err := d.ReadState()
	if err != nil {
		return c, false, err
	}
	return logCall(state, key)
}

// BeginLog returns the journal entry for key, creating it (with a fresh
// ID) if there is none.
func (d *ModelDir) BeginLog(key string) (LogCall, error) {
	var c LogCall
	_, err := d.UpdateState(func(state map[string]any) error {
		var found bool
		var err error
		if c, found, err = logCall(state, key); err != nil || found {
			return err
		}
		if c, err = NewLogCall(); err != nil {
			return err
		}
		return PutLogCall(state, key, c)
	})
	return c, err
}

// NewLogCall returns a new call's journal entry, with a fresh ID.
func NewLogCall() (LogCall, error) {
	var id [8]byte
	if _, err := rand.Read(id[:]); err != nil {
		return LogCall{}, fmt.Errorf("store: log journal: %w", err)
	}
	return LogCall{ID: hex.EncodeToString(id[:]), Started: time.Now().UTC().Format(sortableTime)}, nil
}

// PutLogCall sets key's journal entry in state (a state.json map being
// updated), dropping the oldest entries past maxLogJournal. c must have an
// ID (NewLogCall).
func PutLogCall(state map[string]any, key string, c LogCall) error {
	if c.ID == "" {
		return fmt.Errorf("store: log journal: entry %s without an id", key)
	}
	journal, _ := state[logJournalKey].(map[string]any)
	if journal == nil {
		journal = map[string]any{}
	}
	var v map[string]any
	b, err := json.Marshal(c)
	if err == nil {
		err = json.Unmarshal(b, &v)
	}
	if err != nil {
		return fmt.Errorf("store: log journal: encode entry: %w", err)
	}
	journal[key] = v
	dropOldest(journal, "started", maxLogJournal)
	state[logJournalKey] = journal
	return nil
}

// DropLogCall removes key's journal entry from state (a state.json map
// being updated).
func DropLogCall(state map[string]any, key string) {
	journal, _ := state[logJournalKey].(map[string]any)
	if _, ok := journal[key]; !ok {
		return
	}
	delete(journal, key)
	if len(journal) == 0 {
		delete(state, logJournalKey)
	}
}

// EndLog removes key's journal entry (damaged or not): the call is
// complete. A call with the caller's id (not "") is remembered as logged
// at step in the same write (LoggedCall).
func (d *ModelDir) EndLog(key, id string, step int) error {
	state, err := d.ReadState()
	if err != nil {
		return err
	}
	if journal, _ := state[logJournalKey].(map[string]any); journal[key] == nil && id == "" {
		return nil
	}
	_, err = d.UpdateState(func(state map[string]any) error {
		DropLogCall(state, key)
		if id != "" {
			markLogDone(state, id, step)
		}
		return nil
	})
	return err
}

// HistoryHasRow reports whether history.jsonl has a row recorded at
// recordedAt (its "recorded_at" value). Corrupt lines are skipped.
func (d *ModelDir) HistoryHasRow(recordedAt string) (bool, error) {
	rows, err := d.ReadHistory()
	var corrupt *CorruptLinesError
	if err != nil && !errors.As(err, &corrupt) {
		return false, err
	}
	for _, r := range rows {
		if r["recorded_at"] == recordedAt {
			return true, nil
		}
	}
	return false, nil
}

// logCall decodes key's journal entry from state.
func logCall(state map[string]any, key string) (c LogCall, found bool, err error) {
	journal, _ := state[logJournalKey].(map[string]any)
	v, ok := journal[key]
	if !ok {
		return c, false, nil
	}
	b, err := json.Marshal(v)
	if err == nil {
		err = json.Unmarshal(b, &c)
	}
	if err == nil && c.ID == "" {
		err = errors.New("no id")
	}
	if err != nil {
		return LogCall{}, false, fmt.Errorf("store: %s: log journal entry %s is damaged (fix or delete it: it only lets a failed Log call be retried): %w", StateFile, key, err)
	}
	return c, true, nil
}
