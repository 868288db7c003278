package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/tmc/langchaingo/llms"
	"github.com/tmc/langchaingo/llms/openai"

	"github.com/artgo/art"
)

// langchaingoAgent is the weather agent written with langchaingo: its
// OpenAI LLM, with the Recorder's client as its HTTP client, called turn by
// turn with the tool.
func langchaingoAgent(ctx context.Context, hc *http.Client, ep art.Endpoint, question string, maxTokens int) (string, string, error) {
	llm, err := openai.New(openai.WithBaseURL(ep.BaseURL), openai.WithToken(ep.APIKey), openai.WithModel(ep.Model), openai.WithHTTPClient(hc))
	if err != nil {
		return "", "", fmt.Errorf("langchaingo: %w", err)
	}
	tools := []llms.Tool{{Type: "function", Function: &llms.FunctionDefinition{
		Name: "get_weather", Description: "the weather of a city", Parameters: json.RawMessage(weatherParams)}}}
	msgs := []llms.MessageContent{
		llms.TextParts(llms.ChatMessageTypeSystem, "You answer weather questions. Call get_weather first."),
		llms.TextParts(llms.ChatMessageTypeHuman, question),
	}
	resp, err := llm.GenerateContent(ctx, msgs, llms.WithTools(tools), llms.WithMaxTokens(maxTokens))
	if err != nil {
		return "", "", fmt.Errorf("langchaingo: %w", err)
	}
	c := resp.Choices[0]
	if len(c.ToolCalls) == 0 {
		return c.Content, "", nil
	}
	call := c.ToolCalls[0]
	var args struct {
		City string `json:"city"`
	}
	json.Unmarshal([]byte(call.FunctionCall.Arguments), &args) // a malformed call gets the tool's answer for ""
	msgs = append(msgs,
		llms.MessageContent{Role: llms.ChatMessageTypeAI, Parts: []llms.ContentPart{call}},
		llms.MessageContent{Role: llms.ChatMessageTypeTool, Parts: []llms.ContentPart{llms.ToolCallResponse{
			ToolCallID: call.ID, Name: call.FunctionCall.Name, Content: weather(args.City)}}},
	)
	resp, err = llm.GenerateContent(ctx, msgs, llms.WithTools(tools), llms.WithMaxTokens(maxTokens))
	if err != nil {
		return "", "", fmt.Errorf("langchaingo: %w", err)
	}
	return resp.Choices[0].Content, call.FunctionCall.Arguments, nil
}
