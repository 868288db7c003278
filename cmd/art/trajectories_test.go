package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/artgo/art/store"
)

// writeTrajectories logs two trajectories at val step 3 and returns the
// parquet file's path.
func writeTrajectories(t *testing.T) string {
	t.Helper()
	d, err := store.New(t.TempDir(), "p", "agent")
	if err != nil {
		t.Fatal(err)
	}
	rows := []store.TrajectoryRow{
		{GroupIndex: 0, Reward: 1, Metrics: `{"correct":1,"answered":1}`, Messages: []store.MessageRow{
			{Role: "user", Content: "Who sent it?"},
			{Role: "assistant", ToolCalls: `[{"id":"c1","function":{"name":"search"}}]`, Trainable: true},
			{Role: "tool", Content: "[]", ToolCallID: "c1"},
		}},
		{GroupIndex: 1, Reward: -2, Logs: []string{"turn 1: no tool call"}, Messages: []store.MessageRow{
			{Role: "user", Content: "What day?\nSay it."},
			{Role: "assistant", Content: "garbled", Trainable: true},
		}},
	}
	if err := d.WriteTrajectories("val", 3, rows); err != nil {
		t.Fatal(err)
	}
	return d.TrajectoriesPath("val", 3)
}

func TestTrajectories(t *testing.T) {
	path := writeTrajectories(t)
	code, out, errOut := runArgs(t, "trajectories", path)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, want := range []string{
		"=== group 0  reward 1  answered=1 correct=1\n",
		"  user:     Who sent it?\n",
		`* assistant:  tool_calls=[{"id":"c1","function":{"name":"search"}}]`,
		"  tool:     [] (for c1)\n",
		"=== group 1  reward -2\n",
		"  user:     What day?\n            Say it.\n",
		"* assistant: garbled\n",
		"  log: turn 1: no tool call\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if !strings.Contains(errOut, "2 of 2 trajectories") {
		t.Errorf("stderr %q; want the count", errOut)
	}

	code, out, errOut = runArgs(t, "trajectories", path, "--json", "--max-reward", "0")
	if code != 0 {
		t.Fatalf("--json: exit %d: %s", code, errOut)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	var row struct {
		Reward   float64
		Logs     []string
		Messages []struct{ Role, Content string }
	}
	if len(lines) != 1 || json.Unmarshal([]byte(lines[0]), &row) != nil || row.Reward != -2 || row.Messages[1].Content != "garbled" ||
		len(row.Logs) != 1 {
		t.Errorf("--json --max-reward 0 printed %q; want the one trajectory rewarded -2", out)
	}

	_, out, _ = runArgs(t, "trajectories", path, "--json", "-n", "1")
	var first map[string]any
	if err := json.Unmarshal([]byte(out), &first); err != nil {
		t.Fatalf("--json -n 1: %v (%q)", err, out)
	}
	if m, ok := first["metrics"].(map[string]any); !ok || m["correct"] != 1.0 {
		t.Errorf("--json metrics %v; want an embedded object with correct=1", first["metrics"])
	}
	if tc, ok := first["messages"].([]any)[1].(map[string]any)["tool_calls"].([]any); !ok || len(tc) != 1 {
		t.Errorf("--json tool_calls %v; want an embedded array", first["messages"])
	}

	if _, out, _ = runArgs(t, "trajectories", path, "-n", "1"); strings.Count(out, "=== group") != 1 {
		t.Errorf("-n 1 printed %d trajectories", strings.Count(out, "=== group"))
	}
}

func TestTrajectories_BadInput(t *testing.T) {
	path := writeTrajectories(t)
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"trajectories", filepath.Join(t.TempDir(), "missing.parquet")}, "missing.parquet"},
		{[]string{"trajectories", path, "--limit", "-1"}, "--limit -1"},
		{[]string{"trajectories", path, "--min-reward", "1", "--max-reward", "0"}, "--min-reward 1 is above --max-reward 0"},
		{[]string{"trajectories", path, "--max-reward", "NaN"}, "must be numbers"},
		{[]string{"trajectories"}, `"art trajectories" needs FILE.parquet`},
	} {
		code, _, errOut := runArgs(t, tt.args...)
		if code == 0 || !strings.Contains(errOut, tt.want) {
			t.Errorf("%v: exit %d, stderr %q; want an error naming %q", tt.args, code, errOut, tt.want)
		}
	}
}
