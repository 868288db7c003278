package art

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/openai/openai-go/v3"
)

// Message roles.
const (
	RoleSystem    = "system"
	RoleDeveloper = "developer"
	RoleUser      = "user"
	RoleAssistant = "assistant"
	RoleTool      = "tool"
)

// Message is a chat message in OpenAI's wire shape: context the model was
// given, or an assistant turn that was not sampled by the trained model.
// Messages are context: they are trained only with
// TrainConfig.AllowTrainingWithoutLogprobs (sampled turns are Choices).
//
// In JSON, Content is a string, or an array of content parts, or null for an
// assistant message that only calls tools. Empty Name, ToolCalls and
// ToolCallID are omitted.
type Message struct {
	Role       string     `json:"role"`
	Content    Content    `json:"content"`
	Name       string     `json:"name,omitempty"`
	ToolCalls  []ToolCall `json:"tool_calls,omitempty"`
	ToolCallID string     `json:"tool_call_id,omitempty"`
}

func msg(role, text string) Message { return Message{Role: role, Content: Text(text)} }

// SystemMsg returns a system message.
func SystemMsg(text string) Message { return msg(RoleSystem, text) }

// UserMsg returns a user message.
func UserMsg(text string) Message { return msg(RoleUser, text) }

// AssistantMsg returns an assistant message. It is context, not a trainable
// turn; sampled turns are Choices.
func AssistantMsg(text string) Message { return msg(RoleAssistant, text) }

// ToolMsg returns the result of the tool call with the given id.
func ToolMsg(toolCallID, text string) Message {
	return Message{Role: RoleTool, Content: Text(text), ToolCallID: toolCallID}
}

// MarshalJSON encodes m in OpenAI's shape. Empty content is encoded as null
// for an assistant message with tool calls (as OpenAI returns it) and as ""
// otherwise (as OpenAI requires it).
func (m Message) MarshalJSON() ([]byte, error) {
	w := struct {
		Role       string     `json:"role"`
		Content    *Content   `json:"content"`
		Name       string     `json:"name,omitempty"`
		ToolCalls  []ToolCall `json:"tool_calls,omitempty"`
		ToolCallID string     `json:"tool_call_id,omitempty"`
	}{Role: m.Role, Name: m.Name, ToolCalls: m.ToolCalls, ToolCallID: m.ToolCallID}
	if !m.Content.IsZero() || m.Role != RoleAssistant || len(m.ToolCalls) == 0 {
		w.Content = &m.Content
	}
	return json.Marshal(w)
}

// Content is the content of a message: plain text, or a list of parts
// (text, images, ...). Parts wins when it is non-nil.
type Content struct {
	Text  string
	Parts []ContentPart
}

// Text returns plain-text content.
func Text(s string) Content { return Content{Text: s} }

// IsZero reports whether c holds neither text nor parts.
func (c Content) IsZero() bool { return c.Text == "" && c.Parts == nil }

// String returns the text of c: Text, or the text parts joined.
func (c Content) String() string {
	if c.Parts == nil {
		return c.Text
	}
	var b strings.Builder
	for _, p := range c.Parts {
		if p.Type == PartText {
			b.WriteString(p.Text)
		}
	}
	return b.String()
}

// MarshalJSON encodes c as a JSON string, or as an array when it has parts.
func (c Content) MarshalJSON() ([]byte, error) {
	if c.Parts != nil {
		return json.Marshal(c.Parts)
	}
	return json.Marshal(c.Text)
}

// UnmarshalJSON decodes a string, an array of parts, or null (empty content).
func (c *Content) UnmarshalJSON(data []byte) error {
	*c = Content{}
	switch data = bytes.TrimSpace(data); {
	case bytes.Equal(data, []byte("null")):
		return nil
	case len(data) > 0 && data[0] == '"':
		return json.Unmarshal(data, &c.Text)
	case len(data) > 0 && data[0] == '[':
		c.Parts = []ContentPart{}
		return json.Unmarshal(data, &c.Parts)
	}
	return fmt.Errorf("art: message content must be a string, an array of parts or null; got %.40s", data)
}

// Content part types with fields of their own in ContentPart.
const (
	PartText     = "text"
	PartImageURL = "image_url"
)

// ContentPart is one part of a multi-part message content. Text parts use
// Text, image parts use ImageURL, and any other OpenAI part type ("input_audio",
// "file", ...) is kept verbatim in Raw so that it round-trips unchanged.
type ContentPart struct {
	Type     string
	Text     string
	ImageURL *ImageURL
	Raw      json.RawMessage // the whole part object, for other types
}

