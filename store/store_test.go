package store

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/parquet-go/parquet-go"
)

func newDir(t *testing.T) *ModelDir {
	t.Helper()
	d, err := New(t.TempDir(), "proj", "model-1")
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func TestValidateName(t *testing.T) {
	tests := []struct {
		name    string
		wantErr string // substring; "" means valid
	}{
		{"tic-tac-toe", ""},
		{"Qwen2.5-0.5B_agent", ""},
		{"a", ""},
		{strings.Repeat("x", 128), ""},
		{"", "empty"},
		{strings.Repeat("x", 129), "longer than 128"},
		{".hidden", "must not start"},
		{"-flag", "must not start"},
		{"a/b", `'/'`},
		{`a\b`, `'\\'`},
		{"name@3", `'@'`},
		{"with space", `' '`},
		{"..", "must not start"},
		{"ünïcode", `'ü'`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := ValidateName(tt.name)
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("ValidateName(%q) = %v; want nil", tt.name, err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Fatalf("ValidateName(%q) = %v; want error containing %q", tt.name, err, tt.wantErr)
			}
		})
	}
}

func TestNew(t *testing.T) {
	d, err := New("", "p", "m")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := d.Path(), filepath.Join(".art", "p", "models", "m"); got != want {
		t.Fatalf("Path() = %q; want %q", got, want)
	}
	if _, err := New("x", "p", "m@1"); err == nil || !strings.Contains(err.Error(), "model name") {
		t.Fatalf("New with bad name: got %v; want a model name error", err)
	}
	if _, err := New("x", "", "m"); err == nil || !strings.Contains(err.Error(), "project") {
		t.Fatalf("New with empty project: got %v; want a project error", err)
	}
}

func TestModelFile(t *testing.T) {
	d := newDir(t)
	var v map[string]any
	if err := d.ReadModel(&v); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("ReadModel before write: got %v; want ErrNotExist", err)
	}
	want := map[string]any{"name": "model-1", "trainable": true}
	if err := d.WriteModel(want); err != nil {
		t.Fatal(err)
	}
	if err := d.ReadModel(&v); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(v, want) {
		t.Fatalf("ReadModel = %v; want %v", v, want)
	}
}

func TestState(t *testing.T) {
	d := newDir(t)
	got, err := d.ReadState()
	if err != nil || got != nil {
		t.Fatalf("ReadState on a new dir = %v, %v; want nil, nil", got, err)
	}

	base := map[string]any{
		"step": 3.0,
		"data": map[string]any{"offset": 10.0, "seed": 1.0},
		"keep": "me",
	}
	if err := d.OverwriteState(base); err != nil {
		t.Fatal(err)
	}
	patch := map[string]any{
		"step": 4.0,
		"data": map[string]any{"offset": 20.0},
		"new":  []any{"x"},
	}
	merged, err := d.MergeState(patch)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"step": 4.0,
		"data": map[string]any{"offset": 20.0, "seed": 1.0},
		"keep": "me",
		"new":  []any{"x"},
	}
	if !reflect.DeepEqual(merged, want) {
		t.Fatalf("MergeState returned %v; want %v", merged, want)
	}
	got, err = d.ReadState()
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("ReadState after merge = %v; want %v", got, want)
	}
	// The inputs are not modified.
	if base["data"].(map[string]any)["offset"] != 10.0 || len(patch) != 3 {
		t.Fatalf("MergeState modified its inputs: base %v, patch %v", base, patch)
	}

	if err := d.OverwriteState(map[string]any{"only": true}); err != nil {
		t.Fatal(err)
	}
	got, _ = d.ReadState()
	if want := map[string]any{"only": true}; !reflect.DeepEqual(got, want) {
		t.Fatalf("ReadState after overwrite = %v; want %v", got, want)
	}

	os.WriteFile(filepath.Join(d.Path(), StateFile), []byte("{broken"), 0o644)
	if _, err := d.ReadState(); err == nil || !strings.Contains(err.Error(), StateFile) {
		t.Fatalf("ReadState of a corrupted file: got %v; want an error naming %s", err, StateFile)
	}
}

// Ensure concurrent merges each land: the read-modify-write is locked.
func TestMergeState_Concurrent(t *testing.T) {
	d := newDir(t)
	const n = 24
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			if _, err := d.MergeState(map[string]any{"nested": map[string]any{fmt.Sprint(i): true}}); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	got, err := d.ReadState()
	if err != nil {
		t.Fatal(err)
	}
	if keys := len(got["nested"].(map[string]any)); keys != n {
		t.Fatalf("got %d merged keys; want %d", keys, n)
	}
}

