package server

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	oai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"

	"github.com/artgo/art/openai"
)

// Ensure a tiny positive temperature samples as temperature 0 (greedy)
// does: scaled by 1/T, the logits overflowed to infinities whose softmax
// is NaN, and the draw fell through to the vocabulary's last token.
func TestTinyTemperatureIsGreedy(t *testing.T) {
	_, ts := newTestServer(t, Config{APIKey: testKey})
	client := newClient(ts.URL)
	ctx := context.Background()
	answer := func(temp float64) []int {
		t.Helper()
		resp, err := client.Chat.Completions.New(ctx, oai.ChatCompletionNewParams{Model: testModel, Messages: userMsgs("hi"),
			MaxTokens: oai.Int(8), Seed: oai.Int(5), Temperature: oai.Float(temp)})
		if err != nil {
			t.Fatal(err)
		}
		return extraInts(t, resp.Choices[0].JSON.ExtraFields["token_ids"])
	}
	greedy := answer(0)
	for _, temp := range []float64{1e-6, 1e-30, 1e-40, 1e-300, 5e-324} {
		if got := answer(temp); !slices.Equal(got, greedy) {
			t.Errorf("temperature %g sampled %v; temperature 0 samples %v", temp, got, greedy)
		}
	}
}

// Ensure a request that does not fit the context is refused as OpenAI
// refuses it: 400 with code "context_length_exceeded" and a message
// beginning "This model's maximum context length is", which frameworks
// match to trim the conversation (LangChain the code, LiteLLM the
// message) — plain, streamed, and on the legacy completions route.
func TestContextLengthExceeded(t *testing.T) {
	_, ts := newTestServer(t, Config{APIKey: testKey})
	client := newClient(ts.URL)
	ctx := context.Background()
	long := strings.Repeat("x", 5000) // the byte tokenizer: 5000 tokens
	check := func(name, param string, err error) {
		t.Helper()
		var apiErr *oai.Error
		if !errors.As(err, &apiErr) {
			t.Fatalf("%s: %v; want an API error", name, err)
		}
		if apiErr.StatusCode != 400 || apiErr.Code != "context_length_exceeded" || apiErr.Param != param ||
			!strings.HasPrefix(apiErr.Message, "This model's maximum context length is 4096 tokens") {
			t.Errorf("%s: %d code %q param %q %q; want 400 context_length_exceeded on %s", name, apiErr.StatusCode, apiErr.Code, apiErr.Param, apiErr.Message, param)
		}
	}
	_, err := client.Chat.Completions.New(ctx, oai.ChatCompletionNewParams{Model: testModel, Messages: userMsgs(long)})
	check("long prompt", "messages", err)
	_, err = client.Chat.Completions.New(ctx, oai.ChatCompletionNewParams{Model: testModel, Messages: userMsgs("hi"), MaxCompletionTokens: oai.Int(4090)})
	check("max_completion_tokens", "max_completion_tokens", err)
	stream := client.Chat.Completions.NewStreaming(ctx, oai.ChatCompletionNewParams{Model: testModel, Messages: userMsgs("hi"), MaxTokens: oai.Int(4090)})
	for stream.Next() {
	}
	check("streamed max_tokens", "max_tokens", stream.Err())
	_, err = client.Completions.New(ctx, oai.CompletionNewParams{Model: testModel, Prompt: oai.CompletionNewParamsPromptUnion{OfString: oai.String(long)}})
	check("completions prompt", "prompt", err)
}

// Ensure a content part the text-only model cannot read is a 400 naming
// the message and the part, without the engine's package prefixes ("train:
// render chat: chat: ", which read as if training had failed).
func TestImagePartRefused(t *testing.T) {
	_, ts := newTestServer(t, Config{APIKey: testKey})
	client := newClient(ts.URL)
	_, err := client.Chat.Completions.New(context.Background(), oai.ChatCompletionNewParams{Model: testModel, Messages: []oai.ChatCompletionMessageParamUnion{
		oai.UserMessage([]oai.ChatCompletionContentPartUnionParam{oai.TextContentPart("what is this?"), oai.ImageContentPart(oai.ChatCompletionContentPartImageImageURLParam{URL: "data:image/png;base64,AAAA"})})}})
	var apiErr *oai.Error
	if !errors.As(err, &apiErr) {
		t.Fatalf("%v; want an API error", err)
	}
	if apiErr.StatusCode != 400 || apiErr.Param != "messages" || !strings.HasPrefix(apiErr.Message, "message 0: content part 1 of type image_url is not supported") {
		t.Fatalf("%d param %q %q; want a 400 on messages beginning \"message 0: content part 1 of type image_url\"", apiErr.StatusCode, apiErr.Param, apiErr.Message)
	}
}

