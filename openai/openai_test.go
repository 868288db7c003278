package openai

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// golden compares got (indented) with testdata/name.golden.
func golden(t *testing.T, name string, v any) {
	t.Helper()
	got, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	got = append(got, '\n')
	path := filepath.Join("testdata", name+".golden")
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s:\ngot\n%s\nwant\n%s", path, got, want)
	}
}

func ptr[T any](v T) *T { return &v }

func TestGolden_Responses(t *testing.T) {
	lp := func(tok string, id int, p float64, top ...TopLogprob) TokenLogprob {
		return TokenLogprob{Token: tok, TokenID: id, Bytes: Bytes(tok), Logprob: p, TopLogprobs: top}
	}
	cases := []struct {
		name string
		v    any
	}{
		{"completion", ChatCompletion{
			ID: "chatcmpl-1", Object: ObjectChatCompletion, Created: 1700000000, Model: "agent@3",
			Choices: []Choice{{
				Index: 0, Message: Message{Role: "assistant", Content: ptr("Hé")}, FinishReason: FinishStop,
				Logprobs: &Logprobs{Content: []TokenLogprob{
					lp("H", 72, -0.5, TopLogprob{Token: "H", TokenID: 72, Bytes: Bytes("H"), Logprob: -0.5}),
					{Token: "\ufffd", TokenID: 195, Bytes: Bytes{0xc3}, Logprob: -1.25, TopLogprobs: []TopLogprob{}},
					{Token: "\ufffd", TokenID: 169, Bytes: Bytes{0xa9}, Logprob: -0.125, TopLogprobs: []TopLogprob{}},
					lp("<|im_end|>", 258, -2, []TopLogprob{}...),
				}},
				TokenIDs: []int{72, 195, 169, 258},
			}},
			Usage:          &Usage{PromptTokens: 5, CompletionTokens: 4, TotalTokens: 9},
			PromptTokenIDs: []int{257, 117, 115, 101, 114},
		}},
		{"completion_tool_calls", ChatCompletion{
			ID: "chatcmpl-2", Object: ObjectChatCompletion, Created: 1700000000, Model: "agent@0",
			Choices: []Choice{{
				Index:   1,
				Message: Message{Role: "assistant", ToolCalls: []ToolCall{{ID: "call_1", Type: "function", Function: FunctionCall{Name: "get_weather", Arguments: `{"city":"Paris"}`}}}},
				Logprobs: &Logprobs{Content: []TokenLogprob{
					lp("x", 120, -0.1, []TopLogprob{}...),
				}},
				FinishReason: FinishToolCalls,
				TokenIDs:     []int{120},
			}},
			Usage: &Usage{PromptTokens: 1, CompletionTokens: 1, TotalTokens: 2},
		}},
		{"chunk", ChatCompletionChunk{
			ID: "chatcmpl-3", Object: ObjectChatCompletionChunk, Created: 1700000000, Model: "agent@1",
			Choices: []ChunkChoice{{
				Index: 2, Delta: Delta{Role: "assistant", Content: ptr("a")},
				Logprobs: &Logprobs{Content: []TokenLogprob{lp("a", 97, -3, []TopLogprob{}...)}},
				TokenIDs: []int{97},
			}},
		}},
		{"chunk_finish", ChatCompletionChunk{
			ID: "chatcmpl-3", Object: ObjectChatCompletionChunk, Created: 1700000000, Model: "agent@1",
			Choices: []ChunkChoice{{
				Index: 0, FinishReason: ptr(FinishToolCalls),
				Delta: Delta{ToolCalls: []ToolCall{{Index: ptr(0), ID: "call_1", Type: "function", Function: FunctionCall{Name: "f", Arguments: "{}"}}}},
			}},
		}},
		{"chunk_usage", ChatCompletionChunk{
			ID: "chatcmpl-3", Object: ObjectChatCompletionChunk, Created: 1700000000, Model: "agent@1",
			Choices: []ChunkChoice{}, Usage: &Usage{PromptTokens: 3, CompletionTokens: 4, TotalTokens: 7}, PromptTokenIDs: []int{1, 2, 3},
		}},
		{"models", ModelList{Object: ObjectList, Data: []Model{{ID: "agent@0", Object: ObjectModel, Created: 1700000000, OwnedBy: "art", Root: ".art/p/models/agent/checkpoints/0000", Parent: "base", MaxModelLen: 4096}}}},
		{"error", ErrorResponse{Error: ErrorBody{Message: "n must be in [1, 128], got 0", Type: ErrInvalidRequest, Param: ptr("n"), Code: ptr("invalid_value")}}},
		{"error_no_param", ErrorResponse{Error: ErrorBody{Message: "boom", Type: ErrServer}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { golden(t, c.name, c.v) })
	}
}

// Ensure a request decodes every supported field, keeps messages and tools
// byte for byte, and ignores unknown fields.
func TestChatCompletionRequest_Decode(t *testing.T) {
	body, err := os.ReadFile(filepath.Join("testdata", "request.json"))
	if err != nil {
		t.Fatal(err)
	}
	var r ChatCompletionRequest
	if err := json.Unmarshal(body, &r); err != nil {
		t.Fatal(err)
	}
	if r.Model != "agent@2" || *r.N != 3 || *r.Temperature != 0.7 || *r.TopP != 0.9 || *r.TopK != 20 ||
		*r.MaxTokens != 16 || *r.Seed != 42 || !*r.Logprobs || *r.TopLogprobs != 2 || !r.Stream || !r.IncludeUsage() {
		t.Fatalf("decoded %+v", r)
	}
	if got := []string(r.Stop); !reflect.DeepEqual(got, []string{"\n\n", "END"}) {
		t.Errorf("stop %q", got)
	}
	if r.ToolChoice.Mode != ToolChoiceAuto {
		t.Errorf("tool_choice %+v", r.ToolChoice)
	}
	if r.ChatTemplateKwargs["enable_thinking"] != false {
		t.Errorf("chat_template_kwargs %v", r.ChatTemplateKwargs)
	}
	if r.ResponseFormat.Type != "text" {
		t.Errorf("response_format %+v", r.ResponseFormat)
	}
	// Verbatim: the tool's schema keeps its key order and spacing.
	if got := string(r.Tools[0]); !strings.Contains(got, `"properties": {"city": {"type": "string"}, "unit": {"type": "string"}}`) {
		t.Errorf("tool not verbatim: %s", got)
	}
	if len(r.Messages) != 2 || !strings.HasPrefix(string(r.Messages[0]), `{"role": "system"`) {
		t.Errorf("messages not verbatim: %s", r.Messages)
	}
	if p, v := r.MaxTokensParam(); p != "max_tokens" || *v != 16 {
		t.Errorf("MaxTokensParam = %s %d", p, *v)
	}
	r.MaxCompletionTokens = ptr(8)
	if p, v := r.MaxTokensParam(); p != "max_completion_tokens" || *v != 8 {
		t.Errorf("MaxTokensParam = %s %d", p, *v)
	}
}

func TestStop(t *testing.T) {
	cases := []struct {
		in      string
		want    Stop
		wantErr bool
	}{
		{`"x"`, Stop{"x"}, false},
		{`["a","b"]`, Stop{"a", "b"}, false},
		{`null`, nil, false},
		{`[]`, Stop{}, false},
		{`3`, nil, true},
		{`[1]`, nil, true},
	}
	for _, c := range cases {
		var s Stop
		err := json.Unmarshal([]byte(c.in), &s)
		if (err != nil) != c.wantErr || !c.wantErr && !reflect.DeepEqual(s, c.want) {
			t.Errorf("%s: got %q, %v; want %q (error %v)", c.in, s, err, c.want, c.wantErr)
		}
	}
}

func TestToolChoice(t *testing.T) {
	cases := []struct {
		in      string
		want    ToolChoice
		wantErr bool
	}{
		{`"none"`, ToolChoice{Mode: "none"}, false},
		{`"required"`, ToolChoice{Mode: "required"}, false},
		{`{"type":"function","function":{"name":"f"}}`, ToolChoice{Mode: ToolChoiceFunction, Function: "f"}, false},
		{`{"type":"function"}`, ToolChoice{}, true},
		{`7`, ToolChoice{}, true},
	}
	for _, c := range cases {
		var tc ToolChoice
		err := json.Unmarshal([]byte(c.in), &tc)
		if (err != nil) != c.wantErr || !c.wantErr && tc != c.want {
			t.Errorf("%s: got %+v, %v; want %+v (error %v)", c.in, tc, err, c.want, c.wantErr)
			continue
		}
		if c.wantErr {
			continue
		}
		b, err := json.Marshal(tc)
		if err != nil {
			t.Fatal(err)
		}
		var back ToolChoice
		if err := json.Unmarshal(b, &back); err != nil || back != tc {
			t.Errorf("round trip of %+v: %s → %+v, %v", tc, b, back, err)
		}
	}
}

func TestBytes(t *testing.T) {
	b, err := json.Marshal(Bytes{0, 72, 255})
	if err != nil || string(b) != "[0,72,255]" {
		t.Fatalf("marshal: %s, %v", b, err)
	}
	if b, _ := json.Marshal(Bytes(nil)); string(b) != "[]" {
		t.Errorf("nil bytes: %s; want []", b)
	}
	var back Bytes
	if err := json.Unmarshal([]byte("[0,72,255]"), &back); err != nil || !bytes.Equal(back, Bytes{0, 72, 255}) {
		t.Errorf("unmarshal: %v, %v", back, err)
	}
	if err := json.Unmarshal([]byte("[256]"), &back); err == nil {
		t.Error("256 accepted as a byte")
	}
}
