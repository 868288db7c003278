package server

import (
	"context"
	"encoding/json"
	"testing"

	oai "github.com/openai/openai-go/v3"

	"github.com/artgo/art"
)

// Ensure tool_choice "required" and a named function force a call with a
// random-weight model: every one of 20 answers (plain and streamed) is one
// call of an offered tool — the named one when named — with arguments that
// match its parameters, finish reason "tool_calls", and token ids that
// train (ChoiceFromOpenAI keeps them).
func TestToolChoice_Forced(t *testing.T) {
	_, ts := newTestServer(t, Config{APIKey: testKey})
	client := newClient(ts.URL)
	ctx := context.Background()
	tools := []oai.ChatCompletionToolUnionParam{
		oai.ChatCompletionFunctionTool(oai.FunctionDefinitionParam{Name: "get_weather", Parameters: oai.FunctionParameters{
			"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string", "maxLength": 6}},
			"required": []string{"city"}, "additionalProperties": false}}),
		oai.ChatCompletionFunctionTool(oai.FunctionDefinitionParam{Name: "get_time", Parameters: oai.FunctionParameters{
			"type": "object", "properties": map[string]any{"utc": map[string]any{"type": "boolean"}},
			"required": []string{"utc"}, "additionalProperties": false}}),
	}
	for _, tc := range []struct {
		name   string
		choice oai.ChatCompletionToolChoiceOptionUnionParam
		want   string // "" means either tool
	}{
		{"Required", oai.ChatCompletionToolChoiceOptionUnionParam{OfAuto: oai.String("required")}, ""},
		{"Named", oai.ToolChoiceOptionFunctionToolChoice(oai.ChatCompletionNamedToolChoiceFunctionParam{Name: "get_time"}), "get_time"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			params := oai.ChatCompletionNewParams{Model: testModel, Messages: userMsgs("weather in Paris?"), Tools: tools,
				ToolChoice: tc.choice, N: oai.Int(20), MaxTokens: oai.Int(200), Seed: oai.Int(3)}
			resp, err := client.Chat.Completions.New(ctx, params)
			if err != nil {
				t.Fatal(err)
			}
			for i, c := range resp.Choices {
				if c.FinishReason != "tool_calls" || len(c.Message.ToolCalls) != 1 {
					t.Fatalf("choice %d: finish %q, %d calls, content %q", i, c.FinishReason, len(c.Message.ToolCalls), c.Message.Content)
				}
				call := c.Message.ToolCalls[0].Function
				var args map[string]any
				if err := json.Unmarshal([]byte(call.Arguments), &args); err != nil {
					t.Fatalf("choice %d: arguments %q: %v", i, call.Arguments, err)
				}
				switch _, city := args["city"].(string); {
				case tc.want != "" && call.Name != tc.want:
					t.Fatalf("choice %d called %q; want %q", i, call.Name, tc.want)
				case call.Name == "get_weather" && (!city || len(args) != 1):
					t.Fatalf("choice %d: get_weather(%s)", i, call.Arguments)
				case call.Name == "get_time" && len(args) != 1:
					t.Fatalf("choice %d: get_time(%s)", i, call.Arguments)
				}
				ch, err := art.ChoiceFromOpenAI(c)
				if err != nil || len(ch.Logprobs) == 0 || len(ch.Message.ToolCalls) != 1 {
					t.Fatalf("choice %d does not train: %v", i, err)
				}
			}
			// The stream with the same seed makes the same first call.
			params.N = oai.Int(1)
			stream := client.Chat.Completions.NewStreaming(ctx, params)
			var acc oai.ChatCompletionAccumulator
			for stream.Next() {
				acc.AddChunk(stream.Current())
			}
			if err := stream.Err(); err != nil {
				t.Fatal(err)
			}
			got := acc.Choices[0].Message.ToolCalls
			if len(got) != 1 || got[0].Function.Name != resp.Choices[0].Message.ToolCalls[0].Function.Name || acc.Choices[0].FinishReason != "tool_calls" {
				t.Fatalf("stream: %+v, finish %q", got, acc.Choices[0].FinishReason)
			}
		})
	}
}