func TestHistory(t *testing.T) {
	d := newDir(t)
	rows, err := d.ReadHistory()
	if err != nil || rows != nil {
		t.Fatalf("ReadHistory on a new dir = %v, %v; want nil, nil", rows, err)
	}
	in := []map[string]any{
		{"step": 1, "val/reward": 0.5, "recorded_at": "2026-01-01T00:00:00Z"},
		{"step": 2, "val/reward": math.NaN(), "loss/train": math.Inf(1), "note": "line\nbreak ✓"},
	}
	for _, r := range in {
		if err := d.AppendHistory(r); err != nil {
			t.Fatal(err)
		}
	}
	rows, err = d.ReadHistory()
	if err != nil {
		t.Fatal(err)
	}
	want := []map[string]any{
		{"step": 1.0, "val/reward": 0.5, "recorded_at": "2026-01-01T00:00:00Z"},
		{"step": 2.0, "note": "line\nbreak ✓"}, // NaN and Inf dropped
	}
	if !reflect.DeepEqual(rows, want) {
		t.Fatalf("ReadHistory = %v; want %v", rows, want)
	}
}

// Ensure history lines written by Python's json (ART's), which writes NaN,
// Infinity and -Infinity, read with those values left out instead of as
// corrupted lines; the words inside strings stay as they are, and a line
// that is broken for another reason is still corrupted.
func TestHistory_PythonNonFinite(t *testing.T) {
	d := newDir(t)
	os.MkdirAll(d.Path(), 0o755)
	content := `{"step": 1, "train/reward": NaN, "train/loss": Infinity, "train/kl": -Infinity, "note": "NaN \" Infinity", "train/n": 3}` + "\n" +
		`{"step": 2, "train/reward": NaN, oops}` + "\n"
	if err := os.WriteFile(filepath.Join(d.Path(), HistoryFile), []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	rows, err := d.ReadHistory()
	var ce *CorruptLinesError
	if !errors.As(err, &ce) || !slices.Equal(ce.Lines, []int{2}) {
		t.Fatalf("ReadHistory error = %v; want line 2 corrupted", err)
	}
	want := []map[string]any{{"step": 1.0, "note": `NaN " Infinity`, "train/n": 3.0}}
	if !reflect.DeepEqual(rows, want) {
		t.Fatalf("rows = %v; want %v", rows, want)
	}
}

func TestHistory_TornAndCorruptLines(t *testing.T) {
	d := newDir(t)
	path := filepath.Join(d.Path(), HistoryFile)
	os.MkdirAll(d.Path(), 0o755)
	content := `{"step":1}` + "\n" +
		"not json\n" +
		"\n" +
		`[1,2]` + "\n" +
		`{"step":2}` + "\n" +
		`{"step":3,"val/rew` // torn: a writer died here
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}

	rows, err := d.ReadHistory()
	var ce *CorruptLinesError
	if !errors.As(err, &ce) {
		t.Fatalf("ReadHistory error = %v; want *CorruptLinesError", err)
	}
	if want := []int{2, 4}; !slices.Equal(ce.Lines, want) {
		t.Fatalf("corrupted lines = %v; want %v", ce.Lines, want)
	}
	if !strings.Contains(err.Error(), "2 corrupted line(s)") || !strings.Contains(err.Error(), "line 2") {
		t.Fatalf("error text %q does not say how many lines and where", err)
	}
	if want := []map[string]any{{"step": 1.0}, {"step": 2.0}}; !reflect.DeepEqual(rows, want) {
		t.Fatalf("rows = %v; want %v", rows, want)
	}

	// The next append cuts the torn tail instead of gluing onto it.
	if err := d.AppendHistory(map[string]any{"step": 4}); err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(path)
	if !strings.HasSuffix(string(data), `{"step":2}`+"\n"+`{"step":4}`+"\n") {
		t.Fatalf("history after repair ends with %q", data[max(0, len(data)-40):])
	}
}

