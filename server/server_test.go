package server

import (
	"bufio"
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/artgo/art/host"
	"github.com/artgo/art/openai"
)

func tokens(texts ...string) []host.Token {
	out := make([]host.Token, len(texts))
	for i, s := range texts {
		out[i] = host.Token{ID: 1000 + i, Bytes: []byte(s), Logprob: -float64(i) - 0.5,
			Top: []host.TopToken{{ID: 7, Bytes: []byte("x"), Logprob: -0.1}}}
	}
	return out
}

// Ensure a choice with tool calls is assembled as OpenAI sends it: content
// null, the calls, finish_reason "tool_calls", and all token ids and
// logprobs (top logprobs only when asked).
func TestCompletion_ToolCalls(t *testing.T) {
	resp := host.ChatResponse{Model: "agent@2", PromptTokenIDs: []int{1, 2, 3}, CompletionTokens: 2, Choices: []host.ChatChoice{
		{Index: 0, Content: "", FinishReason: "tool_calls", Tokens: tokens("<tool_call>", "<|im_end|>"),
			ToolCalls: []host.ToolCall{{ID: "call_a", Name: "get_weather", Arguments: `{"city":"Paris"}`}}},
	}}
	for _, top := range []bool{false, true} {
		c := completion(resp, "chatcmpl-x", 5, top)
		b, err := json.Marshal(c)
		if err != nil {
			t.Fatal(err)
		}
		var got struct {
			Model   string `json:"model"`
			Choices []struct {
				Message struct {
					Content   *string           `json:"content"`
					ToolCalls []openai.ToolCall `json:"tool_calls"`
				} `json:"message"`
				FinishReason string `json:"finish_reason"`
				TokenIDs     []int  `json:"token_ids"`
				Logprobs     struct {
					Content []openai.TokenLogprob `json:"content"`
				} `json:"logprobs"`
			} `json:"choices"`
			Usage          openai.Usage `json:"usage"`
			PromptTokenIDs []int        `json:"prompt_token_ids"`
		}
		if err := json.Unmarshal(b, &got); err != nil {
			t.Fatal(err)
		}
		ch := got.Choices[0]
		if got.Model != "agent@2" || ch.Message.Content != nil || ch.FinishReason != "tool_calls" {
			t.Fatalf("top=%v: %s", top, b)
		}
		if len(ch.Message.ToolCalls) != 1 || ch.Message.ToolCalls[0].Index != nil || ch.Message.ToolCalls[0].ID != "call_a" ||
			ch.Message.ToolCalls[0].Type != "function" || ch.Message.ToolCalls[0].Function.Arguments != `{"city":"Paris"}` {
			t.Fatalf("tool calls %+v", ch.Message.ToolCalls)
		}
		if len(ch.TokenIDs) != 2 || ch.TokenIDs[1] != 1001 || len(ch.Logprobs.Content) != 2 || ch.Logprobs.Content[1].TokenID != 1001 ||
			ch.Logprobs.Content[1].Logprob != -1.5 || string(ch.Logprobs.Content[1].Bytes) != "<|im_end|>" {
			t.Fatalf("tokens: ids %v, logprobs %+v", ch.TokenIDs, ch.Logprobs.Content)
		}
		if n := len(ch.Logprobs.Content[0].TopLogprobs); (n == 1) != top {
			t.Errorf("top=%v: %d top logprobs", top, n)
		}
		if got.Usage != (openai.Usage{PromptTokens: 3, CompletionTokens: 2, TotalTokens: 5}) || len(got.PromptTokenIDs) != 3 {
			t.Errorf("usage %+v, prompt ids %v", got.Usage, got.PromptTokenIDs)
		}
	}
}

// sseEvents parses a recorded SSE body into its data payloads.
func sseEvents(t *testing.T, body string) []string {
	t.Helper()
	var out []string
	sc := bufio.NewScanner(strings.NewReader(body))
	for sc.Scan() {
		if p, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			out = append(out, p)
		} else if sc.Text() != "" {
			t.Fatalf("unexpected SSE line %q", sc.Text())
		}
	}
	return out
}

