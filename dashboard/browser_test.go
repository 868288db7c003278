package dashboard

import (
	"bufio"
	"context"
	"encoding/json"
	"image/png"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/artgo/art/internal/testassets"
	"github.com/artgo/art/store"
)

// chromiumPath is Debian's chromium, which scripts/install-browser.sh
// installs; the tests never use a browser build downloaded by a tool.
const chromiumPath = "/usr/bin/chromium"

// browser returns the node_modules folder holding playwright-core, or skips
// the test (fails under ART_REQUIRE_ASSETS=1) when it or chromium is
// missing.
func browser(t *testing.T) string {
	t.Helper()
	dir, ok := findBrowser(t)
	if !ok {
		msg := "headless chromium or playwright-core not installed: run scripts/install-browser.sh (needs root, node and npm)"
		if os.Getenv("ART_REQUIRE_ASSETS") == "1" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	return dir
}

// findBrowser returns the node_modules folder holding playwright-core and
// whether it, node and chromium are all installed.
func findBrowser(t *testing.T) (string, bool) {
	dir := filepath.Join(testassets.Root(t), ".assets", "playwright", "node_modules")
	_, errPkg := os.Stat(filepath.Join(dir, "playwright-core", "package.json"))
	_, errChromium := os.Stat(chromiumPath)
	_, errNode := exec.LookPath("node")
	return dir, errPkg == nil && errChromium == nil && errNode == nil
}

// runBrowser runs testdata/browser.mjs against url in mode ("check" or
// "perf"), calling onLine with each line it prints but the last, and
// decodes the last (JSON) into out.
func runBrowser(t *testing.T, nodeModules, url, mode, outDir string, onLine func(string), out any) {
	t.Helper()
	last, stderr := runNode(t, nodeModules, onLine, "browser.mjs", url, chromiumPath, outDir, mode)
	if err := json.Unmarshal([]byte(last), out); err != nil {
		t.Fatalf("browser.mjs printed %q: %v\n%s", last, err, stderr)
	}
}

// runNode runs the node script testdata/<script> with args (playwright-core
// from nodeModules), for at most three minutes, calls onLine (if not nil)
// with each line it prints, and returns the last line and its stderr. A
// script that fails fails the test.
func runNode(t *testing.T, nodeModules string, onLine func(string), script string, args ...string) (last, stderr string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", append([]string{filepath.Join("testdata", script)}, args...)...)
	cmd.Env = append(os.Environ(), "NODE_PATH="+nodeModules)
	var errOut strings.Builder
	cmd.Stderr = &errOut
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := bufio.NewScanner(stdout)
	lines.Buffer(nil, 1<<20)
	for lines.Scan() {
		last = lines.Text()
		if onLine != nil {
			onLine(last)
		}
	}
	io.Copy(io.Discard, stdout)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("%s %s: %v\n%s", script, strings.Join(args[min(len(args), 2):], " "), err, errOut.String())
	}
	return last, errOut.String()
}

// browserResult is what testdata/browser.mjs prints.
type browserResult struct {
	ConsoleErrors  []string  `json:"consoleErrors"`
	ChartsMs       int       `json:"chartsMs"`
	Points         int       `json:"points"`
	PolylinePoints int       `json:"polylinePoints"`
	Charts         int       `json:"charts"`
	OverlayPoints  int       `json:"overlayPoints"`
	LivePoints     int       `json:"livePoints"`
	LiveHead       string    `json:"liveHead"`
	Step           string    `json:"step"`
	Rows           []float64 `json:"rows"`
	Filtered       []float64 `json:"filtered"`
	Messages       int       `json:"messages"`
	Tokens         int       `json:"tokens"`
	ToolCalls      int       `json:"toolCalls"`
	Ruler          int       `json:"ruler"`
	DetailText     string    `json:"detailText"`
	DetailRetries  int       `json:"detailRetries"`
	UnknownModel   string    `json:"unknownModel"`
	CorruptHistory string    `json:"corruptHistory"`
	CorruptCharts  int       `json:"corruptCharts"`
	MissingStep    string    `json:"missingStep"`
}