func TestCutTornTail_LongLine(t *testing.T) {
	tests := []struct {
		name, content, want string
	}{
		{"empty", "", ""},
		{"clean", "a\nb\n", "a\nb\n"},
		{"torn", "a\nbb", "a\n"},
		{"only torn", "abc", ""},
		{"torn longer than a chunk", "a\n" + strings.Repeat("x", 200<<10), "a\n"},
		{"long clean line then torn", strings.Repeat("y", 100<<10) + "\nz", strings.Repeat("y", 100<<10) + "\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "h")
			os.WriteFile(path, []byte(tt.content), 0o644)
			f, err := os.OpenFile(path, os.O_RDWR, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if err := cutTornTail(f); err != nil {
				t.Fatal(err)
			}
			got, _ := os.ReadFile(path)
			if string(got) != tt.want {
				t.Fatalf("got %d bytes; want %d", len(got), len(tt.want))
			}
		})
	}
}

// checkWholeLines fails unless every line of history.jsonl is a complete row
// written by appendRows, and returns the number of rows.
func checkWholeLines(t *testing.T, d *ModelDir) int {
	t.Helper()
	rows, err := d.ReadHistory()
	if err != nil {
		t.Fatalf("ReadHistory: %v", err)
	}
	for i, r := range rows {
		pad, _ := r["pad"].(string)
		letter, _ := r["letter"].(string)
		if len(pad) != padLen || strings.Trim(pad, letter) != "" {
			t.Fatalf("row %d is not whole: letter %q, pad of %d bytes", i, letter, len(pad))
		}
	}
	return len(rows)
}

const padLen = 8 << 10 // several pages, so a line takes more than one page write

