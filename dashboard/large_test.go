package dashboard

import (
	"fmt"
	"net/http"
	"os"
	"testing"
	"time"

	"github.com/artgo/art/store"
)

// Ensure the dashboard stays fast on a large run: 1,000 steps of history
// and checkpoints, 10,000 trajectories at every step. The run is generated
// here, in a temporary folder (never committed): one step's parquet file is
// written and hard-linked as the other 999 steps' files, which is the same
// to a reader. Each answer must come within largeRunBound; the times are
// logged (the README quotes them, measured on a shared, loaded machine).
func TestLargeRun(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("writes a 1,000-step run with 10,000 trajectories a step and times it (not under -short or -race)")
	}
	const (
		steps         = 1000
		perStep       = 10000
		largeRunBound = 5 * time.Second // the target is < 1 s; the slack is for a loaded CI machine
	)
	root := t.TempDir()
	start := time.Now()
	d := writeRun(t, root, testRun{project: "big", name: "agent", steps: steps})
	if err := d.WriteTrajectories("train", 0, trajectoryRows(perStep, 0)); err != nil {
		t.Fatal(err)
	}
	for s := 1; s < steps; s++ {
		if err := os.MkdirAll(d.Path()+"/trajectories/train", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Link(d.TrajectoriesPath("train", 0), d.TrajectoriesPath("train", s)); err != nil {
			t.Fatal(err)
		}
	}
	st, _ := os.Stat(d.TrajectoriesPath("train", 0))
	t.Logf("wrote %d steps, %d trajectories a step (%d kB parquet) in %v", steps, perStep, st.Size()>>10, time.Since(start).Round(time.Millisecond))

	srv, _ := newTestServer(t, Config{Root: root})
	base := srv.URL + DefaultBasePath
	c := &http.Client{Timeout: time.Minute}
	for _, q := range []struct{ name, path string }{
		{"runs", "api/runs"},
		{"run (curves, checkpoints)", "api/run?run=big/agent"},
		{"trajectories, first page (cold: decodes the step)", "api/trajectories?run=big/agent&split=train&step=999&sort=-reward"},
		{"trajectories, filtered and sorted", "api/trajectories?run=big/agent&split=train&step=999&sort=reward&min=0.25&max=0.75&offset=100"},
		{"trajectories, text search", "api/trajectories?run=big/agent&split=train&step=999&q=board+4321+"},
		{"one trajectory", "api/trajectory?run=big/agent&split=train&step=999&index=9876"},
		{"another step (cold)", "api/trajectories?run=big/agent&split=train&step=500"},
	} {
		t0 := time.Now()
		var body map[string]any
		if st := get(t, c, base+q.path, &body); st != 200 {
			t.Fatalf("%s: %d %v", q.name, st, body)
		}
		took := time.Since(t0)
		t.Logf("%-52s %4d ms", q.name, took.Milliseconds())
		if took > largeRunBound {
			t.Errorf("%s took %v; want < %v", q.name, took, largeRunBound)
		}
		if m, ok := body["matched"].(float64); ok && m == 0 {
			t.Errorf("%s matched nothing", q.name)
		}
	}

	// The same in the browser, from navigation to drawn, when it is
	// installed (TestBrowser says how; ART_REQUIRE_ASSETS=1 requires it).
	nodeModules, ok := timingBrowser(t)
	if !ok {
		return
	}
	var got struct {
		ConsoleErrors                                                       []string
		ChartsColdMs, ChartsMs, TrajectoriesMs, TrajectoryMs, CheckpointsMs int
		Charts, Rows, Checkpoints                                           int
	}
	runBrowser(t, nodeModules, base, "perf", t.TempDir(), nil, &got)
	t.Logf("in chromium: charts (%d metrics × 1,000 steps) %d ms (%d ms as the browser's first page), trajectory list %d ms, a trajectory %d ms, checkpoints (%d) %d ms",
		got.Charts, got.ChartsMs, got.ChartsColdMs, got.TrajectoriesMs, got.TrajectoryMs, got.Checkpoints, got.CheckpointsMs)
	if got.Rows != defaultPage || got.Checkpoints != steps || len(got.ConsoleErrors) > 0 {
		t.Errorf("large run in the browser: %d rows, %d checkpoints, console errors %q; want %d, %d, none", got.Rows, got.Checkpoints, got.ConsoleErrors, defaultPage, steps)
	}
	for name, ms := range map[string]int{"charts": got.ChartsMs, "trajectory list": got.TrajectoriesMs, "trajectory": got.TrajectoryMs, "checkpoints": got.CheckpointsMs} {
		if took := time.Duration(ms) * time.Millisecond; took > largeRunBound {
			t.Errorf("the %s page took %v in the browser; want < %v", name, took, largeRunBound)
		}
	}
}