// Ensure the Responses API names its own fields when the request does not
// fit the context: "input", not the chat API's "messages", and
// "max_output_tokens", not "max_tokens", in the param and the message
// alike (the max-tokens error also says to shorten the prompt's field).
func TestResponses_ContextLengthParam(t *testing.T) {
	_, ts := newTestServer(t, Config{APIKey: testKey})
	for _, c := range []struct{ fields, param string }{
		{`"input":"` + strings.Repeat("x", 5000) + `"`, "input"},
		{`"input":"hi","max_output_tokens":4090`, "max_output_tokens"},
	} {
		for _, stream := range []string{"false", "true"} {
			status, body := do(t, "POST", ts.URL+"/v1/responses", testKey, `{"model":"agent","stream":`+stream+`,`+c.fields+`}`)
			var env openai.ErrorResponse
			if err := json.Unmarshal(body, &env); err != nil || status != 400 {
				t.Fatalf("%s, stream %s: %d %s", c.param, stream, status, body)
			}
			if e := env.Error; e.Param == nil || *e.Param != c.param || e.Code == nil || *e.Code != "context_length_exceeded" ||
				strings.Contains(e.Message, "messages") || strings.Contains(e.Message, "max_tokens") {
				t.Errorf("%s, stream %s: %s; want param %s, code context_length_exceeded, and neither \"messages\" nor \"max_tokens\" in the message", c.param, stream, body, c.param)
			}
		}
	}
}

// Ensure vLLM's extras are accepted at their neutral values (clients and
// frameworks send them so), while other values are refused
// (TestBadRequests).
func TestVLLMExtrasNeutral(t *testing.T) {
	_, ts := newTestServer(t, Config{APIKey: testKey})
	neutral := `"repetition_penalty":1,"min_p":0,"min_tokens":0,"ignore_eos":false,"stop_token_ids":[],"guided_json":null,` +
		`"include_stop_str_in_output":false,"add_generation_prompt":true,"continue_final_message":false,"use_beam_search":false`
	if status, body := do(t, "POST", ts.URL+"/v1/chat/completions", testKey, chatBody(neutral)); status != 200 {
		t.Fatalf("chat: %d %s", status, body)
	}
	if status, body := do(t, "POST", ts.URL+"/v1/completions", testKey, `{"model":"agent","prompt":"hi","max_tokens":2,`+neutral+`}`); status != 200 {
		t.Fatalf("completions: %d %s", status, body)
	}
}

// Ensure parallel_tool_calls false reaches the host as SingleToolCall
// where a turn could make several calls (tools offered, tool_choice auto),
// and not where it makes at most one already (a forced call) or none
// (tool_choice none); the Responses API echoes the setting.
func TestParallelToolCallsFalse(t *testing.T) {
	s, ts := newTestServer(t, Config{APIKey: testKey})
	f, tr := false, true
	tool := json.RawMessage(`{"type":"function","function":{"name":"f","parameters":{"type":"object","properties":{}}}}`)
	msgs := []json.RawMessage{json.RawMessage(`{"role":"user","content":"hi"}`)}
	for _, c := range []struct {
		parallel *bool
		tools    []json.RawMessage
		choice   *openai.ToolChoice
		want     bool
	}{
		{&f, []json.RawMessage{tool}, nil, true},
		{&f, []json.RawMessage{tool}, &openai.ToolChoice{Mode: openai.ToolChoiceAuto}, true},
		{&f, []json.RawMessage{tool}, &openai.ToolChoice{Mode: openai.ToolChoiceRequired}, false},
		{&f, []json.RawMessage{tool}, &openai.ToolChoice{Mode: openai.ToolChoiceNone}, false},
		{&f, nil, nil, false},
		{&tr, []json.RawMessage{tool}, nil, false},
		{nil, []json.RawMessage{tool}, nil, false},
	} {
		req := openai.ChatCompletionRequest{Model: testModel, Messages: msgs, Tools: c.tools, ToolChoice: c.choice, ParallelToolCalls: c.parallel}
		got, e := s.chatRequest(&req)
		if e != nil {
			t.Fatalf("%+v: %v", c, e)
		}
		if got.SingleToolCall != c.want {
			t.Errorf("parallel_tool_calls %v, %d tools, tool_choice %+v: SingleToolCall %v, want %v", c.parallel, len(c.tools), c.choice, got.SingleToolCall, c.want)
		}
	}
	client := newClient(ts.URL)
	resp, err := client.Responses.New(context.Background(), responses.ResponseNewParams{Model: testModel,
		Input:             responses.ResponseNewParamsInputUnion{OfString: oai.String("hi")},
		ParallelToolCalls: oai.Bool(false), MaxOutputTokens: oai.Int(4)})
	if err != nil {
		t.Fatal(err)
	}
	if resp.ParallelToolCalls {
		t.Error("a response to parallel_tool_calls false says parallel_tool_calls true")
	}
}
