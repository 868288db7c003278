package server

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/artgo/art"
	"github.com/artgo/art/backend/remote"
)

// nodeFrameworks returns the folder holding LangChain JS and the Vercel AI
// SDK, or skips the test (fails under ART_REQUIRE_ASSETS=1) when they are
// not installed.
func nodeFrameworks(t *testing.T) string {
	t.Helper()
	return nodePackages(t, "node-frameworks", "ai", "LangChain JS / Vercel AI SDK not installed: run scripts/install-node-frameworks.sh (needs node and npm)")
}

// recordingProxy forwards /<rollout>/v1/... to target through one
// art.Recorder per rollout: how an agent in any language is recorded.
type recordingProxy struct {
	target *url.URL
	mu     sync.Mutex // guards recs
	recs   map[string]*art.Recorder
}

func (p *recordingProxy) recorder(name string) *art.Recorder {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.recs[name] == nil {
		p.recs[name] = art.NewRecorder(nil)
	}
	return p.recs[name]
}

func (p *recordingProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	name, rest, ok := strings.Cut(strings.TrimPrefix(r.URL.Path, "/"), "/")
	if !ok {
		http.NotFound(w, r)
		return
	}
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(p.target)
			pr.Out.URL.Path = "/" + rest
		},
		Transport:     p.recorder(name),
		FlushInterval: -1,
	}
	rp.ServeHTTP(w, r)
}

// Ensure agents written with LangChain JS (chat completions: tools with
// tool_choice "required", streaming, withStructuredOutput) and the Vercel
// AI SDK (the Responses API: a two-step tool agent, streamText,
// generateObject; and .chat) run unchanged against the server, that a
// recording proxy records their turns as trainable histories, and that
// those train a step.
func TestNodeFrameworks(t *testing.T) {
	dir := nodeFrameworks(t)
	_, ts := newTestServer(t, Config{APIKey: testKey})
	target, _ := url.Parse(ts.URL)
	proxy := &recordingProxy{target: target, recs: map[string]*art.Recorder{}}
	ps := httptest.NewServer(proxy)
	defer ps.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", filepath.Join("testdata", "frameworks_client.mjs"))
	cmd.Env = append(os.Environ(), "ART_NODE_FRAMEWORKS="+dir, "ART_PROXY="+ps.URL, "ART_API_KEY="+testKey, "ART_MODEL="+testModel)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	outb, err := cmd.Output()
	if err != nil {
		t.Fatalf("frameworks_client.mjs: %v\n%s", err, stderr.String())
	}
	var res struct {
		Versions  map[string]string `json:"versions"`
		LangChain struct {
			ToolCalls []struct {
				Name string         `json:"name"`
				Args map[string]any `json:"args"`
			} `json:"tool_calls"`
			ToolResult   string          `json:"tool_result"`
			StreamChunks int             `json:"stream_chunks"`
			Structured   json.RawMessage `json:"structured"`
		} `json:"langchain"`
		Vercel struct {
			Steps []struct {
				Finish  string   `json:"finish"`
				Calls   []string `json:"calls"`
				Results []any    `json:"results"`
			} `json:"steps"`
			StreamFinish string          `json:"stream_finish"`
			Object       json.RawMessage `json:"object"`
			ChatFinish   string          `json:"chat_finish"`
		} `json:"vercel"`
		OpenAIResponses struct {
			Model  string   `json:"model"`
			Status []string `json:"status"`
		} `json:"openai_responses"`
	}
	if err := json.Unmarshal(outb, &res); err != nil {
		t.Fatalf("frameworks_client.mjs printed %q: %v", outb, err)
	}
	t.Logf("versions %v", res.Versions)
	lc := res.LangChain
	if len(lc.ToolCalls) != 1 || lc.ToolCalls[0].Name != "get_weather" || !strings.HasPrefix(lc.ToolResult, "sunny in ") {
		t.Errorf("langchain tool calls %+v, result %q", lc.ToolCalls, lc.ToolResult)
	}
	if lc.StreamChunks == 0 {
		t.Error("langchain stream: no chunks")
	}
	var verdict struct{ Verdict string }
	if json.Unmarshal(lc.Structured, &verdict) != nil || !strings.Contains("win loss draw", verdict.Verdict) || verdict.Verdict == "" {
		t.Errorf("langchain withStructuredOutput: %s", lc.Structured)
	}
	v := res.Vercel
	if len(v.Steps) != 2 || len(v.Steps[0].Calls) != 1 || v.Steps[0].Calls[0] != "get_weather" || len(v.Steps[0].Results) != 1 || v.Steps[0].Finish != "tool-calls" {
		t.Errorf("vercel steps %+v", v.Steps)
	}
	if json.Unmarshal(v.Object, &verdict) != nil || verdict.Verdict == "" {
		t.Errorf("vercel generateObject: %s", v.Object)
	}
	if v.StreamFinish == "" || v.ChatFinish == "" {
		t.Errorf("vercel stream finish %q, chat finish %q", v.StreamFinish, v.ChatFinish)
	}
	if r := res.OpenAIResponses; r.Model != "agent@0" || len(r.Status) != 2 {
		t.Errorf("openai responses: %+v", r)
	}

	// Every rollout was recorded with token ids; the tool agents' turns
	// form one history each.
	wantRoles := map[string]string{
		"langchain":        "user,assistant,tool,assistant",
		"vercel":           "system,user,assistant,tool,assistant",
		"openai-responses": "system,user,assistant,user,assistant",
	}
	var g art.TrajectoryGroup
	for name, rec := range proxy.recs {
		if err := rec.Err(); err != nil {
			t.Errorf("%s: %v", name, err)
		}
		tr := rec.Trajectory()
		var roles []string
		for _, it := range tr.MessagesAndChoices {
			roles = append(roles, it.AsMessage().Role)
			if it.Choice != nil && len(it.Choice.Logprobs) == 0 {
				t.Errorf("%s: a recorded choice has no token ids", name)
			}
		}
		if want, ok := wantRoles[name]; ok && (strings.Join(roles, ",") != want || len(tr.AdditionalHistories) != 0) {
			t.Errorf("%s recorded %v and %d additional histories; want %s", name, roles, len(tr.AdditionalHistories), want)
		}
		if len(roles) == 0 {
			t.Errorf("%s: nothing recorded", name)
		}
		tr.Reward = float64(len(g.Trajectories) % 2)
		g.Trajectories = append(g.Trajectories, tr)
	}
	b, err := remote.New(remote.Options{BaseURL: ts.URL, APIKey: testKey, Quiet: true})
	if err != nil {
		t.Fatal(err)
	}
	m := &art.TrainableModel{Model: art.Model{Name: testModel, Project: "p", BasePath: t.TempDir()}, BaseModel: "base"}
	if err := m.Register(ctx, b); err != nil {
		t.Fatal(err)
	}
	tres, err := b.Train(ctx, m, []art.TrajectoryGroup{g}, art.TrainConfig{LearningRate: 1e-3})
	if err != nil || tres.Step != 1 || tres.Skipped {
		t.Fatalf("Train = %+v, %v", tres, err)
	}
}