// Ensure the page works in a real browser: the curves have one point per
// logged step, another model overlays, a new step appears live, the
// trajectory list sorts and filters by reward, a trajectory shows its
// messages, tool calls, RULER explanation and coloured tokens, bad input
// shows a message, and the page is not blank.
//
// With ART_DASHBOARD_SCREENSHOTS=DIR the screenshots (charts.png,
// trajectory.png) are copied to DIR; the README's picture is made so.
func TestBrowser(t *testing.T) {
	if raceEnabled {
		t.Skip("runs once, without the race detector (the API it drives is raced in TestAPI and TestEvents)")
	}
	nodeModules := browser(t)
	root := t.TempDir()
	agent := writeRun(t, root, testRun{project: "ttt", name: "agent", steps: 12, trajectories: 40, every: 5})
	baseline := writeRun(t, root, testRun{project: "ttt", name: "baseline", steps: 6, gain: 0.4})
	os.WriteFile(filepath.Join(baseline.Path(), store.ModelFile), []byte(`{"name":"baseline","base_model":"tiny-qwen"}`), 0o644)
	broken := writeRun(t, root, testRun{project: "bad", name: "broken", steps: 3})
	f, _ := os.OpenFile(filepath.Join(broken.Path(), store.HistoryFile), os.O_APPEND|os.O_WRONLY, 0)
	f.WriteString("{\"step\": 3, oops\n")
	f.Close()

	srv, _ := newTestServer(t, Config{Root: root, PollInterval: 100 * time.Millisecond})
	out := t.TempDir()
	var got browserResult
	runBrowser(t, nodeModules, srv.URL+DefaultBasePath, "check", out, func(line string) {
		if line == "need-step" {
			if err := os.MkdirAll(agent.CheckpointDir(12), 0o755); err != nil {
				t.Error(err)
			}
			logStep(t, agent, 12, 0)
		}
	}, &got)
	t.Logf("charts of 12 steps drawn %d ms after navigation", got.ChartsMs)
	if got.DetailRetries > 0 {
		t.Logf("the first click on a trajectory showed nothing; %d more click(s) opened it", got.DetailRetries)
	}

	if got.Points != 12 || got.PolylinePoints != 12 {
		t.Errorf("train/reward curve: data-n %d, %d polyline points; want 12", got.Points, got.PolylinePoints)
	}
	if got.Charts < 8 {
		t.Errorf("%d charts; want one per metric (8 or more)", got.Charts)
	}
	if got.OverlayPoints != 6 {
		t.Errorf("overlaid baseline has %d points; want 6", got.OverlayPoints)
	}
	if got.LivePoints != 13 || !strings.Contains(got.LiveHead, "step 12") {
		t.Errorf("after a new step the curve has %d points and the heading says %q; want 13 and step 12", got.LivePoints, got.LiveHead)
	}
	if got.Step != "10" || len(got.Rows) != 40 || !slices.IsSortedFunc(got.Rows, func(a, b float64) int { return int((b - a) * 1e6) }) {
		t.Errorf("trajectory list at step %s: %v; want step 10's 40 rewards, descending", got.Step, got.Rows)
	}
	if len(got.Filtered) != 9 || !slices.IsSorted(got.Filtered) || got.Filtered[0] < 0.5 || got.Filtered[8] > 0.7 {
		t.Errorf("filtered to [0.5, 0.7], ascending: %v; want 9 rewards", got.Filtered)
	}
	if got.Messages != 5 || got.Tokens != 7 || got.ToolCalls != 1 || got.Ruler != 1 ||
		!strings.Contains(got.DetailText, "tic-tac-toe") || !strings.Contains(got.DetailText, "move(") {
		t.Errorf("trajectory detail: %d messages, %d tokens, %d tool calls, %d RULER logs; want 5, 7, 1, 1\n%s",
			got.Messages, got.Tokens, got.ToolCalls, got.Ruler, got.DetailText)
	}
	if !strings.Contains(got.UnknownModel, `no model "ttt/nope"`) {
		t.Errorf("unknown model shows %q", got.UnknownModel)
	}
	if !strings.Contains(got.CorruptHistory, "1 corrupted history line(s) skipped (first at line 7") || got.CorruptCharts != 1 {
		t.Errorf("corrupt history shows %q with %d train/reward curves; want a warning and the curve", got.CorruptHistory, got.CorruptCharts)
	}
	if !strings.Contains(got.MissingStep, "No train trajectories at step 3; showing step 10") {
		t.Errorf("missing step shows %q", got.MissingStep)
	}
	if len(got.ConsoleErrors) > 0 {
		t.Errorf("console errors: %q", got.ConsoleErrors)
	}
	for _, name := range []string{"charts.png", "trajectory.png"} {
		checkNotBlank(t, filepath.Join(out, name))
	}
	if dir := os.Getenv("ART_DASHBOARD_SCREENSHOTS"); dir != "" {
		for _, name := range []string{"charts.png", "trajectory.png"} {
			b, _ := os.ReadFile(filepath.Join(out, name))
			if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// checkNotBlank fails unless the PNG at path has many colours over a large
// part of it (a blank or error-only page has a handful).
func checkNotBlank(t *testing.T, path string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	b := img.Bounds()
	colours := map[[3]uint32]int{}
	for y := b.Min.Y; y < b.Max.Y; y += 2 {
		for x := b.Min.X; x < b.Max.X; x += 2 {
			r, g, bl, _ := img.At(x, y).RGBA()
			colours[[3]uint32{r >> 8, g >> 8, bl >> 8}]++
		}
	}
	var background int
	for _, n := range colours {
		background = max(background, n)
	}
	total := (b.Dx() / 2) * (b.Dy() / 2)
	if len(colours) < 50 || background > total*95/100 {
		t.Errorf("%s looks blank: %d colours, the commonest covers %d of %d pixels", path, len(colours), background, total)
	}
}
