package openai

import (
	"encoding/json"
)

// ResponsesRequest is the body of POST /v1/responses (the Responses API).
// Input is a string or a list of input items, kept raw for
// art.ResponsesConversation. Fields not listed here are ignored.
type ResponsesRequest struct {
	Model              string            `json:"model"`
	Input              json.RawMessage   `json:"input"`
	Instructions       *string           `json:"instructions,omitempty"`
	PreviousResponseID string            `json:"previous_response_id,omitempty"`
	Tools              []json.RawMessage `json:"tools,omitempty"`
	ToolChoice         json.RawMessage   `json:"tool_choice,omitempty"`
	ParallelToolCalls  *bool             `json:"parallel_tool_calls,omitempty"`
	MaxOutputTokens    *int              `json:"max_output_tokens,omitempty"`
	Temperature        *float64          `json:"temperature,omitempty"`
	TopP               *float64          `json:"top_p,omitempty"`
	TopLogprobs        *int              `json:"top_logprobs,omitempty"`
	Text               *ResponsesText    `json:"text,omitempty"`
	Stream             bool              `json:"stream,omitempty"`
	// Store (default true) keeps the response for previous_response_id and
	// item_reference.
	Store    *bool             `json:"store,omitempty"`
	Metadata map[string]string `json:"metadata,omitempty"`
	User     string            `json:"user,omitempty"`
	// Seed is our extra, as in chat completions.
	Seed *int64 `json:"seed,omitempty"`
}

// ResponsesText is the "text" option: the output format.
type ResponsesText struct {
	Format *ResponsesFormat `json:"format,omitempty"`
}

// ResponsesFormat is text.format: "text", "json_object" or "json_schema"
// (with name, schema and strict beside the type, not nested).
type ResponsesFormat struct {
	Type        string          `json:"type"`
	Name        string          `json:"name,omitempty"`
	Description string          `json:"description,omitempty"`
	Schema      json.RawMessage `json:"schema,omitempty"`
	Strict      *bool           `json:"strict,omitempty"`
}

// Object types and statuses of the Responses API.
const (
	ObjectResponse     = "response"
	ResponseCompleted  = "completed"
	ResponseIncomplete = "incomplete"
	ResponseInProgress = "in_progress"
)

// Response is a Responses API response. Besides OpenAI's fields it carries
// Choice (the answer as a chat choice, with every sampled token id and
// logprob: what art.ChoiceFromResponse reads to train) and PromptTokenIDs.
type Response struct {
	ID                 string             `json:"id"`
	Object             string             `json:"object"` // ObjectResponse
	CreatedAt          int64              `json:"created_at"`
	Status             string             `json:"status"`
	IncompleteDetails  *IncompleteDetails `json:"incomplete_details"`
	Error              *ErrorBody         `json:"error"`
	Model              string             `json:"model"`
	Instructions       *string            `json:"instructions"`
	Output             []OutputItem       `json:"output"`
	ParallelToolCalls  bool               `json:"parallel_tool_calls"`
	PreviousResponseID *string            `json:"previous_response_id"`
	Temperature        *float64           `json:"temperature"`
	TopP               *float64           `json:"top_p"`
	ToolChoice         json.RawMessage    `json:"tool_choice"`
	Tools              []json.RawMessage  `json:"tools"`
	Text               ResponsesText      `json:"text"`
	Store              bool               `json:"store"`
	Metadata           map[string]string  `json:"metadata"`
	Usage              *ResponsesUsage    `json:"usage,omitempty"`

	Choice         *Choice `json:"choice,omitempty"`
	PromptTokenIDs []int   `json:"prompt_token_ids,omitempty"`
}

// IncompleteDetails says why a response is incomplete.
type IncompleteDetails struct {
	Reason string `json:"reason"` // "max_output_tokens"
}

// OutputItem is an output message or a function call.
type OutputItem struct {
	Type   string `json:"type"` // "message" or "function_call"
	ID     string `json:"id"`
	Status string `json:"status"`
	// message
	Role    string       `json:"role,omitempty"`
	Content []OutputPart `json:"content,omitzero"` // [] for a message just added
	// function_call
	CallID    string `json:"call_id,omitempty"`
	Name      string `json:"name,omitempty"`
	Arguments string `json:"arguments,omitempty"`
}

// OutputPart is a part of an output message: "output_text".
type OutputPart struct {
	Type        string            `json:"type"`
	Text        string            `json:"text"`
	Annotations []json.RawMessage `json:"annotations"`
	Logprobs    []TokenLogprob    `json:"logprobs"`
}

// ResponsesUsage counts a response's tokens.
type ResponsesUsage struct {
	InputTokens         int                 `json:"input_tokens"`
	InputTokensDetails  CachedTokensDetails `json:"input_tokens_details"`
	OutputTokens        int                 `json:"output_tokens"`
	OutputTokensDetails ReasoningDetails    `json:"output_tokens_details"`
	TotalTokens         int                 `json:"total_tokens"`
}

// CachedTokensDetails is usage.prompt_tokens_details (chat completions)
// and usage.input_tokens_details (responses): the prompt tokens whose keys
// and values were reused rather than prefilled.
type CachedTokensDetails struct {
	CachedTokens int `json:"cached_tokens"`
}

// ReasoningDetails is usage.output_tokens_details.
type ReasoningDetails struct {
	ReasoningTokens int `json:"reasoning_tokens"`
}

// ResponseEvent is one server-sent event of a streamed response, sent as
// "event: <type>\ndata: {...}\n\n". Which fields are set depends on Type.
type ResponseEvent struct {
	Type           string         `json:"type"`
	SequenceNumber int            `json:"sequence_number"`
	Response       *Response      `json:"response,omitempty"`
	OutputIndex    *int           `json:"output_index,omitempty"`
	ContentIndex   *int           `json:"content_index,omitempty"`
	ItemID         string         `json:"item_id,omitempty"`
	Item           *OutputItem    `json:"item,omitempty"`
	Part           *OutputPart    `json:"part,omitempty"`
	Delta          *string        `json:"delta,omitempty"`
	Text           *string        `json:"text,omitempty"`
	Arguments      *string        `json:"arguments,omitempty"`
	Logprobs       []TokenLogprob `json:"logprobs,omitempty"`
	// The "error" event's.
	Code    string  `json:"code,omitempty"`
	Message string  `json:"message,omitempty"`
	Param   *string `json:"param,omitempty"`
}
