package art

import (
	"bytes"
	"encoding/json"
	"flag"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

func ptr[T any](v T) *T { return &v }

// goldenCases are Go values whose JSON is pinned in testdata/<name>.golden.
// Each must survive Go → JSON → Go unchanged, so collections that decode as
// empty (rather than nil) are built empty.
func goldenCases() []struct {
	name  string
	value any
} {
	toolCallTurn := Message{
		Role: RoleAssistant,
		ToolCalls: []ToolCall{{
			ID:       "call_1",
			Type:     "function",
			Function: FunctionCall{Name: "move", Arguments: `{"row": 1, "col":2}`},
		}},
	}
	choice := Choice{
		Index:        0,
		Message:      Message{Role: RoleAssistant, Content: Text("Bonjour 👋")},
		FinishReason: "stop",
		Logprobs: []TokenLogprob{
			{TokenID: 81581, Token: "Bon", Bytes: []byte("Bon"), Logprob: -0.25, TopLogprobs: []TopLogprob{
				{TokenID: 81581, Token: "Bon", Bytes: []byte("Bon"), Logprob: -0.25},
				{TokenID: 9707, Token: "Hello", Bytes: []byte("Hello"), Logprob: -1.5},
			}},
			{TokenID: 29262, Token: "jour", Bytes: []byte("jour"), Logprob: -0.001, TopLogprobs: []TopLogprob{}},
			// The emoji is split over two tokens: neither is valid UTF-8
			// alone, so Bytes carries the truth.
			{TokenID: 61804, Token: " \ufffd", Bytes: []byte{0x20, 0xf0, 0x9f}, Logprob: -2},
			{TokenID: 233, Token: "\ufffd", Bytes: []byte{0x91, 0x8b}, Logprob: -0.5},
		},
	}
	toolChoice := Choice{
		Index:        1,
		Message:      toolCallTurn,
		FinishReason: "tool_calls",
		Logprobs:     []TokenLogprob{{TokenID: 151657, Token: "<tool_call>", Logprob: 0}},
	}
	tool := Tool{Type: "function", Function: FunctionDefinition{
		Name:        "move",
		Description: "Place a mark on the board.",
		// Key order deliberately not sorted: it must survive.
		Parameters: json.RawMessage(`{"type":"object","properties":{"row":{"type":"integer"},"col":{"type":"integer"}},"required":["row","col"]}`),
		Strict:     ptr(true),
	}}
	traj := Trajectory{
		MessagesAndChoices: []MessageOrChoice{
			{Message: ptr(SystemMsg("You play tic-tac-toe as X."))},
			{Message: ptr(UserMsg("Your move."))},
			{Choice: &toolChoice},
			{Message: ptr(ToolMsg("call_1", "ok"))},
			{Choice: &choice},
		},
		Tools: []Tool{tool},
		AdditionalHistories: []History{{
			MessagesAndChoices: []MessageOrChoice{{Message: ptr(UserMsg("sub-agent task"))}, {Choice: &choice}},
		}},
		Reward:               0.5,
		InitialPolicyVersion: ptr(3),
		FinalPolicyVersion:   ptr(4),
		Metrics:              map[string]float64{"win": 1, "num_moves": 5, "duration": 1.25},
		Metadata:             map[string]any{"scenario_id": "s-7", "difficulty": 3.0, "hard": true, "note": nil},
		Logs:                 []string{"started", "won"},
	}
	return []struct {
		name  string
		value any
	}{
		{"message_text", UserMsg("Hello")},
		{"message_unicode", msg(RoleUser, "héllo wörld — 日本語 🎉 <b>&amp;</b> \"quoted\"\n\ttab \u2028 end")},
		{"message_named", Message{Role: RoleUser, Content: Text("hi"), Name: "alice"}},
		{"message_parts", Message{Role: RoleUser, Content: Content{Parts: []ContentPart{
			TextPart("What is on this board?"),
			{Type: PartImageURL, ImageURL: &ImageURL{URL: "data:image/png;base64,iVBORw0KGgo=", Detail: "low"}},
			{Type: "input_audio", Raw: json.RawMessage(`{"type":"input_audio","input_audio":{"data":"UklGRg==","format":"wav"}}`)},
		}}}},
		{"message_empty_parts", Message{Role: RoleUser, Content: Content{Parts: []ContentPart{}}}},
		{"message_tool_calls", toolCallTurn},
		{"message_tool_result", ToolMsg("call_1", `{"status": "ok"}`)},
		{"message_empty_assistant", AssistantMsg("")},
		{"choice_logprobs", choice},
		{"choice_tool_calls", toolChoice},
		{"choice_no_logprobs", Choice{Message: AssistantMsg("hi"), FinishReason: "length"}},
		{"tool", tool},
		{"trajectory", traj},
		{"group", TrajectoryGroup{
			Trajectories: []Trajectory{traj},
			Exceptions: []Exception{
				{Type: "*errors.errorString", Message: "judge timed out"},
				{Type: "panic", Message: "panic: index out of range", Stack: "goroutine 7 [running]:\nmain.rollout()\n"},
			},
			Metadata: map[string]any{"scenario_id": "s-7"},
			Metrics:  map[string]float64{"judge_cost": 0.002},
			Logs:     []string{"scored by RULER"},
		}},
	}
}

// Ensure every value encodes to its golden JSON, and the golden JSON decodes
// back to the value and re-encodes to the same bytes.
func TestJSON_Golden(t *testing.T) {
	for _, tc := range goldenCases() {
		t.Run(tc.name, func(t *testing.T) {
			got, err := json.MarshalIndent(tc.value, "", "  ")
			if err != nil {
				t.Fatalf("marshal: %v", err)
			}
			got = append(got, '\n')
			path := filepath.Join("testdata", tc.name+".golden")
			if *update {
				if err := os.WriteFile(path, got, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run go test -update to create it)", err)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("JSON of %s:\n%s\nwant (%s):\n%s", tc.name, got, path, want)
			}

			back := reflect.New(reflect.TypeOf(tc.value))
			if err := json.Unmarshal(want, back.Interface()); err != nil {
				t.Fatalf("unmarshal golden: %v", err)
			}
			if !reflect.DeepEqual(back.Elem().Interface(), tc.value) {
				t.Fatalf("decoded golden:\n%#v\nwant:\n%#v", back.Elem().Interface(), tc.value)
			}
			again, err := json.MarshalIndent(back.Interface(), "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(append(again, '\n'), want) {
				t.Fatalf("re-encoded golden differs:\n%s", again)
			}
		})
	}
}

// Ensure zero-valued collections encode the way ART writes its defaults.
func TestJSON_Defaults(t *testing.T) {
	tests := []struct {
		name  string
		value any
		want  string
	}{
		{"trajectory", Trajectory{}, `{"messages_and_choices":[],"tools":null,"additional_histories":[],"reward":0,"initial_policy_version":null,"final_policy_version":null,"metrics":{},"metadata":{},"logs":[]}`},
		{"group", TrajectoryGroup{}, `{"trajectories":[],"exceptions":[],"metadata":{},"metrics":{},"logs":[]}`},
		{"history", History{}, `{"messages_and_choices":[],"tools":null}`},
		{"tool without type", Tool{Function: FunctionDefinition{Name: "f"}}, `{"type":"function","function":{"name":"f"}}`},
		{"tool call without type", ToolCall{ID: "c", Function: FunctionCall{Name: "f", Arguments: "{}"}}, `{"id":"c","type":"function","function":{"name":"f","arguments":"{}"}}`},
		{"unknown token id", TokenLogprob{TokenID: -1, Token: "a", Logprob: -1}, `{"token":"a","logprob":-1}`},
		{"content alone", Text(""), `""`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := json.Marshal(tt.value)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tt.want {
				t.Fatalf("got %s; want %s", got, tt.want)
			}
		})
	}
}

