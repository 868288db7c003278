// Package openai defines the JSON wire types of the OpenAI-compatible API
// that `art serve` speaks: the chat completion request, the response and its
// streamed chunks, the model list and the error envelope; the Responses API
// (responses.go: its response carries the answer as a chat Choice, for
// training) and the legacy completions API (completions.go).
//
// They are our own small structs rather than a client library's: the
// request keeps messages and tools verbatim (their key order reaches the
// chat template), unknown request fields are tolerated, and responses
// carry only the fields OpenAI sends plus vLLM's extras that training needs:
//
//   - every choice has "logprobs": {"content": [...]} with one entry per
//     sampled token, each with our "token_id", whether or not the client
//     asked for logprobs (as ART's patched vLLM does), and "token_ids";
//   - "top_logprobs" entries are filled only when the client asked;
//   - the completion has "prompt_token_ids", the tokens of the rendered
//     prompt.
//
// Stock clients ignore the extra fields; art.ChoiceFromOpenAI reads them.
package openai

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
)

// ChatCompletionRequest is the body of POST /v1/chat/completions. Optional
// fields are pointers so that an explicit zero (n = 0) can be told from an
// absent field. Fields not listed here are ignored when decoding.
type ChatCompletionRequest struct {
	Model string `json:"model"`
	// Messages are OpenAI message objects, kept verbatim.
	Messages []json.RawMessage `json:"messages"`
	// Tools are OpenAI tool objects, kept verbatim.
	Tools      []json.RawMessage `json:"tools,omitempty"`
	ToolChoice *ToolChoice       `json:"tool_choice,omitempty"`
	// ParallelToolCalls false ends a turn after its first complete tool
	// call (host.ChatRequest.SingleToolCall); absent or true, the model may
	// make several.
	ParallelToolCalls *bool `json:"parallel_tool_calls,omitempty"`

	N           *int     `json:"n,omitempty"`
	Temperature *float64 `json:"temperature,omitempty"`
	TopP        *float64 `json:"top_p,omitempty"`
	// TopK is vLLM's extra: keep the k most likely tokens; -1 or 0 is off.
	TopK *int `json:"top_k,omitempty"`
	// MaxTokens is the legacy name of MaxCompletionTokens, which wins when
	// both are set.
	MaxTokens           *int   `json:"max_tokens,omitempty"`
	MaxCompletionTokens *int   `json:"max_completion_tokens,omitempty"`
	Stop                Stop   `json:"stop,omitempty"`
	Seed                *int64 `json:"seed,omitempty"`
	// Logprobs is accepted for compatibility: logprobs are always
	// returned. TopLogprobs > 0 needs it true, as OpenAI and vLLM require.
	Logprobs    *bool `json:"logprobs,omitempty"`
	TopLogprobs *int  `json:"top_logprobs,omitempty"`

	FrequencyPenalty *float64        `json:"frequency_penalty,omitempty"`
	PresencePenalty  *float64        `json:"presence_penalty,omitempty"`
	LogitBias        map[string]any  `json:"logit_bias,omitempty"`
	ResponseFormat   *ResponseFormat `json:"response_format,omitempty"`
	Stream           bool            `json:"stream,omitempty"`
	StreamOptions    *StreamOptions  `json:"stream_options,omitempty"`
	User             string          `json:"user,omitempty"`

	// ChatTemplateKwargs are vLLM's extra variables for the chat template
	// (for example {"enable_thinking": false}).
	ChatTemplateKwargs map[string]any `json:"chat_template_kwargs,omitempty"`

	VLLMExtras
}

// MaxTokensParam returns the requested completion length and the name of
// the field that set it ("" and nil when neither is set).
func (r *ChatCompletionRequest) MaxTokensParam() (param string, v *int) {
	switch {
	case r.MaxCompletionTokens != nil:
		return "max_completion_tokens", r.MaxCompletionTokens
	case r.MaxTokens != nil:
		return "max_tokens", r.MaxTokens
	}
	return "", nil
}

// IncludeUsage reports whether a stream should end with a usage chunk.
func (r *ChatCompletionRequest) IncludeUsage() bool {
	return r.StreamOptions != nil && r.StreamOptions.IncludeUsage
}

// StreamOptions are the options of a streamed completion.
type StreamOptions struct {
	// IncludeUsage asks for a last chunk with the usage and no choices.
	IncludeUsage bool `json:"include_usage"`
}

// ResponseFormat constrains the output: "text", "json_object" or
// "json_schema" (with its schema in JSONSchema).
type ResponseFormat struct {
	Type       string          `json:"type"`
	JSONSchema json.RawMessage `json:"json_schema,omitempty"`
}

// Stop is the "stop" field: a string or a list of strings. It decodes to a
// list; null decodes to nil.
type Stop []string

// UnmarshalJSON decodes a string, a list of strings or null.
func (s *Stop) UnmarshalJSON(data []byte) error {
	data = bytes.TrimSpace(data)
	switch {
	case bytes.Equal(data, []byte("null")):
		*s = nil
		return nil
	case len(data) > 0 && data[0] == '"':
		var one string
		if err := json.Unmarshal(data, &one); err != nil {
			return err
		}
		*s = Stop{one}
		return nil
	}
	var list []string
	if err := json.Unmarshal(data, &list); err != nil {
		return &FieldError{Field: "stop", Msg: fmt.Sprintf("stop must be a string or an array of strings, got %.60s", data)}
	}
	*s = list
	return nil
}

// FieldError is a request field's value that its own decoder refused;
// Field names the field, for the error answer's param (encoding/json does
// not say which field a decoder's error came from).
type FieldError struct {
	Field string
	Msg   string
}

