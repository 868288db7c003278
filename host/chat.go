package host

import "encoding/json"

// ChatRequest is a chat completion request as the server hands it over.
type ChatRequest struct {
	Model    string            // "name@step" or "name"
	Messages []json.RawMessage // OpenAI message objects
	// Prompt, if set, is the raw prompt text (the legacy completions API):
	// no chat template is applied and Messages and Tools must be empty.
	Prompt      *string
	Tools       []json.RawMessage // OpenAI tool objects; nil for none
	N           int               // choices; 0 means 1
	MaxTokens   int               // 0 means DefaultMaxTokens, capped by the context
	Temperature *float64          // nil means 1
	TopP        float64           // 0 means 1
	TopK        int
	Stop        []string
	Seed        *int64
	TopLogprobs int
	// ParseToolCalls turns tool-call text in the output into ToolCalls
	// (the server sets it unless tool_choice is "none").
	ParseToolCalls bool
	// TemplateKwargs are extra chat template variables (chat_template_kwargs).
	TemplateKwargs map[string]any
	// ResponseFormat, if set, constrains every choice to JSON; it cannot be
	// combined with ParseToolCalls.
	ResponseFormat *ResponseFormat
	// ToolChoice, if set, forces every choice to be exactly one call of one
	// of Tools (tool_choice "required" or a named function), enforced by
	// constrained decoding; it needs ParseToolCalls.
	ToolChoice *ToolChoice
	// SingleToolCall (parallel_tool_calls false) ends a turn after its
	// first complete tool call, enforced by constrained decoding where the
	// tool-call format closes its calls (Hermes' </tool_call>).
	SingleToolCall bool
}

// ToolChoice forces a tool call. The call's arguments match the tool's
// parameters schema (constrained decoding), so the schema must use only
// the keywords structured outputs support.
type ToolChoice struct {
	// Function names the one tool to call; "" means any of the tools.
	Function string
}

// DefaultMaxTokens caps a completion when the request does not.
const DefaultMaxTokens = 1024

// ResponseFormat asks for a JSON answer (structured outputs), enforced by
// constrained decoding: only tokens that keep the answer a prefix of a valid
// document are sampled, and the turn can end only once the document is
// complete. A generation cut by max_tokens ends with finish reason "length"
// and an incomplete document, never an invalid one.
type ResponseFormat struct {
	// Schema is the JSON Schema the answer must match; nil means any JSON
	// object (response_format "json_object").
	Schema json.RawMessage
}

// Token is one sampled token with its log probability.
type Token struct {
	ID      int
	Bytes   []byte
	Logprob float64
	Top     []TopToken
}

// TopToken is one of the most likely tokens at a position.
type TopToken struct {
	ID      int
	Bytes   []byte
	Logprob float64
}

// ChatChoice is one generated answer.
type ChatChoice struct {
	Index        int
	Content      string
	ToolCalls    []ToolCall
	FinishReason string // stop, length or tool_calls
	Tokens       []Token
}

// ToolCall is one function call parsed from an answer.
type ToolCall struct {
	ID        string
	Name      string
	Arguments string // the arguments object as JSON text
}

// ChatResponse is a finished chat completion.
type ChatResponse struct {
	Model            string // the resolved "name@step"
	Step             int
	Choices          []ChatChoice
	PromptTokenIDs   []int
	CompletionTokens int
	// CachedTokens is how many of the prompt's first tokens were not
	// prefilled but reused from another request's keys and values.
	CachedTokens int
}

// StreamEvent is one increment of a streamed completion: the next sampled
// token of a choice and the text it completes (which may be empty while a
// multi-byte character is incomplete).
type StreamEvent struct {
	Choice int
	Token  Token
	Text   string
}

// ToolFormat is how a model writes tool calls in its output; a streaming
// server holds back text that may be the start of a call.
type ToolFormat int

const (
	// ToolsNone: all generated text is content.
	ToolsNone ToolFormat = iota
	// ToolsHermes: <tool_call>{"name": ..., "arguments": ...}</tool_call>
	// blocks after any content (Qwen, Hermes).
	ToolsHermes
	// ToolsLlama3JSON: the whole output is one or more JSON calls,
	// optionally after <|python_tag|> (Llama 3.x).
	ToolsLlama3JSON
)
