package native

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/artgo/art/engine/chat"
	"github.com/artgo/art/engine/generate"
	"github.com/artgo/art/host"
)

// toolCallFrames are the markers around a call in each tool format, and
// the key its arguments go under (as the chat templates render calls and
// chat.ParseToolCalls reads them).
var toolCallFrames = map[chat.Format]struct{ prefix, suffix, argsKey string }{
	chat.FormatHermes:     {"<tool_call>\n", "\n</tool_call>", "arguments"},
	chat.FormatLlama3JSON: {"", "", "parameters"},
}

// toolChoiceConstraint returns the per-sequence constraint that makes an
// answer exactly one call of one of tools (of tc.Function when named): the
// format's call markers around {"name": ..., "arguments": {...}} whose
// arguments match the tool's parameters. Problems are *host.RequestError.
func (h *Host) toolChoiceConstraint(tools []json.RawMessage, tc *host.ToolChoice) (func() generate.Constraint, error) {
	frame, ok := toolCallFrames[h.folder.ToolFormat]
	if !ok {
		return nil, &host.RequestError{Param: "tool_choice", Msg: "this model's chat template has no tool-call format, so a call cannot be forced; use tool_choice \"auto\""}
	}
	schema, err := toolCallSchema(tools, tc.Function, frame.argsKey)
	if err != nil {
		return nil, err
	}
	g, err := h.grammar(&host.ResponseFormat{Schema: schema})
	if err != nil {
		if re, ok := err.(*host.RequestError); ok {
			return nil, &host.RequestError{Param: "tools", Msg: "tool_choice forces a call whose arguments match the tool's parameters, and they cannot be enforced: " + re.Msg}
		}
		return nil, err
	}
	v, err := h.vocab()
	if err != nil {
		return nil, err
	}
	prefix, suffix := h.tok.Encode(frame.prefix), h.tok.Encode(frame.suffix)
	return func() generate.Constraint { return g.NewFramedMatcher(v, prefix, suffix) }, nil
}

// toolCallSchema is the JSON Schema of one call of the chosen tools: an
// anyOf over {"name": {"const": name}, argsKey: parameters}.
func toolCallSchema(tools []json.RawMessage, name, argsKey string) (json.RawMessage, error) {
	var alts []json.RawMessage
	for _, raw := range tools {
		var t struct {
			Function struct {
				Name       string          `json:"name"`
				Parameters json.RawMessage `json:"parameters"`
			} `json:"function"`
		}
		if err := json.Unmarshal(raw, &t); err != nil {
			return nil, &host.RequestError{Param: "tools", Msg: fmt.Sprintf("a tool is not a function object: %v", err)}
		}
		if name != "" && t.Function.Name != name {
			continue
		}
		params := t.Function.Parameters
		if len(params) == 0 || string(params) == "null" {
			params = json.RawMessage(`{"type":"object","properties":{}}`)
		}
		nameJSON, _ := json.Marshal(t.Function.Name)
		keyJSON, _ := json.Marshal(argsKey)
		alts = append(alts, json.RawMessage(fmt.Sprintf(`{"type":"object","properties":{"name":{"const":%s},%s:%s},"required":["name",%s],"additionalProperties":false}`,
			nameJSON, keyJSON, params, keyJSON)))
	}
	switch len(alts) {
	case 0:
		if name != "" {
			return nil, &host.RequestError{Param: "tool_choice", Msg: fmt.Sprintf("tool_choice names %q, which is not one of the tools", name)}
		}
		return nil, &host.RequestError{Param: "tool_choice", Msg: "tool_choice requires a tool call but the request has no tools"}
	case 1:
		return alts[0], nil
	}
	return json.Marshal(map[string][]json.RawMessage{"anyOf": alts})
}

// oneCallConstraint returns, for parallel_tool_calls false, the
// per-sequence constraint that ends a turn after its first complete tool
// call: any token until the format's closing marker has been sampled, then
// only the end of the turn. nil when the format has no closing marker (a
// Llama 3 JSON call is the whole turn already).
func (h *Host) oneCallConstraint() func() generate.Constraint {
	frame, ok := toolCallFrames[h.folder.ToolFormat]
	closing := strings.TrimSpace(frame.suffix)
	if !ok || closing == "" {
		return nil
	}
	return func() generate.Constraint {
		return &endAfterCall{closing: []string{closing}, tokenBytes: h.tok.TokenBytes, stops: h.folder.StopIDs}
	}
}

// endAfterCall is oneCallConstraint's constraint.
type endAfterCall struct {
	closing    []string // the one marker, as generate.MatchStop takes it
	tokenBytes func(id int) []byte
	stops      []int
	tail       []byte // the end of the text a closing marker could still complete
	called     bool   // the first call is complete: only a stop token may follow
}

func (c *endAfterCall) Allows(id int) bool { return !c.called || slices.Contains(c.stops, id) }

func (c *endAfterCall) FillMask(mask []uint64) {
	if !c.called {
		for i := range mask {
			mask[i] = ^uint64(0)
		}
		return
	}
	clear(mask)
	for _, id := range c.stops {
		if id >= 0 && id/64 < len(mask) {
			mask[id/64] |= 1 << (id % 64)
		}
	}
}

func (c *endAfterCall) Accept(id int) error {
	if !c.Allows(id) {
		return fmt.Errorf("token %d after the turn's one tool call, which parallel_tool_calls false ends", id)
	}
	if c.called {
		return nil
	}
	c.called = generate.MatchStop(&c.tail, c.tokenBytes(id), c.closing) != ""
	return nil
}
