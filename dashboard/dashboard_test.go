package dashboard

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/artgo/art/store"
)

// testRun describes a run writeRun makes.
type testRun struct {
	project, name string
	steps         int // history rows and checkpoints 0..steps-1
	trajectories  int // trajectories per step, logged at every every-th step
	every         int
	gain          float64 // how far the rewards rise (0: 1)
}

// writeRun writes a run under root the way training does: history rows
// with train/val rewards and losses, a checkpoint folder per step, and
// train trajectories (a tool call, a tool result and a sampled answer with
// logprobs) at every every-th step.
func writeRun(tb testing.TB, root string, r testRun) *store.ModelDir {
	tb.Helper()
	d, err := store.New(root, r.project, r.name)
	if err != nil {
		tb.Fatal(err)
	}
	if err := d.WriteModel(map[string]any{"name": r.name, "project": r.project, "base_model": "tiny-qwen", "trainable": true}); err != nil {
		tb.Fatal(err)
	}
	// The history is written at once (AppendHistory syncs each line, which
	// takes seconds for a large run); live steps use logStep.
	var history []byte
	for s := range r.steps {
		if err := os.MkdirAll(d.CheckpointDir(s), 0o755); err != nil {
			tb.Fatal(err)
		}
		for _, row := range historyRows(s, r.gain) {
			line, _ := json.Marshal(row)
			history = append(append(history, line...), '\n')
		}
		if r.trajectories > 0 && s%max(r.every, 1) == 0 {
			if err := d.WriteTrajectories("train", s, trajectoryRows(r.trajectories, s)); err != nil {
				tb.Fatal(err)
			}
		}
	}
	if err := os.WriteFile(filepath.Join(d.Path(), store.HistoryFile), history, 0o644); err != nil {
		tb.Fatal(err)
	}
	return d
}

// logStep appends the history rows of one step as training does.
func logStep(tb testing.TB, d *store.ModelDir, s int, gain float64) {
	tb.Helper()
	for _, row := range historyRows(s, gain) {
		if err := d.AppendHistory(row); err != nil {
			tb.Fatal(err)
		}
	}
}

// historyRows are the history rows of one step: train, then val, with
// rewards rising by gain (0: 1) over the steps.
func historyRows(s int, gain float64) []map[string]any {
	if gain == 0 {
		gain = 1
	}
	x := float64(s)
	return []map[string]any{
		{"step": s, "training_step": s, "train/reward": 0.2 + 0.6*gain*(1-math.Exp(-x/10)), "loss/train": 1 / (1 + x), "loss/grad_norm": 0.5 + 0.1*gain*math.Sin(x),
			"data/step_num_scenarios": 8, "data/cum/num_scenarios": 8 * (x + 1), "time/step_trainer_s": 1.5, "costs/judge": 0.01},
		{"step": s, "training_step": s, "val/reward": 0.25 + 0.5*gain*(1-math.Exp(-x/12)), "val/exception_rate": 0},
	}
}

// trajectoryRows makes n trajectories of a step, in groups of 8, with
// rewards i/n so that sorting has something to do.
func trajectoryRows(n, step int) []store.TrajectoryRow {
	rows := make([]store.TrajectoryRow, n)
	for i := range rows {
		reward := float64((i*7919)%n) / float64(n)
		rows[i] = store.TrajectoryRow{
			GroupIndex: int64(i / 8),
			Reward:     reward,
			Metrics:    fmt.Sprintf(`{"win":%d,"turns":%d}`, int(reward+0.5), 1+i%3),
			Metadata:   fmt.Sprintf(`{"scenario_id":"s%d"}`, i/8),
			Logs:       []string{fmt.Sprintf("RULER explanation: trajectory %d reached the goal %.0f%% of the way", i, 100*reward)},
			Messages: []store.MessageRow{
				{Role: "system", Content: "You play tic-tac-toe as X. Call move(row, col)."},
				{Role: "user", Content: fmt.Sprintf("Board %d at step %d:\n. . .\n. O .\n. . .", i, step)},
				{Role: "assistant", Trainable: true, ToolCalls: `[{"id":"c1","type":"function","function":{"name":"move","arguments":"{\"row\":0,\"col\":0}"}}]`,
					Logprobs: []store.TokenRow{{TokenID: 27, Token: "<tool_call>", Logprob: -0.01}, {TokenID: 5, Token: "move", Logprob: -0.4}}},
				{Role: "tool", Content: "ok: X at 0,0", ToolCallID: "c1"},
				{Role: "assistant", Trainable: true, Content: "I took the corner.", Logprobs: []store.TokenRow{
					{TokenID: 40, Token: "I", Logprob: -0.05}, {TokenID: 3867, Token: " took", Logprob: -1.2},
					{TokenID: 279, Token: " the", Logprob: -0.02}, {TokenID: 9131, Token: " corner", Logprob: -2.9}, {TokenID: 13, Token: ".", Logprob: -0.3}}},
			},
		}
	}
	return rows
}