// Ensure JSON as OpenAI-compatible servers send it decodes as expected.
func TestJSON_DecodeWire(t *testing.T) {
	// A choice from vLLM with return_tokens_as_token_ids and OpenAI's extra
	// fields (refusal, annotations) that we do not keep.
	const vllmChoice = `{
	  "index": 0,
	  "message": {"role": "assistant", "content": null, "refusal": null, "annotations": [],
	    "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
	  "finish_reason": "tool_calls",
	  "logprobs": {"content": [
	      {"token": "token_id:151657", "logprob": -0.01, "bytes": [60], "top_logprobs": []},
	      {"token": "x", "token_id": 87, "logprob": -0.5, "bytes": null}
	    ], "refusal": null}
	}`
	var mc MessageOrChoice
	if err := json.Unmarshal([]byte(vllmChoice), &mc); err != nil {
		t.Fatal(err)
	}
	if mc.Choice == nil || mc.Message != nil {
		t.Fatalf("decoded %+v; want a Choice", mc)
	}
	c := mc.Choice
	if got := []int{c.Logprobs[0].TokenID, c.Logprobs[1].TokenID}; !reflect.DeepEqual(got, []int{151657, 87}) {
		t.Fatalf("token ids %v; want [151657 87]", got)
	}
	if !c.Message.Content.IsZero() || len(c.Message.ToolCalls) != 1 || c.Message.ToolCalls[0].Function.Name != "f" {
		t.Fatalf("message %+v; want empty content and one tool call to f", c.Message)
	}
	if c.Logprobs[1].Bytes != nil || !bytes.Equal(c.Logprobs[0].Bytes, []byte("<")) {
		t.Fatalf("bytes %v, %v; want [60] and nil", c.Logprobs[0].Bytes, c.Logprobs[1].Bytes)
	}
	out, _ := json.Marshal(c)
	if !strings.Contains(string(out), `"content":null`) {
		t.Fatalf("re-encoded tool-call message lost its null content: %s", out)
	}

	tests := []struct {
		name, in string
		want     Message
	}{
		{"null content", `{"role":"user","content":null}`, Message{Role: RoleUser}},
		{"missing content", `{"role":"assistant"}`, Message{Role: RoleAssistant}},
		{"unknown fields", `{"role":"assistant","content":"a","reasoning_content":"hmm","refusal":null}`, AssistantMsg("a")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var mc MessageOrChoice
			if err := json.Unmarshal([]byte(tt.in), &mc); err != nil {
				t.Fatal(err)
			}
			if mc.Message == nil || !reflect.DeepEqual(*mc.Message, tt.want) {
				t.Fatalf("decoded %+v; want message %+v", mc, tt.want)
			}
		})
	}
}

