package server

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/artgo/art/openai"
)

// do sends a request to the test server and returns the status and body.
func do(t *testing.T, method, url, key, body string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, b
}

// chatBody returns a valid chat request with extra fields merged in.
func chatBody(extra string) string {
	b := `{"model":"agent","messages":[{"role":"user","content":"hi"}],"max_tokens":3`
	if extra != "" {
		b += "," + extra
	}
	return b + "}"
}

func tool(fn string) string { return `"tools":[{"type":"function","function":` + fn + `}]` }

// Ensure each bad request gets a 4xx answer in OpenAI's error shape naming
// the problem, and that the server keeps serving after every one.
func TestBadRequests(t *testing.T) {
	_, ts := newTestServer(t, Config{APIKey: testKey, MaxBodyBytes: 64 << 10})
	chat := ts.URL + "/v1/chat/completions"
	cases := []struct {
		name         string
		method, path string
		key, body    string
		status       int
		typ, param   string
		msg          string
	}{
		{"MalformedJSON", "POST", chat, testKey, `{"model": "agent", "messages": [`, 400, "invalid_request_error", "", "not valid JSON"},
		{"TrailingGarbage", "POST", chat, testKey, chatBody("") + "x", 400, "invalid_request_error", "", "not valid JSON"},
		{"EmptyBody", "POST", chat, testKey, "", 400, "invalid_request_error", "", "body is empty"},
		{"WrongType", "POST", chat, testKey, chatBody(`"n":"two"`), 400, "invalid_request_error", "n", `field "n" must be an integer (64-bit), got JSON string`},
		{"BodyNotObject", "POST", chat, testKey, `["hi"]`, 400, "invalid_request_error", "", "the request body must be a JSON object, got JSON array"},
		{"MessagesNotArray", "POST", chat, testKey, `{"model":"agent","messages":{"role":"user","content":"hi"}}`, 400, "invalid_request_error", "messages", `field "messages" must be an array, got JSON object`},
		{"ResponseFormatNotObject", "POST", chat, testKey, chatBody(`"response_format":"json_object"`), 400, "invalid_request_error", "response_format", `field "response_format" must be an object, got JSON string`},
		{"TemperatureNotNumber", "POST", chat, testKey, chatBody(`"temperature":"hot"`), 400, "invalid_request_error", "temperature", `field "temperature" must be a number, got JSON string`},
		{"NoModel", "POST", chat, testKey, `{"messages":[{"role":"user","content":"hi"}]}`, 400, "invalid_request_error", "model", "model is required; served: agent@0"},
		{"UnknownModel", "POST", chat, testKey, strings.Replace(chatBody(""), `"agent"`, `"other"`, 1), 404, "not_found_error", "model", `unknown model "other"; served: agent@0`},
		{"UnknownStep", "POST", chat, testKey, strings.Replace(chatBody(""), `"agent"`, `"agent@9"`, 1), 404, "not_found_error", "model", `served: agent@0`},
		{"NoMessages", "POST", chat, testKey, `{"model":"agent","messages":[]}`, 400, "invalid_request_error", "messages", "non-empty"},
		{"MessageNotObject", "POST", chat, testKey, `{"model":"agent","messages":["hi"]}`, 400, "invalid_request_error", "messages[0]", "message object"},
		{"MessageNoRole", "POST", chat, testKey, `{"model":"agent","messages":[{"content":"hi"}]}`, 400, "invalid_request_error", "messages[0].role", "has no role"},
		{"MessageBadRole", "POST", chat, testKey, `{"model":"agent","messages":[{"role":"robot","content":"hi"}]}`, 400, "invalid_request_error", "messages[0].role", `got "robot"`},
		{"ContentNumber", "POST", chat, testKey, `{"model":"agent","messages":[{"role":"user","content":123}]}`, 400, "invalid_request_error", "messages[0].content", "a string or an array of content parts, got 123"},
		{"ContentObject", "POST", chat, testKey, `{"model":"agent","messages":[{"role":"user","content":{"type":"text","text":"hi"}}]}`, 400, "invalid_request_error", "messages[0].content", "a string or an array of content parts"},
		{"ContentPartNumber", "POST", chat, testKey, `{"model":"agent","messages":[{"role":"user","content":[{"type":"text","text":"hi"},7]}]}`, 400, "invalid_request_error", "messages[0].content[1]", "content part object"},
		{"ToolCallsNotArray", "POST", chat, testKey, `{"model":"agent","messages":[{"role":"assistant","tool_calls":{"id":"c"}},{"role":"user","content":"hi"}]}`, 400, "invalid_request_error", "messages[0].tool_calls", "array of tool calls"},
		{"ToolCallNotObject", "POST", chat, testKey, `{"model":"agent","messages":[{"role":"assistant","tool_calls":["c"]},{"role":"user","content":"hi"}]}`, 400, "invalid_request_error", "messages[0].tool_calls[0]", "tool call object"},
		{"TooManyTools", "POST", chat, testKey, chatBody(`"tools":[` + strings.Repeat(`{"type":"function","function":{"name":"f"}},`, 128) + `{"type":"function","function":{"name":"f"}}]`), 400, "invalid_request_error", "tools", "129 tools; at most 128"},
		{"NZero", "POST", chat, testKey, chatBody(`"n":0`), 400, "invalid_request_error", "n", "n must be in [1, 128], got 0"},
		{"NTooLarge", "POST", chat, testKey, chatBody(`"n":129`), 400, "invalid_request_error", "n", "got 129"},
		{"MaxTokensBeyondContext", "POST", chat, testKey, `{"model":"agent","messages":[{"role":"user","content":"hi"}],"max_tokens":100000}`, 400, "invalid_request_error", "max_tokens", "maximum context length is 4096 tokens, but you requested 100099: max_tokens 100000"},
		{"MaxCompletionTokensBeyondContext", "POST", chat, testKey, `{"model":"agent","messages":[{"role":"user","content":"hi"}],"max_completion_tokens":100000}`, 400, "invalid_request_error", "max_completion_tokens", "max_completion_tokens 100000"},
		{"MaxTokensZero", "POST", chat, testKey, `{"model":"agent","messages":[{"role":"user","content":"hi"}],"max_tokens":0}`, 400, "invalid_request_error", "max_tokens", "at least 1"},
		{"Temperature", "POST", chat, testKey, chatBody(`"temperature":-1`), 400, "invalid_request_error", "temperature", ">= 0"},
		{"TopP", "POST", chat, testKey, chatBody(`"top_p":0`), 400, "invalid_request_error", "top_p", "(0, 1]"},
		{"TopLogprobs", "POST", chat, testKey, chatBody(`"logprobs":true,"top_logprobs":21`), 400, "invalid_request_error", "top_logprobs", "[0, 20]"},
		{"TopLogprobsWithoutLogprobs", "POST", chat, testKey, chatBody(`"top_logprobs":2`), 400, "invalid_request_error", "top_logprobs", "logprobs must be true"},
		{"TopLogprobsLogprobsFalse", "POST", chat, testKey, chatBody(`"logprobs":false,"top_logprobs":2`), 400, "invalid_request_error", "top_logprobs", "logprobs must be true"},
		{"ToolType", "POST", chat, testKey, chatBody(`"tools":[{"type":"retrieval","function":{"name":"f"}}]`), 400, "invalid_request_error", "tools[0].type", `must be "function"`},
		{"ToolNotObject", "POST", chat, testKey, chatBody(`"tools":["f"]`), 400, "invalid_request_error", "tools[0]", "tool object"},
		{"ToolNoFunction", "POST", chat, testKey, chatBody(`"tools":[{"type":"function"}]`), 400, "invalid_request_error", "tools[0].function", "is required"},
		{"ToolNoName", "POST", chat, testKey, chatBody(tool(`{"parameters":{}}`)), 400, "invalid_request_error", "tools[0].function.name", "1 to 64 letters"},
		{"ToolBadName", "POST", chat, testKey, chatBody(tool(`{"name":"get weather"}`)), 400, "invalid_request_error", "tools[0].function.name", `got "get weather"`},
		{"ToolParamsNotObject", "POST", chat, testKey, chatBody(tool(`{"name":"f","parameters":["x"]}`)), 400, "invalid_request_error", "tools[0].function.parameters", "JSON Schema object"},
		{"ToolDuplicate", "POST", chat, testKey, chatBody(`"tools":[{"type":"function","function":{"name":"f"}},{"type":"function","function":{"name":"f"}}]`), 400, "invalid_request_error", "tools[1].function.name", "used by another tool"},
		{"ToolChoiceNoTools", "POST", chat, testKey, chatBody(`"tool_choice":"required"`), 400, "invalid_request_error", "tool_choice", "has no tools"},
		{"ToolChoiceUnknown", "POST", chat, testKey, chatBody(tool(`{"name":"f"}`) + `,"tool_choice":{"type":"function","function":{"name":"g"}}`), 400, "invalid_request_error", "tool_choice", `"g", which is not one of the tools`},
		{"ToolChoiceUnenforceable", "POST", chat, testKey, chatBody(tool(`{"name":"f","parameters":{"type":"object","properties":{"a":{"not":{}}}}}`) + `,"tool_choice":"required"`), 400, "invalid_request_error", "tools", `keyword "not" is not supported`},
		{"ToolChoiceBad", "POST", chat, testKey, chatBody(`"tool_choice":{"type":"function"}`), 400, "invalid_request_error", "tool_choice", "invalid request: tool_choice must be"},
		{"ToolChoiceNumber", "POST", chat, testKey, chatBody(`"tool_choice":1`), 400, "invalid_request_error", "tool_choice", "invalid request: tool_choice must be"},
		{"StopNotStrings", "POST", chat, testKey, chatBody(`"stop":[1]`), 400, "invalid_request_error", "stop", "invalid request: stop must be a string or an array of strings, got [1]"},
		{"JSONSchemaKeyword", "POST", chat, testKey, chatBody(`"response_format":{"type":"json_schema","json_schema":{"name":"x","schema":{"type":"object","properties":{"a":{"type":"string","not":{}}}}}}`), 400, "invalid_request_error", "response_format.json_schema.schema", `schema at /properties/a: keyword "not" is not supported`},
		{"JSONSchemaNoName", "POST", chat, testKey, chatBody(`"response_format":{"type":"json_schema","json_schema":{"schema":{}}}`), 400, "invalid_request_error", "response_format.json_schema.name", "1 to 64 letters"},
		{"JSONSchemaNotObject", "POST", chat, testKey, chatBody(`"response_format":{"type":"json_schema","json_schema":{"name":"x","schema":"string"}}`), 400, "invalid_request_error", "response_format.json_schema.schema", "JSON Schema object"},
		{"JSONSchemaMissing", "POST", chat, testKey, chatBody(`"response_format":{"type":"json_schema"}`), 400, "invalid_request_error", "response_format.json_schema", `must be an object`},
		{"JSONSchemaImpossible", "POST", chat, testKey, chatBody(`"response_format":{"type":"json_schema","json_schema":{"name":"x","schema":{"type":"integer","minimum":3,"maximum":2}}}`), 400, "invalid_request_error", "response_format.json_schema.schema", "leave no number"},
		{"JSONWithTools", "POST", chat, testKey, chatBody(tool(`{"name":"f"}`) + `,"response_format":{"type":"json_object"}`), 400, "invalid_request_error", "response_format", "with tools is not supported"},
		{"ResponseFormatUnknown", "POST", chat, testKey, chatBody(`"response_format":{"type":"yaml"}`), 400, "invalid_request_error", "response_format", `got "yaml"`},
		{"RepetitionPenalty", "POST", chat, testKey, chatBody(`"repetition_penalty":1.2`), 400, "invalid_request_error", "repetition_penalty", "vLLM's repetition_penalty is not supported"},
		{"GuidedJSON", "POST", chat, testKey, chatBody(`"guided_json":{"type":"object"}`), 400, "invalid_request_error", "guided_json", "use response_format"},
		{"StopTokenIDs", "POST", chat, testKey, chatBody(`"stop_token_ids":[5]`), 400, "invalid_request_error", "stop_token_ids", "not supported"},
		{"ContinueFinalMessage", "POST", chat, testKey, chatBody(`"continue_final_message":true,"add_generation_prompt":false`), 400, "invalid_request_error", "add_generation_prompt", "not supported"},
		{"CompletionsMinP", "POST", ts.URL + "/v1/completions", testKey, `{"model":"agent","prompt":"hi","max_tokens":2,"min_p":0.1}`, 400, "invalid_request_error", "min_p", "not supported"},
		{"Penalty", "POST", chat, testKey, chatBody(`"presence_penalty":0.5`), 400, "invalid_request_error", "presence_penalty", "not supported yet"},
		{"Oversize", "POST", chat, testKey, chatBody(`"user":"` + strings.Repeat("x", 70<<10) + `"`), 413, "invalid_request_error", "", "exceeds the server's limit of 65536 bytes"},
		{"NoKey", "POST", chat, "", chatBody(""), 401, "authentication_error", "", "missing API key"},
		{"WrongKey", "POST", chat, "sk-wrong", chatBody(""), 401, "authentication_error", "", "incorrect API key"},
		{"ModelsNeedKey", "GET", ts.URL + "/v1/models", "", "", 401, "authentication_error", "", "missing API key"},
		{"MetricsNeedKey", "GET", ts.URL + "/metrics", "", "", 401, "authentication_error", "", "missing API key"},
		{"TrainNeedsKey", "POST", ts.URL + "/v1/art/train", "", `{}`, 401, "authentication_error", "", "missing API key"},
		{"UnknownRoute", "GET", ts.URL + "/v2/nothing", testKey, "", 404, "not_found_error", "", "no route for GET /v2/nothing"},
		{"WrongMethod", "GET", chat, testKey, "", 405, "invalid_request_error", "", "use POST"},
		{"ModelUnknown", "GET", ts.URL + "/v1/models/agent@3", testKey, "", 404, "not_found_error", "model", "served: agent@0"},
		{"TrainOtherModel", "POST", ts.URL + "/v1/art/train", testKey, `{"model":"other","groups":[]}`, 404, "not_found_error", "model", `trains "agent", not "other"`},
		{"TrainBadConfig", "POST", ts.URL + "/v1/art/train", testKey, `{"groups":[],"config":{"learning_rate":-1}}`, 400, "invalid_request_error", "config", "LearningRate"},
		{"TrainBadGroup", "POST", ts.URL + "/v1/art/train", testKey, `{"groups":[{"trajectories":[{"messages_and_choices":[],"metadata":{"x":[1]}}]}]}`, 400, "invalid_request_error", "", "metadata"},
		{"SFTOtherModel", "POST", ts.URL + "/v1/art/train_sft", testKey, `{"model":"other","trajectories":[]}`, 404, "not_found_error", "model", `trains "agent", not "other"`},
		{"SFTNoTrajectories", "POST", ts.URL + "/v1/art/train_sft", testKey, `{"trajectories":[]}`, 400, "invalid_request_error", "trajectories", "nothing to learn"},
		{"SFTBadSchedule", "POST", ts.URL + "/v1/art/train_sft", testKey, `{"trajectories":[{"messages_and_choices":[]}],"config":{"learning_rates":[1,2]}}`, 400, "invalid_request_error", "config", "1 batches"},
		{"SFTBadTrajectory", "POST", ts.URL + "/v1/art/train_sft", testKey, `{"trajectories":[{"messages_and_choices":[],"metadata":{"x":[1]}}]}`, 400, "invalid_request_error", "", "metadata"},
		{"DeleteNegative", "POST", ts.URL + "/v1/art/checkpoints/delete", testKey, `{"keep":[-1]}`, 400, "invalid_request_error", "keep[0]", ">= 0"},
		{"RestoreNoStep", "POST", ts.URL + "/v1/art/checkpoints/restore", testKey, `{}`, 400, "invalid_request_error", "step", "step is required"},
		{"RestoreNegative", "POST", ts.URL + "/v1/art/checkpoints/restore", testKey, `{"step":-1}`, 400, "invalid_request_error", "step", ">= 0"},
		{"RestoreUnknownStep", "POST", ts.URL + "/v1/art/checkpoints/restore", testKey, `{"step":9}`, 404, "not_found_error", "step", "agent@9"},
		{"RestoreOtherModel", "POST", ts.URL + "/v1/art/checkpoints/restore", testKey, `{"model":"other","step":0}`, 404, "not_found_error", "model", "other"},
		{"RegisterNoName", "POST", ts.URL + "/v1/art/register", testKey, `{}`, 400, "invalid_request_error", "name", "name is required"},
		{"LogBadSplit", "POST", ts.URL + "/v1/art/log", testKey, `{"split":"../x"}`, 400, "invalid_request_error", "split", "split"},
		{"LogBadCallID", "POST", ts.URL + "/v1/art/log", testKey, `{"call_id":"a b"}`, 400, "invalid_request_error", "call_id", "call id"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			status, body := do(t, c.method, c.path, c.key, c.body)
			var env openai.ErrorResponse
			if err := json.Unmarshal(body, &env); err != nil {
				t.Fatalf("status %d, body %q is not an error envelope: %v", status, body, err)
			}
			e := env.Error
			param := ""
			if e.Param != nil {
				param = *e.Param
			}
			if status != c.status || e.Type != c.typ || param != c.param || !strings.Contains(e.Message, c.msg) {
				t.Errorf("got %d %s param=%q %q; want %d %s param=%q message containing %q", status, e.Type, param, e.Message, c.status, c.typ, c.param, c.msg)
			}
			// The server keeps serving.
			if status, body := do(t, "POST", chat, testKey, chatBody("")); status != 200 {
				t.Fatalf("after %s: good request got %d %s", c.name, status, body)
			}
		})
	}
	// /healthz needs no key.
	if status, body := do(t, "GET", ts.URL+"/healthz", "", ""); status != 200 || !strings.Contains(string(body), `"ok"`) {
		t.Errorf("healthz: %d %s", status, body)
	}
}