func newTestServer(tb testing.TB, cfg Config) (*httptest.Server, *Dashboard) {
	tb.Helper()
	d := New(cfg)
	srv := httptest.NewServer(d)
	tb.Cleanup(func() { d.Close(); srv.Close() })
	return srv, d
}

// get fetches path and decodes its JSON answer into v (when not nil),
// returning the status.
func get(tb testing.TB, client *http.Client, url string, v any) int {
	tb.Helper()
	res, err := client.Get(url)
	if err != nil {
		tb.Fatal(err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	if v != nil {
		if err := json.Unmarshal(body, v); err != nil {
			tb.Fatalf("GET %s: %d %q: %v", url, res.StatusCode, body, err)
		}
	}
	return res.StatusCode
}

func TestAPI(t *testing.T) {
	root := t.TempDir()
	writeRun(t, root, testRun{project: "ttt", name: "agent", steps: 12, trajectories: 40, every: 5})
	writeRun(t, root, testRun{project: "ttt", name: "baseline", steps: 3})
	srv, _ := newTestServer(t, Config{Root: root})
	base := srv.URL + DefaultBasePath
	c := srv.Client()

	var runs struct {
		Runs []runRow `json:"runs"`
	}
	if st := get(t, c, base+"api/runs", &runs); st != 200 || len(runs.Runs) != 2 {
		t.Fatalf("api/runs: %d %+v; want two runs", st, runs)
	}
	if r := runs.Runs[0]; r.ID != "ttt/agent" || r.Step != 11 || r.ValReward == nil || r.TrainReward == nil {
		t.Fatalf("first run %+v; want ttt/agent at step 11 with rewards", r)
	}

	var run runDetail
	if st := get(t, c, base+"api/run?run=ttt/agent", &run); st != 200 {
		t.Fatalf("api/run: %d", st)
	}
	if n := len(run.Metrics["train/reward"]); n != 12 {
		t.Errorf("train/reward has %d points; want 12", n)
	}
	if n := len(run.Metrics["loss/grad_norm"]); n != 12 {
		t.Errorf("loss/grad_norm has %d points; want 12", n)
	}
	if len(run.Checkpoints) != 12 || run.Checkpoints[0].Step != 11 || !run.Checkpoints[0].Best || run.Checkpoints[0].ValReward == nil {
		t.Errorf("checkpoints %+v; want 12, newest first, the last one best by val/reward", run.Checkpoints[:2])
	}
	if got := run.Trajectories["train"]; fmt.Sprint(got) != "[0 5 10]" {
		t.Errorf("trajectory steps %v; want [0 5 10]", got)
	}

	var list struct {
		Total, Matched int
		Items          []trajectorySummary
	}
	if st := get(t, c, base+"api/trajectories?run=ttt/agent&split=train&step=5&sort=-reward&limit=10", &list); st != 200 {
		t.Fatalf("api/trajectories: %d", st)
	}
	if list.Total != 40 || list.Matched != 40 || len(list.Items) != 10 {
		t.Fatalf("list total %d matched %d items %d; want 40, 40, 10", list.Total, list.Matched, len(list.Items))
	}
	for i := 1; i < len(list.Items); i++ {
		if list.Items[i].Reward > list.Items[i-1].Reward {
			t.Fatalf("rewards not descending: %v then %v", list.Items[i-1].Reward, list.Items[i].Reward)
		}
	}
	if !list.Items[0].HasLogprobs || !strings.HasPrefix(list.Items[0].Preview, "Board ") {
		t.Errorf("item %+v; want logprobs and a preview of the user message", list.Items[0])
	}
	get(t, c, base+"api/trajectories?run=ttt/agent&split=train&step=5&min=0.5&max=0.7&sort=reward", &list)
	for _, it := range list.Items {
		if it.Reward < 0.5 || it.Reward > 0.7 {
			t.Errorf("filtered item with reward %v outside [0.5, 0.7]", it.Reward)
		}
	}
	if list.Matched != 9 { // rewards k/40 for k = 20..28
		t.Errorf("%d match rewards in [0.5, 0.7]; want 9", list.Matched)
	}
	get(t, c, base+"api/trajectories?run=ttt/agent&split=train&step=5&q=BOARD+17+", &list)
	if list.Matched != 1 || list.Items[0].Index != 17 {
		t.Errorf("text search: %+v; want trajectory 17 alone", list)
	}

	var tr struct {
		Reward   float64
		Logs     []string
		Messages []messageView
	}
	if st := get(t, c, base+"api/trajectory?run=ttt/agent&split=train&step=10&index=3", &tr); st != 200 {
		t.Fatalf("api/trajectory: %d", st)
	}
	if len(tr.Messages) != 5 || len(tr.Messages[4].Tokens) != 5 || tr.Messages[4].Tokens[3][0] != " corner" ||
		string(tr.Messages[2].ToolCalls) == "" || tr.Messages[3].ToolCallID != "c1" || !strings.HasPrefix(tr.Logs[0], "RULER explanation") {
		t.Fatalf("trajectory %+v; want its messages, tool call, tokens and RULER log", tr)
	}

	// The page and its assets are embedded.
	for _, p := range []string{"", "assets/app.js", "assets/app.css"} {
		res, err := c.Get(base + p)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != 200 || len(body) < 500 {
			t.Errorf("GET %s: %d, %d bytes", base+p, res.StatusCode, len(body))
		}
		if strings.Contains(string(body), "http://") || strings.Contains(string(body), "https://") {
			t.Errorf("%s refers to another site; the dashboard must work offline", p)
		}
	}
}

// Ensure bad input gets a clear message and a 4xx, never a 500.
func TestAPI_Errors(t *testing.T) {
	root := t.TempDir()
	d := writeRun(t, root, testRun{project: "p", name: "m", steps: 4, trajectories: 5, every: 2})
	// A corrupt history line, a damaged parquet file.
	f, _ := os.OpenFile(filepath.Join(d.Path(), store.HistoryFile), os.O_APPEND|os.O_WRONLY, 0)
	f.WriteString("{not json\n")
	f.Close()
	logStep(t, d, 4, 0)
	os.WriteFile(d.TrajectoriesPath("train", 2), []byte("PAR1 garbage"), 0o644)

	srv, _ := newTestServer(t, Config{Root: root})
	base := srv.URL + DefaultBasePath
	c := srv.Client()
	var run runDetail
	if st := get(t, c, base+"api/run?run=p/m", &run); st != 200 || len(run.Metrics["train/reward"]) != 5 ||
		len(run.Warnings) != 1 || !strings.Contains(run.Warnings[0], "1 corrupted history line(s) skipped (first at line 9") {
		t.Errorf("run with a corrupt line: %d, %d points, warnings %q; want the 5 good rows and a warning naming line 9", st, len(run.Metrics["train/reward"]), run.Warnings)
	}
	for _, tc := range []struct {
		path, want string
		status     int
	}{
		{"api/run?run=p/nope", `no model "p/nope" under ` + root + " (models: p/m)", 404},
		{"api/run", "no model named", 400},
		{"api/trajectories?run=p/m&split=train&step=1", "p/m has no train trajectories at step 1 (steps with train trajectories: 0, 2)", 404},
		{"api/trajectories?run=p/m&split=val&step=0", "steps with val trajectories: none", 404},
		{"api/trajectories?run=p/m&split=../x&step=0", "split: name", 400},
		{"api/trajectories?run=p/m&split=train&step=x", `step "x"`, 400},
		{"api/trajectories?run=p/m&split=train&step=2", "cannot read the train trajectories of step 2", 422},
		{"api/trajectories?run=p/m&split=train&step=0&sort=foo", "sort", 400},
		{"api/trajectories?run=p/m&split=train&step=0&min=a", `min "a"`, 400},
		{"api/trajectory?run=p/m&split=train&step=0&index=99", "it has 5, numbered from 0", 404},
		{"api/nothing", "no dashboard route", 404},
	} {
		var e apiError
		if st := get(t, c, base+tc.path, &e); st != tc.status || !strings.Contains(e.Error, tc.want) {
			t.Errorf("GET %s: %d %q; want %d and %q", tc.path, st, e.Error, tc.status, tc.want)
		}
	}

	srv2, _ := newTestServer(t, Config{Root: filepath.Join(root, "missing")})
	var e apiError
	if st := get(t, srv2.Client(), srv2.URL+DefaultBasePath+"api/runs", &e); st != 404 || !strings.Contains(e.Error, "missing: no such file or directory") {
		t.Errorf("missing data folder: %d %q", st, e.Error)
	}
}

func TestAuth(t *testing.T) {
	root := t.TempDir()
	writeRun(t, root, testRun{project: "p", name: "m", steps: 1})
	srv, _ := newTestServer(t, Config{Root: root, APIKey: "s3cret"})
	base := srv.URL + DefaultBasePath
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

	var e apiError
	if st := get(t, noRedirect, base+"api/runs", &e); st != 401 || !strings.Contains(e.Error, "?key=") {
		t.Fatalf("without a key: %d %q; want 401 saying how to sign in", st, e.Error)
	}
	if st := get(t, noRedirect, base+"?key=wrong", nil); st != 401 {
		t.Fatalf("with a wrong key: %d; want 401", st)
	}
	req, _ := http.NewRequest("GET", base+"api/runs", nil)
	req.Header.Set("Authorization", "Bearer s3cret")
	if res, err := noRedirect.Do(req); err != nil || res.StatusCode != 200 {
		t.Fatalf("with the Bearer header: %v %v", res.StatusCode, err)
	}

	res, err := noRedirect.Get(base + "?key=s3cret&x=1")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	loc := res.Header.Get("Location")
	cookies := res.Cookies()
	if res.StatusCode != http.StatusSeeOther || strings.Contains(loc, "s3cret") || !strings.Contains(loc, "x=1") || len(cookies) != 1 {
		t.Fatalf("?key=: %d Location %q cookies %v; want a redirect without the key, and a cookie", res.StatusCode, loc, cookies)
	}
	ck := cookies[0]
	if ck.Path != "/dashboard" || !ck.HttpOnly || ck.SameSite != http.SameSiteLaxMode || strings.Contains(ck.Value, "s3cret") {
		t.Fatalf("cookie %+v; want HttpOnly, SameSite=Lax (a link from another site keeps you signed in), scoped to /dashboard, without the key", ck)
	}
	req, _ = http.NewRequest("GET", base+"api/runs", nil)
	req.AddCookie(ck)
	if res, err := noRedirect.Do(req); err != nil || res.StatusCode != 200 {
		t.Fatalf("with the cookie: %v %v", res.StatusCode, err)
	}
	req.Header.Set("Cookie", cookieName+"=forged")
	if res, err := noRedirect.Do(req); err != nil || res.StatusCode != 401 {
		t.Fatalf("with a forged cookie: %v %v", res.StatusCode, err)
	}
}

// Ensure a new step shows up on the event stream, and Close ends it.
func TestEvents(t *testing.T) {
	root := t.TempDir()
	d := writeRun(t, root, testRun{project: "p", name: "m", steps: 2})
	srv, dash := newTestServer(t, Config{Root: root, PollInterval: 20 * time.Millisecond})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", srv.URL+DefaultBasePath+"api/events", nil)
	res, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if ct := res.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("Content-Type %q", ct)
	}
	lines := bufio.NewScanner(res.Body)
	lines.Scan() // retry:
	time.Sleep(50 * time.Millisecond)
	logStep(t, d, 2, 0)
	writeRun(t, root, testRun{project: "p", name: "new", steps: 1})
	var got []string
	for lines.Scan() {
		if data, ok := strings.CutPrefix(lines.Text(), "data: "); ok {
			var ev struct{ Changed []string }
			json.Unmarshal([]byte(data), &ev)
			got = append(got, ev.Changed...)
			if strings.Contains(fmt.Sprint(got), "p/m") && strings.Contains(fmt.Sprint(got), "p/new") {
				break
			}
		}
	}
	if !strings.Contains(fmt.Sprint(got), "p/m") || !strings.Contains(fmt.Sprint(got), "p/new") {
		t.Fatalf("changes %v (err %v); want p/m and p/new", got, lines.Err())
	}
	dash.Close()
	done := make(chan struct{})
	go func() {
		for lines.Scan() {
		}
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the event stream is still open 10 s after Close")
	}
}
