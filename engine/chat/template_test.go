package chat

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

func raw(ss ...string) []json.RawMessage {
	out := make([]json.RawMessage, len(ss))
	for i, s := range ss {
		out[i] = json.RawMessage(s)
	}
	return out
}

func mustTemplate(tb testing.TB, src string) *Template {
	tb.Helper()
	tpl, err := NewTemplate(src)
	if err != nil {
		tb.Fatal(err)
	}
	return tpl
}

// TestConstants checks that the exported templates are the fixture texts the
// golden tests render.
func TestConstants(t *testing.T) {
	for _, tt := range []struct{ file, constant string }{
		{"qwen2_5.jinja", Qwen25Template},
		{"llama3_1.jinja", Llama31Template},
	} {
		want, err := os.ReadFile(filepath.Join("testdata", "templates", tt.file))
		if err != nil {
			t.Fatal(err)
		}
		if tt.constant != string(want) {
			t.Errorf("constant for %s differs from the fixture:\n%s", tt.file, diffSnippet(tt.constant, string(want)))
		}
		if _, err := NewTemplate(tt.constant); err != nil {
			t.Errorf("%s: %v", tt.file, err)
		}
	}
}

func TestRender(t *testing.T) {
	user := `{"role": "user", "content": "hi"}`
	tests := []struct {
		name     string
		template string
		messages []json.RawMessage
		tools    []json.RawMessage
		opts     RenderOptions
		want     string
	}{
		{
			name:     "variables",
			template: `{{ bos_token }}|{{ eos_token }}|{{ add_generation_prompt }}|{{ tools is defined }}|{{ messages | length }}`,
			messages: raw(user),
			opts:     RenderOptions{BOSToken: "<s>", EOSToken: "</s>", AddGenerationPrompt: true},
			want:     "<s>|</s>|True|False|1",
		},
		{
			name:     "empty tools are no tools",
			template: `{{ tools is defined }}`,
			messages: raw(user),
			tools:    []json.RawMessage{},
			want:     "False",
		},
		{
			name:     "kwargs, ordered from raw JSON",
			template: `{{ enable_thinking }} {{ extra | tojson }} {{ plain | tojson }}`,
			messages: raw(user),
			opts: RenderOptions{Kwargs: map[string]any{
				"enable_thinking": false,
				"extra":           json.RawMessage(`{"z": 1, "a": [true, null]}`),
				"plain":           map[string]any{"z": 1, "a": "x"},
			}},
			want: `False {"z": 1, "a": [true, null]} {"a": "x", "z": 1}`,
		},
		{
			name:     "kwargs override special tokens",
			template: `{{ bos_token }}`,
			messages: raw(user),
			opts:     RenderOptions{BOSToken: "<s>", Kwargs: map[string]any{"bos_token": "<bos>"}},
			want:     "<bos>",
		},
		{
			name:     "strftime_now",
			template: `{{ strftime_now("%d %b %Y") }}|{{ strftime_now("%Y-%m-%dT%H:%M:%S %A %B %j %I%p %%") }}`,
			messages: raw(user),
			opts:     RenderOptions{Now: time.Date(2024, 7, 6, 15, 4, 5, 0, time.UTC)},
			want:     "06 Jul 2024|2024-07-06T15:04:05 Saturday July 188 03PM %",
		},
		{
			name:     "null content and tool_calls",
			template: `{{ messages[0].content | tojson }} {{ 'tool_calls' in messages[0] }}`,
			messages: raw(`{"role": "assistant", "content": null, "tool_calls": null}`),
			want:     `"" False`,
		},
		{
			name:     "loop controls and range",
			template: `{% for i in range(1, 100) %}{% if i % 2 %}{% continue %}{% endif %}{% if i > 6 %}{% break %}{% endif %}{{ i }}{% endfor %}`,
			messages: raw(user),
			want:     "246",
		},
		{
			name:     "trailing newline dropped as Jinja does",
			template: "{{ messages[0].content }}\n",
			messages: raw(user),
			want:     "hi",
		},
		{
			name:     "continue final message keeps the template's spacing",
			template: `{% for m in messages %}<{{ m.role }}>{{ m.content }}</{{ m.role }}>{% endfor %}`,
			messages: raw(user, `{"role": "assistant", "content": "The answer is"}`),
			opts:     RenderOptions{ContinueFinalMessage: true},
			want:     "<user>hi</user><assistant>The answer is",
		},
		{
			name:     "continue final message trims what the template trimmed",
			template: `{% for m in messages %}<{{ m.role }}>{{ m.content | trim }}</{{ m.role }}>{% endfor %}`,
			messages: raw(user, `{"role": "assistant", "content": "  The answer is "}`),
			opts:     RenderOptions{ContinueFinalMessage: true},
			want:     "<user>hi</user><assistant>The answer is",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := mustTemplate(t, tt.template).Render(tt.messages, tt.tools, tt.opts)
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("got %q; want %q", got, tt.want)
			}
		})
	}
}

