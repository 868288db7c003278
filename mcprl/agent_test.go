package mcprl

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/artgo/art"
	"github.com/artgo/art/arttest"
	"github.com/artgo/art/backend/local"
	"github.com/artgo/art/ruler"
)

// scriptedModel is an OpenAI-compatible endpoint that answers each chat
// turn from a script of tool calls. It stands in for a trained agent: a
// random tiny model does not call tools, and `art serve` cannot force a
// call yet. The MCP servers it drives are real.
type scriptedModel struct {
	mu       sync.Mutex
	turns    [][][2]string // per turn, the (name, arguments) of each call
	requests []map[string]any
	srv      *httptest.Server
}

func newScriptedModel(t *testing.T, turns ...[][2]string) *scriptedModel {
	s := &scriptedModel{turns: turns}
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var req map[string]any
		json.Unmarshal(body, &req)
		s.mu.Lock()
		s.requests = append(s.requests, req)
		k := len(s.requests) - 1
		s.mu.Unlock()
		msg := map[string]any{"role": "assistant", "content": "done"}
		if k < len(s.turns) {
			var calls []any
			for i, c := range s.turns[k] {
				calls = append(calls, map[string]any{"id": "call_" + string(rune('a'+k)) + string(rune('0'+i)), "type": "function",
					"function": map[string]any{"name": c[0], "arguments": c[1]}})
			}
			msg = map[string]any{"role": "assistant", "content": nil, "tool_calls": calls}
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"id": "x", "object": "chat.completion", "created": 1, "model": req["model"],
			"choices": []any{map[string]any{"index": 0, "finish_reason": "tool_calls", "message": msg,
				"logprobs": map[string]any{"content": []any{map[string]any{"token": "x", "token_id": 7, "logprob": -0.5, "bytes": []int{120}, "top_logprobs": []any{}}}}}}})
	}))
	t.Cleanup(s.srv.Close)
	return s
}

func (s *scriptedModel) client() openai.Client {
	return openai.NewClient(option.WithBaseURL(s.srv.URL+"/v1"), option.WithAPIKey("k"), option.WithMaxRetries(0))
}

// Ensure the ready rollout drives a real MCP server (server-memory): tool
// errors (an unknown tool, arguments that are not JSON) are fed back as
// tool messages, a good call changes the server's state, complete_task
// ends the rollout with its summary, and every turn is a Choice.
func TestAgent_RunOnMemoryServer(t *testing.T) {
	srv, file := startMemory(t, Options{})
	ctx := context.Background()
	tools, err := srv.Tools(ctx)
	if err != nil {
		t.Fatal(err)
	}
	m := newScriptedModel(t,
		[][2]string{{"delete_everything", `{}`}},
		[][2]string{{"create_entities", `{"entities": [`}},
		[][2]string{{"create_entities", `{"entities":[{"name":"Grace","entityType":"person","observations":["found a moth"]}]}`}},
		[][2]string{{CompleteTaskTool, `{"summary":"Stored Grace."}`}},
	)
	traj, err := Agent{Client: m.client(), Model: "agent@0"}.Run(ctx, srv, tools, "Remember that Grace found a moth.")
	if err != nil {
		t.Fatal(err)
	}
	choices, toolMsgs := 0, []string{}
	for _, mc := range traj.MessagesAndChoices {
		if mc.Choice != nil {
			choices++
			if len(mc.Choice.Logprobs) == 0 {
				t.Error("a turn lost its logprobs")
			}
		}
		if mc.Message != nil && mc.Message.Role == art.RoleTool {
			toolMsgs = append(toolMsgs, mc.Message.Content.String())
		}
	}
	if choices != 4 || len(toolMsgs) != 4 {
		t.Fatalf("%d choices, tool messages %q", choices, toolMsgs)
	}
	if !strings.Contains(toolMsgs[0], `no tool "delete_everything"`) || !strings.HasPrefix(toolMsgs[1], "Error: the arguments are not a JSON object") {
		t.Errorf("tool errors fed back: %q", toolMsgs[:2])
	}
	want := map[string]float64{"turns": 4, "tool_calls": 4, "tool_errors": 2, "completed": 1}
	for k, v := range want {
		if traj.Metrics[k] != v {
			t.Errorf("metric %s = %v; want %v", k, traj.Metrics[k], v)
		}
	}
	if traj.Metadata["summary"] != "Stored Grace." {
		t.Errorf("metadata %v", traj.Metadata)
	}
	if b, _ := os.ReadFile(file); !strings.Contains(string(b), "found a moth") {
		t.Errorf("the server's state: %q", b)
	}
	// Every request offered the server's tools and complete_task.
	if tl, _ := m.requests[0]["tools"].([]any); len(tl) != len(tools)+1 {
		t.Errorf("the first request offered %d tools; want %d", len(tl), len(tools)+1)
	}
}

// Ensure scenario generation against our own server (a random tiny model
// under grammar-constrained decoding, a real generator of the judge kind)
// returns exactly N valid scenarios for a real server's tools, and that
// the ready rollout records the real model's turns with their token ids.
func TestOwnServer_GenerateAndRun(t *testing.T) {
	srv, _ := startMemory(t, Options{})
	b := local.New(local.Options{Path: t.TempDir(), Quiet: true})
	defer b.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	model := &art.TrainableModel{Model: art.Model{Name: "gen", Project: "mcprl"}, BaseModel: arttest.TinyModel(t)}
	if err := model.Register(ctx, b); err != nil {
		t.Fatal(err)
	}
	ep, err := b.InferenceEndpoint(ctx, model, 0)
	if err != nil {
		t.Fatal(err)
	}
	all, err := srv.Tools(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// Two tools keep the prompt within the tiny model's 4096 positions
	// (its tokenizer spends one token per byte).
	var tools []Tool
	for _, name := range []string{"create_entities", "read_graph"} {
		tool, _ := toolNamed(all, name)
		tools = append(tools, tool)
	}
	gen := ruler.FromEndpoint(ep)
	gen.MaxTokens = 400
	scenarios, err := Generate(ctx, gen, tools, GenerateOptions{Count: 3, MaxTaskLength: 24, MaxRetries: -1})
	if err != nil {
		t.Fatal(err)
	}
	if len(scenarios) != 3 || scenarios.Validate() != nil {
		t.Fatalf("scenarios %+v", scenarios)
	}
	t.Logf("%s", scenarios)

	client, err := model.OpenAIClient()
	if err != nil {
		t.Fatal(err)
	}
	agent := Agent{Client: client, Model: model.InferenceName(0), MaxTurns: 2, Params: openai.ChatCompletionNewParams{MaxTokens: openai.Int(16)}}
	traj, err := agent.Run(ctx, srv, tools, scenarios[0].Task)
	if err != nil {
		t.Fatal(err)
	}
	var sampled int
	for _, mc := range traj.MessagesAndChoices {
		if mc.Choice != nil {
			for _, lp := range mc.Choice.Logprobs {
				if lp.TokenID < 0 {
					t.Fatal("a sampled token has no id")
				}
			}
			sampled += len(mc.Choice.Logprobs)
		}
	}
	if sampled == 0 || traj.Metrics["turns"] < 1 {
		t.Fatalf("nothing sampled: %+v", traj.Metrics)
	}
}
