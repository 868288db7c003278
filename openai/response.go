package openai

import (
	"encoding/json"
	"errors"
	"strconv"
)

// Object types.
const (
	ObjectChatCompletion      = "chat.completion"
	ObjectChatCompletionChunk = "chat.completion.chunk"
	ObjectList                = "list"
	ObjectModel               = "model"
)

// Finish reasons.
const (
	FinishStop      = "stop"
	FinishLength    = "length"
	FinishToolCalls = "tool_calls"
)

// ChatCompletion is the response of a non-streamed chat completion.
type ChatCompletion struct {
	ID      string   `json:"id"`
	Object  string   `json:"object"` // ObjectChatCompletion
	Created int64    `json:"created"`
	Model   string   `json:"model"` // the resolved "name@step"
	Choices []Choice `json:"choices"`
	Usage   *Usage   `json:"usage,omitempty"`
	// PromptTokenIDs are the token ids of the rendered prompt (vLLM's extra).
	PromptTokenIDs []int `json:"prompt_token_ids,omitempty"`
}

// Choice is one answer of a chat completion.
type Choice struct {
	Index        int       `json:"index"`
	Message      Message   `json:"message"`
	Logprobs     *Logprobs `json:"logprobs"`
	FinishReason string    `json:"finish_reason"`
	// TokenIDs are the sampled token ids (vLLM's return_token_ids extra),
	// the stop token included.
	TokenIDs []int `json:"token_ids"`
}

// Message is an assistant message in a response. Content is null when the
// message only calls tools.
type Message struct {
	Role      string     `json:"role"`
	Content   *string    `json:"content"`
	ToolCalls []ToolCall `json:"tool_calls,omitempty"`
}

// ToolCall is a function call made by the model. Index is set only in
// streamed deltas.
type ToolCall struct {
	Index    *int         `json:"index,omitempty"`
	ID       string       `json:"id"`
	Type     string       `json:"type"` // "function"
	Function FunctionCall `json:"function"`
}

// FunctionCall names a function and its arguments as JSON text.
type FunctionCall struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// Logprobs holds the per-token log probabilities of a choice.
type Logprobs struct {
	Content []TokenLogprob `json:"content"`
}

// TokenLogprob is one sampled token: its text, our token id, its UTF-8
// bytes, its log probability and, when asked for, the most likely
// alternatives.
type TokenLogprob struct {
	Token       string       `json:"token"`
	TokenID     int          `json:"token_id"`
	Bytes       Bytes        `json:"bytes"`
	Logprob     float64      `json:"logprob"`
	TopLogprobs []TopLogprob `json:"top_logprobs"`
}

// TopLogprob is one of the most likely tokens at a position.
type TopLogprob struct {
	Token   string  `json:"token"`
	TokenID int     `json:"token_id"`
	Bytes   Bytes   `json:"bytes"`
	Logprob float64 `json:"logprob"`
}

// Bytes are the UTF-8 bytes of a token, encoded as an array of integers as
// OpenAI sends them (not base64). A token may be part of a character, so
// its Token text alone can lose information.
type Bytes []byte

// MarshalJSON encodes b as an array of integers; nil is [].
func (b Bytes) MarshalJSON() ([]byte, error) {
	out := make([]byte, 0, 2+4*len(b))
	out = append(out, '[')
	for i, x := range b {
		if i > 0 {
			out = append(out, ',')
		}
		out = strconv.AppendUint(out, uint64(x), 10)
	}
	return append(out, ']'), nil
}

// UnmarshalJSON decodes an array of integers in [0, 255], or null.
func (b *Bytes) UnmarshalJSON(data []byte) error {
	var ints []int
	if err := json.Unmarshal(data, &ints); err != nil {
		return err
	}
	if ints == nil {
		*b = nil
		return nil
	}
	out := make(Bytes, len(ints))
	for i, x := range ints {
		if x < 0 || x > 255 {
			return errors.New("openai: token bytes must be integers in [0, 255]")
		}
		out[i] = byte(x)
	}
	*b = out
	return nil
}

// Usage counts the tokens of a completion.
type Usage struct {
	PromptTokens        int                 `json:"prompt_tokens"`
	CompletionTokens    int                 `json:"completion_tokens"`
	TotalTokens         int                 `json:"total_tokens"`
	PromptTokensDetails CachedTokensDetails `json:"prompt_tokens_details"`
}

// ChatCompletionChunk is one server-sent event of a streamed completion,
// sent as "data: {...}\n\n"; the stream ends with "data: [DONE]\n\n".
type ChatCompletionChunk struct {
	ID      string        `json:"id"`
	Object  string        `json:"object"` // ObjectChatCompletionChunk
	Created int64         `json:"created"`
	Model   string        `json:"model"`
	Choices []ChunkChoice `json:"choices"`
	// Usage is set on the last chunk (which has no choices) when the
	// request asked for stream_options.include_usage.
	Usage *Usage `json:"usage,omitempty"`
	// PromptTokenIDs are sent once, on the last chunk before [DONE].
	PromptTokenIDs []int `json:"prompt_token_ids,omitempty"`
}

// ChunkChoice is the increment of one choice in a chunk.
type ChunkChoice struct {
	Index        int       `json:"index"`
	Delta        Delta     `json:"delta"`
	Logprobs     *Logprobs `json:"logprobs"`
	FinishReason *string   `json:"finish_reason"`
	// TokenIDs are the ids of the tokens sampled since the previous chunk
	// of this choice.
	TokenIDs []int `json:"token_ids,omitempty"`
}

// Delta is the new part of a streamed message. Role is sent on a choice's
// first chunk only.
type Delta struct {
	Role      string     `json:"role,omitempty"`
	Content   *string    `json:"content,omitempty"`
	ToolCalls []ToolCall `json:"tool_calls,omitempty"`
}

// ModelList is the response of GET /v1/models.
type ModelList struct {
	Object string  `json:"object"` // ObjectList
	Data   []Model `json:"data"`
}

// Model describes a served model id, as vLLM lists LoRA adapters.
type Model struct {
	ID      string `json:"id"`
	Object  string `json:"object"` // ObjectModel
	Created int64  `json:"created"`
	OwnedBy string `json:"owned_by"`
	// Root is the checkpoint folder of the adapter; Parent the base model.
	Root        string `json:"root,omitempty"`
	Parent      string `json:"parent,omitempty"`
	MaxModelLen int    `json:"max_model_len,omitempty"`
}

// Error types used in ErrorBody.Type.
const (
	ErrInvalidRequest = "invalid_request_error"
	ErrAuthentication = "authentication_error"
	ErrNotFound       = "not_found_error"
	ErrServer         = "server_error"
	ErrTimeout        = "timeout_error"
)

// ErrorResponse is OpenAI's error envelope: {"error": {...}}.
type ErrorResponse struct {
	Error ErrorBody `json:"error"`
}

// ErrorBody describes what went wrong. Param names the offending request
// field and Code is a machine-readable reason; both are null when unknown.
type ErrorBody struct {
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    *string `json:"code"`
}
