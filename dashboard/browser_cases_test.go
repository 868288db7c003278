package dashboard

import (
	"encoding/json"
	"math"
	"os"
	"strings"
	"testing"
	"time"
)

// runScenario runs testdata/scenarios.mjs's scenario against url and
// decodes the JSON it prints last into out; it fails the test on page
// errors (uncaught exceptions, dialogs) the scenario saw. onLine, when not
// nil, gets each line as it is printed (the scenario's requests to change
// the store; the last, JSON, too).
func runScenario(t *testing.T, url, scenario string, onLine func(string), out any) {
	t.Helper()
	if raceEnabled {
		t.Skip("drives a browser; the API is raced in the API tests")
	}
	nodeModules := browser(t)
	last, _ := runNode(t, nodeModules, onLine, "scenarios.mjs", url, chromiumPath, scenario)
	var errs struct{ PageErrors []string }
	if err := json.Unmarshal([]byte(last), &errs); err != nil {
		t.Fatalf("scenarios.mjs %s printed %q: %v", scenario, last, err)
	}
	if len(errs.PageErrors) > 0 {
		t.Errorf("page errors: %q", errs.PageErrors)
	}
	json.Unmarshal([]byte(last), out)
}

// Ensure trajectories with odd columns open in the browser and show what
// is there: tool_calls that are a JSON object or not JSON at all (a file
// written by other code), and a sampled token at probability 0.
func TestBrowser_OddTrajectories(t *testing.T) {
	root := t.TempDir()
	d := writeRun(t, root, testRun{project: "p", name: "odd", steps: 1})
	rows := trajectoryRows(4, 0)
	rows[0].Messages[4].Logprobs[1].Logprob = math.Inf(-1)
	rows[1].Messages[2].ToolCalls = `{"id":"c9","function":{"name":"jump","arguments":"{}"}}`
	rows[2].Messages[2].ToolCalls = `move(0,0) -- not json`
	rows[3].Messages[2].ToolCalls = `[null, 7]`
	if err := d.WriteTrajectories("train", 0, rows); err != nil {
		t.Fatal(err)
	}
	srv, _ := newTestServer(t, Config{Root: root})
	var got struct {
		Details []struct {
			Text      string
			ToolCalls int
			Tokens    int
			Titles    []string
		}
	}
	runScenario(t, srv.URL+DefaultBasePath, "odd", nil, &got)
	if len(got.Details) != 4 {
		t.Fatalf("details %+v", got.Details)
	}
	for i, d := range got.Details {
		if strings.HasPrefix(d.Text, "NOT OPENED") || d.Tokens != 7 {
			t.Errorf("trajectory %d: %d tokens, %q; want it open with its 7 tokens", i, d.Tokens, d.Text)
		}
	}
	if d := got.Details[0]; len(d.Titles) < 4 || !strings.Contains(d.Titles[3], "logprob -Infinity (p=0)") {
		t.Errorf("token at probability 0: titles %q", d.Titles)
	}
	if d := got.Details[1]; d.ToolCalls != 1 || !strings.Contains(d.Text, "jump(") {
		t.Errorf("tool_calls as one object: %d tool calls, %q; want the jump call", d.ToolCalls, d.Text)
	}
	if d := got.Details[2]; d.ToolCalls != 1 || !strings.Contains(d.Text, "move(0,0) -- not json") {
		t.Errorf("tool_calls not JSON: %d tool calls, %q; want one showing the text as written", d.ToolCalls, d.Text)
	}
	if d := got.Details[3]; d.ToolCalls != 2 {
		t.Errorf("tool_calls [null, 7]: %d tool calls, %q; want 2, shown as written", d.ToolCalls, d.Text)
	}
}

// Ensure every chart has a text alternative: an accessible name saying
// what it shows (svg role="img" and an aria-label with each model's
// points, last value and range) and a table of its values on demand.
func TestBrowser_ChartsTextAlternative(t *testing.T) {
	root := t.TempDir()
	writeRun(t, root, testRun{project: "p", name: "a", steps: 4})
	writeRun(t, root, testRun{project: "p", name: "b", steps: 3, gain: 0.5})
	srv, _ := newTestServer(t, Config{Root: root})
	var got struct {
		Charts    []struct{ Metric, Role, Label string }
		TableHead string
		TableRows []string
	}
	runScenario(t, srv.URL+DefaultBasePath, "charts", nil, &got)
	if len(got.Charts) < 8 {
		t.Fatalf("%d charts; want 8 or more", len(got.Charts))
	}
	for _, c := range got.Charts {
		if c.Role != "img" || !strings.Contains(c.Label, c.Metric) || !strings.Contains(c.Label, "p/a") {
			t.Errorf("chart %s: role %q, aria-label %q; want img and a label naming the metric and the models", c.Metric, c.Role, c.Label)
		}
	}
	for _, c := range got.Charts {
		// train/reward of p/a: 0.2 + 0.6*(1-exp(-x/10)) at steps 0..3.
		if c.Metric == "train/reward" && !strings.Contains(c.Label, "p/a: 4 points, steps 0 to 3, last 0.3555") || c.Metric == "train/reward" && !strings.Contains(c.Label, "p/b: 3 points") {
			t.Errorf("train/reward aria-label %q; want each model's points, steps and last value", c.Label)
		}
	}
	if !strings.Contains(got.TableHead, "step") || !strings.Contains(got.TableHead, "p/a") || !strings.Contains(got.TableHead, "p/b") ||
		len(got.TableRows) != 4 || got.TableRows[0] != "0 0.2 0.2" || !strings.HasPrefix(got.TableRows[3], "3 0.3555 –") {
		t.Errorf("train/reward table: head %q rows %q; want step, p/a, p/b and a row per step", got.TableHead, got.TableRows)
	}
}

