package store

import (
	"bytes"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

func groupIndexes(rows []TrajectoryRow) []int64 {
	var idx []int64
	for _, r := range rows {
		idx = append(idx, r.GroupIndex)
	}
	return idx
}

// Ensure AppendTrajectories creates the file, then keeps its rows and adds
// the new ones after them, their group indexes continuing after the file's
// highest (gaps kept), ZSTD-compressed, without changing the caller's rows.
func TestAppendTrajectories(t *testing.T) {
	d := newDir(t)
	first := []TrajectoryRow{
		{GroupIndex: 0, Reward: 1, GroupMetadata: `{"k":"a"}`, Messages: []MessageRow{{Role: "user", Content: "hi"}}},
		{GroupIndex: 0, Reward: 0},
		{GroupIndex: 2, Reward: 0.5, Logs: []string{"x"}}, // group 1 had no trajectories
	}
	if err := d.AppendTrajectories("train", 4, first); err != nil {
		t.Fatal(err)
	}
	got, err := d.ReadTrajectories("train", 4)
	if err != nil || !reflect.DeepEqual(got, first) {
		t.Fatalf("after the first append: %+v, %v; want %+v", got, err, first)
	}
	second := []TrajectoryRow{{GroupIndex: 0, Reward: 0.25}, {GroupIndex: 1, Reward: 0.75}, {GroupIndex: 1, Reward: 0.125}}
	third := []TrajectoryRow{{GroupIndex: 1, Reward: -1}} // group 0 had no trajectories
	for _, rows := range [][]TrajectoryRow{second, third} {
		if err := d.AppendTrajectories("train", 4, rows); err != nil {
			t.Fatal(err)
		}
	}
	if second[0].GroupIndex != 0 || third[0].GroupIndex != 1 {
		t.Fatal("AppendTrajectories changed the caller's rows")
	}
	got, err = d.ReadTrajectories("train", 4)
	if err != nil {
		t.Fatal(err)
	}
	if want := []int64{0, 0, 2, 3, 4, 4, 6}; !slices.Equal(groupIndexes(got), want) {
		t.Fatalf("group indexes %v; want %v", groupIndexes(got), want)
	}
	var rewards []float64
	for _, r := range got {
		rewards = append(rewards, r.Reward)
	}
	if want := []float64{1, 0, 0.5, 0.25, 0.75, 0.125, -1}; !slices.Equal(rewards, want) {
		t.Fatalf("rewards %v; want %v", rewards, want)
	}
	if !reflect.DeepEqual(got[:3], first) {
		t.Fatalf("the first rows changed: %+v; want %+v", got[:3], first)
	}
	checkZstd(t, d.TrajectoriesPath("train", 4))

	// No rows: an existing file stays byte for byte; a missing one is
	// written empty, as WriteTrajectories does.
	before, _ := os.ReadFile(d.TrajectoriesPath("train", 4))
	if err := d.AppendTrajectories("train", 4, nil); err != nil {
		t.Fatal(err)
	}
	if after, _ := os.ReadFile(d.TrajectoriesPath("train", 4)); !bytes.Equal(before, after) {
		t.Fatal("appending no rows rewrote the file")
	}
	if err := d.AppendTrajectories("val", 0, nil); err != nil {
		t.Fatal(err)
	}
	if rows, err := d.ReadTrajectories("val", 0); err != nil || len(rows) != 0 {
		t.Fatalf("an empty append to no file: %v, %v; want an empty file", rows, err)
	}
	// An existing file without rows is replaced by the new rows.
	if err := d.AppendTrajectories("val", 0, third); err != nil {
		t.Fatal(err)
	}
	if rows, err := d.ReadTrajectories("val", 0); err != nil || !reflect.DeepEqual(rows, third) {
		t.Fatalf("appending to an empty file: %+v, %v; want %+v", rows, err, third)
	}

	if err := d.AppendTrajectories("../x", 1, first); err == nil {
		t.Fatal("AppendTrajectories with split ../x: got nil error")
	}
	if err := d.AppendTrajectories("val", -1, first); err == nil {
		t.Fatal("AppendTrajectories with a negative step: got nil error")
	}
	// No temporary files are left behind.
	entries, _ := os.ReadDir(filepath.Dir(d.TrajectoriesPath("train", 4)))
	for _, e := range entries {
		if e.Name() != "0004.parquet" {
			t.Errorf("stray file %s", e.Name())
		}
	}
}

// Ensure an existing file that does not read is an error naming it, and is
// left exactly as it was.
func TestAppendTrajectories_UnreadableFileLeftAlone(t *testing.T) {
	d := newDir(t)
	path := d.TrajectoriesPath("val", 2)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	damaged := []byte("PAR1\x00\x01\x02 damaged PAR1")
	if err := os.WriteFile(path, damaged, 0o644); err != nil {
		t.Fatal(err)
	}
	err := d.AppendTrajectories("val", 2, []TrajectoryRow{{Reward: 1}})
	if err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "left as it is") {
		t.Fatalf("AppendTrajectories over a damaged file = %v; want an error naming %s", err, path)
	}
	if got, _ := os.ReadFile(path); !bytes.Equal(got, damaged) {
		t.Fatalf("the damaged file became %q", got)
	}
}

