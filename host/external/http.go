package external

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// Bounds on what is read from the engine.
const (
	maxErrorBody  = 4 << 10
	maxAnswerBody = 256 << 20
)

// statusError is an engine's answer with an error status.
type statusError struct {
	engine Dialect
	path   string
	status int
	msg    string // the engine's message
	// param and code are the OpenAI error object's, when the engine sent
	// them (vLLM's numeric code is not one: it is the status).
	param, code string
}

func (e *statusError) Error() string {
	return fmt.Sprintf("external: %s %s: %d %s: %s", e.engine, e.path, e.status, http.StatusText(e.status), e.msg)
}

// call sends body as JSON (a GET if body is nil) to the engine's path,
// waiting at most timeout, and returns the answer. Failures say what went
// wrong: the engine cannot be reached or did not answer in time
// (ErrEngineUnavailable), it ran out of memory (ErrEngineOOM), or it
// answered with an error status (*statusError with its message).
func (h *Host) call(parent context.Context, path string, body any, timeout time.Duration) ([]byte, error) {
	ctx, cancel := context.WithTimeout(parent, timeout)
	defer cancel()
	method := http.MethodGet
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, fmt.Errorf("external: encode request: %w", err)
		}
		method, rd = http.MethodPost, bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, h.opt.URL+path, rd)
	if err != nil {
		return nil, fmt.Errorf("external: %w", err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if h.opt.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+h.opt.APIKey)
	}
	resp, err := h.client.Do(req)
	if err != nil {
		return nil, h.transportError(parent, ctx, path, timeout, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
		msg := engineMessage(b)
		se := &statusError{engine: h.opt.Dialect, path: path, status: resp.StatusCode, msg: msg}
		se.param, se.code = engineParamCode(b)
		if isOOM(msg) {
			return nil, fmt.Errorf("%w: %w", ErrEngineOOM, se)
		}
		return nil, se
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswerBody))
	if err != nil {
		return nil, h.transportError(parent, ctx, path, timeout, err)
	}
	return b, nil
}

// transportError explains a request that got no complete answer: the
// caller's context (parent) ended, the engine took longer than timeout
// (ctx, the request's), or the transport failed.
func (h *Host) transportError(parent, ctx context.Context, path string, timeout time.Duration, err error) error {
	if parent.Err() != nil { // the caller's deadline or cancellation, not the engine's fault
		return fmt.Errorf("external: %s %s: %w", h.opt.Dialect, path, parent.Err())
	}
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return fmt.Errorf("%w: %s at %s did not answer %s within %s", ErrEngineUnavailable, h.opt.Dialect, h.opt.URL, path, timeout)
	}
	return fmt.Errorf("%w: %s at %s: %w", ErrEngineUnavailable, h.opt.Dialect, h.opt.URL, err)
}

// engineMessage extracts the message of an error answer: OpenAI's
// {"error":{"message"}}, vLLM's and SGLang's {"message"} or
// {"error_message"}, FastAPI's {"detail"}, or the text itself.
func engineMessage(b []byte) string {
	var e struct {
		Error        json.RawMessage `json:"error"`
		Message      string          `json:"message"`
		ErrorMessage string          `json:"error_message"`
		Detail       any             `json:"detail"`
	}
	if json.Unmarshal(b, &e) == nil {
		var inner struct {
			Message string `json:"message"`
		}
		var s string
		switch {
		case json.Unmarshal(e.Error, &inner) == nil && inner.Message != "":
			return inner.Message
		case json.Unmarshal(e.Error, &s) == nil && s != "":
			return s
		case e.Message != "":
			return e.Message
		case e.ErrorMessage != "":
			return e.ErrorMessage
		case e.Detail != nil:
			return fmt.Sprint(e.Detail)
		}
	}
	return strings.TrimSpace(string(b))
}

// engineParamCode returns the param and code of an error answer's OpenAI
// error object ({"error":{"param","code"}}, or vLLM's top-level ones), where
// they are strings.
func engineParamCode(b []byte) (param, code string) {
	type fields struct {
		Param any `json:"param"`
		Code  any `json:"code"`
	}
	var e struct {
		fields
		Error json.RawMessage `json:"error"`
	}
	if json.Unmarshal(b, &e) != nil {
		return "", ""
	}
	var inner fields
	if json.Unmarshal(e.Error, &inner) == nil && (inner.Param != nil || inner.Code != nil) {
		e.fields = inner
	}
	param, _ = e.Param.(string)
	code, _ = e.Code.(string)
	return param, code
}

// isContextLength reports whether an engine's message says the prompt (with
// the tokens asked for) does not fit the model's context: vLLM's "This
// model's maximum context length is …" (OpenAI's words), SGLang's "… is
// longer than the model's context length …".
func isContextLength(msg string) bool {
	m := strings.ToLower(msg)
	return strings.Contains(m, "maximum context length") || strings.Contains(m, "model's context length")
}

// isOOM reports whether an engine's message is about running out of
// (GPU) memory.
func isOOM(msg string) bool {
	m := strings.ToLower(msg)
	return strings.Contains(m, "out of memory") || strings.Contains(m, "outofmemory") || strings.Contains(m, "oom")
}

// ping checks that the engine answers GET /v1/models.
func (h *Host) ping(ctx context.Context) error {
	if _, err := h.call(ctx, "/v1/models", nil, h.opt.AdapterTimeout); err != nil {
		return fmt.Errorf("external: check %s at %s: %w", h.opt.Dialect, h.opt.URL, err)
	}
	return nil
}

// loadAdapter asks the engine to load the PEFT adapter folder at path as
// name.
func (h *Host) loadAdapter(ctx context.Context, name, path string) error {
	body := map[string]any{"lora_name": name, "lora_path": path}
	route := "/v1/load_lora_adapter"
	if h.opt.Dialect == SGLang {
		route = "/load_lora_adapter"
	}
	b, err := h.call(ctx, route, body, h.opt.AdapterTimeout)
	if err == nil {
		err = sglangFailure(b)
	}
	var se *statusError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &se) && strings.Contains(strings.ToLower(se.msg), "already"):
		return nil // loaded before (by another process or before a restart)
	case errors.Is(err, ErrEngineUnavailable) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("external: load adapter %s: %w", name, err)
	}
	return fmt.Errorf("%w %s from %s: %w", ErrAdapterRejected, name, path, err)
}

// unloadAdapter asks the engine to drop the adapter name; one it does not
// know is already gone.
func (h *Host) unloadAdapter(ctx context.Context, name string) error {
	route := "/v1/unload_lora_adapter"
	if h.opt.Dialect == SGLang {
		route = "/unload_lora_adapter"
	}
	b, err := h.call(ctx, route, map[string]any{"lora_name": name}, h.opt.AdapterTimeout)
	if err == nil {
		err = sglangFailure(b)
	}
	var se *statusError
	if errors.As(err, &se) && (se.status == http.StatusNotFound || strings.Contains(strings.ToLower(se.msg), "not found")) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("external: unload adapter %s: %w", name, err)
	}
	return nil
}

// sglangFailure turns SGLang's {"success": false, "error_message": ...}
// (sent with status 200 by some versions) into an error.
func sglangFailure(b []byte) error {
	var r struct {
		Success      *bool  `json:"success"`
		ErrorMessage string `json:"error_message"`
	}
	if json.Unmarshal(b, &r) == nil && r.Success != nil && !*r.Success {
		return &statusError{engine: SGLang, status: http.StatusBadRequest, msg: r.ErrorMessage}
	}
	return nil
}
