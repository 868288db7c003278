package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/artgo/art"
)

// judgeStandIn answers every chat completion with scores 0.9, 0.1, ... for
// as many trajectories as the prompt holds. It stands in for a paid
// remote judge, which cannot run here (ruler's own tests use our server).
func judgeStandIn(t *testing.T) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer sk-judge" {
			http.Error(w, `{"error":{"message":"bad key"}}`, http.StatusUnauthorized)
			return
		}
		var req struct {
			Messages []struct{ Content string } `json:"messages"`
		}
		json.NewDecoder(r.Body).Decode(&req)
		n := strings.Count(req.Messages[len(req.Messages)-1].Content, "<trajectory id=")
		var parts []string
		for i := range n {
			parts = append(parts, fmt.Sprintf(`{"trajectory_id":"%d","explanation":"why %d","score":%v}`, i+1, i+1, []float64{0.9, 0.1, 0.5}[i%3]))
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"id": "x", "object": "chat.completion", "model": "j",
			"choices": []any{map[string]any{"index": 0, "finish_reason": "stop", "message": map[string]any{"role": "assistant",
				"content": `{"scores":[` + strings.Join(parts, ",") + `]}`}}},
			"usage": map[string]any{"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}})
	}))
	t.Cleanup(srv.Close)
	return srv
}

// loggedStep logs two groups of three trajectories (rewards 0, 1, 2 and
// 10, 11, 12) with model.Log and returns the parquet file's path.
func loggedStep(t *testing.T) string {
	t.Helper()
	m := &art.Model{Name: "agent", Project: "p", BasePath: t.TempDir()}
	var groups []art.TrajectoryGroup
	for g := range 2 {
		var grp art.TrajectoryGroup
		for i := range 3 {
			tr := art.Trajectory{Reward: float64(10*g + i)}
			tr.AddMessage(art.UserMsg(fmt.Sprintf("question %d", g)))
			tr.AddChoice(art.Choice{FinishReason: "stop", Message: art.AssistantMsg(fmt.Sprintf("answer %d", i))})
			grp.Trajectories = append(grp.Trajectories, tr)
		}
		groups = append(groups, grp)
	}
	step := 4
	if err := m.Log(context.Background(), groups, art.LogOptions{Split: "val", Step: &step}); err != nil {
		t.Fatal(err)
	}
	d, _ := m.Dir()
	return d.TrajectoriesPath("val", 4)
}

// Ensure `art ruler` scores a step logged by model.Log group by group and
// prints each reward beside the judge's score and explanation, and that
// bad input gets a clear error.
func TestRuler(t *testing.T) {
	path := loggedStep(t)
	srv := judgeStandIn(t)
	t.Setenv("JUDGE_KEY", "sk-judge")
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	code, out, errOut := runArgs(t, "ruler", path, "--judge", "judge@0", "--base-url", srv.URL+"/v1", "--api-key-env", "JUDGE_KEY")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, want := range []string{
		"group 0 (3 trajectories)\n  #1  reward   0.000  score 0.900  why 1\n  #2  reward   1.000  score 0.100  why 2\n",
		"group 1 (3 trajectories)\n  #1  reward  10.000  score 0.900  why 1\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if !strings.Contains(errOut, "2 groups scored by judge@0: 2 judge calls") {
		t.Errorf("stderr %q", errOut)
	}
	code, out, _ = runArgs(t, "ruler", path, "--judge", "judge@0", "--base-url", srv.URL+"/v1", "--api-key-env", "JUDGE_KEY", "--json")
	if code != 0 || !strings.Contains(out, `{"group":1,"trajectories":[{"reward":10,"score":0.9,"explanation":"why 1"}`) {
		t.Errorf("--json: exit %d: %s", code, out)
	}

	t.Setenv("OPENAI_API_KEY", "")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"ruler", path}, "--judge is required"},
		{[]string{"ruler", path, "--judge", "openai/o3"}, "OPENAI_API_KEY"},
		{[]string{"ruler", path, "--judge", "j", "--base-url", srv.URL + "/v1", "--api-key-env", "NO_SUCH_VAR"}, "NO_SUCH_VAR"},
		{[]string{"ruler", path, "--judge", "j", "--base-url", srv.URL + "/v1", "--no-cache"}, "401"},
		{[]string{"ruler", "missing.parquet", "--judge", "j", "--base-url", srv.URL + "/v1"}, "missing.parquet"},
	} {
		code, _, errOut := runArgs(t, tc.args...)
		if code == 0 || !strings.Contains(errOut, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want an error with %q", tc.args, code, errOut, tc.want)
		}
	}
}

// Ensure out-of-range numbers are errors naming their flag, checked before
// the file is read, never silently read as RULER's defaults (a 0 timeout is
// ruler.Options' 3 minutes).
func TestRulerCmd_BadNumbers(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--timeout", "0s"}, "ruler: --timeout must be > 0, got 0s"},
		{[]string{"--timeout", "-1s"}, "ruler: --timeout must be > 0, got -1s"},
		{[]string{"--max-tokens", "-1"}, "ruler: --max-tokens must be >= 0, got -1"},
		{[]string{"--max-explanation", "-2"}, "ruler: --max-explanation must be >= 0, got -2"},
	} {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			missing := filepath.Join(t.TempDir(), "missing.parquet")
			args := append([]string{"ruler", missing, "--judge", "judge@0", "--base-url", "http://127.0.0.1:1/v1"}, tt.args...)
			code, _, errOut := runArgs(t, args...)
			if code != 1 || errOut != "art: "+tt.want+"\n" {
				t.Fatalf("exit %d, stderr %q; want 1 and %q", code, errOut, "art: "+tt.want)
			}
		})
	}
}

// Ensure a judge the flags do not make is one error naming the flag, with
// "ruler: " once (it printed "art: ruler: ruler: judge …").
func TestRulerCmd_BadJudge(t *testing.T) {
	t.Setenv("OPENAI_API_KEY", "")
	missing := filepath.Join(t.TempDir(), "missing.parquet")
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--judge", "nope"}, `art: ruler: judge "nope": unknown provider`},
		{[]string{"--judge", "openai/o4-mini"}, `art: ruler: judge "openai/o4-mini" needs an API key: set OPENAI_API_KEY or pass one`},
		{[]string{"--judge", "j@0", "--base-url", "x"}, `art: ruler: judge "j@0": base URL "x"`},
		{[]string{"--judge", "j@0", "--base-url", "http://127.0.0.1:1/v1", "--api-key-env", "ART_TEST_UNSET_KEY"}, "art: ruler: --api-key-env ART_TEST_UNSET_KEY: the variable is empty or unset\n"},
	} {
		code, _, errOut := runArgs(t, append([]string{"ruler", missing}, tt.args...)...)
		if code != 1 || !strings.HasPrefix(errOut, tt.want) {
			t.Errorf("%q: exit %d, stderr %q; want 1 and %q", tt.args, code, errOut, tt.want)
		}
	}
}
