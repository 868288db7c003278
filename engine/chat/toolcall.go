package chat

import (
	"bytes"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"unicode"
)

// ToolCall is one function call parsed from generated text, in the shape of
// an OpenAI tool call of type "function".
type ToolCall struct {
	// ID is "call_" followed by 26 random characters (crypto/rand, base 32),
	// unique enough for a conversation; it is not derived from the text, so
	// two identical calls in one message still get distinct IDs.
	ID string
	// Name is the function name.
	Name string
	// Arguments is the arguments object as compact JSON text, keys in the
	// order the model generated them ("{}" when the model gave none).
	Arguments string
}

// Format is a model family's way of writing tool calls in its output.
type Format int

const (
	// FormatNone parses nothing: all generated text is content.
	FormatNone Format = iota
	// FormatHermes is <tool_call>\n{"name": ..., "arguments": {...}}\n</tool_call>,
	// one block per call (Qwen2.5, Qwen3, Hermes; vLLM's "hermes" parser).
	FormatHermes
	// FormatLlama3JSON is a bare JSON object {"name": ..., "parameters": {...}},
	// optionally after <|python_tag|>, several separated by ";" (Llama 3.x;
	// vLLM's "llama3_json" parser).
	FormatLlama3JSON
)

var formatNames = map[Format]string{
	FormatNone:       "none",
	FormatHermes:     "hermes",
	FormatLlama3JSON: "llama3_json",
}

// String returns the format's name as vLLM's --tool-call-parser spells it.
func (f Format) String() string {
	if s, ok := formatNames[f]; ok {
		return s
	}
	return fmt.Sprintf("Format(%d)", int(f))
}

// ParseFormat returns the Format named s ("none", "hermes", "llama3_json").
func ParseFormat(s string) (Format, error) {
	for f, name := range formatNames {
		if name == s {
			return f, nil
		}
	}
	return FormatNone, fmt.Errorf("chat: unknown tool-call format %q (want none, hermes or llama3_json)", s)
}

// DetectFormat guesses a model's tool-call format from its chat template:
// Hermes when the template mentions <tool_call>, Llama 3 JSON for templates
// with Llama 3 header tokens or <|python_tag|>, and Hermes otherwise (the
// default parser of ART's vLLM setup).
func DetectFormat(templateSource string) Format {
	switch {
	case strings.Contains(templateSource, "<tool_call>"):
		return FormatHermes
	case strings.Contains(templateSource, "<|python_tag|>"),
		strings.Contains(templateSource, "<|start_header_id|>"):
		return FormatLlama3JSON
	}
	return FormatHermes
}

// ParseToolCalls splits generated text into content and tool calls.
//
// Malformed output never loses the sample and never half-parses: if any
// call in the text is malformed (invalid JSON, no name, arguments that are
// not an object, an unclosed <tool_call>, text that is neither a call nor a
// separator in Llama 3 output), the whole text is returned as content with
// no calls, as vLLM's parsers do.
//
// Hermes: content is the text outside the <tool_call> blocks (normally what
// precedes the first one, e.g. a <think> block) with surrounding whitespace
// trimmed. Llama 3 JSON: a text that is entirely calls has empty content;
// anything else is content.
func ParseToolCalls(text string, format Format) (content string, calls []ToolCall) {
	var err error
	switch format {
	case FormatHermes:
		content, calls, err = parseHermes(text)
	case FormatLlama3JSON:
		content, calls, err = parseLlama3JSON(text)
	default:
		return text, nil
	}
	if err != nil || len(calls) == 0 {
		return text, nil
	}
	return content, calls
}

const (
	hermesOpen  = "<tool_call>"
	hermesClose = "</tool_call>"
	pythonTag   = "<|python_tag|>"
)

func parseHermes(text string) (string, []ToolCall, error) {
	var outside strings.Builder
	var calls []ToolCall
	rest := text
	for {
		i := strings.Index(rest, hermesOpen)
		if i < 0 {
			outside.WriteString(rest)
			break
		}
		outside.WriteString(rest[:i])
		rest = rest[i+len(hermesOpen):]
		j := strings.Index(rest, hermesClose)
		if j < 0 {
			return "", nil, errors.New("unclosed <tool_call>")
		}
		call, err := parseCallObject([]byte(rest[:j]), "arguments")
		if err != nil {
			return "", nil, err
		}
		calls = append(calls, call)
		rest = rest[j+len(hermesClose):]
	}
	return strings.TrimFunc(outside.String(), unicode.IsSpace), calls, nil
}

func parseLlama3JSON(text string) (string, []ToolCall, error) {
	rest := strings.TrimSpace(text)
	if after, ok := strings.CutPrefix(rest, pythonTag); ok {
		rest = strings.TrimSpace(after)
	}
	if !strings.HasPrefix(rest, "{") {
		return "", nil, errors.New("not a JSON tool call")
	}
	var calls []ToolCall
	for rest != "" {
		dec := json.NewDecoder(strings.NewReader(rest))
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return "", nil, err
		}
		call, err := parseCallObject(raw, "parameters", "arguments")
		if err != nil {
			return "", nil, err
		}
		calls = append(calls, call)
		rest = strings.TrimSpace(rest[dec.InputOffset():])
		if after, ok := strings.CutPrefix(rest, ";"); ok {
			rest = strings.TrimSpace(after)
		}
	}
	return "", calls, nil
}

// parseCallObject parses {"name": ..., <argument key>: {...}}; the first
// argument key present wins.
func parseCallObject(data []byte, argKeys ...string) (ToolCall, error) {
	var obj map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&obj); err != nil {
		return ToolCall{}, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return ToolCall{}, errors.New("text after the tool-call object")
	}
	var name string
	if err := json.Unmarshal(obj["name"], &name); err != nil || name == "" {
		return ToolCall{}, errors.New("tool call without a name")
	}
	args := json.RawMessage("{}")
	for _, k := range argKeys {
		if a, ok := obj[k]; ok {
			args = a
			break
		}
	}
	compact, err := compactArguments(args)
	if err != nil {
		return ToolCall{}, err
	}
	return ToolCall{ID: newCallID(), Name: name, Arguments: compact}, nil
}

// compactArguments returns args as compact JSON object text. null becomes
// {}; a JSON string holding an object (some models double-encode) is
// unwrapped.
func compactArguments(args json.RawMessage) (string, error) {
	args = bytes.TrimSpace(args)
	switch {
	case bytes.Equal(args, []byte("null")):
		return "{}", nil
	case len(args) > 0 && args[0] == '"':
		var s string
		if err := json.Unmarshal(args, &s); err != nil {
			return "", err
		}
		args = bytes.TrimSpace([]byte(s))
	}
	if len(args) == 0 || args[0] != '{' {
		return "", errors.New("tool-call arguments are not a JSON object")
	}
	var b bytes.Buffer
	if err := json.Compact(&b, args); err != nil {
		return "", err
	}
	return b.String(), nil
}

func newCallID() string {
	return "call_" + rand.Text()
}
