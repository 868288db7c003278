package art

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
)

// Ensure Chat sends the history and its tools exactly as they are recorded
// (key order and argument text included) along with the caller's params,
// and appends the returned choice.
func TestTrajectory_Chat(t *testing.T) {
	var body []byte
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ = io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, chatCompletion)
	}))
	defer srv.Close()
	m := newTrainable(t)
	b := newFakeBackend(srv.URL + "/v1")
	if err := m.Register(context.Background(), b); err != nil {
		t.Fatal(err)
	}
	client, err := m.OpenAIClient()
	if err != nil {
		t.Fatal(err)
	}

	traj := Trajectory{Tools: []Tool{FunctionTool("calc", "", json.RawMessage(`{"type":"object","properties":{"z":{},"a":{}}}`))}}
	traj.AddMessage(SystemMsg("be brief"), UserMsg("2+2?"))
	traj.AddChoice(Choice{Message: Message{Role: RoleAssistant, ToolCalls: []ToolCall{{ID: "c1", Function: FunctionCall{Name: "calc", Arguments: `{ "e":"2+2" }`}}}}})
	traj.AddMessage(ToolMsg("c1", "4"))
	c, err := traj.Chat(context.Background(), client, openai.ChatCompletionNewParams{Model: m.InferenceName(-1), Temperature: openai.Float(0.5)})
	if err != nil {
		t.Fatal(err)
	}
	if c.Message.Content.String() != "Hi!" || len(c.Logprobs) != 2 {
		t.Fatalf("Chat = %+v; want the server's choice", c)
	}
	if n := len(traj.MessagesAndChoices); n != 5 || traj.MessagesAndChoices[4].Choice == nil || traj.StartTime.IsZero() {
		t.Fatalf("history has %d items, last %+v; want the choice appended", n, traj.MessagesAndChoices[n-1])
	}
	for _, want := range []string{
		`"model":"agent-1@0"`, `"temperature":0.5`,
		`"messages":[{"role":"system","content":"be brief"},{"role":"user","content":"2+2?"},{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"calc","arguments":"{ \"e\":\"2+2\" }"}}]},{"role":"tool","content":"4","tool_call_id":"c1"}]`,
		`"tools":[{"type":"function","function":{"name":"calc","parameters":{"type":"object","properties":{"z":{},"a":{}}}}}]`,
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("request body %s\nlacks %s", body, want)
		}
	}

	// A per-call history (one chat per move) works the same way.
	var h History
	h.AddMessage(UserMsg("board"))
	if _, err := h.Chat(context.Background(), client, openai.ChatCompletionNewParams{Model: "x"}); err != nil || len(h.MessagesAndChoices) != 2 {
		t.Fatalf("History.Chat: %v, %d items", err, len(h.MessagesAndChoices))
	}

	bad := openai.ChatCompletionNewParams{Model: "x", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")}}
	if _, err := h.Chat(context.Background(), client, bad); err == nil {
		t.Error("Chat with params.Messages set succeeded")
	}
	if _, err := new(History).Chat(context.Background(), client, openai.ChatCompletionNewParams{Model: "x"}); err == nil {
		t.Error("Chat with an empty history succeeded")
	}
}

// minimalBackend has only the methods every Backend must have.
type minimalBackend struct{ Backend }

// Ensure a backend without an optional capability makes the model method
// fail clearly, with errors.ErrUnsupported.
func TestTrainableModel_Unsupported(t *testing.T) {
	ctx := context.Background()
	m := newTrainable(t)
	if err := m.Register(ctx, minimalBackend{newFakeBackend("http://127.0.0.1:1/v1")}); err != nil {
		t.Fatal(err)
	}
	traj := Trajectory{}
	traj.AddMessage(UserMsg("hi"), AssistantMsg("hello"))
	if _, err := m.TrainSFT(ctx, []Trajectory{traj}, TrainSFTConfig{}); !errors.Is(err, errors.ErrUnsupported) || !strings.Contains(err.Error(), "SFTTrainer") {
		t.Errorf("TrainSFT = %v; want ErrUnsupported naming SFTTrainer", err)
	}
	if err := m.DeleteCheckpoints(ctx, ""); !errors.Is(err, errors.ErrUnsupported) || !strings.Contains(err.Error(), "CheckpointDeleter") {
		t.Errorf("DeleteCheckpoints = %v; want ErrUnsupported naming CheckpointDeleter", err)
	}
}
