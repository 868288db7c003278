package ruler

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/artgo/art"
)

// standIn is an OpenAI-compatible chat endpoint that answers from a
// script. It stands in for a paid remote judge (o3, Claude), which cannot
// run here; the real judge test (judge_test.go) uses our own server.
type standIn struct {
	mu       sync.Mutex
	answers  []string // answered in order; the last one repeats
	delay    time.Duration
	requests []map[string]any
	headers  []http.Header
	srv      *httptest.Server
}

func newStandIn(t *testing.T, answers ...string) *standIn {
	s := &standIn{answers: answers}
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var req map[string]any
		json.Unmarshal(body, &req)
		s.mu.Lock()
		s.requests = append(s.requests, req)
		s.headers = append(s.headers, r.Header.Clone())
		k := min(len(s.requests), len(s.answers)) - 1
		answer, delay := s.answers[k], s.delay
		s.mu.Unlock()
		if delay > 0 {
			select {
			case <-time.After(delay):
			case <-r.Context().Done():
				return
			}
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{
			"id": "x", "object": "chat.completion", "created": 1, "model": req["model"],
			"choices": []any{map[string]any{"index": 0, "finish_reason": "stop",
				"message": map[string]any{"role": "assistant", "content": answer}}},
			"usage": map[string]any{"prompt_tokens": 1000, "completion_tokens": 100, "total_tokens": 1100},
		})
	}))
	t.Cleanup(s.srv.Close)
	return s
}

func (s *standIn) judge(model string) Judge {
	return Judge{Model: model, BaseURL: s.srv.URL + "/v1", APIKey: "k"}
}

func (s *standIn) calls() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.requests)
}

func scores(vals ...float64) string {
	var parts []string
	for i, v := range vals {
		parts = append(parts, fmt.Sprintf(`{"trajectory_id":"%d","explanation":"reason %d","score":%v}`, i+1, i+1, v))
	}
	return `{"scores":[` + strings.Join(parts, ",") + `]}`
}

func group(rewards ...float64) art.TrajectoryGroup {
	var g art.TrajectoryGroup
	for i, r := range rewards {
		tr := art.Trajectory{Reward: r, Metadata: map[string]any{"scenario_id": "s7"}}
		tr.AddMessage(art.UserMsg("say something"))
		tr.AddChoice(art.Choice{FinishReason: "stop", Message: art.AssistantMsg(fmt.Sprintf("answer %d", i))})
		g.Trajectories = append(g.Trajectories, tr)
	}
	return g
}

func opts(t *testing.T) Options { return Options{CacheDir: t.TempDir(), Timeout: 5 * time.Second} }

// Ensure ScoreGroup maps the judge's scores onto a new group with the
// original's metrics and logs, sends a strict json_schema response_format,
// and leaves the input alone.
func TestScoreGroup(t *testing.T) {
	s := newStandIn(t, scores(0.9, 0.1, 0.5))
	in := group(1, 2, 3)
	st := &Stats{}
	o := opts(t)
	o.Stats = st
	out, err := ScoreGroup(context.Background(), in, s.judge("o4-mini"), o)
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []float64{0.9, 0.1, 0.5} {
		tr := out.Trajectories[i]
		if tr.Reward != want || tr.Metrics["ruler_score"] != want || tr.Metrics["independent_reward"] != float64(i+1) ||
			tr.Logs[len(tr.Logs)-1] != fmt.Sprintf("RULER explanation: reason %d", i+1) {
			t.Errorf("trajectory %d: reward %v metrics %v logs %q", i, tr.Reward, tr.Metrics, tr.Logs)
		}
		if in.Trajectories[i].Reward != float64(i+1) || in.Trajectories[i].Metrics != nil || len(in.Trajectories[i].Logs) != 0 {
			t.Errorf("input trajectory %d changed: %+v", i, in.Trajectories[i])
		}
	}
	rf, _ := s.requests[0]["response_format"].(map[string]any)
	js, _ := rf["json_schema"].(map[string]any)
	if rf["type"] != "json_schema" || js["strict"] != true || js["schema"] == nil {
		t.Errorf("response_format %v", rf)
	}
	if _, ok := s.requests[0]["temperature"]; ok {
		t.Error("temperature sent though unset (o-series models refuse it)")
	}
	m := st.Take("train")
	if m["ruler/judge_calls"] != 1 || m["ruler/judge_prompt_tokens"] != 1000 || m["costs/train/judge/ruler"] != 1000*1.1e-6+100*4.4e-6 {
		t.Errorf("stats %v", m)
	}
}

