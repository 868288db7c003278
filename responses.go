package art

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
)

// Responses API support: the OpenAI Responses API (POST /v1/responses, the
// Vercel AI SDK's default) describes a conversation as input items rather
// than messages. ResponsesConversation turns them into the chat messages
// that are rendered, recorded and trained, the same way for the server
// (which samples) and the Recorder (which records), so both see one
// history.

// ResponsesConversation remembers the conversations of earlier responses
// (by response id) and their output items (by item id), so that a request
// continuing one (previous_response_id) or pointing at its items
// (item_reference) can be expanded into the full message list. It holds at
// most a bounded number of responses (the oldest are forgotten first) and
// is safe for concurrent use.
type ResponsesConversation struct {
	max int // responses kept; 0 means no bound

	mu     sync.Mutex // guards the fields below
	order  []string   // response ids, oldest first
	convs  map[string][]Message
	items  map[string]Message // output item id → the assistant message part it was
	itemOf map[string][]string
}

// NewResponsesConversation returns a store keeping at most max responses
// (0: no bound).
func NewResponsesConversation(max int) *ResponsesConversation {
	return &ResponsesConversation{max: max, convs: map[string][]Message{}, items: map[string]Message{}, itemOf: map[string][]string{}}
}

// ErrUnknownResponse is wrapped by errors for a previous_response_id or an
// item_reference the conversation does not hold.
var ErrUnknownResponse = errors.New("not found")

// Remember records a response: conv (the messages sent, without the
// instructions), the answer c, and the ids of its output items: msgID for
// the text message ("" when there is none) and callIDs[i] for the item of
// c.Message.ToolCalls[i].
func (rc *ResponsesConversation) Remember(responseID string, conv []Message, c Choice, msgID string, callIDs []string) {
	answer := c.Message
	answer.Role = RoleAssistant
	if answer.Content.String() == "" {
		answer.Content = Content{}
	}
	conv = append(slices.Clone(conv), answer)
	items := map[string]Message{}
	if msgID != "" {
		items[msgID] = Message{Role: RoleAssistant, Content: answer.Content}
	}
	for i, id := range callIDs {
		if i < len(answer.ToolCalls) && id != "" {
			items[id] = Message{Role: RoleAssistant, ToolCalls: []ToolCall{answer.ToolCalls[i]}}
		}
	}
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if _, ok := rc.convs[responseID]; !ok {
		rc.order = append(rc.order, responseID)
	}
	rc.convs[responseID] = conv
	for id, m := range items {
		rc.items[id] = m
		rc.itemOf[responseID] = append(rc.itemOf[responseID], id)
	}
	for rc.max > 0 && len(rc.order) > rc.max {
		old := rc.order[0]
		rc.order = rc.order[1:]
		for _, id := range rc.itemOf[old] {
			delete(rc.items, id)
		}
		delete(rc.itemOf, old)
		delete(rc.convs, old)
	}
}

// Messages returns the conversation a request describes: the messages of
// previousID's conversation (if set), then the input (a string: one user
// message; or a list of input items). Instructions are not included: they
// are the caller's to put first, as they do not carry over to the next
// response.
func (rc *ResponsesConversation) Messages(previousID string, input json.RawMessage) ([]Message, error) {
	var out []Message
	if previousID != "" {
		rc.mu.Lock()
		prev, ok := rc.convs[previousID]
		rc.mu.Unlock()
		if !ok {
			return nil, fmt.Errorf("previous response %q: %w (responses are kept in memory, a bounded number, while the server runs)", previousID, ErrUnknownResponse)
		}
		out = append(out, prev...)
	}
	input = bytes.TrimSpace(input)
	if len(input) > 0 && input[0] == '"' {
		var s string
		if err := json.Unmarshal(input, &s); err != nil {
			return nil, fmt.Errorf("input: %w", err)
		}
		return append(out, UserMsg(s)), nil
	}
	var items []json.RawMessage
	if err := json.Unmarshal(input, &items); err != nil {
		return nil, errors.New("input must be a string or an array of input items")
	}
	for i, raw := range items {
		var err error
		if out, err = rc.addItem(out, raw); err != nil {
			return nil, fmt.Errorf("input[%d]: %w", i, err)
		}
	}
	return out, nil
}

// responseItem is an input or output item, as far as a chat needs it.
type responseItem struct {
	Type      string          `json:"type"`
	ID        string          `json:"id"`
	Role      string          `json:"role"`
	Content   json.RawMessage `json:"content"`
	CallID    string          `json:"call_id"`
	Name      string          `json:"name"`
	Arguments string          `json:"arguments"`
	Output    json.RawMessage `json:"output"`
}