// ImageURL is the payload of an image_url content part.
type ImageURL struct {
	URL    string `json:"url"`
	Detail string `json:"detail,omitempty"`
}

// TextPart returns a text content part.
func TextPart(text string) ContentPart { return ContentPart{Type: PartText, Text: text} }

// ImagePart returns an image_url content part; url may be a data: URL.
func ImagePart(url string) ContentPart {
	return ContentPart{Type: PartImageURL, ImageURL: &ImageURL{URL: url}}
}

// MarshalJSON encodes p as an OpenAI content part object.
func (p ContentPart) MarshalJSON() ([]byte, error) {
	switch p.Type {
	case PartText:
		return json.Marshal(struct {
			Type string `json:"type"`
			Text string `json:"text"`
		}{p.Type, p.Text})
	case PartImageURL:
		if p.ImageURL == nil {
			return nil, errors.New("art: image_url content part has no ImageURL")
		}
		return json.Marshal(struct {
			Type     string    `json:"type"`
			ImageURL *ImageURL `json:"image_url"`
		}{p.Type, p.ImageURL})
	}
	if len(p.Raw) == 0 {
		return nil, fmt.Errorf("art: content part of type %q has no Raw JSON", p.Type)
	}
	return p.Raw, nil
}

// UnmarshalJSON decodes an OpenAI content part object.
func (p *ContentPart) UnmarshalJSON(data []byte) error {
	var w struct {
		Type     string    `json:"type"`
		Text     string    `json:"text"`
		ImageURL *ImageURL `json:"image_url"`
	}
	if err := json.Unmarshal(data, &w); err != nil {
		return fmt.Errorf("art: content part: %w", err)
	}
	*p = ContentPart{Type: w.Type}
	switch w.Type {
	case PartText:
		p.Text = w.Text
	case PartImageURL:
		if w.ImageURL == nil {
			return errors.New("art: image_url content part without image_url")
		}
		p.ImageURL = w.ImageURL
	default:
		var buf bytes.Buffer
		if err := json.Compact(&buf, data); err != nil {
			return fmt.Errorf("art: content part: %w", err)
		}
		p.Raw = buf.Bytes()
	}
	return nil
}

// ToolCall is a call of a function tool made by an assistant message.
type ToolCall struct {
	ID       string       `json:"id"`
	Type     string       `json:"type"` // always "function"; empty is encoded as "function"
	Function FunctionCall `json:"function"`
}

// FunctionCall names the function a ToolCall calls and its arguments.
type FunctionCall struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"` // JSON text exactly as the model sampled it
}

// MarshalJSON encodes c, filling in the type "function" when it is empty.
func (c ToolCall) MarshalJSON() ([]byte, error) {
	type toolCall ToolCall
	if c.Type == "" {
		c.Type = "function"
	}
	return json.Marshal(toolCall(c))
}

// Tool is a function the model may call, in OpenAI's tool shape.
type Tool struct {
	Type     string             `json:"type"` // always "function"; empty is encoded as "function"
	Function FunctionDefinition `json:"function"`
}

// FunctionDefinition describes a function tool.
type FunctionDefinition struct {
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
	// Parameters is the JSON Schema of the arguments, kept as raw bytes so
	// that its key order (which chat templates render) is the user's. It is
	// compacted when decoded.
	Parameters json.RawMessage `json:"parameters,omitempty"`
	Strict     *bool           `json:"strict,omitempty"`
}

// UnmarshalJSON decodes d, keeping Parameters' key order and dropping its
// insignificant whitespace.
func (d *FunctionDefinition) UnmarshalJSON(data []byte) error {
	type def FunctionDefinition
	var v def
	if err := json.Unmarshal(data, &v); err != nil {
		return err
	}
	if v.Parameters != nil {
		var buf bytes.Buffer
		if err := json.Compact(&buf, v.Parameters); err != nil {
			return err
		}
		v.Parameters = buf.Bytes()
	}
	*d = FunctionDefinition(v)
	return nil
}

// FunctionTool returns a function tool. parameters is a JSON Schema object,
// or nil.
func FunctionTool(name, description string, parameters json.RawMessage) Tool {
	return Tool{Type: "function", Function: FunctionDefinition{Name: name, Description: description, Parameters: parameters}}
}

// MarshalJSON encodes t, filling in the type "function" when it is empty.
func (t Tool) MarshalJSON() ([]byte, error) {
	type tool Tool
	if t.Type == "" {
		t.Type = "function"
	}
	return json.Marshal(tool(t))
}