func TestRenderErrors(t *testing.T) {
	user := `{"role": "user", "content": "hi"}`
	tests := []struct {
		name     string
		template string
		messages []json.RawMessage
		tools    []json.RawMessage
		opts     RenderOptions
		wantErr  string // substring
	}{
		{"message not JSON", `x`, raw(`{"role":`), nil, RenderOptions{}, "message 0"},
		{"message not an object", `x`, raw(`["user", "hi"]`), nil, RenderOptions{}, "message 0 is not a non-empty JSON object"},
		{"tool not JSON", `x`, raw(user), raw(`{`), RenderOptions{}, "tool 0"},
		{"unsupported content part", `x`, raw(`{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}`), nil, RenderOptions{}, "not supported"},
		{"both prompt modes", `x`, raw(user), nil, RenderOptions{AddGenerationPrompt: true, ContinueFinalMessage: true}, "mutually exclusive"},
		{"kwargs may not set messages", `x`, raw(user), nil, RenderOptions{Kwargs: map[string]any{"messages": 1}}, `may not set "messages"`},
		{"final message not in output", `x`, raw(user), nil, RenderOptions{ContinueFinalMessage: true}, "does not appear"},
		{"runtime error", `{{ messages[0].nope.deeper }}`, raw(user), nil, RenderOptions{}, "chat: render:"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := mustTemplate(t, tt.template).Render(tt.messages, tt.tools, tt.opts)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("got error %v; want one containing %q", err, tt.wantErr)
			}
		})
	}
}

func TestRenderRaiseException(t *testing.T) {
	tpl := mustTemplate(t, `{% if messages | length > 1 %}{{ raise_exception("only one message, got " ~ (messages | length)) }}{% endif %}ok`)
	_, err := tpl.Render(raw(`{"role":"user","content":"a"}`, `{"role":"user","content":"b"}`), nil, RenderOptions{})
	var te *TemplateError
	if !errors.As(err, &te) {
		t.Fatalf("got %v; want a *TemplateError", err)
	}
	if te.Message != "only one message, got 2" {
		t.Errorf("got message %q; want %q", te.Message, "only one message, got 2")
	}
	// The same template still renders other inputs: nothing leaked between calls.
	got, err := tpl.Render(raw(`{"role":"user","content":"a"}`), nil, RenderOptions{})
	if err != nil || got != "ok" {
		t.Errorf("got %q, %v; want %q, nil", got, err, "ok")
	}
}

func TestNewTemplateError(t *testing.T) {
	src := "{% for m in messages %}" + strings.Repeat("x", 500)
	_, err := NewTemplate(src)
	if err == nil {
		t.Fatal("got no error for an unclosed for; want one")
	}
	if strings.Contains(err.Error(), strings.Repeat("x", 100)) {
		t.Errorf("error repeats the template source: %v", err)
	}
}