// appendRows appends n rows from each of g goroutines.
func appendRows(d *ModelDir, writer string, g, n int) error {
	var wg sync.WaitGroup
	errs := make(chan error, g)
	for w := range g {
		wg.Go(func() {
			letter := string(rune('a' + w%26))
			for i := range n {
				row := map[string]any{"writer": writer, "g": w, "seq": i, "letter": letter, "pad": strings.Repeat(letter, padLen)}
				if err := d.AppendHistory(row); err != nil {
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

// Ensure many goroutines appending at once produce only whole lines.
func TestAppendHistory_ConcurrentGoroutines(t *testing.T) {
	d := newDir(t)
	const g, n = 8, 15
	if err := appendRows(d, "main", g, n); err != nil {
		t.Fatal(err)
	}
	if got := checkWholeLines(t, d); got != g*n {
		t.Fatalf("got %d rows; want %d", got, g*n)
	}
}

func TestTrajectories_RoundTrip(t *testing.T) {
	d := newDir(t)
	rows := []TrajectoryRow{
		{
			GroupIndex:    0,
			GroupMetadata: `{"scenario_id":"s1"}`,
			GroupMetrics:  `{"judge_cost":0.01}`,
			GroupLogs:     []string{"group log"},
			Reward:        0.75,
			Metrics:       `{"completion_tokens":12,"duration":1.5}`,
			Metadata:      `{"difficulty":3}`,
			Tools:         `[{"type":"function","function":{"name":"move","parameters":{"type":"object"}}}]`,
			Logs:          []string{"first", "ünïcode ✓ 日本語"},
			Messages: []MessageRow{
				{Role: "system", Content: "You play tic-tac-toe."},
				{Role: "user", Content: `[{"type":"text","text":"look"},{"type":"image_url","image_url":{"url":"data:,"}}]`},
				{Role: "assistant", ToolCalls: `[{"id":"c1","type":"function","function":{"name":"move","arguments":"{\"x\":1}"}}]`, Trainable: true},
				{Role: "tool", Content: "ok", ToolCallID: "c1"},
				{Role: "assistant", Content: "Done 🎉", Trainable: true, Logprobs: []TokenRow{
					{TokenID: 17, Token: "Done", Logprob: -0.125}, {TokenID: -1, Token: " \ufffd", Logprob: -3.5}, {TokenID: 0, Logprob: 0},
				}},
			},
		},
		{
			GroupIndex: 0,
			Reward:     -1,
			Messages:   []MessageRow{{Role: "user", Content: "hi"}},
		},
		{
			GroupIndex: 1,
			Reward:     math.Inf(-1),
			Logs:       []string{},
		},
	}
	if err := d.WriteTrajectories("val", 7, rows); err != nil {
		t.Fatal(err)
	}
	path := d.TrajectoriesPath("val", 7)
	if want := filepath.Join(d.Path(), "trajectories", "val", "0007.parquet"); path != want {
		t.Fatalf("TrajectoriesPath = %q; want %q", path, want)
	}
	got, err := d.ReadTrajectories("val", 7)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, rows) {
		gj, _ := json.MarshalIndent(got, "", " ")
		wj, _ := json.MarshalIndent(rows, "", " ")
		t.Fatalf("read back:\n%s\nwant:\n%s", gj, wj)
	}
	checkZstd(t, path)

	if err := d.WriteTrajectories("../x", 1, rows); err == nil {
		t.Fatalf("WriteTrajectories with split %q: got nil error", "../x")
	}
	if err := d.WriteTrajectories("val", -1, rows); err == nil {
		t.Fatal("WriteTrajectories with a negative step: got nil error")
	}
	if _, err := d.ReadTrajectories("val", 8); err == nil || !strings.Contains(err.Error(), "0008.parquet") {
		t.Fatalf("ReadTrajectories of a missing file: got %v; want an error naming it", err)
	}
}

func TestTrajectories_Empty(t *testing.T) {
	d := newDir(t)
	if err := d.WriteTrajectories("train", 0, nil); err != nil {
		t.Fatal(err)
	}
	got, err := d.ReadTrajectories("train", 0)
	if err != nil || len(got) != 0 {
		t.Fatalf("ReadTrajectories = %v, %v; want no rows, nil", got, err)
	}
}

func TestCheckpoints(t *testing.T) {
	d := newDir(t)
	if steps, err := d.ListCheckpoints(); err != nil || steps != nil {
		t.Fatalf("ListCheckpoints on a new dir = %v, %v; want nil, nil", steps, err)
	}
	if step, err := d.LatestStep(); err != nil || step != 0 {
		t.Fatalf("LatestStep on a new dir = %d, %v; want 0, nil", step, err)
	}
	for _, s := range []int{0, 1, 2, 10, 12345} {
		os.MkdirAll(filepath.Join(d.CheckpointDir(s), "sub"), 0o755)
	}
	root := filepath.Join(d.Path(), CheckpointsDir)
	os.MkdirAll(filepath.Join(root, "tmp"), 0o755)
	os.MkdirAll(filepath.Join(root, "-1"), 0o755)
	os.MkdirAll(filepath.Join(root, ".deleting-0003-ab"), 0o755)
	os.WriteFile(filepath.Join(root, "0005"), nil, 0o644) // a file, not a checkpoint

	if got, want := d.CheckpointDir(3), filepath.Join(root, "0003"); got != want {
		t.Fatalf("CheckpointDir(3) = %q; want %q", got, want)
	}
	steps, err := d.ListCheckpoints()
	if err != nil {
		t.Fatal(err)
	}
	if want := []int{0, 1, 2, 10, 12345}; !slices.Equal(steps, want) {
		t.Fatalf("ListCheckpoints = %v; want %v", steps, want)
	}
	if step, _ := d.LatestStep(); step != 12345 {
		t.Fatalf("LatestStep = %d; want 12345", step)
	}

	if err := d.DeleteCheckpoints([]int{1, 12345, 99}); err != nil {
		t.Fatal(err)
	}
	steps, _ = d.ListCheckpoints()
	if want := []int{1, 12345}; !slices.Equal(steps, want) {
		t.Fatalf("after DeleteCheckpoints: %v; want %v", steps, want)
	}
	entries, _ := os.ReadDir(root)
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".deleting-") && e.Name() != ".deleting-0003-ab" {
			t.Fatalf("left a half-deleted directory %s", e.Name())
		}
	}
	for _, name := range []string{"tmp", "0005"} {
		if _, err := os.Stat(filepath.Join(root, name)); err != nil {
			t.Fatalf("DeleteCheckpoints removed non-checkpoint %s: %v", name, err)
		}
	}
}

// Ensure UpdateState writes what update made of the state and nothing when
// update fails.
func TestUpdateState(t *testing.T) {
	d, err := New(t.TempDir(), "p", "m")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.UpdateState(func(s map[string]any) error { s["n"] = 1.0; return nil }); err != nil {
		t.Fatal(err)
	}
	if _, err := d.UpdateState(func(s map[string]any) error { s["n"] = 2.0; return errors.New("no") }); err == nil {
		t.Fatal("a failing update returned no error")
	}
	st, err := d.ReadState()
	if err != nil || st["n"] != 1.0 {
		t.Fatalf("state %v, %v; want n=1", st, err)
	}
}

// Ensure RemoveLeftovers deletes only what interrupted checkpoint writes and
// deletions leave behind.
func TestRemoveLeftovers(t *testing.T) {
	d, err := New(t.TempDir(), "p", "m")
	if err != nil {
		t.Fatal(err)
	}
	root := filepath.Join(d.Path(), CheckpointsDir)
	for _, name := range []string{"0001", ".0002.tmp-123", ".deleting-0000-ab12", ".keep"} {
		if err := os.MkdirAll(filepath.Join(root, name, "sub"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(root, "notes.txt"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	removed, err := d.RemoveLeftovers()
	if err != nil || strings.Join(removed, ",") != ".0002.tmp-123,.deleting-0000-ab12" {
		t.Fatalf("removed %v, %v", removed, err)
	}
	entries, _ := os.ReadDir(root)
	var left []string
	for _, e := range entries {
		left = append(left, e.Name())
	}
	if strings.Join(left, ",") != ".keep,0001,notes.txt" {
		t.Fatalf("left %v", left)
	}
}

// Ensure files written before the logprobs column existed (and ART's, which
// never have it) still read, with Logprobs nil.
func TestTrajectories_WithoutLogprobsColumn(t *testing.T) {
	type oldMessage struct {
		Role       string `parquet:"role,optional"`
		Content    string `parquet:"content,optional"`
		ToolCalls  string `parquet:"tool_calls,optional"`
		ToolCallID string `parquet:"tool_call_id,optional"`
		Trainable  bool   `parquet:"trainable"`
	}
	type oldRow struct {
		GroupIndex    int64        `parquet:"group_index"`
		GroupMetadata string       `parquet:"group_metadata,optional"`
		GroupMetrics  string       `parquet:"group_metrics,optional"`
		GroupLogs     []string     `parquet:"group_logs,optional,list"`
		Reward        float64      `parquet:"reward"`
		Metrics       string       `parquet:"metrics,optional"`
		Metadata      string       `parquet:"metadata,optional"`
		Tools         string       `parquet:"tools,optional"`
		Logs          []string     `parquet:"logs,optional,list"`
		Messages      []oldMessage `parquet:"messages,optional,list"`
	}
	path := filepath.Join(t.TempDir(), "0003.parquet")
	old := []oldRow{{GroupIndex: 2, Reward: 0.5, Logs: []string{"RULER explanation: fine"}, Messages: []oldMessage{
		{Role: "user", Content: "hi"}, {Role: "assistant", Content: "hello", Trainable: true},
	}}}
	if err := parquet.WriteFile(path, old); err != nil {
		t.Fatal(err)
	}
	got, err := ReadTrajectoriesFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].GroupIndex != 2 || got[0].Reward != 0.5 || len(got[0].Messages) != 2 {
		t.Fatalf("old file read as %+v; want its one row", got)
	}
	for i, m := range got[0].Messages {
		if m.Role != old[0].Messages[i].Role || m.Content != old[0].Messages[i].Content ||
			m.Trainable != old[0].Messages[i].Trainable || len(m.Logprobs) != 0 {
			t.Errorf("message %d read as %+v; want %+v without logprobs", i, m, old[0].Messages[i])
		}
	}
}

func TestListTrajectories(t *testing.T) {
	d := newDir(t)
	if got, err := d.ListTrajectories(); err != nil || len(got) != 0 {
		t.Fatalf("ListTrajectories of a new dir = %v, %v; want none", got, err)
	}
	for _, w := range []struct {
		split string
		step  int
	}{{"train", 2}, {"train", 0}, {"train", 10}, {"val", 1}} {
		if err := d.WriteTrajectories(w.split, w.step, []TrajectoryRow{{Reward: 1}}); err != nil {
			t.Fatal(err)
		}
	}
	// Leftovers of a write in progress and stray names are ignored.
	for _, name := range []string{"train/.0011.parquet.tmp-1", "train/notes.txt", "val/x.parquet", ".hidden/0001.parquet"} {
		p := filepath.Join(d.Path(), TrajectoriesDir, name)
		os.MkdirAll(filepath.Dir(p), 0o755)
		os.WriteFile(p, nil, 0o644)
	}
	got, err := d.ListTrajectories()
	want := map[string][]int{"train": {0, 2, 10}, "val": {1}}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("ListTrajectories = %v, %v; want %v", got, err, want)
	}
}