// Ensure a request that exceeds the request timeout is a 504.
func TestRequestTimeout(t *testing.T) {
	_, ts := newTestServer(t, Config{RequestTimeout: time.Nanosecond})
	for _, stream := range []string{"false", "true"} {
		status, body := do(t, "POST", ts.URL+"/v1/chat/completions", "", chatBody(`"stream":`+stream))
		if status != http.StatusGatewayTimeout || !strings.Contains(string(body), "request timeout") || !strings.Contains(string(body), "timeout_error") {
			t.Errorf("stream=%s: %d %s; want a 504 timeout_error", stream, status, body)
		}
	}
}

// Ensure a request with more messages than the limit is refused (a test of
// its own: the body is larger than TestBadRequests' body limit).
func TestTooManyMessages(t *testing.T) {
	_, ts := newTestServer(t, Config{APIKey: testKey})
	body := `{"model":"agent","messages":[` + strings.Repeat(`{"role":"user"},`, maxMessages) + `{"role":"user"}]}`
	status, b := do(t, "POST", ts.URL+"/v1/chat/completions", testKey, body)
	if status != 400 || !strings.Contains(string(b), `"param":"messages"`) || !strings.Contains(string(b), "4097 messages; at most 4096") {
		t.Fatalf("%d %s", status, b)
	}
}