// Ensure a trajectory of 30,000 sampled tokens (a long agent episode) opens
// quickly, from the API and drawn in the browser, every token coloured by
// its probability and showing it on hover.
func TestLongTrajectory(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("times a 30,000-token trajectory (not under -short or -race)")
	}
	const (
		tokens = 30000
		bound  = 5 * time.Second // the target is < 1 s; the slack is for a loaded CI machine
	)
	root := t.TempDir()
	d := writeRun(t, root, testRun{project: "long", name: "agent", steps: 1})
	rows := trajectoryRows(8, 0)
	long := make([]store.TokenRow, tokens)
	for i := range long {
		long[i] = store.TokenRow{TokenID: int64(i % 1000), Token: fmt.Sprintf(" w%d", i%1000), Logprob: -float64(i%50) / 10}
	}
	msgs := rows[0].Messages
	msgs[len(msgs)-1].Logprobs = long
	if err := d.WriteTrajectories("train", 0, rows); err != nil {
		t.Fatal(err)
	}
	srv, _ := newTestServer(t, Config{Root: root})
	base := srv.URL + DefaultBasePath
	c := &http.Client{Timeout: time.Minute}
	t0 := time.Now()
	var tr struct {
		Messages []struct {
			Tokens [][2]any `json:"tokens"`
		} `json:"messages"`
	}
	if st := get(t, c, base+"api/trajectory?run=long/agent&split=train&step=0&index=0", &tr); st != 200 {
		t.Fatalf("trajectory: %d", st)
	}
	took := time.Since(t0)
	t.Logf("api/trajectory of %d tokens: %d ms", tokens, took.Milliseconds())
	if n := len(tr.Messages[len(tr.Messages)-1].Tokens); n != tokens || took > bound {
		t.Errorf("api/trajectory: %d tokens in %v; want %d in < %v", n, took, tokens, bound)
	}

	nodeModules, ok := timingBrowser(t)
	if !ok {
		return
	}
	var got struct {
		ConsoleErrors                  []string
		TrajectoryMs, ScrollMs, Tokens int
	}
	runBrowser(t, nodeModules, base, "long", t.TempDir(), nil, &got)
	t.Logf("in chromium: a trajectory of %d tokens drawn in %d ms, scrolled to its end in %d ms", got.Tokens, got.TrajectoryMs, got.ScrollMs)
	if got.Tokens < tokens || len(got.ConsoleErrors) > 0 {
		t.Errorf("long trajectory in the browser: %d tokens drawn, console errors %q; want %d, none", got.Tokens, got.ConsoleErrors, tokens)
	}
	for name, ms := range map[string]int{"drawing": got.TrajectoryMs, "scrolling": got.ScrollMs} {
		if took := time.Duration(ms) * time.Millisecond; took > bound {
			t.Errorf("%s the long trajectory took %v in the browser; want < %v", name, took, bound)
		}
	}
}

// timingBrowser is findBrowser for a test that also times the API: without
// a browser it logs that the browser timings were skipped (fails under
// ART_REQUIRE_ASSETS=1) and says so.
func timingBrowser(t *testing.T) (string, bool) {
	t.Helper()
	nodeModules, ok := findBrowser(t)
	if !ok {
		if os.Getenv("ART_REQUIRE_ASSETS") == "1" {
			t.Fatal("headless chromium or playwright-core not installed: run scripts/install-browser.sh")
		}
		t.Log("browser timings skipped: run scripts/install-browser.sh")
	}
	return nodeModules, ok
}
