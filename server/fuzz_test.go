package server

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/artgo/art/server/api"
)

// fuzzServer is a server over a real tiny model whose requests are answered
// in process (no sockets), quiet so that fuzzing does not flood the log.
func fuzzServer(f *testing.F) http.Handler {
	f.Helper()
	srv := New(Config{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}, openHost(f, writeTinyModel(f)))
	f.Cleanup(func() { srv.Close() })
	return srv.Handler()
}

// post answers one request in process; it fails if the answer takes longer
// than fuzzDeadline (the request's context ends then: every wait in the
// server must honour it).
func post(t *testing.T, h http.Handler, path string, body []byte) *httptest.ResponseRecorder {
	ctx, cancel := context.WithTimeout(context.Background(), fuzzDeadline)
	defer cancel()
	rec := httptest.NewRecorder()
	req := httptest.NewRequestWithContext(ctx, http.MethodPost, path, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	start := time.Now()
	h.ServeHTTP(rec, req)
	if d := time.Since(start); d > fuzzDeadline+5*time.Second {
		t.Fatalf("%s took %s (request %q)", path, d, body)
	}
	return rec
}

const fuzzDeadline = 20 * time.Second

// checkAnswer fails unless the answer is a success or a client error in
// OpenAI's error shape: any request body, however malformed, must never
// reach a panic or an internal error.
func checkAnswer(t *testing.T, body []byte, rec *httptest.ResponseRecorder) {
	t.Helper()
	switch {
	case rec.Code == http.StatusOK:
	case rec.Code >= 400 && rec.Code < 500:
		var e struct {
			Error struct {
				Message string `json:"message"`
				Type    string `json:"type"`
			} `json:"error"`
		}
		if err := json.Unmarshal(rec.Body.Bytes(), &e); err != nil || e.Error.Message == "" || e.Error.Type == "" {
			t.Fatalf("status %d with a body not in OpenAI's error shape: %q (request %q)", rec.Code, rec.Body.String(), body)
		}
	default:
		t.Fatalf("status %d for request %q: %s", rec.Code, body, rec.Body.String())
	}
}

// FuzzChatCompletions sends arbitrary bodies to /v1/chat/completions. The
// seeds are valid requests of every kind the server answers (plain, n > 1,
// tools, stop strings, logprobs, structured outputs, streamed).
func FuzzChatCompletions(f *testing.F) {
	for _, extra := range []string{
		"",
		`"n":3,"seed":7`,
		`"stream":true,"stream_options":{"include_usage":true}`,
		`"logprobs":true,"top_logprobs":3,"temperature":0.5,"top_p":0.9`,
		`"stop":["a","b"],"max_completion_tokens":4`,
		tool(`{"name":"f","parameters":{"type":"object","properties":{"x":{"type":"integer"}}}}`) + `,"tool_choice":"auto"`,
		tool(`{"name":"f","parameters":{"type":"object","properties":{"x":{"type":"integer"}}}}`) + `,"tool_choice":"required","max_tokens":40`,
		tool(`{"name":"f"}`) + `,"tool_choice":{"type":"function","function":{"name":"f"}},"stream":true`,
		`"response_format":{"type":"json_schema","json_schema":{"name":"s","strict":true,"schema":{"type":"object","properties":{"a":{"type":"boolean"}},"required":["a"],"additionalProperties":false}}}`,
		`"response_format":{"type":"json_object"}`,
		`"chat_template_kwargs":{"enable_thinking":false}`,
	} {
		f.Add([]byte(chatBody(extra)))
	}
	f.Add([]byte(`{"model":"agent@0","messages":[{"role":"system","content":"s"},{"role":"user","content":[{"type":"text","text":"x"}]},{"role":"assistant","content":null,"tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{}"}}]},{"role":"tool","tool_call_id":"c","content":"1"}],"max_tokens":2}`))
	f.Add([]byte(`{}`))
	f.Add([]byte(`[`))
	h := fuzzServer(f)
	f.Fuzz(func(t *testing.T, body []byte) {
		// Bound the work of one input: the tiny model's context is short,
		// but n and max_tokens are the fuzzer's to choose.
		var probe struct {
			N         *json.Number `json:"n"`
			MaxTokens *json.Number `json:"max_tokens"`
		}
		if json.Unmarshal(body, &probe) == nil && probe.N != nil {
			if n, err := probe.N.Int64(); err == nil && n > 8 {
				t.Skip("n > 8 only costs time")
			}
		}
		checkAnswer(t, body, post(t, h, "/v1/chat/completions", body))
	})
}

// FuzzResponsesAndCompletions sends arbitrary bodies to /v1/responses and
// /v1/completions. The seeds are valid requests of each kind (input items,
// tools and forced calls, structured outputs, streams; raw prompts).
func FuzzResponsesAndCompletions(f *testing.F) {
	tools := `"tools":[{"type":"function","name":"f","parameters":{"type":"object","properties":{"x":{"type":"integer"}}}}]`
	for _, body := range []string{
		`{"model":"agent","input":"hi","max_output_tokens":4}`,
		`{"model":"agent","instructions":"s","input":[{"role":"user","content":[{"type":"input_text","text":"x"}]},{"type":"function_call","call_id":"c","name":"f","arguments":"{}"},{"type":"function_call_output","call_id":"c","output":"1"}],` + tools + `,"max_output_tokens":4,"stream":true}`,
		`{"model":"agent","input":"hi",` + tools + `,"tool_choice":"required","max_output_tokens":40}`,
		`{"model":"agent","input":"hi","text":{"format":{"type":"json_schema","name":"s","schema":{"type":"object","properties":{"a":{"type":"boolean"}},"required":["a"]}}},"max_output_tokens":20}`,
		`{"model":"agent","previous_response_id":"resp_x","input":"hi"}`,
	} {
		f.Add(uint8(0), []byte(body))
	}
	for _, body := range []string{
		`{"model":"agent","prompt":"Once","max_tokens":4,"n":2,"logprobs":2}`,
		`{"model":"agent","prompt":["x"],"stream":true,"stream_options":{"include_usage":true}}`,
	} {
		f.Add(uint8(1), []byte(body))
	}
	h := fuzzServer(f)
	paths := []string{"/v1/responses", "/v1/completions"}
	f.Fuzz(func(t *testing.T, route uint8, body []byte) {
		var probe struct {
			N *json.Number `json:"n"`
		}
		if json.Unmarshal(body, &probe) == nil && probe.N != nil {
			if n, err := probe.N.Int64(); err == nil && n > 8 {
				t.Skip("n > 8 only costs time")
			}
		}
		path := paths[int(route)%len(paths)]
		checkAnswer(t, body, post(t, h, path, body))
	})
}

// FuzzTrainingAPI sends arbitrary bodies to the training API's decoders:
// /v1/art/train, /v1/art/train_sft and /v1/art/log. A body that passes
// validation trains or logs for real; a streamed training answer must end
// in a result or an error event, never a panic.
func FuzzTrainingAPI(f *testing.F) {
	choice := `{"finish_reason":"stop","index":0,"message":{"role":"assistant","content":"ab"},"logprobs":{"content":[{"token":"a","token_id":97,"logprob":-1.5,"top_logprobs":[]},{"token":"b","token_id":98,"logprob":-0.5,"top_logprobs":[]}]}}`
	traj := func(r string) string {
		return `{"messages_and_choices":[{"role":"user","content":"hi"},` + choice + `],"reward":` + r + `}`
	}
	group := `{"trajectories":[` + traj("1") + `,` + traj("0") + `]}`
	f.Add(uint8(0), []byte(`{"groups":[`+group+`],"config":{"learning_rate":0.001}}`))
	f.Add(uint8(0), []byte(`{"model":"agent","groups":[`+group+`,`+group+`],"config":{"learning_rate":0.001,"loss":"ppo","kl_penalty_coef":0.1}}`))
	f.Add(uint8(1), []byte(`{"trajectories":[`+traj("1")+`],"config":{"learning_rate":0.001,"batch_size":1}}`))
	f.Add(uint8(2), []byte(`{"groups":[`+group+`],"split":"val","step":0,"metrics":{"x":1}}`))
	f.Add(uint8(0), []byte(`{"groups":[{"trajectories":[]}]}`))
	h := fuzzServer(f)
	paths := []string{"/v1/art/train", "/v1/art/train_sft", "/v1/art/log"}
	f.Fuzz(func(t *testing.T, route uint8, body []byte) {
		path := paths[int(route)%len(paths)]
		rec := post(t, h, path, body)
		checkAnswer(t, body, rec)
		if rec.Code != http.StatusOK || path == "/v1/art/log" {
			return
		}
		var last api.TrainEvent
		sc := bufio.NewScanner(rec.Body)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			if len(sc.Bytes()) == 0 {
				continue // a keep-alive
			}
			if err := json.Unmarshal(sc.Bytes(), &last); err != nil {
				t.Fatalf("%s: a line that is not an event: %q", path, sc.Text())
			}
		}
		switch {
		case last.Type == api.EventResult:
		case last.Type == api.EventError && !strings.Contains(last.Message, "panic"):
		default:
			t.Fatalf("%s: the stream ended with %+v (request %q)", path, last, body)
		}
	})
}