func (e *FieldError) Error() string { return "openai: " + e.Msg }

// Tool choice modes.
const (
	ToolChoiceNone     = "none"
	ToolChoiceAuto     = "auto"
	ToolChoiceRequired = "required"
	// ToolChoiceFunction is the mode of {"type":"function","function":{"name":...}}.
	ToolChoiceFunction = "function"
)

// ToolChoice is the "tool_choice" field: "none", "auto", "required", or an
// object naming one function.
type ToolChoice struct {
	Mode     string // one of the ToolChoice constants
	Function string // the named function when Mode is ToolChoiceFunction
}

// MarshalJSON encodes the string form, or the object for a named function.
func (c ToolChoice) MarshalJSON() ([]byte, error) {
	if c.Mode != ToolChoiceFunction {
		return json.Marshal(c.Mode)
	}
	var o toolChoiceObject
	o.Type = "function"
	o.Function.Name = c.Function
	return json.Marshal(o)
}

type toolChoiceObject struct {
	Type     string `json:"type"`
	Function struct {
		Name string `json:"name"`
	} `json:"function"`
}

// UnmarshalJSON decodes the string or object form.
func (c *ToolChoice) UnmarshalJSON(data []byte) error {
	data = bytes.TrimSpace(data)
	if len(data) > 0 && data[0] == '"' {
		*c = ToolChoice{}
		return json.Unmarshal(data, &c.Mode)
	}
	var o toolChoiceObject
	if err := json.Unmarshal(data, &o); err != nil || o.Type != "function" || o.Function.Name == "" {
		return &FieldError{Field: "tool_choice", Msg: fmt.Sprintf(`tool_choice must be "none", "auto", "required" or {"type":"function","function":{"name":...}}; got %.60s`, data)}
	}
	*c = ToolChoice{Mode: ToolChoiceFunction, Function: o.Function.Name}
	return nil
}

// VLLMExtras are vLLM's sampling and prompt extras that this server does
// not implement. They are decoded only to refuse a value that would change
// the answer: ignored like other unknown fields, it would change it
// silently, as a refused presence_penalty would. Their neutral values
// (which clients and frameworks send) pass.
type VLLMExtras struct {
	RepetitionPenalty      json.RawMessage `json:"repetition_penalty,omitempty"`
	MinP                   json.RawMessage `json:"min_p,omitempty"`
	MinTokens              json.RawMessage `json:"min_tokens,omitempty"`
	IgnoreEOS              json.RawMessage `json:"ignore_eos,omitempty"`
	StopTokenIDs           json.RawMessage `json:"stop_token_ids,omitempty"`
	IncludeStopStrInOutput json.RawMessage `json:"include_stop_str_in_output,omitempty"`
	UseBeamSearch          json.RawMessage `json:"use_beam_search,omitempty"`
	AddGenerationPrompt    json.RawMessage `json:"add_generation_prompt,omitempty"`
	ContinueFinalMessage   json.RawMessage `json:"continue_final_message,omitempty"`
	GuidedJSON             json.RawMessage `json:"guided_json,omitempty"`
	GuidedRegex            json.RawMessage `json:"guided_regex,omitempty"`
	GuidedChoice           json.RawMessage `json:"guided_choice,omitempty"`
	GuidedGrammar          json.RawMessage `json:"guided_grammar,omitempty"`
	StructuredOutputs      json.RawMessage `json:"structured_outputs,omitempty"`
}

// Unsupported returns the first extra set to a value other than its
// neutral one, and a hint of what to send instead ("" when none is set).
func (x *VLLMExtras) Unsupported() (param, hint string) {
	const useFormat = "use response_format (json_schema) instead"
	for _, e := range []struct {
		param   string
		raw     json.RawMessage
		neutral string // the JSON of the value that changes nothing; "" means only null
		hint    string
	}{
		{"repetition_penalty", x.RepetitionPenalty, "1", "omit it or send 1"},
		{"min_p", x.MinP, "0", "omit it or send 0"},
		{"min_tokens", x.MinTokens, "0", "omit it or send 0"},
		{"ignore_eos", x.IgnoreEOS, "false", "omit it or send false"},
		{"stop_token_ids", x.StopTokenIDs, "[]", "use stop strings"},
		{"include_stop_str_in_output", x.IncludeStopStrInOutput, "false", "omit it or send false"},
		{"use_beam_search", x.UseBeamSearch, "false", "omit it or send false"},
		{"add_generation_prompt", x.AddGenerationPrompt, "true", "omit it or send true"},
		{"continue_final_message", x.ContinueFinalMessage, "false", "omit it or send false"},
		{"guided_json", x.GuidedJSON, "", useFormat},
		{"guided_regex", x.GuidedRegex, "", "omit it"},
		{"guided_choice", x.GuidedChoice, "", useFormat + " with an enum"},
		{"guided_grammar", x.GuidedGrammar, "", "omit it"},
		{"structured_outputs", x.StructuredOutputs, "", useFormat},
	} {
		if !neutralJSON(e.raw, e.neutral) {
			return e.param, e.hint
		}
	}
	return "", ""
}

// neutralJSON reports whether raw is absent, null, or the same JSON value
// as neutral (numbers compared as numbers: 1 and 1.0 are equal).
func neutralJSON(raw json.RawMessage, neutral string) bool {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return true
	}
	if neutral == "" {
		return false
	}
	var got, want any
	if json.Unmarshal(raw, &got) != nil || json.Unmarshal([]byte(neutral), &want) != nil {
		return false
	}
	return reflect.DeepEqual(got, want)
}