// Ensure malformed answers are retried with what was wrong, and fail
// clearly after the retries, naming the judge, the group and the answer.
func TestScoreGroup_Malformed(t *testing.T) {
	ctx := context.Background()
	s := newStandIn(t, `{"scores":[]}`, scores(0.2, 0.8))
	out, err := ScoreGroup(ctx, group(0, 0), s.judge("j"), opts(t))
	if err != nil || out.Trajectories[1].Reward != 0.8 || s.calls() != 2 {
		t.Fatalf("retry: %v, %d calls", err, s.calls())
	}
	last := s.requests[1]["messages"].([]any)
	if fix := last[len(last)-1].(map[string]any)["content"].(string); !strings.Contains(fix, "0 scores for 2 trajectories") {
		t.Errorf("the retry did not say what was wrong: %q", fix)
	}
	for _, tc := range []struct{ answer, want string }{
		{scores(0.5), "1 scores for 2 trajectories"},
		{`{"scores": "many"`, "not the JSON object"},
		{scores(0.5, 7), "outside [0, 1]"},
	} {
		s := newStandIn(t, tc.answer)
		st := &Stats{}
		o := opts(t)
		o.Stats = st
		_, err := ScoreGroup(ctx, group(0, 0), s.judge("my-judge"), o)
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "my-judge") ||
			!strings.Contains(err.Error(), "scenario s7") || !strings.Contains(err.Error(), "after 3 attempts") {
			t.Errorf("answer %s: err %v", tc.answer, err)
		}
		if s.calls() != 3 || st.failed.Load() != 1 {
			t.Errorf("answer %s: %d calls, %d failed groups", tc.answer, s.calls(), st.failed.Load())
		}
	}
}

// Ensure nothing hangs: a judge that never answers fails within the
// timeout, a cancelled context at once, an unreachable endpoint with a
// clear error; a missing key fails before any call.
func TestScoreGroup_Bounded(t *testing.T) {
	s := newStandIn(t, scores(1, 0))
	s.delay = time.Hour
	o := opts(t)
	o.Timeout = 300 * time.Millisecond
	start := time.Now()
	_, err := ScoreGroup(context.Background(), group(0, 0), s.judge("slow"), o)
	if err == nil || !strings.Contains(err.Error(), "no answer within 300ms") || time.Since(start) > 10*time.Second {
		t.Errorf("slow judge: %v after %v", err, time.Since(start))
	}

	ctx, cancel := context.WithCancel(context.Background())
	go func() { time.Sleep(100 * time.Millisecond); cancel() }()
	start = time.Now()
	o.Timeout = time.Hour
	if _, err := ScoreGroup(ctx, group(0, 0), s.judge("slow"), o); err == nil || time.Since(start) > 10*time.Second {
		t.Errorf("cancelled: %v after %v", err, time.Since(start))
	}

	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	addr := ln.Addr().String()
	ln.Close()
	_, err = ScoreGroup(context.Background(), group(0, 0), Judge{Model: "gone", BaseURL: "http://" + addr + "/v1"}, opts(t))
	if err == nil || !strings.Contains(err.Error(), "gone") || !strings.Contains(err.Error(), addr) {
		t.Errorf("unreachable: %v", err)
	}

	t.Setenv("OPENAI_API_KEY", "")
	t.Setenv("OPENAI_BASE_URL", "")
	if _, err := NewJudge("openai/o3", "", ""); err == nil || !strings.Contains(err.Error(), "OPENAI_API_KEY") {
		t.Errorf("missing key: %v", err)
	}
}

// Ensure SwallowErrors drops a group loudly: nil, counted, and zero groups
// from the AfterEach hook; without it the gather fails.
func TestSwallowErrors(t *testing.T) {
	s := newStandIn(t, "nonsense")
	st := &Stats{}
	o := opts(t)
	o.SwallowErrors, o.Stats, o.MaxRetries = true, st, -1
	g, err := ScoreGroup(context.Background(), group(0, 1), s.judge("j"), o)
	if g != nil || err != nil || st.Dropped() != 1 {
		t.Fatalf("swallowed: %v, %v, dropped %d", g, err, st.Dropped())
	}
	out, err := AfterEach(s.judge("j"), o)(context.Background(), group(0, 1))
	if len(out) != 0 || err != nil || st.Take("train")["ruler/dropped_groups"] != 2 {
		t.Fatalf("AfterEach: %v, %v", out, err)
	}
	o.SwallowErrors = false
	if _, err := AfterEach(s.judge("j"), o)(context.Background(), group(0, 1)); err == nil {
		t.Fatal("AfterEach without SwallowErrors succeeded on a bad answer")
	}
}

