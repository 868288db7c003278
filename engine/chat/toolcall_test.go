package chat

import (
	"strings"
	"testing"
)

type wantCall struct{ name, args string }

func TestParseToolCalls(t *testing.T) {
	tests := []struct {
		name        string
		format      Format
		text        string
		wantContent string
		wantCalls   []wantCall
	}{
		{
			name:        "hermes single call",
			format:      FormatHermes,
			text:        "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"unit\": \"celsius\", \"city\": \"Paris\"}}\n</tool_call>",
			wantContent: "",
			wantCalls:   []wantCall{{"get_weather", `{"unit":"celsius","city":"Paris"}`}},
		},
		{
			name:        "hermes content before and several calls",
			format:      FormatHermes,
			text:        "Let me check both.\n<tool_call>\n{\"name\": \"a\", \"arguments\": {\"z\": [1, {\"y\": 2, \"x\": \"é 😀\"}]}}\n</tool_call>\n<tool_call>\n{\"name\": \"b\", \"arguments\": {}}\n</tool_call>",
			wantContent: "Let me check both.",
			wantCalls:   []wantCall{{"a", `{"z":[1,{"y":2,"x":"é 😀"}]}`}, {"b", `{}`}},
		},
		{
			name:        "hermes keeps a think block as content",
			format:      FormatHermes,
			text:        "<think>\nI need the weather.\n</think>\n\n<tool_call>\n{\"name\": \"w\", \"arguments\": {\"c\": 1}}\n</tool_call>",
			wantContent: "<think>\nI need the weather.\n</think>",
			wantCalls:   []wantCall{{"w", `{"c":1}`}},
		},
		{
			name:      "hermes missing arguments and double-encoded arguments",
			format:    FormatHermes,
			text:      "<tool_call>{\"name\": \"now\"}</tool_call><tool_call>{\"name\": \"s\", \"arguments\": \"{\\\"q\\\": 1}\"}</tool_call>",
			wantCalls: []wantCall{{"now", `{}`}, {"s", `{"q":1}`}},
		},
		{
			name:        "hermes no call",
			format:      FormatHermes,
			text:        "Just an answer.",
			wantContent: "Just an answer.",
		},
		{
			name:        "hermes bad json stays content",
			format:      FormatHermes,
			text:        "<tool_call>\n{\"name\": \"a\", \"arguments\": {\"x\": }\n</tool_call>",
			wantContent: "<tool_call>\n{\"name\": \"a\", \"arguments\": {\"x\": }\n</tool_call>",
		},
		{
			name:        "hermes unclosed tag stays content, well-formed calls included",
			format:      FormatHermes,
			text:        "<tool_call>\n{\"name\": \"a\", \"arguments\": {}}\n</tool_call>\n<tool_call>\n{\"name\": \"b\", \"argu",
			wantContent: "<tool_call>\n{\"name\": \"a\", \"arguments\": {}}\n</tool_call>\n<tool_call>\n{\"name\": \"b\", \"argu",
		},
		{
			name:        "hermes no name stays content",
			format:      FormatHermes,
			text:        "<tool_call>{\"arguments\": {}}</tool_call>",
			wantContent: "<tool_call>{\"arguments\": {}}</tool_call>",
		},
		{
			name:        "hermes arguments not an object stay content",
			format:      FormatHermes,
			text:        "<tool_call>{\"name\": \"a\", \"arguments\": [1]}</tool_call>",
			wantContent: "<tool_call>{\"name\": \"a\", \"arguments\": [1]}</tool_call>",
		},
		{
			name:        "hermes two objects in one block stay content",
			format:      FormatHermes,
			text:        "<tool_call>{\"name\": \"a\"} {\"name\": \"b\"}</tool_call>",
			wantContent: "<tool_call>{\"name\": \"a\"} {\"name\": \"b\"}</tool_call>",
		},
		{
			name:      "llama3 json",
			format:    FormatLlama3JSON,
			text:      "{\"name\": \"get_weather\", \"parameters\": {\"unit\": \"celsius\", \"city\": \"Paris\"}}",
			wantCalls: []wantCall{{"get_weather", `{"unit":"celsius","city":"Paris"}`}},
		},
		{
			name:      "llama3 python tag and several calls",
			format:    FormatLlama3JSON,
			text:      "<|python_tag|>{\"name\": \"a\", \"parameters\": {\"b\": 1}}; {\"name\": \"c\", \"arguments\": {\"d\": null}}\n",
			wantCalls: []wantCall{{"a", `{"b":1}`}, {"c", `{"d":null}`}},
		},
		{
			name:        "llama3 plain answer",
			format:      FormatLlama3JSON,
			text:        "The weather is fine.",
			wantContent: "The weather is fine.",
		},
		{
			name:        "llama3 trailing text stays content",
			format:      FormatLlama3JSON,
			text:        "{\"name\": \"a\", \"parameters\": {}} and then some",
			wantContent: "{\"name\": \"a\", \"parameters\": {}} and then some",
		},
		{
			name:        "llama3 truncated json stays content",
			format:      FormatLlama3JSON,
			text:        "{\"name\": \"a\", \"parameters\": {\"b\"",
			wantContent: "{\"name\": \"a\", \"parameters\": {\"b\"",
		},
		{
			name:        "llama3 json without name stays content",
			format:      FormatLlama3JSON,
			text:        "{\"answer\": 42}",
			wantContent: "{\"answer\": 42}",
		},
		{
			name:        "format none",
			format:      FormatNone,
			text:        "<tool_call>{\"name\": \"a\"}</tool_call>",
			wantContent: "<tool_call>{\"name\": \"a\"}</tool_call>",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			content, calls := ParseToolCalls(tt.text, tt.format)
			if content != tt.wantContent {
				t.Errorf("got content %q; want %q", content, tt.wantContent)
			}
			if len(calls) != len(tt.wantCalls) {
				t.Fatalf("got %d calls %+v; want %d", len(calls), calls, len(tt.wantCalls))
			}
			seen := map[string]bool{}
			for i, c := range calls {
				if c.Name != tt.wantCalls[i].name || c.Arguments != tt.wantCalls[i].args {
					t.Errorf("call %d: got %s(%s); want %s(%s)", i, c.Name, c.Arguments, tt.wantCalls[i].name, tt.wantCalls[i].args)
				}
				if !strings.HasPrefix(c.ID, "call_") || len(c.ID) != len("call_")+26 || seen[c.ID] {
					t.Errorf("call %d: got id %q; want a fresh call_ + 26 characters", i, c.ID)
				}
				seen[c.ID] = true
			}
		})
	}
}

