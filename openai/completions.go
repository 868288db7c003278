package openai

import "encoding/json"

// ObjectTextCompletion is the object type of a legacy completion.
const ObjectTextCompletion = "text_completion"

// CompletionRequest is the body of POST /v1/completions (the legacy
// completions API): a raw prompt, no chat template. Fields not listed here
// are ignored.
type CompletionRequest struct {
	Model string `json:"model"`
	// Prompt is a string or a list of one string.
	Prompt           json.RawMessage `json:"prompt"`
	MaxTokens        *int            `json:"max_tokens,omitempty"`
	Temperature      *float64        `json:"temperature,omitempty"`
	TopP             *float64        `json:"top_p,omitempty"`
	N                *int            `json:"n,omitempty"`
	Stop             Stop            `json:"stop,omitempty"`
	Seed             *int64          `json:"seed,omitempty"`
	Logprobs         *int            `json:"logprobs,omitempty"` // alternatives per token, 0–5
	Echo             bool            `json:"echo,omitempty"`
	Suffix           *string         `json:"suffix,omitempty"`
	BestOf           *int            `json:"best_of,omitempty"`
	FrequencyPenalty *float64        `json:"frequency_penalty,omitempty"`
	PresencePenalty  *float64        `json:"presence_penalty,omitempty"`
	LogitBias        map[string]any  `json:"logit_bias,omitempty"`
	Stream           bool            `json:"stream,omitempty"`
	StreamOptions    *StreamOptions  `json:"stream_options,omitempty"`
	User             string          `json:"user,omitempty"`

	VLLMExtras
}

// Completion is a legacy completion (and, with one choice holding the new
// text, each chunk of a streamed one).
type Completion struct {
	ID             string             `json:"id"`
	Object         string             `json:"object"` // ObjectTextCompletion
	Created        int64              `json:"created"`
	Model          string             `json:"model"`
	Choices        []CompletionChoice `json:"choices"`
	Usage          *Usage             `json:"usage,omitempty"`
	PromptTokenIDs []int              `json:"prompt_token_ids,omitempty"`
}

// CompletionChoice is one generated text. TokenIDs are the sampled ids,
// the stop token included (vLLM's extra).
type CompletionChoice struct {
	Index        int                 `json:"index"`
	Text         string              `json:"text"`
	Logprobs     *CompletionLogprobs `json:"logprobs"`
	FinishReason *string             `json:"finish_reason"`
	TokenIDs     []int               `json:"token_ids,omitempty"`
}

// CompletionLogprobs are the legacy API's per-token logprobs.
type CompletionLogprobs struct {
	Tokens        []string             `json:"tokens"`
	TokenLogprobs []float64            `json:"token_logprobs"`
	TopLogprobs   []map[string]float64 `json:"top_logprobs"`
	TextOffset    []int                `json:"text_offset"`
}