// Ensure the hook works inside a gather, and ScoreGroups scores a step's
// groups concurrently.
func TestGatherAndScoreGroups(t *testing.T) {
	s := newStandIn(t, scores(0.25, 0.75))
	o := opts(t)
	rollout := func(i int) art.Rollout {
		return func(ctx context.Context) (art.Trajectory, error) {
			tr := art.Trajectory{}
			tr.AddMessage(art.UserMsg("q"))
			tr.AddChoice(art.Choice{FinishReason: "stop", Message: art.AssistantMsg(fmt.Sprint(i))})
			return tr, nil
		}
	}
	specs := []art.GroupSpec{{Rollouts: []art.Rollout{rollout(0), rollout(1)}}, {Rollouts: []art.Rollout{rollout(2), rollout(3)}}}
	groups, err := art.GatherTrajectoryGroups(context.Background(), specs, art.GatherOptions{Quiet: true, AfterEach: AfterEach(s.judge("j"), o)})
	if err != nil || len(groups) != 2 || groups[1].Trajectories[1].Reward != 0.75 {
		t.Fatalf("gather: %v, %+v", err, groups)
	}
	more, err := ScoreGroups(context.Background(), []art.TrajectoryGroup{group(0, 0), group(1, 1), group(2, 2)}, s.judge("j"), o)
	if err != nil || len(more) != 3 || more[2].Trajectories[0].Reward != 0.25 {
		t.Fatalf("ScoreGroups: %v, %d groups", err, len(more))
	}
	bad := newStandIn(t, "nonsense")
	if _, err := ScoreGroups(context.Background(), []art.TrajectoryGroup{group(0, 0), group(1, 1)}, bad.judge("j"), o); err == nil || errors.Is(err, context.Canceled) {
		t.Fatalf("ScoreGroups with a bad judge: %v", err)
	}
}

// Ensure a second scoring of the same group is answered from the cache,
// and that identical trajectories are scored once and the score copied.
func TestCacheAndIdentical(t *testing.T) {
	s := newStandIn(t, scores(0.3, 0.6))
	st := &Stats{}
	o := opts(t)
	o.Stats = st
	for range 2 {
		if _, err := ScoreGroup(context.Background(), group(0, 0), s.judge("j"), o); err != nil {
			t.Fatal(err)
		}
	}
	if s.calls() != 1 || st.cacheHits.Load() != 1 {
		t.Errorf("%d judge calls, %d cache hits; want 1, 1", s.calls(), st.cacheHits.Load())
	}
	o.NoCache = true
	if _, err := ScoreGroup(context.Background(), group(0, 0), s.judge("j"), o); err != nil || s.calls() != 2 {
		t.Errorf("NoCache: %v, %d calls", err, s.calls())
	}

	one := newStandIn(t, scores(0.4))
	g := group(0)
	g.Trajectories = append(g.Trajectories, g.Trajectories[0], g.Trajectories[0])
	out, err := ScoreGroup(context.Background(), g, one.judge("j"), opts(t))
	if err != nil || len(out.Trajectories) != 3 || out.Trajectories[2].Reward != 0.4 {
		t.Fatalf("identical: %v", err)
	}
}

func TestPriceOf(t *testing.T) {
	for model, want := range map[string]float64{"o3": 2, "anthropic/claude-sonnet-4-20250514": 3, "gpt-4.1-mini-2025-04-14": 0.4} {
		if p, ok := priceOf(model); !ok || p.in != want {
			t.Errorf("priceOf(%q) = %v, %v", model, p, ok)
		}
	}
	if _, ok := priceOf("my-local-judge"); ok {
		t.Error("an unknown model was priced")
	}
}

func TestCompactJSON(t *testing.T) {
	b, _ := compactJSON(art.UserMsg(`<a> & \u003c`))
	if want := `{"role":"user","content":"<a> & \\u003c"}`; string(b) != want {
		t.Errorf("got %s, want %s", b, want)
	}
}