func TestJSON_Errors(t *testing.T) {
	decode := []struct {
		name, in, target, wantErr string
	}{
		{"content number", `{"role":"user","content":42}`, "message", "content must be"},
		{"image part without url", `{"role":"user","content":[{"type":"image_url"}]}`, "message", "without image_url"},
		{"byte out of range", `{"token":"a","logprob":0,"bytes":[300]}`, "logprob", "not a byte"},
		{"non-scalar metadata", `{"metadata":{"nested":{"a":1}}}`, "trajectory", `metadata["nested"] is a map[string]interface {}`},
		{"group non-scalar metadata", `{"metadata":{"l":[1]}}`, "group", `metadata["l"]`},
	}
	for _, tt := range decode {
		t.Run(tt.name, func(t *testing.T) {
			var target any
			switch tt.target {
			case "message":
				target = new(Message)
			case "logprob":
				target = new(TokenLogprob)
			case "trajectory":
				target = new(Trajectory)
			case "group":
				target = new(TrajectoryGroup)
			}
			err := json.Unmarshal([]byte(tt.in), target)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("got %v; want an error containing %q", err, tt.wantErr)
			}
		})
	}

	encode := []struct {
		name    string
		value   any
		wantErr string
	}{
		{"NaN reward", Trajectory{Reward: math.NaN()}, "reward is NaN"},
		{"Inf metric", Trajectory{Metrics: map[string]float64{"loss": math.Inf(1)}}, `metrics["loss"] is +Inf`},
		{"slice metadata", Trajectory{Metadata: map[string]any{"tags": []string{"a"}}}, `metadata["tags"] is a []string`},
		{"NaN metadata", Trajectory{Metadata: map[string]any{"x": math.NaN()}}, `metadata["x"] is NaN`},
		{"empty item", Trajectory{MessagesAndChoices: []MessageOrChoice{{}}}, "messages_and_choices[0]: exactly one"},
		{"both set", MessageOrChoice{Message: &Message{}, Choice: &Choice{}}, "exactly one"},
		{"Inf logprob", Trajectory{MessagesAndChoices: []MessageOrChoice{{Choice: &Choice{Logprobs: []TokenLogprob{{Logprob: 0}, {Logprob: math.Inf(-1)}}}}}}, "messages_and_choices[0]: logprobs[1] is -Inf"},
		{"NaN top logprob", Trajectory{MessagesAndChoices: []MessageOrChoice{{Choice: &Choice{Logprobs: []TokenLogprob{{TopLogprobs: []TopLogprob{{Logprob: math.NaN()}}}}}}}}, "logprobs[0].top_logprobs[0] is NaN"},
		{"bad additional history", Trajectory{AdditionalHistories: []History{{MessagesAndChoices: []MessageOrChoice{{}}}}}, "additional_histories[0]"},
		{"group metric", TrajectoryGroup{Metrics: map[string]float64{"m": math.NaN()}}, `group metrics["m"]`},
		{"trajectory in group", TrajectoryGroup{Trajectories: []Trajectory{{Reward: math.Inf(-1)}}}, "reward is -Inf"},
		{"part without raw", ContentPart{Type: "file"}, `type "file" has no Raw`},
		{"image part without url", ContentPart{Type: PartImageURL}, "no ImageURL"},
	}
	for _, tt := range encode {
		t.Run(tt.name, func(t *testing.T) {
			_, err := json.Marshal(tt.value)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("got %v; want an error containing %q", err, tt.wantErr)
			}
		})
	}
}
