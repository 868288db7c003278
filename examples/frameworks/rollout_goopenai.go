package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"

	goopenai "github.com/sashabaranov/go-openai"

	"github.com/artgo/art"
)

// goOpenAIAgent is the weather agent written with go-openai: its client,
// configured with the Recorder's client as its HTTP client, called turn by
// turn with the tool.
func goOpenAIAgent(ctx context.Context, hc *http.Client, ep art.Endpoint, question string, maxTokens int) (string, string, error) {
	cfg := goopenai.DefaultConfig(ep.APIKey)
	cfg.BaseURL = ep.BaseURL
	cfg.HTTPClient = hc
	client := goopenai.NewClientWithConfig(cfg)
	req := goopenai.ChatCompletionRequest{
		Model: ep.Model, MaxTokens: maxTokens,
		Messages: []goopenai.ChatCompletionMessage{
			{Role: goopenai.ChatMessageRoleSystem, Content: "You answer weather questions. Call get_weather first."},
			{Role: goopenai.ChatMessageRoleUser, Content: question},
		},
		Tools: []goopenai.Tool{{Type: goopenai.ToolTypeFunction, Function: &goopenai.FunctionDefinition{
			Name: "get_weather", Description: "the weather of a city", Parameters: json.RawMessage(weatherParams)}}},
	}
	resp, err := client.CreateChatCompletion(ctx, req)
	if err != nil {
		return "", "", fmt.Errorf("go-openai: %w", err)
	}
	msg := resp.Choices[0].Message
	if len(msg.ToolCalls) == 0 {
		return msg.Content, "", nil
	}
	call := msg.ToolCalls[0]
	var args struct {
		City string `json:"city"`
	}
	json.Unmarshal([]byte(call.Function.Arguments), &args) // a malformed call gets the tool's answer for ""
	req.Messages = append(req.Messages, msg, goopenai.ChatCompletionMessage{
		Role: goopenai.ChatMessageRoleTool, ToolCallID: call.ID, Content: weather(args.City)})
	resp, err = client.CreateChatCompletion(ctx, req)
	if err != nil {
		return "", "", fmt.Errorf("go-openai: %w", err)
	}
	return resp.Choices[0].Message.Content, call.Function.Arguments, nil
}