// Ensure a stream's content, concatenated, is exactly the non-streamed
// content, whatever has to be held back: stop tokens, stop strings, tool
// calls, split UTF-8 characters; and that every token's id and logprob
// are streamed.
func TestChatStream_Content(t *testing.T) {
	hermesCall := []host.ToolCall{{ID: "call_1", Name: "f", Arguments: "{}"}}
	cases := []struct {
		name    string
		tokens  []string
		stop    []string
		format  host.ToolFormat
		content string // the service's final content
		calls   []host.ToolCall
		finish  string
	}{
		{"StopToken", []string{"He", "llo", "<|im_end|>"}, nil, host.ToolsNone, "Hello", nil, "stop"},
		{"Length", []string{"a", "b"}, nil, host.ToolsNone, "ab", nil, "length"},
		{"StopString", []string{"ab", "cX", "YZ"}, []string{"XY"}, host.ToolsNone, "abc", nil, "stop"},
		{"StopStringFirstToken", []string{"XYZ"}, []string{"XY"}, host.ToolsNone, "", nil, "stop"},
		{"UTF8Split", []string{"\xc3", "\xa9", "!"}, nil, host.ToolsNone, "é!", nil, "length"},
		{"InvalidUTF8", []string{"\xe6", "\x88", "~", "x"}, nil, host.ToolsNone, "\xe6\x88~x", nil, "length"},
		{"HermesCall", []string{"Sure", " ", "<tool", "_call>", "\n{\"name\": \"f\", \"arguments\": {}}", "\n</tool_call>", "<|im_end|>"},
			nil, host.ToolsHermes, "Sure", hermesCall, "tool_calls"},
		{"HermesOnlyCall", []string{"<tool_call>", "\n{\"name\": \"f\", \"arguments\": {}}\n", "</tool_call>", "<|im_end|>"},
			nil, host.ToolsHermes, "", hermesCall, "tool_calls"},
		{"HermesMalformed", []string{"x ", "<tool_call>", " oops", "<|im_end|>"}, nil, host.ToolsHermes, "x <tool_call> oops", nil, "stop"},
		{"HermesAlmostMarker", []string{"a <tool", " b", "<|im_end|>"}, nil, host.ToolsHermes, "a <tool b", nil, "stop"},
		{"Llama3Call", []string{"{\"name\"", ": \"f\", \"parameters\": {}}", "<|eot_id|>"}, nil, host.ToolsLlama3JSON, "", hermesCall, "tool_calls"},
		{"Llama3Text", []string{"Hi", " there", "<|eot_id|>"}, nil, host.ToolsLlama3JSON, "Hi there", nil, "stop"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			stopHold := 0
			for _, s := range c.stop {
				stopHold = max(stopHold, len(s)-1)
			}
			creq := host.ChatRequest{Model: "agent@0", N: 1, Stop: c.stop}
			st := &chatStream{w: rec, rc: http.NewResponseController(rec), creq: creq, format: newChatFormat(&openai.ChatCompletionRequest{}, creq),
				stopHold: stopHold, tools: c.format, choices: make([]choiceStream, 1),
				wake: make(chan struct{}, 1), quit: make(chan struct{}), stopped: make(chan struct{})}
			toks := tokens(c.tokens...)
			for _, tok := range toks {
				if err := st.onToken(host.StreamEvent{Choice: 0, Token: tok}); err != nil {
					t.Fatal(err)
				}
			}
			st.stopWriter()
			ch := host.ChatChoice{Index: 0, Content: c.content, ToolCalls: c.calls, FinishReason: c.finish, Tokens: toks}
			for _, ev := range st.format.finish(host.ChatResponse{Choices: []host.ChatChoice{ch}}, []string{st.rest(0, ch)}) {
				if err := st.send(ev); err != nil {
					t.Fatal(err)
				}
			}
			st.done()

			var content strings.Builder
			var ids []int
			var calls []openai.ToolCall
			var finish string
			events := sseEvents(t, rec.Body.String())
			if events[len(events)-1] != "[DONE]" {
				t.Fatalf("stream does not end with [DONE]: %q", events)
			}
			for i, ev := range events[:len(events)-1] {
				var ch openai.ChatCompletionChunk
				if err := json.Unmarshal([]byte(ev), &ch); err != nil {
					t.Fatal(err)
				}
				cc := ch.Choices[0]
				if (i == 0) != (cc.Delta.Role == "assistant") {
					t.Errorf("chunk %d role %q", i, cc.Delta.Role)
				}
				if cc.Delta.Content != nil {
					content.WriteString(*cc.Delta.Content)
				}
				ids = append(ids, cc.TokenIDs...)
				if cc.Logprobs != nil && (len(cc.Logprobs.Content) != 1 || cc.Logprobs.Content[0].TokenID != cc.TokenIDs[0]) {
					t.Errorf("chunk %d logprobs %+v for ids %v", i, cc.Logprobs, cc.TokenIDs)
				}
				calls = append(calls, cc.Delta.ToolCalls...)
				if cc.FinishReason != nil {
					finish = *cc.FinishReason
				}
			}
			// Compare as JSON decodes both, invalid bytes included.
			want, _ := json.Marshal(c.content)
			var wantStr string
			json.Unmarshal(want, &wantStr)
			if content.String() != wantStr {
				t.Errorf("streamed content %q; want %q", content.String(), wantStr)
			}
			if len(ids) != len(toks) {
				t.Errorf("streamed %d token ids; want %d", len(ids), len(toks))
			}
			if len(calls) != len(c.calls) || finish != c.finish {
				t.Errorf("tool calls %+v, finish %q; want %d calls, %q", calls, finish, len(c.calls), c.finish)
			}
			for i, call := range calls {
				if call.Index == nil || *call.Index != i || call.Function.Name != c.calls[i].Name {
					t.Errorf("tool call %d: %+v", i, call)
				}
			}
		})
	}
}

