package art

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/artgo/art/internal/apierr"
)

// Chat sends the history to the chat completions API with the stock
// openai-go client, appends the first choice of the answer to the history
// (a sampled turn, with its token ids and logprobs) and returns it. A turn
// of a rollout is one line:
//
//	choice, err := h.Chat(ctx, client, openai.ChatCompletionNewParams{Model: name, MaxTokens: openai.Int(64)})
//
// The history is the conversation that is sent: its messages and choices
// (see History.Messages) and its Tools, exactly as the history records them,
// so that what is trained is what the model saw. Leave params.Messages and
// params.Tools empty (Chat refuses them); set anything else (the model,
// sampling parameters, a seed, tool_choice, response_format) in params.
// opts are passed to the client's call. Only the first choice is kept
// (and trained), whatever params.N asks for.
func (h *History) Chat(ctx context.Context, client openai.Client, params openai.ChatCompletionNewParams, opts ...option.RequestOption) (Choice, error) {
	c, err := chat(ctx, client, h.MessagesAndChoices, h.Tools, params, opts)
	if err != nil {
		return Choice{}, err
	}
	h.AddChoice(c)
	return c, nil
}

// Chat is History.Chat on the trajectory's main history.
func (t *Trajectory) Chat(ctx context.Context, client openai.Client, params openai.ChatCompletionNewParams, opts ...option.RequestOption) (Choice, error) {
	t.start()
	c, err := chat(ctx, client, t.MessagesAndChoices, t.Tools, params, opts)
	if err != nil {
		return Choice{}, err
	}
	t.AddChoice(c)
	return c, nil
}

func chat(ctx context.Context, client openai.Client, items []MessageOrChoice, tools []Tool, params openai.ChatCompletionNewParams, opts []option.RequestOption) (Choice, error) {
	if len(params.Messages) > 0 || len(params.Tools) > 0 {
		return Choice{}, errors.New("art: chat: params.Messages and params.Tools must be empty: the history's messages and tools are sent")
	}
	if len(items) == 0 {
		return Choice{}, errors.New("art: chat: the history is empty")
	}
	if err := validateItems("history", items); err != nil {
		return Choice{}, err
	}
	msgs, err := json.Marshal(messagesOf(items))
	if err != nil {
		return Choice{}, fmt.Errorf("art: chat: %w", err)
	}
	// Our own encoding goes on the wire: tool parameters keep their key
	// order and sampled arguments their exact text, as training renders them.
	pre := []option.RequestOption{option.WithJSONSet("messages", json.RawMessage(msgs))}
	if len(tools) > 0 {
		b, err := json.Marshal(tools)
		if err != nil {
			return Choice{}, fmt.Errorf("art: chat: tools: %w", err)
		}
		pre = append(pre, option.WithJSONSet("tools", json.RawMessage(b)))
	}
	resp, err := client.Chat.Completions.New(ctx, params, append(pre, opts...)...)
	if err != nil {
		return Choice{}, fmt.Errorf("art: chat with %s: %w", params.Model, apierr.WithMessage(err))
	}
	if len(resp.Choices) == 0 {
		return Choice{}, fmt.Errorf("art: chat with %s: the answer has no choices", params.Model)
	}
	c, err := ChoiceFromOpenAI(resp.Choices[0])
	c.Model = resp.Model
	return c, err
}
