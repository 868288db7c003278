package art

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// Ensure requests of a gathered rollout without a seed get one derived
// from the run's seed, the model, the group, the index and the call; a
// request's own seed wins; requests outside a rollout are sent unchanged.
func TestSeedingTransport(t *testing.T) {
	var mu sync.Mutex
	var bodies []string
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		bodies = append(bodies, string(b))
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"model":"m@1","choices":[{"index":0,"message":{"role":"assistant","content":"x"},"finish_reason":"stop"}]}`)
	}))
	defer ts.Close()
	send := func(ctx context.Context, rt http.RoundTripper, path, body string) map[string]any {
		t.Helper()
		mu.Lock()
		bodies = nil
		mu.Unlock()
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, ts.URL+path, strings.NewReader(body))
		resp, err := rt.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		var got map[string]any
		if err := json.Unmarshal([]byte(bodies[0]), &got); err != nil {
			t.Fatalf("the server got %q: %v", bodies[0], err)
		}
		return got
	}
	seeding := seedingTransport{http.DefaultTransport}
	rollout := func(seed int64, group, index int) context.Context {
		return withRollout(context.Background(), seed, group, index)
	}
	const chatBody = `{"model":"m@1","messages":[{"role":"user","content":"hi"}]}`

	ctx := rollout(7, 2, 3)
	first := send(ctx, seeding, "/v1/chat/completions", chatBody)["seed"]
	second := send(ctx, seeding, "/v1/chat/completions", chatBody)["seed"]
	if first == nil || second == nil || first == second {
		t.Fatalf("two calls of one rollout got seeds %v and %v; want two different seeds", first, second)
	}
	if again := send(rollout(7, 2, 3), seeding, "/v1/chat/completions", chatBody)["seed"]; again != first {
		t.Errorf("the same rollout in another run got seed %v; want %v", again, first)
	}
	for name, ctx := range map[string]context.Context{"OtherSeed": rollout(8, 2, 3), "OtherGroup": rollout(7, 1, 3), "OtherIndex": rollout(7, 2, 0)} {
		if s := send(ctx, seeding, "/v1/chat/completions", chatBody)["seed"]; s == first || s == nil {
			t.Errorf("%s: seed %v; want another seed than %v", name, s, first)
		}
	}
	if s := send(rollout(7, 2, 3), seeding, "/v1/chat/completions", `{"model":"m@2","messages":[]}`)["seed"]; s == first {
		t.Errorf("another step got the same seed %v", s)
	}
	if s := send(ctx, seeding, "/v1/chat/completions", `{"model":"m@1","seed":42}`)["seed"]; s != 42.0 {
		t.Errorf("a request's own seed became %v; want 42", s)
	}
	if s := send(rollout(7, 2, 3), seeding, "/v1/chat/completions", `{"model":"m@1","seed":null}`)["seed"]; s != first {
		t.Errorf("seed null became %v; want %v", s, first)
	}
	if s, ok := send(rollout(7, 2, 3), seeding, "/v1/responses", `{}`)["seed"]; ok {
		t.Errorf("a responses request (OpenAI refuses a seed there) got seed %v", s)
	}
	if s, ok := send(context.Background(), seeding, "/v1/chat/completions", chatBody)["seed"]; ok {
		t.Errorf("a request outside a rollout got seed %v", s)
	}

	// The Recorder seeds the same way, and records.
	rec := NewRecorder(nil)
	if s := send(rollout(7, 2, 3), rec, "/v1/chat/completions", chatBody)["seed"]; s != first {
		t.Errorf("the Recorder seeded %v; want %v", s, first)
	}
	if tr := rec.Trajectory(); len(tr.MessagesAndChoices) != 2 || rec.Err() != nil {
		t.Errorf("the Recorder recorded %+v, %v", tr.MessagesAndChoices, rec.Err())
	}
}

// Ensure the seed is appended to the body without changing its other bytes.
func TestSeedBody_KeepsBytes(t *testing.T) {
	ctx := withRollout(context.Background(), 1, 0, 0)
	want, _ := requestSeed(withRollout(context.Background(), 1, 0, 0), "m")
	for _, c := range []struct{ in, prefix string }{
		{`{"model":"m", "b": [1, 2]}` + "\n", `{"model":"m", "b": [1, 2],"seed":`},
		{`{}`, `{"seed":`},
		{`not json`, `not json`},
	} {
		got := string(seedBody(withRollout(context.Background(), 1, 0, 0), []byte(c.in)))
		if !strings.HasPrefix(got, c.prefix) {
			t.Errorf("seedBody(%q) = %q; want a prefix %q", c.in, got, c.prefix)
		}
	}
	if got := string(seedBody(ctx, []byte(`{"model":"m"}`))); !strings.Contains(got, `"seed":`) || !json.Valid([]byte(got)) {
		t.Errorf("seedBody = %q", got)
	}
	if s, ok := RolloutSeed(ctx); !ok || s < 0 || want < 0 {
		t.Errorf("RolloutSeed = %d, %v", s, ok)
	}
	if _, ok := RolloutSeed(context.Background()); ok {
		t.Error("RolloutSeed outside a rollout reported ok")
	}
}

// Ensure gather gives each rollout its identity.
func TestGather_RolloutSeeds(t *testing.T) {
	groups, err := GatherGroups(context.Background(), []int{0, 1}, 2, func(ctx context.Context, s int) (Trajectory, error) {
		seed, ok := RolloutSeed(ctx)
		if !ok {
			t.Error("no rollout seed in a gathered rollout")
		}
		return Trajectory{Reward: float64(seed)}, nil
	}, GatherOptions{Seed: 3, Quiet: true})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[float64]bool{}
	for _, g := range groups {
		for _, tr := range g.Trajectories {
			seen[tr.Reward] = true
		}
	}
	if len(seen) != 4 {
		t.Errorf("4 rollouts got %d distinct seeds", len(seen))
	}
}