// TestParseToolCallsRoundTrip parses what the Qwen2.5 template renders for an
// assistant tool call, i.e. what a Qwen model is trained to generate.
func TestParseToolCallsRoundTrip(t *testing.T) {
	tpl := mustTemplate(t, Qwen25Template)
	out, err := tpl.Render(raw(
		`{"role": "user", "content": "Weather?"}`,
		`{"role": "assistant", "content": "Checking.", "tool_calls": [{"type": "function", "function": {"name": "get_weather", "arguments": "{\"unit\":\"celsius\",\"city\":\"Paris\"}"}}]}`,
	), nil, RenderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	start := strings.LastIndex(out, "<|im_start|>assistant\n") + len("<|im_start|>assistant\n")
	generated := strings.TrimSuffix(out[start:], "<|im_end|>\n")
	content, calls := ParseToolCalls(generated, DetectFormat(Qwen25Template))
	if content != "Checking." || len(calls) != 1 || calls[0].Name != "get_weather" || calls[0].Arguments != `{"unit":"celsius","city":"Paris"}` {
		t.Errorf("got %q %+v; want Checking. and get_weather({\"unit\":\"celsius\",\"city\":\"Paris\"})", content, calls)
	}
}

func TestDetectFormat(t *testing.T) {
	tests := []struct {
		name, src string
		want      Format
	}{
		{"qwen2.5", Qwen25Template, FormatHermes},
		{"llama3.1", Llama31Template, FormatLlama3JSON},
		{"llama3 without tools", "{{ '<|start_header_id|>' + message['role'] + '<|end_header_id|>' }}", FormatLlama3JSON},
		{"unknown", "{{ messages }}", FormatHermes},
	}
	for _, tt := range tests {
		if got := DetectFormat(tt.src); got != tt.want {
			t.Errorf("%s: got %v; want %v", tt.name, got, tt.want)
		}
	}
}

func TestParseFormat(t *testing.T) {
	for _, f := range []Format{FormatNone, FormatHermes, FormatLlama3JSON} {
		got, err := ParseFormat(f.String())
		if err != nil || got != f {
			t.Errorf("ParseFormat(%q) = %v, %v; want %v", f.String(), got, err, f)
		}
	}
	if _, err := ParseFormat("mistral"); err == nil {
		t.Error("ParseFormat(mistral): got no error; want one")
	}
}