func (rc *ResponsesConversation) addItem(out []Message, raw json.RawMessage) ([]Message, error) {
	var it responseItem
	if err := json.Unmarshal(raw, &it); err != nil || !bytes.HasPrefix(bytes.TrimSpace(raw), []byte("{")) {
		return nil, fmt.Errorf("an input item must be an object, got %.60s", raw)
	}
	switch it.Type {
	case "message", "":
		switch it.Role {
		case RoleUser, RoleSystem, "developer", RoleAssistant:
		default:
			return nil, fmt.Errorf(`a message's role must be "user", "system", "developer" or "assistant", got %q`, it.Role)
		}
		c, err := responseContent(it.Content)
		if err != nil {
			return nil, err
		}
		return append(out, Message{Role: it.Role, Content: c}), nil
	case "function_call":
		if it.CallID == "" || it.Name == "" {
			return nil, errors.New("a function_call needs a call_id and a name")
		}
		return appendCall(out, ToolCall{ID: it.CallID, Type: "function", Function: FunctionCall{Name: it.Name, Arguments: it.Arguments}}), nil
	case "function_call_output":
		if it.CallID == "" {
			return nil, errors.New("a function_call_output needs a call_id")
		}
		c, err := responseContent(it.Output)
		if err != nil {
			return nil, fmt.Errorf("output: %w", err)
		}
		return append(out, Message{Role: RoleTool, ToolCallID: it.CallID, Content: Text(c.String())}), nil
	case "item_reference":
		rc.mu.Lock()
		m, ok := rc.items[it.ID]
		rc.mu.Unlock()
		if !ok {
			return nil, fmt.Errorf("item %q: %w", it.ID, ErrUnknownResponse)
		}
		if m.Content.IsZero() {
			for _, tc := range m.ToolCalls {
				out = appendCall(out, tc)
			}
			return out, nil
		}
		return append(out, m), nil
	case "reasoning":
		return out, nil // no reasoning is sampled separately here
	}
	return nil, fmt.Errorf("input items of type %q are not supported (message, function_call, function_call_output, item_reference and reasoning are)", it.Type)
}

// appendCall adds a call to the assistant message that ends out, or a new
// one: a chat turn holds its text and all its calls.
func appendCall(out []Message, tc ToolCall) []Message {
	if n := len(out); n > 0 && out[n-1].Role == RoleAssistant {
		out[n-1].ToolCalls = append(out[n-1].ToolCalls, tc)
		return out
	}
	return append(out, Message{Role: RoleAssistant, ToolCalls: []ToolCall{tc}})
}

// responseContent reads a message's content: a string or a list of parts
// (input_text, output_text, text; input_image with an image_url). One text
// part is plain text.
func responseContent(raw json.RawMessage) (Content, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return Content{}, nil
	}
	if raw[0] == '"' {
		var s string
		err := json.Unmarshal(raw, &s)
		return Text(s), err
	}
	var parts []struct {
		Type     string          `json:"type"`
		Text     string          `json:"text"`
		ImageURL json.RawMessage `json:"image_url"`
	}
	if err := json.Unmarshal(raw, &parts); err != nil {
		return Content{}, fmt.Errorf("content must be a string or an array of content parts, got %.60s", raw)
	}
	var out []ContentPart
	for _, p := range parts {
		switch p.Type {
		case "input_text", "output_text", "text":
			out = append(out, TextPart(p.Text))
		case "input_image":
			var url string
			if json.Unmarshal(p.ImageURL, &url) != nil || url == "" {
				return Content{}, errors.New("an input_image part needs an image_url string")
			}
			out = append(out, ImagePart(url))
		default:
			return Content{}, fmt.Errorf("content parts of type %q are not supported", p.Type)
		}
	}
	if len(out) == 1 && out[0].Type == PartText {
		return Text(out[0].Text), nil
	}
	return Content{Parts: out}, nil
}

// ResponsesTools converts the Responses API's function tools ({"type":
// "function", "name", "description", "parameters", "strict"}) to Tools.
func ResponsesTools(tools []json.RawMessage) ([]Tool, error) {
	out := make([]Tool, 0, len(tools))
	for i, raw := range tools {
		var t struct {
			Type string `json:"type"`
		}
		var def FunctionDefinition // its own decoder: decoded apart
		if err := json.Unmarshal(raw, &t); err != nil {
			return nil, fmt.Errorf("tools[%d]: %w", i, err)
		}
		if t.Type != "function" {
			return nil, fmt.Errorf(`tools[%d]: only "function" tools are served, got %q`, i, t.Type)
		}
		if err := json.Unmarshal(raw, &def); err != nil {
			return nil, fmt.Errorf("tools[%d]: %w", i, err)
		}
		out = append(out, Tool{Type: "function", Function: def})
	}
	return out, nil
}

// ChoiceFromResponse returns the trainable Choice of a Responses API
// response as `art serve` sends it (the JSON of the response, or of a
// stream's response.completed event): its "choice" field holds the answer
// as a chat choice with every sampled token id and logprob. A response from
// another server has none, and the error says so.
func ChoiceFromResponse(data []byte) (Choice, error) {
	var r struct {
		Response *json.RawMessage `json:"response"` // a response.completed event
		Choice   *Choice          `json:"choice"`
	}
	if err := json.Unmarshal(data, &r); err != nil {
		return Choice{}, fmt.Errorf("art: decode response: %w", err)
	}
	if r.Choice == nil && r.Response != nil {
		return ChoiceFromResponse(*r.Response)
	}
	if r.Choice == nil {
		return Choice{}, errors.New("art: the response has no \"choice\" with token ids (is it from art serve?)")
	}
	return *r.Choice, nil
}