// Ensure concurrent appends to one file lose no row and keep each call's
// rows together as one group of its own.
func TestAppendTrajectories_Concurrent(t *testing.T) {
	d := newDir(t)
	const writers, calls = 6, 5
	if err := appendTrajectoryGroups(d, "w", writers, calls); err != nil {
		t.Fatal(err)
	}
	checkAppendedGroups(t, d, writers*calls)
}

// appendTrajectoryGroups appends, from each of g goroutines, n groups of two
// rows, one call each, to trajectories/train/0001.parquet.
func appendTrajectoryGroups(d *ModelDir, writer string, g, n int) error {
	var wg sync.WaitGroup
	errs := make(chan error, g)
	for w := range g {
		wg.Go(func() {
			for i := range n {
				tag := fmt.Sprintf(`{"call":"%s-%d-%d"}`, writer, w, i)
				rows := []TrajectoryRow{{GroupMetadata: tag, Reward: 1}, {GroupMetadata: tag, Reward: 0}}
				if err := d.AppendTrajectories("train", 1, rows); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	return <-errs
}

// checkAppendedGroups checks that the file appendTrajectoryGroups writes
// holds want groups of two rows, each with its own group index and call.
func checkAppendedGroups(t *testing.T, d *ModelDir, want int) {
	t.Helper()
	rows, err := d.ReadTrajectories("train", 1)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 2*want {
		t.Fatalf("%d rows; want %d", len(rows), 2*want)
	}
	calls := map[int64]string{}
	seen := map[string]bool{}
	for i := 0; i < len(rows); i += 2 {
		a, b := rows[i], rows[i+1]
		if a.GroupIndex != b.GroupIndex || a.GroupMetadata != b.GroupMetadata || a.Reward != 1 || b.Reward != 0 {
			t.Fatalf("rows %d and %d are not one call's group: %+v, %+v", i, i+1, a, b)
		}
		if _, dup := calls[a.GroupIndex]; dup || seen[a.GroupMetadata] {
			t.Fatalf("group index %d or call %s appears twice", a.GroupIndex, a.GroupMetadata)
		}
		calls[a.GroupIndex], seen[a.GroupMetadata] = a.GroupMetadata, true
	}
}

func TestAppendTrajectoryRows(t *testing.T) {
	rows := func(idx ...int64) []TrajectoryRow {
		var out []TrajectoryRow
		for _, i := range idx {
			out = append(out, TrajectoryRow{GroupIndex: i})
		}
		return out
	}
	tests := []struct {
		name     string
		old, new []TrajectoryRow
		want     []int64 // nil: an error
	}{
		{"onto nothing", nil, rows(3, 5), []int64{3, 5}},
		{"nothing new", rows(0, 1), nil, []int64{0, 1}},
		{"continues", rows(0, 0, 1), rows(0, 1, 1), []int64{0, 0, 1, 2, 3, 3}},
		{"gaps kept", rows(0, 2), rows(1, 3), []int64{0, 2, 4, 6}},
		{"after the highest, not the last", rows(5, 1), rows(0), []int64{5, 1, 6}},
		{"negative new", rows(0), rows(-2, 0), []int64{0, 1, 3}},
		{"negative old", rows(-7), rows(0), []int64{-7, -6}},
		{"fits exactly", rows(math.MaxInt64 - 2), rows(0, 1), []int64{math.MaxInt64 - 2, math.MaxInt64 - 1, math.MaxInt64}},
		{"no room", rows(math.MaxInt64 - 1), rows(0, 1), nil},
		{"highest taken", rows(math.MaxInt64), rows(0), nil},
		{"span too wide", rows(math.MinInt64), rows(math.MinInt64, math.MaxInt64), nil},
	}
	for _, tt := range tests {
		got, err := appendTrajectoryRows(tt.old, tt.new)
		if tt.want == nil {
			if err == nil {
				t.Errorf("%s: got %v; want an error", tt.name, groupIndexes(got))
			}
			continue
		}
		if err != nil || !slices.Equal(groupIndexes(got), tt.want) {
			t.Errorf("%s: got %v, %v; want %v", tt.name, groupIndexes(got), err, tt.want)
		}
	}
}

// Ensure AppendTrajectoriesOnce appends a call's rows once: the same id
// again appends nothing and says so, another id appends, a plain append
// keeps the ids the file remembers, and a bad id is refused.
func TestAppendTrajectoriesOnce(t *testing.T) {
	d := newDir(t)
	rows := []TrajectoryRow{{GroupIndex: 0, Reward: 1}, {GroupIndex: 0, Reward: 0}}
	count := func() int {
		t.Helper()
		got, err := d.ReadTrajectories("val", 1)
		if err != nil {
			t.Fatal(err)
		}
		return len(got)
	}
	for i, c := range []struct {
		id   string
		want bool
		rows int
	}{{"a1", true, 2}, {"a1", false, 2}, {"b2", true, 4}, {"", true, 6}, {"a1", false, 6}, {"b2", false, 6}} {
		var ok bool
		var err error
		if c.id == "" {
			err, ok = d.AppendTrajectories("val", 1, rows), true
		} else {
			ok, err = d.AppendTrajectoriesOnce("val", 1, rows, c.id)
		}
		if err != nil || ok != c.want || count() != c.rows {
			t.Fatalf("call %d (id %q): appended %v, %v, %d rows; want %v and %d rows", i, c.id, ok, err, count(), c.want, c.rows)
		}
	}
	for _, id := range []string{"", "a,b"} {
		if _, err := d.AppendTrajectoriesOnce("val", 1, rows, id); err == nil {
			t.Errorf("id %q accepted", id)
		}
	}
}

// Ensure the log journal keeps an entry per unfinished call, returns the
// same entry to a retry, drops the oldest past its bound, and is gone from
// state.json once every call ended.
func TestLogJournal(t *testing.T) {
	d := newDir(t)
	first, err := d.BeginLog("k0")
	if err != nil || first.ID == "" {
		t.Fatalf("BeginLog = %+v, %v", first, err)
	}
	if again, err := d.BeginLog("k0"); err != nil || again.ID != first.ID {
		t.Fatalf("BeginLog again = %+v, %v; want the entry %+v", again, err, first)
	}
	if c, found, err := d.PendingLog("k0"); err != nil || !found || c.ID != first.ID {
		t.Fatalf("PendingLog = %+v, %v, %v", c, found, err)
	}
	for i := 1; i <= maxLogJournal; i++ {
		if _, err := d.BeginLog(fmt.Sprint("k", i)); err != nil {
			t.Fatal(err)
		}
	}
	if _, found, _ := d.PendingLog("k0"); found {
		t.Fatalf("the oldest of %d entries kept", maxLogJournal+1)
	}
	for i := 1; i <= maxLogJournal; i++ {
		if err := d.EndLog(fmt.Sprint("k", i), "", 0); err != nil {
			t.Fatal(err)
		}
	}
	if err := d.EndLog("never begun", "", 0); err != nil {
		t.Fatal(err)
	}
	state, err := d.ReadState()
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := state[logJournalKey]; ok {
		t.Fatalf("state %v keeps an empty journal", state)
	}
	if err := d.OverwriteState(map[string]any{logJournalKey: map[string]any{"bad": map[string]any{"id": 3}}}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := d.PendingLog("bad"); err == nil || !strings.Contains(err.Error(), "damaged") {
		t.Fatalf("a damaged entry: %v; want an error saying so", err)
	}
}

// Ensure the journal's times sort as strings in time order, trailing zeros
// included (RFC3339Nano drops them, and "28.5Z" sorted after "28.51Z").
func TestSortableTime(t *testing.T) {
	base := time.Date(2026, 11, 29, 17, 34, 28, 500_000_000, time.UTC)
	prev := base.Format(sortableTime)
	for _, d := range []time.Duration{10 * time.Millisecond, time.Nanosecond, time.Second} {
		next := base.Add(d).Format(sortableTime)
		if next <= prev {
			t.Errorf("%s does not sort after %s", next, prev)
		}
		if _, err := time.Parse(time.RFC3339Nano, next); err != nil {
			t.Errorf("%s is not RFC 3339: %v", next, err)
		}
	}
}
