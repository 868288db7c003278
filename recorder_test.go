package art

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
)

// fakeChatServer answers chat completions like `art serve`: each answer
// names the turn ("answer N" for a request with N messages), carries one
// logprob entry per byte with its token id, and calls a tool on the first
// turn when tools are offered. Streams send one chunk per byte.
func fakeChatServer(t *testing.T) *httptest.Server {
	t.Helper()
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Messages []json.RawMessage `json:"messages"`
			Tools    []json.RawMessage `json:"tools"`
			Stream   bool              `json:"stream"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, err.Error(), 400)
			return
		}
		text := fmt.Sprintf("answer %d", len(req.Messages))
		callTool := len(req.Tools) > 0 && len(req.Messages) == 1
		entry := func(i int) map[string]any {
			return map[string]any{"token": text[i : i+1], "token_id": int(text[i]), "logprob": -0.5, "bytes": []int{int(text[i])}, "top_logprobs": []any{}}
		}
		if !req.Stream {
			var lps []any
			for i := range text {
				lps = append(lps, entry(i))
			}
			msg := map[string]any{"role": "assistant", "content": text}
			finish := "stop"
			if callTool {
				msg["content"] = nil
				msg["tool_calls"] = []any{map[string]any{"id": "call_1", "type": "function", "function": map[string]any{"name": "lookup", "arguments": `{"q": 1}`}}}
				finish = "tool_calls"
			}
			w.Header().Set("Content-Type", "application/json")
			json.NewEncoder(w).Encode(map[string]any{"id": "x", "object": "chat.completion", "created": 1, "model": "agent@3",
				"choices": []any{map[string]any{"index": 0, "message": msg, "finish_reason": finish, "logprobs": map[string]any{"content": lps}}}})
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		for i := range text {
			// vLLM style: the token id only in token_ids.
			e := entry(i)
			delete(e, "token_id")
			delta := map[string]any{"content": text[i : i+1]}
			if i == 0 {
				delta["role"] = "assistant"
			}
			b, _ := json.Marshal(map[string]any{"id": "x", "object": "chat.completion.chunk", "model": "agent@4",
				"choices": []any{map[string]any{"index": 0, "delta": delta, "logprobs": map[string]any{"content": []any{e}}, "finish_reason": nil, "token_ids": []int{int(text[i])}}}})
			fmt.Fprintf(w, "data: %s\n\n", b)
		}
		b, _ := json.Marshal(map[string]any{"id": "x", "object": "chat.completion.chunk", "model": "agent@4",
			"choices": []any{map[string]any{"index": 0, "delta": map[string]any{}, "finish_reason": "stop"}}})
		fmt.Fprintf(w, "data: %s\n\ndata: [DONE]\n\n", b)
	}))
}

func TestRecorder_OpenAIGo(t *testing.T) {
	ts := fakeChatServer(t)
	defer ts.Close()
	rec := NewRecorder(nil)
	client := openai.NewClient(option.WithBaseURL(ts.URL+"/v1"), option.WithAPIKey("k"), option.WithHTTPClient(rec.Client()))
	ctx := context.Background()
	tool := openai.ChatCompletionFunctionTool(openai.FunctionDefinitionParam{Name: "lookup", Parameters: openai.FunctionParameters{"type": "object"}})

	// Turn 1 calls a tool, turn 2 continues the conversation with its
	// result: both go to the main history.
	msgs := []openai.ChatCompletionMessageParamUnion{openai.UserMessage("find it")}
	resp, err := client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "agent", Messages: msgs, Tools: []openai.ChatCompletionToolUnionParam{tool}})
	if err != nil {
		t.Fatal(err)
	}
	msgs = append(msgs, resp.Choices[0].Message.ToParam(), openai.ToolMessage("42", "call_1"))
	if _, err := client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "agent", Messages: msgs, Tools: []openai.ChatCompletionToolUnionParam{tool}}); err != nil {
		t.Fatal(err)
	}
	// A streamed side request with another prompt and no tools: a new
	// additional history.
	stream := client.Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{Model: "agent",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.SystemMessage("summarise"), openai.UserMessage("text")}})
	var streamed strings.Builder
	for stream.Next() {
		if len(stream.Current().Choices) > 0 {
			streamed.WriteString(stream.Current().Choices[0].Delta.Content)
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	stream.Close()
	if streamed.String() != "answer 2" {
		t.Fatalf("the client read %q through the recorder; want %q", streamed.String(), "answer 2")
	}
	if err := rec.Err(); err != nil {
		t.Fatal(err)
	}

	tr := rec.Trajectory()
	roles := func(items []MessageOrChoice) string {
		var s []string
		for _, it := range items {
			if it.Choice != nil {
				s = append(s, "choice")
			} else {
				s = append(s, it.Message.Role)
			}
		}
		return strings.Join(s, ",")
	}
	if got := roles(tr.MessagesAndChoices); got != "user,choice,tool,choice" {
		t.Fatalf("main history %s; want user,choice,tool,choice", got)
	}
	if len(tr.Tools) != 1 || tr.Tools[0].Function.Name != "lookup" {
		t.Errorf("main tools %+v", tr.Tools)
	}
	first := tr.MessagesAndChoices[1].Choice
	if len(first.Message.ToolCalls) != 1 || first.FinishReason != "tool_calls" {
		t.Errorf("first choice %+v; want a tool call", first)
	}
	if len(tr.AdditionalHistories) != 1 || roles(tr.AdditionalHistories[0].MessagesAndChoices) != "system,user,choice" {
		t.Fatalf("additional histories %+v; want one system,user,choice", tr.AdditionalHistories)
	}
	sc := tr.AdditionalHistories[0].MessagesAndChoices[2].Choice
	if sc.Message.Content.String() != "answer 2" || sc.FinishReason != "stop" || len(sc.Logprobs) != len("answer 2") {
		t.Fatalf("streamed choice %+v", sc)
	}
	for i, c := range []*Choice{first, tr.MessagesAndChoices[3].Choice, sc} {
		for j, lp := range c.Logprobs {
			if lp.TokenID < 0 {
				t.Fatalf("choice %d token %d has no id", i, j)
			}
		}
	}
	if tr.InitialPolicyVersion == nil || *tr.InitialPolicyVersion != 3 || *tr.FinalPolicyVersion != 4 {
		t.Errorf("policy versions %v, %v; want 3 and 4", tr.InitialPolicyVersion, tr.FinalPolicyVersion)
	}
	if err := tr.Validate(); err != nil {
		t.Fatal(err)
	}
}

// Ensure a stream the client abandons is reported, not recorded half.
func TestRecorder_AbandonedStream(t *testing.T) {
	ts := fakeChatServer(t)
	defer ts.Close()
	rec := NewRecorder(nil)
	resp, err := rec.Client().Post(ts.URL+"/v1/chat/completions", "application/json",
		strings.NewReader(`{"model":"agent","stream":true,"messages":[{"role":"user","content":"x"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	io.ReadFull(resp.Body, make([]byte, 10))
	resp.Body.Close()
	if tr := rec.Trajectory(); len(tr.MessagesAndChoices) != 0 {
		t.Errorf("recorded %d items from an abandoned stream", len(tr.MessagesAndChoices))
	}
	if err := rec.Err(); err == nil || !strings.Contains(err.Error(), "closed before its end") {
		t.Errorf("Err = %v; want the abandoned stream reported", err)
	}
	// Other requests pass through untouched.
	if r, err := rec.Client().Get(ts.URL + "/v1/models"); err != nil {
		t.Fatal(err)
	} else {
		r.Body.Close()
	}
}

func TestSameMessage(t *testing.T) {
	call := func(args string) Message {
		return Message{Role: RoleAssistant, ToolCalls: []ToolCall{{ID: "c", Function: FunctionCall{Name: "f", Arguments: args}}}}
	}
	cases := []struct {
		a, b Message
		want bool
	}{
		{UserMsg("x"), UserMsg("x"), true},
		{UserMsg("x"), UserMsg("y"), false},
		{UserMsg("x"), SystemMsg("x"), false},
		{UserMsg("x"), Message{Role: RoleUser, Content: Content{Parts: []ContentPart{TextPart("x")}}}, true},
		{call(`{"a": 1}`), call(`{"a":1}`), true},
		{call(`{"a": 1}`), call(`{"a":2}`), false},
		{ToolMsg("c", "r"), ToolMsg("d", "r"), false},
	}
	for i, c := range cases {
		if got := sameMessage(c.a, c.b); got != c.want {
			t.Errorf("case %d: sameMessage(%+v, %+v) = %v; want %v", i, c.a, c.b, got, c.want)
		}
	}
}
