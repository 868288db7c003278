package chat

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzParseToolCalls checks the parser on arbitrary model output: it never
// panics, a text without calls comes back whole as content, and every
// call has a name, an id and arguments that are one compact JSON object.
func FuzzParseToolCalls(f *testing.F) {
	for _, s := range []string{
		"plain text",
		"<think>x</think>\n<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": 1}}\n</tool_call>",
		"<tool_call>{\"name\":\"f\",\"arguments\":\"{\\\"a\\\": [1, 2]}\"}</tool_call><tool_call>{\"name\":\"g\"}</tool_call>",
		"<tool_call>{\"name\":\"f\"",
		"<|python_tag|>{\"name\": \"f\", \"parameters\": {\"x\": null}}; {\"name\": \"g\", \"parameters\": {}}",
		"{\"name\": \"f\", \"arguments\": null}",
		"{\"name\": 3}",
	} {
		f.Add(s, uint8(FormatHermes))
		f.Add(s, uint8(FormatLlama3JSON))
	}
	f.Fuzz(func(t *testing.T, text string, format uint8) {
		fm := Format(format % 3)
		content, calls := ParseToolCalls(text, fm)
		if len(calls) == 0 {
			if content != text {
				t.Fatalf("%v: no calls but content %q != text %q", fm, content, text)
			}
			return
		}
		if fm == FormatNone {
			t.Fatalf("FormatNone parsed calls from %q", text)
		}
		for _, c := range calls {
			if c.Name == "" || !strings.HasPrefix(c.ID, "call_") {
				t.Fatalf("%v: call %+v from %q", fm, c, text)
			}
			var obj map[string]json.RawMessage
			if err := json.Unmarshal([]byte(c.Arguments), &obj); err != nil || obj == nil {
				t.Fatalf("%v: arguments %q are not a JSON object (%v), from %q", fm, c.Arguments, err, text)
			}
		}
		if fm == FormatHermes && strings.Contains(content, hermesOpen) {
			t.Fatalf("content %q still holds a call, from %q", content, text)
		}
	})
}

// FuzzRender renders arbitrary message and tool lists with the real chat
// templates of the supported families: a bad conversation is an error,
// never a panic or a hang, and rendering is deterministic (the trainer
// re-renders what the server rendered).
func FuzzRender(f *testing.F) {
	var tmpls []*Template
	for _, name := range []string{"qwen2_5.jinja", "qwen3.jinja", "llama3_1.jinja", "llama3_1_lenml.jinja"} {
		src, err := os.ReadFile(filepath.Join("testdata", "templates", name))
		if err != nil {
			f.Fatal(err)
		}
		tm, err := NewTemplate(string(src))
		if err != nil {
			f.Fatal(err)
		}
		tmpls = append(tmpls, tm)
	}
	tools := `[{"type":"function","function":{"name":"f","description":"d","parameters":{"type":"object","properties":{"x":{"type":"string"}}}}}]`
	for _, msgs := range []string{
		`[{"role":"user","content":"hi"}]`,
		`[{"role":"system","content":"s"},{"role":"user","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]},{"role":"assistant","content":"<think>r</think>ok"}]`,
		`[{"role":"user","content":"x"},{"role":"assistant","content":null,"tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{\"x\":\"1\"}"}}]},{"role":"tool","tool_call_id":"c","content":"r"}]`,
		`[{"role":"assistant","content":"first"}]`,
		`[{"role":"tool"}]`,
	} {
		for i := range tmpls {
			f.Add(uint8(i), msgs, tools, true)
			f.Add(uint8(i), msgs, "", false)
		}
	}
	f.Fuzz(func(t *testing.T, which uint8, msgs, tools string, addGen bool) {
		var m, tl []json.RawMessage
		if json.Unmarshal([]byte(msgs), &m) != nil {
			return // the server rejects a messages value that is not a list
		}
		if tools != "" && json.Unmarshal([]byte(tools), &tl) != nil {
			return
		}
		tm := tmpls[int(which)%len(tmpls)]
		opts := RenderOptions{AddGenerationPrompt: addGen, EOSToken: "<|im_end|>"}
		out, err := tm.Render(m, tl, opts)
		again, err2 := tm.Render(m, tl, opts)
		if out != again || (err == nil) != (err2 == nil) {
			t.Fatalf("two renderings of %s differ: %q (%v) and %q (%v)", msgs, out, err, again, err2)
		}
	})
}