// TestRangeDoesNotLeak guards the range replacement: gonja's own range feeds
// a channel from a goroutine that blocks forever when the loop breaks.
func TestRangeDoesNotLeak(t *testing.T) {
	tpl := mustTemplate(t, `{% for i in range(1000) %}{% break %}{% endfor %}`)
	before := runtime.NumGoroutine()
	for range 50 {
		if _, err := tpl.Render(raw(`{"role":"user","content":"a"}`), nil, RenderOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(10 * time.Millisecond)
	if after := runtime.NumGoroutine(); after > before+5 {
		t.Errorf("got %d goroutines after 50 renders; want about %d", after, before)
	}
}

// TestRenderConcurrent renders the golden corpus from many goroutines with
// shared templates (run with -race).
func TestRenderConcurrent(t *testing.T) {
	c := loadCorpus(t)
	type job struct {
		tpl   *Template
		tools []json.RawMessage
		msgs  []json.RawMessage
		opts  RenderOptions
		want  string
	}
	var jobs []job
	for name, spec := range c.Templates {
		src, err := os.ReadFile(filepath.Join("testdata", spec.File))
		if err != nil {
			t.Fatal(err)
		}
		tpl := mustTemplate(t, string(src))
		for _, tc := range c.Cases {
			want, err := os.ReadFile(filepath.Join("testdata", "golden", name, tc.Name+".txt"))
			if err != nil {
				continue // error cases
			}
			opts := RenderOptions{AddGenerationPrompt: tc.AddGenerationPrompt, ContinueFinalMessage: tc.ContinueFinalMessage, Kwargs: map[string]any{}}
			if spec.BOSToken != nil {
				opts.BOSToken = *spec.BOSToken
			}
			if spec.EOSToken != nil {
				opts.EOSToken = *spec.EOSToken
			}
			for k, v := range tc.Kwargs {
				opts.Kwargs[k] = v
			}
			var tools []json.RawMessage
			if tc.Tools != "" {
				tools = c.Tools[tc.Tools]
			}
			jobs = append(jobs, job{tpl, tools, tc.Messages, opts, string(want)})
		}
	}
	var wg sync.WaitGroup
	errs := make(chan string, 8*len(jobs))
	for g := range 8 {
		wg.Go(func() {
			for i := range jobs {
				j := jobs[(i+g*7)%len(jobs)]
				got, err := j.tpl.Render(j.msgs, j.tools, j.opts)
				if err != nil || got != j.want {
					errs <- diffSnippet(got, j.want)
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
}

// BenchmarkRender renders a tool-calling conversation with each official
// template (the server renders every request).
func BenchmarkRender(b *testing.B) {
	c := loadCorpus(b)
	var msgs []json.RawMessage
	for _, tc := range c.Cases {
		if tc.Name == "tool_call_round_trip" {
			msgs = tc.Messages
		}
	}
	for _, name := range []string{"qwen2_5", "qwen3", "llama3_1"} {
		b.Run(name, func(b *testing.B) {
			src, err := os.ReadFile(filepath.Join("testdata", c.Templates[name].File))
			if err != nil {
				b.Fatal(err)
			}
			tpl := mustTemplate(b, string(src))
			opts := RenderOptions{BOSToken: "<|begin_of_text|>"}
			for b.Loop() {
				if _, err := tpl.Render(msgs, c.Tools["two"], opts); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// Ensure a chat template cannot load files or other templates (nor itself,
// which would recurse without end): such tags are refused at compile time.
func TestNewTemplate_NoLoading(t *testing.T) {
	for _, src := range []string{
		`{% include "/etc/passwd" %}`,
		`{%- include "../../../../etc/passwd" %}`,
		`{% import "/etc/passwd" as x %}`,
		`{% from "x" import y %}`,
		`{% extends "/etc/passwd" %}`,
		`{{ messages[0].content }}{% include "/chat_template.jinja" %}`,
	} {
		if _, err := NewTemplate(src); err == nil || !strings.Contains(err.Error(), "cannot load other templates") {
			t.Errorf("NewTemplate(%q) = %v; want a refusal", src, err)
		}
	}
}