// Choice is an assistant turn sampled from the model being trained, as the
// chat completions API returns it. Choices are what trains: Logprobs holds
// one entry per sampled token, with the exact token id.
//
// In JSON a Choice is OpenAI's choice object with our token_id added to each
// logprob entry, and the answering model's id as "model" when known:
//
//	{"index":0,"message":{...},"finish_reason":"stop",
//	 "logprobs":{"content":[{"token":"Hi","token_id":13048,"logprob":-0.1,"bytes":[72,105],"top_logprobs":[]}]}}
type Choice struct {
	Index        int
	Message      Message
	FinishReason string
	Logprobs     []TokenLogprob // nil when the response had no logprobs
	// Model is the model id the response named ("name@step" from an art
	// endpoint; empty when unknown): the trainer compares its logprobs
	// with the sampler's for the turns its starting weights sampled
	// (loss/rollout_logprob_abs_diff). Chat and Recorder fill it in.
	Model string
}

type choiceLogprobs struct {
	Content []TokenLogprob `json:"content"`
}

type choiceJSON struct {
	Index        int             `json:"index"`
	Message      Message         `json:"message"`
	FinishReason string          `json:"finish_reason"`
	Logprobs     *choiceLogprobs `json:"logprobs"`
	// TokenIDs is vLLM's return_token_ids field; it is only read, to fill
	// in logprob entries that lack a token id.
	TokenIDs []int  `json:"token_ids,omitempty"`
	Model    string `json:"model,omitempty"`
}

// MarshalJSON encodes c as an OpenAI choice object.
func (c Choice) MarshalJSON() ([]byte, error) {
	w := choiceJSON{Index: c.Index, Message: c.Message, FinishReason: c.FinishReason, Model: c.Model}
	if c.Logprobs != nil {
		w.Logprobs = &choiceLogprobs{Content: c.Logprobs}
	}
	return json.Marshal(w)
}

// UnmarshalJSON decodes an OpenAI choice object. Unknown fields are ignored.
// When the logprob entries lack token ids but the choice has vLLM's
// "token_ids" with one id per entry, those ids fill them in.
func (c *Choice) UnmarshalJSON(data []byte) error {
	var w choiceJSON
	if err := json.Unmarshal(data, &w); err != nil {
		return err
	}
	*c = Choice{Index: w.Index, Message: w.Message, FinishReason: w.FinishReason, Model: w.Model}
	if w.Logprobs != nil && w.Logprobs.Content != nil {
		c.Logprobs = w.Logprobs.Content
		if len(w.TokenIDs) == len(c.Logprobs) {
			for i := range c.Logprobs {
				if c.Logprobs[i].TokenID < 0 {
					c.Logprobs[i].TokenID = w.TokenIDs[i]
				}
			}
		}
	}
	return nil
}

// ChoiceFromOpenAI converts a choice of an openai-go chat completion, keeping
// every field the server sent (token ids and logprobs included).
func ChoiceFromOpenAI(oc openai.ChatCompletionChoice) (Choice, error) {
	raw := []byte(oc.RawJSON())
	if len(raw) == 0 { // built in Go rather than decoded
		var err error
		if raw, err = json.Marshal(oc); err != nil {
			return Choice{}, fmt.Errorf("art: encode openai choice: %w", err)
		}
	}
	var c Choice
	if err := json.Unmarshal(raw, &c); err != nil {
		return Choice{}, fmt.Errorf("art: decode openai choice: %w", err)
	}
	return c, nil
}

// TokenLogprob is one sampled token of a Choice.
//
// TokenID is the vocabulary id of the token, or -1 when unknown. In JSON it
// is the "token_id" field; when that is absent, a token written as
// "token_id:123" (vLLM's return_tokens_as_token_ids) supplies it, as in ART.
type TokenLogprob struct {
	TokenID     int
	Token       string
	Bytes       []byte // UTF-8 bytes of the token; nil when not given
	Logprob     float64
	TopLogprobs []TopLogprob
}

// TopLogprob is one of the most likely tokens at a position.
type TopLogprob struct {
	TokenID int // -1 when unknown
	Token   string
	Bytes   []byte
	Logprob float64
}

// logprobJSON is the wire form shared by TokenLogprob and TopLogprob.
type logprobJSON struct {
	Token       string        `json:"token"`
	TokenID     *int          `json:"token_id,omitempty"`
	Logprob     float64       `json:"logprob"`
	Bytes       *[]int        `json:"bytes,omitempty"`
	TopLogprobs *[]TopLogprob `json:"top_logprobs,omitempty"`
}