// Ensure the keyboard alone reaches everything a click does: another model
// in the list, the Trajectories tab, and a trajectory (Tab, then Enter).
func TestBrowser_Keyboard(t *testing.T) {
	root := t.TempDir()
	writeRun(t, root, testRun{project: "p", name: "a", steps: 2})
	writeRun(t, root, testRun{project: "p", name: "b", steps: 3, trajectories: 5, every: 1})
	srv, _ := newTestServer(t, Config{Root: root})
	var got struct {
		ReachedRun, ReachedTab, ReachedRow bool
		RowIndex, DetailHead               string
	}
	runScenario(t, srv.URL+DefaultBasePath, "keyboard", nil, &got)
	if !got.ReachedRun || !got.ReachedTab || !got.ReachedRow || !strings.Contains(got.DetailHead, "trajectory "+got.RowIndex+" ") {
		t.Errorf("by keyboard: %+v; want model p/b, the Trajectories tab and a trajectory reached, and the trajectory opened", got)
	}
}

// Ensure the open step's list follows its file: trajectories appended to
// that step while it is shown (a step logged in several calls) appear
// without a reload, and the open trajectory stays open.
func TestBrowser_LiveAppendToShownStep(t *testing.T) {
	root := t.TempDir()
	d := writeRun(t, root, testRun{project: "p", name: "live", steps: 2, trajectories: 8, every: 1})
	srv, _ := newTestServer(t, Config{Root: root, PollInterval: 100 * time.Millisecond})
	var got struct{ Before, After, Detail string }
	runScenario(t, srv.URL+DefaultBasePath, "live-append", func(line string) {
		if line == "need-append" {
			if err := d.AppendTrajectories("train", 1, trajectoryRows(8, 1)); err != nil {
				t.Error(err)
			}
		}
	}, &got)
	if !strings.HasPrefix(got.Before, "8 trajectories at train step 1") || !strings.HasPrefix(got.After, "16 trajectories at train step 1") ||
		!strings.HasPrefix(got.Detail, "trajectory ") {
		t.Errorf("list before %q, after appending 8 %q, detail %q; want 8, then 16, the trajectory still open", got.Before, got.After, got.Detail)
	}
}

// Ensure the page follows its URL: a link to another model or tab opened in
// the same tab (only the hash changes) shows it.
func TestBrowser_HashChange(t *testing.T) {
	root := t.TempDir()
	writeRun(t, root, testRun{project: "p", name: "a", steps: 2})
	writeRun(t, root, testRun{project: "p", name: "b", steps: 3})
	srv, _ := newTestServer(t, Config{Root: root})
	var got struct {
		Head             string
		CheckpointsShown bool
		Rows             int
	}
	runScenario(t, srv.URL+DefaultBasePath, "hash", nil, &got)
	if got.Head != "p/b" || !got.CheckpointsShown || got.Rows != 3 {
		t.Errorf("after the hash became run=p/b&tab=checkpoints: %+v; want p/b's 3 checkpoints", got)
	}
}

// Ensure a model deleted while it is shown is no longer shown as if it
// were there: its charts and heading go, a message says it is gone; written
// again, it is shown again.
func TestBrowser_DeletedWhileShown(t *testing.T) {
	root := t.TempDir()
	writeRun(t, root, testRun{project: "p", name: "keep", steps: 2})
	d := writeRun(t, root, testRun{project: "p", name: "gone", steps: 3})
	srv, _ := newTestServer(t, Config{Root: root, PollInterval: 100 * time.Millisecond})
	var got struct {
		TabsHidden             bool
		Charts, RestoredCharts int
		Head, Banner           string
	}
	runScenario(t, srv.URL+DefaultBasePath, "deleted", func(line string) {
		switch line {
		case "need-delete":
			if err := os.RemoveAll(d.Path()); err != nil {
				t.Error(err)
			}
		case "need-restore":
			writeRun(t, root, testRun{project: "p", name: "gone", steps: 3})
		}
	}, &got)
	if got.RestoredCharts < 8 {
		t.Errorf("the model written again shows %d charts; want them all back", got.RestoredCharts)
	}
	if !got.TabsHidden || got.Charts != 0 || strings.Contains(got.Head, "p/gone") || !strings.Contains(got.Banner, `no model "p/gone"`) {
		t.Errorf("after deleting the shown model: %+v; want no tabs, charts or heading of it, and a message", got)
	}
}
