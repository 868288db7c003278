package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/artgo/art/store"
)

// Ensure `art runs` lists each model with its latest step and rewards, marks
// a damaged history on its row instead of failing, prints JSON on request,
// and says clearly when a folder holds no runs.
func TestRuns(t *testing.T) {
	data := t.TempDir()
	a, _ := store.New(data, "proj", "agent")
	for _, row := range []map[string]any{
		{"step": 1.0, "train/reward": 0.25},
		{"step": 2.0, "train/reward": 0.5, "val/reward": 0.4},
		{"step": 3.0, "train/reward": 0.75},
	} {
		if err := a.AppendHistory(row); err != nil {
			t.Fatal(err)
		}
	}
	for _, s := range []int{0, 3} {
		os.MkdirAll(a.CheckpointDir(s), 0o755)
	}
	b, _ := store.New(data, "proj", "broken")
	os.MkdirAll(b.Path(), 0o755)
	os.WriteFile(filepath.Join(b.Path(), store.HistoryFile), []byte("{\"step\":1,\"train/reward\":1}\nnot json\n"), 0o644)

	code, out, errOut := runArgs(t, "runs", "--data", data)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[0], "PROJECT") {
		t.Fatalf("table:\n%s", out)
	}
	if f := strings.Fields(lines[1]); f[0] != "proj" || f[1] != "agent" || f[2] != "3" || f[3] != "0.750" || f[4] != "@3" || f[5] != "0.400" || f[6] != "@2" {
		t.Errorf("agent row: %q", lines[1])
	}
	if !strings.Contains(lines[2], "broken") || !strings.Contains(lines[2], "1 corrupted history line(s) skipped") {
		t.Errorf("broken row: %q", lines[2])
	}

	code, out, _ = runArgs(t, "runs", "--data", data, "--json")
	var sums []runSummary
	if code != 0 || json.Unmarshal([]byte(out), &sums) != nil || len(sums) != 2 || sums[0].Step != 3 || sums[0].ValReward == nil || sums[0].ValReward.Value != 0.4 || sums[1].Step != -1 {
		t.Fatalf("json (exit %d):\n%s", code, out)
	}

	code, _, errOut = runArgs(t, "runs", "--data", t.TempDir())
	if code != 1 || !strings.Contains(errOut, "no models under") {
		t.Fatalf("empty folder: exit %d, %q", code, errOut)
	}
}

// Ensure `art show` describes one model (checkpoints compacted, the best
// val/reward step, the latest metrics), asks for PROJECT/MODEL when a name
// is in several projects, and lists the models when the name is unknown.
func TestShow(t *testing.T) {
	data := t.TempDir()
	a, _ := store.New(data, "p1", "agent")
	for _, row := range []map[string]any{
		{"step": 1.0, "train/reward": 0.25, "val/reward": 0.5},
		{"step": 2.0, "train/reward": 0.5, "val/reward": 0.7},
		{"step": 3.0, "train/reward": 0.75, "val/reward": 0.6, "loss/train": -0.125},
	} {
		if err := a.AppendHistory(row); err != nil {
			t.Fatal(err)
		}
	}
	for _, s := range []int{0, 1, 2, 3, 7} {
		os.MkdirAll(a.CheckpointDir(s), 0o755)
	}
	b, _ := store.New(data, "p2", "agent")
	b.AppendHistory(map[string]any{"step": 1.0})

	code, out, errOut := runArgs(t, "show", "p1/agent", "--data", data)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, want := range []string{"p1/agent", "checkpoints  0-3, 7", "history      3 rows", "best         val/reward 0.7 at step 2", "loss/train", "-0.125  @3", "train/reward"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if code, _, errOut := runArgs(t, "show", "agent", "--data", data); code != 1 || !strings.Contains(errOut, "several projects") {
		t.Errorf("ambiguous name: exit %d, %q", code, errOut)
	}
	if code, _, errOut := runArgs(t, "show", "nobody", "--data", data); code != 1 || !strings.Contains(errOut, "models: p1/agent, p2/agent") {
		t.Errorf("unknown name: exit %d, %q", code, errOut)
	}
}

// Ensure runs, show and plot say which flag named a data folder that is
// not there and what to give it (they printed "store: list runs: open
// .art: no such file or directory", run from a folder without .art).
func TestRuns_MissingData(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "none")
	for _, args := range [][]string{
		{"runs", "--data", missing},
		{"show", "agent", "--data", missing},
		{"plot", "--metric", "val/reward", "--out", filepath.Join(t.TempDir(), "p.png"), "--data", missing},
	} {
		want := "art: " + args[0] + ": --data " + missing + ": no such folder; give --data the folder holding <project>/models/<name> (art serve's --data, art demo's --path)\n"
		code, _, errOut := runArgs(t, args...)
		if code != 1 || errOut != want {
			t.Errorf("%v: exit %d, stderr %q; want %q", args, code, errOut, want)
		}
	}
}