func TestValidToolName(t *testing.T) {
	for name, want := range map[string]bool{
		"get_weather": true, "a-b_C9": true, strings.Repeat("x", 64): true,
		"": false, "a b": false, "é": false, strings.Repeat("x", 65): false, "a.b": false,
	} {
		if got := validToolName(name); got != want {
			t.Errorf("validToolName(%q) = %v; want %v", name, got, want)
		}
	}
}

func TestSameBaseModel(t *testing.T) {
	cases := []struct {
		client, server string
		want           bool
	}{
		{"/m/Qwen2.5-0.5B", "/m/Qwen2.5-0.5B/", true},
		{"Qwen/Qwen2.5-0.5B", "/srv/models/Qwen2.5-0.5B", true},
		{"/m/Qwen3-8B", "/m/Qwen2.5-0.5B", false},
	}
	for _, c := range cases {
		if got := sameBaseModel(c.client, c.server); got != c.want {
			t.Errorf("sameBaseModel(%q, %q) = %v; want %v", c.client, c.server, got, c.want)
		}
	}
}

// Ensure a restored checkpoint becomes the next step, served at once, with
// the restored adapter's bytes.
func TestRestoreCheckpoint(t *testing.T) {
	srv, ts := newTestServer(t, Config{APIKey: testKey})
	status, body := do(t, "POST", ts.URL+"/v1/art/checkpoints/restore", testKey, `{"model":"agent","step":0}`)
	if status != http.StatusOK || string(bytes.TrimSpace(body)) != `{"step":1}` {
		t.Fatalf("restore step 0: %d %s; want 200 {\"step\":1}", status, body)
	}
	if got := srv.model.Step(); got != 1 {
		t.Fatalf("latest step after the restore = %d; want 1", got)
	}
	read := func(step int) []byte {
		b, err := os.ReadFile(filepath.Join(srv.model.CheckpointPath(step), "adapter_model.safetensors"))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	if !bytes.Equal(read(0), read(1)) {
		t.Error("step 1 does not hold step 0's adapter")
	}
	if status, body := do(t, "POST", ts.URL+"/v1/chat/completions", testKey, `{"model":"agent@1","messages":[{"role":"user","content":"hi"}],"max_tokens":2}`); status != http.StatusOK {
		t.Errorf("chat with the restored step: %d %s", status, body)
	}
}