func (w *logprobJSON) set(id int, token string, b []byte, logprob float64) {
	w.Token, w.Logprob = token, logprob
	if id >= 0 {
		w.TokenID = &id
	}
	if b != nil {
		ints := make([]int, len(b))
		for i, x := range b {
			ints[i] = int(x)
		}
		w.Bytes = &ints
	}
}

func (w *logprobJSON) get() (id int, b []byte, err error) {
	id = -1
	switch {
	case w.TokenID != nil:
		id = *w.TokenID
	case strings.HasPrefix(w.Token, "token_id:"):
		if n, err := strconv.Atoi(w.Token[len("token_id:"):]); err == nil && n >= 0 {
			id = n
		}
	}
	if w.Bytes != nil {
		b = make([]byte, len(*w.Bytes))
		for i, x := range *w.Bytes {
			if x < 0 || x > 255 {
				return 0, nil, fmt.Errorf("art: logprob bytes of %q: %d is not a byte", w.Token, x)
			}
			b[i] = byte(x)
		}
	}
	return id, b, nil
}

// MarshalJSON encodes t as an OpenAI logprob entry plus "token_id". Bytes
// are an array of integers, as OpenAI sends them.
func (t TokenLogprob) MarshalJSON() ([]byte, error) {
	var w logprobJSON
	w.set(t.TokenID, t.Token, t.Bytes, t.Logprob)
	if t.TopLogprobs != nil {
		w.TopLogprobs = &t.TopLogprobs
	}
	return json.Marshal(w)
}

// UnmarshalJSON decodes an OpenAI logprob entry.
func (t *TokenLogprob) UnmarshalJSON(data []byte) error {
	var w logprobJSON
	if err := json.Unmarshal(data, &w); err != nil {
		return err
	}
	id, b, err := w.get()
	if err != nil {
		return err
	}
	*t = TokenLogprob{TokenID: id, Token: w.Token, Bytes: b, Logprob: w.Logprob}
	if w.TopLogprobs != nil {
		t.TopLogprobs = *w.TopLogprobs
	}
	return nil
}

// MarshalJSON encodes t as an OpenAI top-logprob entry plus "token_id".
func (t TopLogprob) MarshalJSON() ([]byte, error) {
	var w logprobJSON
	w.set(t.TokenID, t.Token, t.Bytes, t.Logprob)
	return json.Marshal(w)
}

// UnmarshalJSON decodes an OpenAI top-logprob entry.
func (t *TopLogprob) UnmarshalJSON(data []byte) error {
	var w logprobJSON
	if err := json.Unmarshal(data, &w); err != nil {
		return err
	}
	id, b, err := w.get()
	if err != nil {
		return err
	}
	*t = TopLogprob{TokenID: id, Token: w.Token, Bytes: b, Logprob: w.Logprob}
	return nil
}

// MessageOrChoice is one item of a history: exactly one of Message (context)
// and Choice (a sampled, trainable turn) is set.
//
// In JSON it is the message object or the choice object itself; an object
// with a "message" key decodes as a Choice, any other as a Message.
type MessageOrChoice struct {
	Message *Message
	Choice  *Choice
}

// AsMessage returns the item as a chat message: the Message, or the Choice's
// message with role "assistant" filled in if empty.
func (mc MessageOrChoice) AsMessage() Message {
	switch {
	case mc.Message != nil:
		return *mc.Message
	case mc.Choice != nil:
		m := mc.Choice.Message
		if m.Role == "" {
			m.Role = RoleAssistant
		}
		return m
	}
	return Message{}
}

func (mc MessageOrChoice) validate() error {
	if (mc.Message == nil) == (mc.Choice == nil) {
		return errors.New("exactly one of Message and Choice must be set")
	}
	return nil
}

// MarshalJSON encodes the message or the choice.
func (mc MessageOrChoice) MarshalJSON() ([]byte, error) {
	if err := mc.validate(); err != nil {
		return nil, fmt.Errorf("art: history item: %w", err)
	}
	if mc.Choice != nil {
		return json.Marshal(mc.Choice)
	}
	return json.Marshal(mc.Message)
}

// UnmarshalJSON decodes a choice (an object with a "message" key) or a
// message.
func (mc *MessageOrChoice) UnmarshalJSON(data []byte) error {
	var probe struct {
		Message json.RawMessage `json:"message"`
	}
	if err := json.Unmarshal(data, &probe); err != nil {
		return fmt.Errorf("art: history item: %w", err)
	}
	*mc = MessageOrChoice{}
	if probe.Message != nil {
		mc.Choice = new(Choice)
		return json.Unmarshal(data, mc.Choice)
	}
	mc.Message = new(Message)
	return json.Unmarshal(data, mc.Message)
}
