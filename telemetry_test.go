package art

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"

	"github.com/artgo/art/internal/otlptest"
)

// TestGatherTraces checks the spans of a gather, exported over OTLP/HTTP to
// a loopback receiver: one art.rollout per rollout with its own trajectory
// id, children of art.gather; each chat call's art.chat span under its
// rollout; and the chat requests carrying the trajectory id and trace
// context that the server would continue.
func TestGatherTraces(t *testing.T) {
	recv, flush := otlptest.Install(t)
	var mu sync.Mutex
	seen := map[string]string{} // trajectory id header → traceparent
	// An OpenAI-compatible endpoint that answers one fixed choice; it only
	// records the headers the SDK's client sends.
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen[r.Header.Get("X-ART-Trajectory-ID")] = r.Header.Get("Traceparent")
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"id":"c","object":"chat.completion","created":1,"model":"m@0","choices":[{"index":0,"finish_reason":"stop",` +
			`"message":{"role":"assistant","content":"hi"},"logprobs":{"content":[{"token":"hi","logprob":-0.5,"token_id":7}]}}]}`))
	}))
	defer srv.Close()
	m := &Model{Name: "m", Project: "p", BasePath: t.TempDir(), InferenceBaseURL: srv.URL + "/v1", InferenceAPIKey: "k"}
	client, err := m.OpenAIClient()
	if err != nil {
		t.Fatal(err)
	}
	ids := make(chan string, 4)
	rollout := func(ctx context.Context, scenario string) (Trajectory, error) {
		ids <- TrajectoryID(ctx)
		var tr Trajectory
		tr.AddMessage(UserMsg(scenario))
		if _, err := tr.Chat(ctx, client, openai.ChatCompletionNewParams{Model: "m"}); err != nil {
			return tr, err
		}
		return tr, nil
	}
	groups, err := GatherGroups(context.Background(), []string{"a", "b"}, 2, rollout, GatherOptions{Quiet: true})
	if err != nil {
		t.Fatal(err)
	}
	close(ids)
	flush()

	gather := recv.Named("art.gather")
	rollouts := recv.Named("art.rollout")
	chats := recv.Named("art.chat")
	if len(gather) != 1 || len(rollouts) != 4 || len(chats) != 4 {
		t.Fatalf("want 1 art.gather, 4 art.rollout, 4 art.chat; got:\n%s", recv)
	}
	if gather[0].Attrs["art.rollouts"] != "4" || gather[0].Attrs["art.groups"] != "2" {
		t.Errorf("gather span attributes %v", gather[0].Attrs)
	}
	byID := map[string]otlptest.Span{}
	for _, r := range rollouts {
		if r.ParentSpanID != gather[0].SpanID || r.TraceID != gather[0].TraceID {
			t.Errorf("rollout span %+v is not a child of the gather span", r)
		}
		byID[r.Attrs["art.trajectory_id"]] = r
	}
	for id := range ids {
		if _, ok := byID[id]; !ok || id == "" {
			t.Errorf("rollout saw trajectory id %q; no rollout span has it", id)
		}
	}
	for _, c := range chats {
		r, ok := byID[c.Attrs["art.trajectory_id"]]
		if !ok || c.ParentSpanID != r.SpanID {
			t.Errorf("chat span %+v is not under its rollout's span", c)
			continue
		}
		// The server received the trajectory id and a traceparent naming
		// the chat span: "00-<trace>-<span>-01".
		if tp := seen[c.Attrs["art.trajectory_id"]]; !strings.Contains(tp, c.TraceID+"-"+c.SpanID) {
			t.Errorf("request of trajectory %s had traceparent %q; want trace %s span %s", c.Attrs["art.trajectory_id"], tp, c.TraceID, c.SpanID)
		}
	}
	if len(groups) != 2 || len(groups[0].Trajectories) != 2 {
		t.Fatalf("gathered %+v", groups)
	}
}

// TestLog_TimingMetrics checks time/step_actor_s, time/step_eval_s and
// throughput/avg_actor_tok_per_s from the gather's wall time.
func TestLog_TimingMetrics(t *testing.T) {
	ctx := context.Background()
	const pause = 50 * time.Millisecond
	rollout := func(ctx context.Context, _ int) (Trajectory, error) {
		time.Sleep(pause)
		var tr Trajectory
		tr.AddMessage(UserMsg("q"))
		tr.AddChoice(Choice{Message: AssistantMsg("a"), Logprobs: []TokenLogprob{{TokenID: 1}, {TokenID: 2}}})
		return tr, nil
	}
	m := &Model{Name: "m", Project: "p", BasePath: t.TempDir()}
	d, _ := m.Dir()
	step := 1
	for _, split := range []string{"train", "val"} {
		groups, err := GatherGroups(ctx, []int{1, 2}, 2, rollout, GatherOptions{Quiet: true})
		if err != nil {
			t.Fatal(err)
		}
		if err := m.Log(ctx, groups, LogOptions{Split: split, Step: &step}); err != nil {
			t.Fatal(err)
		}
	}
	rows, err := d.ReadHistory()
	if err != nil || len(rows) != 2 {
		t.Fatalf("history: %v, %d rows", err, len(rows))
	}
	train, val := rows[0], rows[1]
	actor, _ := train["time/step_actor_s"].(float64)
	if actor < pause.Seconds() || actor > 30 {
		t.Errorf("time/step_actor_s = %v; want the gather's wall time, at least %v", actor, pause.Seconds())
	}
	if got, want := train["throughput/avg_actor_tok_per_s"], 8/actor; got != want {
		t.Errorf("throughput/avg_actor_tok_per_s = %v; want 8 tokens / %v s = %v", got, actor, want)
	}
	if train["time/cum/actor_s"] != actor {
		t.Errorf("time/cum/actor_s = %v; want %v", train["time/cum/actor_s"], actor)
	}
	if e, _ := val["time/step_eval_s"].(float64); e < pause.Seconds() {
		t.Errorf("val time/step_eval_s = %v; want at least %v", val["time/step_eval_s"], pause.Seconds())
	}
	if _, ok := val["time/step_actor_s"]; ok {
		t.Error("a val log has time/step_actor_s")
	}
	// Groups built by hand have no gather time.
	if err := m.Log(ctx, []TrajectoryGroup{{Trajectories: []Trajectory{{Reward: 1}}}}, LogOptions{Split: "test", Step: &step}); err != nil {
		t.Fatal(err)
	}
	rows, _ = d.ReadHistory()
	if _, ok := rows[2]["time/step_eval_s"]; ok {
		t.Error("groups made without a gather got a gather time")
	}
}

// TestLog_CostRollups checks ART's cost roll-ups and their totals, which
// survive a restart (a new Model value).
func TestLog_CostRollups(t *testing.T) {
	ctx := context.Background()
	base := t.TempDir()
	log := func(split string, step int, metrics map[string]float64) map[string]any {
		m := &Model{Name: "m", Project: "p", BasePath: base}
		if err := m.Log(ctx, nil, LogOptions{Split: split, Step: &step, Metrics: metrics}); err != nil {
			t.Fatal(err)
		}
		d, _ := m.Dir()
		rows, _ := d.ReadHistory()
		return rows[len(rows)-1]
	}
	check := func(row map[string]any, want map[string]float64) {
		t.Helper()
		for k, v := range want {
			if got, _ := row[k].(float64); got < v-1e-12 || got > v+1e-12 {
				t.Errorf("%s = %v; want %v", k, row[k], v)
			}
		}
	}
	r1 := log("train", 1, map[string]float64{"costs/train/judge/ruler": 0.5, "costs/train/tinker_prefill": 0.25, "costs/gpu": 1})
	check(r1, map[string]float64{"costs/train": 0.75, "costs/all": 1.75, "costs/cum/train": 0.75, "costs/cum/all": 1.75})
	if _, ok := r1["costs/eval"]; ok {
		t.Error("costs/eval logged without eval costs")
	}
	r2 := log("val", 1, map[string]float64{"costs/eval/judge/ruler": 0.125})
	check(r2, map[string]float64{"costs/eval": 0.125, "costs/all": 0.125, "costs/cum/eval": 0.125, "costs/cum/all": 1.875})
	r3 := log("train", 2, map[string]float64{"costs/train": 2}) // a roll-up given as is
	check(r3, map[string]float64{"costs/train": 2, "costs/all": 2, "costs/cum/train": 2.75, "costs/cum/all": 3.875})
	if r4 := log("val", 2, map[string]float64{"x": 1}); r4["costs/cum/all"] != nil {
		t.Error("a log without costs repeated the cost totals")
	}
}
