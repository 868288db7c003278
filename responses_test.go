package art

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

// Ensure Responses input items become the chat messages a server renders:
// text parts, function calls merged into the assistant turn before them,
// their outputs as tool messages, references to remembered items, and the
// conversation of a previous response first; and that bad items, unknown
// references and forgotten responses are clear errors.
func TestResponsesConversation(t *testing.T) {
	rc := NewResponsesConversation(2)
	msgs, err := rc.Messages("", json.RawMessage(`[
		{"role":"user","content":[{"type":"input_text","text":"weather?"}]},
		{"type":"message","role":"assistant","content":[{"type":"output_text","text":"let me look"}]},
		{"type":"function_call","call_id":"c1","name":"get_weather","arguments":"{\"city\":\"Paris\"}"},
		{"type":"function_call","call_id":"c2","name":"get_time","arguments":"{}"},
		{"type":"function_call_output","call_id":"c1","output":"sunny"},
		{"type":"reasoning","summary":[]}]`))
	if err != nil {
		t.Fatal(err)
	}
	got, _ := json.Marshal(msgs)
	want := `[{"role":"user","content":"weather?"},{"role":"assistant","content":"let me look","tool_calls":[{"id":"c1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}},{"id":"c2","type":"function","function":{"name":"get_time","arguments":"{}"}}]},{"role":"tool","content":"sunny","tool_call_id":"c1"}]`
	if string(got) != want {
		t.Fatalf("messages\n%s\nwant\n%s", got, want)
	}

	answer := Choice{Message: Message{Role: RoleAssistant, ToolCalls: []ToolCall{{ID: "c3", Function: FunctionCall{Name: "f", Arguments: "{}"}}}}}
	rc.Remember("resp_1", []Message{UserMsg("hi")}, answer, "", []string{"fc_1"})
	msgs, err = rc.Messages("resp_1", json.RawMessage(`"next"`))
	if err != nil || len(msgs) != 3 || msgs[1].ToolCalls[0].ID != "c3" || msgs[2].Content.String() != "next" {
		t.Fatalf("after resp_1: %+v, %v", msgs, err)
	}
	msgs, err = rc.Messages("", json.RawMessage(`[{"role":"user","content":"hi"},{"type":"item_reference","id":"fc_1"}]`))
	if err != nil || len(msgs) != 2 || msgs[1].Role != RoleAssistant || msgs[1].ToolCalls[0].ID != "c3" {
		t.Fatalf("item_reference: %+v, %v", msgs, err)
	}
	rc.Remember("resp_2", nil, answer, "", nil)
	rc.Remember("resp_3", nil, answer, "", nil) // the bound of 2 forgets resp_1 and its items
	for _, c := range []struct {
		prev, input, msg string
	}{
		{"resp_1", `"x"`, `previous response "resp_1": not found`},
		{"", `[{"type":"item_reference","id":"fc_1"}]`, `input[0]: item "fc_1": not found`},
		{"", `[{"role":"robot","content":"x"}]`, `input[0]: a message's role must be`},
		{"", `[{"type":"web_search_call"}]`, `"web_search_call" are not supported`},
		{"", `[{"type":"function_call","name":"f"}]`, "needs a call_id and a name"},
		{"", `[{"role":"user","content":[{"type":"input_file"}]}]`, `"input_file" are not supported`},
		{"", `{"x":1}`, "input must be a string or an array"},
	} {
		_, err := rc.Messages(c.prev, json.RawMessage(c.input))
		if err == nil || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("Messages(%q, %s) = %v; want %q", c.prev, c.input, err, c.msg)
		}
		if strings.Contains(c.msg, "not found") && !errors.Is(err, ErrUnknownResponse) {
			t.Errorf("%v does not wrap ErrUnknownResponse", err)
		}
	}
}

// Ensure ChoiceFromResponse reads the choice of a response and of a
// response.completed event, and says when a response has none.
func TestChoiceFromResponse(t *testing.T) {
	choice := `{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop","logprobs":{"content":[{"token":"hi","token_id":7,"logprob":-0.5,"bytes":[104,105],"top_logprobs":[]}]}}`
	for _, body := range []string{`{"id":"r","choice":` + choice + `}`, `{"type":"response.completed","response":{"choice":` + choice + `}}`} {
		c, err := ChoiceFromResponse([]byte(body))
		if err != nil || c.Message.Content.String() != "hi" || len(c.Logprobs) != 1 || c.Logprobs[0].TokenID != 7 {
			t.Errorf("%s: %+v, %v", body, c, err)
		}
	}
	if _, err := ChoiceFromResponse([]byte(`{"id":"r","output":[]}`)); err == nil || !strings.Contains(err.Error(), "art serve") {
		t.Errorf("no choice: %v", err)
	}
}
