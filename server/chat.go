package server

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"slices"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/artgo/art"
	"github.com/artgo/art/host"
	"github.com/artgo/art/internal/tracing"
	"github.com/artgo/art/openai"
)

// Request limits, as OpenAI's and vLLM's (messages: OpenAI's 2048 is
// raised for long agent episodes; the context length bounds them anyway).
const (
	maxN           = 128
	maxTopLogprobs = 20
	maxMessages    = 4096
	maxTools       = 128
)

// handleChatCompletions answers POST /v1/chat/completions: it validates
// the request, resolves the model to "name@step", and generates, plain or
// streamed, under the request timeout and the client's context.
func (s *Server) handleChatCompletions(w http.ResponseWriter, r *http.Request) {
	var req openai.ChatCompletionRequest
	if e := s.decode(w, r, &req); e != nil {
		s.metrics.request(e.Status)
		writeError(w, e)
		return
	}
	// Checked here, not in chatRequest: the Responses and legacy
	// completions APIs ask for top logprobs without this flag.
	if k := req.TopLogprobs; k != nil && *k > 0 && (req.Logprobs == nil || !*req.Logprobs) {
		s.fail(w, badRequest("top_logprobs", "logprobs must be true when top_logprobs is used, as OpenAI and vLLM require (each token's logprob is returned either way)"))
		return
	}
	creq, e := s.chatRequest(&req)
	if e != nil {
		s.fail(w, e)
		return
	}
	ctx, end, e := s.startGeneration(r, &creq, req.Stream)
	if e != nil {
		s.fail(w, e)
		return
	}
	defer end()
	if req.Stream {
		st := s.newStream(w, creq, chatParams(&req), newChatFormat(&req, creq))
		s.metrics.request(st.run(ctx, r.Context()))
		return
	}
	resp, err := s.model.Chat(ctx, creq, nil)
	if err != nil {
		e := s.chatError(err, ctx, r.Context(), chatParams(&req))
		s.metrics.request(e.Status)
		if r.Context().Err() == nil {
			writeError(w, e)
		}
		return
	}
	s.countTokens(r.Context(), resp)
	s.metrics.request(http.StatusOK)
	writeJSON(w, http.StatusOK, completion(resp, completionID(), time.Now().Unix(), creq.TopLogprobs > 0))
}

// startGeneration starts generating creq: it resolves the model to "name@step" once
// (so that every event of a stream and the response name the step that
// answers), bounds the work by the request timeout and counts it as
// running until end is called.
func (s *Server) startGeneration(r *http.Request, creq *host.ChatRequest, stream bool) (ctx context.Context, end func(), e *apiError) {
	step, err := s.model.Resolve(creq.Model)
	if err != nil {
		return nil, nil, hostError(err, "model")
	}
	creq.Model = s.modelID(step)
	trace.SpanFromContext(r.Context()).SetAttributes(tracing.Model.String(creq.Model), tracing.Step.Int(step), attribute.Int("art.n", max(creq.N, 1)), attribute.Bool("art.stream", stream))
	ctx, cancel := r.Context(), context.CancelFunc(func() {})
	if s.cfg.RequestTimeout > 0 {
		ctx, cancel = context.WithTimeout(ctx, s.cfg.RequestTimeout)
	}
	n := max(creq.N, 1)
	s.metrics.start(n)
	return ctx, func() { s.metrics.finish(n); cancel() }, nil
}

// chatParams names the host's request fields as the chat request does, for
// errors: the max-tokens field is the one the client sent.
func chatParams(req *openai.ChatCompletionRequest) func(string) string {
	maxTokens, _ := req.MaxTokensParam()
	return func(param string) string {
		if param == "max_tokens" && maxTokens != "" {
			return maxTokens
		}
		return param
	}
}

// sameParams is the renaming of an API whose fields are the host's.
func sameParams(param string) string { return param }

// chatError maps an error of svc.Chat: a timeout of ctx is a 504, a
// cancelled client a 499 (logged, never written), anything else as
// serviceError. rename names the host's param (and its mentions in the
// message) as the client's API does.
func (s *Server) chatError(err error, ctx, clientCtx context.Context, rename func(string) string) *apiError {
	switch {
	case clientCtx.Err() != nil:
		s.log.Info("server: client went away; generation cancelled", "err", err)
		return &apiError{Status: statusClientClosed, Type: openai.ErrInvalidRequest, Msg: "client closed the request"}
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		return &apiError{Status: http.StatusGatewayTimeout, Type: openai.ErrTimeout, Code: "timeout",
			Msg: fmt.Sprintf("the request did not finish within the server's request timeout (%s)", s.cfg.RequestTimeout)}
	}
	e := hostError(err, "model")
	if e.Param != "" {
		// A context-length error on max_tokens also names the prompt's
		// field ("shorten the messages"), which is the API's too.
		named := []string{e.Param}
		if e.Code == host.CodeContextLength {
			named = append(named, "messages")
		}
		for _, hp := range named {
			if p := rename(hp); p != hp {
				e.Msg = strings.ReplaceAll(e.Msg, hp, p)
			}
		}
		e.Param = rename(e.Param)
	}
	if e.Status >= 500 {
		s.log.Error("server: chat completion failed", "err", err)
	}
	return e
}

func completionID() string { return "chatcmpl-" + randomHex() }

// randomHex returns 24 random hex digits, for ids.
func randomHex() string {
	var b [12]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// chatRequest validates req and turns it into the service's request. The
// model is resolved by the caller.
func (s *Server) chatRequest(req *openai.ChatCompletionRequest) (host.ChatRequest, *apiError) {
	out := host.ChatRequest{Model: req.Model, Messages: req.Messages, Tools: req.Tools, Seed: req.Seed,
		TemplateKwargs: req.ChatTemplateKwargs}
	if req.Model == "" {
		ids, _ := host.ModelIDs(s.model)
		return out, badRequest("model", "model is required; served: %s (a bare %q means the latest step)", strings.Join(ids, ", "), s.model.Info().Name)
	}
	if len(req.Messages) == 0 {
		return out, badRequest("messages", "messages must be a non-empty array of message objects")
	}
	if len(req.Messages) > maxMessages {
		return out, badRequest("messages", "%d messages; at most %d are accepted", len(req.Messages), maxMessages)
	}
	if len(req.Tools) > maxTools {
		return out, badRequest("tools", "%d tools; at most %d are accepted", len(req.Tools), maxTools)
	}
	for i, m := range req.Messages {
		if e := validateMessage(i, m); e != nil {
			return out, e
		}
	}
	if req.N != nil {
		if *req.N < 1 || *req.N > maxN {
			return out, badRequest("n", "n must be in [1, %d], got %d", maxN, *req.N)
		}
		out.N = *req.N
	}
	if t := req.Temperature; t != nil {
		if math.IsNaN(*t) || *t < 0 || math.IsInf(*t, 0) {
			return out, badRequest("temperature", "temperature must be a number >= 0, got %v", *t)
		}
		out.Temperature = t
	}
	if p := req.TopP; p != nil {
		if !(*p > 0 && *p <= 1) {
			return out, badRequest("top_p", "top_p must be in (0, 1], got %v", *p)
		}
		out.TopP = *p
	}
	if k := req.TopK; k != nil {
		if *k < -1 {
			return out, badRequest("top_k", "top_k must be -1 (off), 0 (off) or a positive count, got %d", *k)
		}
		out.TopK = max(*k, 0)
	}
	if p, v := req.MaxTokensParam(); v != nil {
		if *v < 1 {
			return out, badRequest(p, "%s must be at least 1, got %d", p, *v)
		}
		out.MaxTokens = *v
	}
	if k := req.TopLogprobs; k != nil {
		if *k < 0 || *k > maxTopLogprobs {
			return out, badRequest("top_logprobs", "top_logprobs must be in [0, %d], got %d", maxTopLogprobs, *k)
		}
		out.TopLogprobs = *k
	}
	for _, st := range req.Stop {
		if st != "" {
			out.Stop = append(out.Stop, st)
		}
	}
	if p := req.FrequencyPenalty; p != nil && *p != 0 {
		return out, unsupported("frequency_penalty", "frequency_penalty is not supported yet; omit it or send 0")
	}
	if p := req.PresencePenalty; p != nil && *p != 0 {
		return out, unsupported("presence_penalty", "presence_penalty is not supported yet; omit it or send 0")
	}
	if len(req.LogitBias) > 0 {
		return out, unsupported("logit_bias", "logit_bias is not supported yet")
	}
	if p, hint := req.Unsupported(); p != "" {
		return out, unsupported(p, "vLLM's %s is not supported here; %s", p, hint)
	}
	if rf := req.ResponseFormat; rf != nil {
		switch rf.Type {
		case "", "text":
		case "json_object":
			out.ResponseFormat = &host.ResponseFormat{}
		case "json_schema":
			f, e := jsonSchemaFormat(rf.JSONSchema)
			if e != nil {
				return out, e
			}
			out.ResponseFormat = f
		default:
			return out, badRequest("response_format", `response_format.type must be "text", "json_object" or "json_schema", got %q`, rf.Type)
		}
	}
	if e := validateTools(req.Tools); e != nil {
		return out, e
	}
	tools, err := canonicalTools(req.Tools)
	if err != nil {
		return out, badRequest("tools", "%v", err)
	}
	out.Tools = tools
	out.ParseToolCalls = len(req.Tools) > 0
	if tc := req.ToolChoice; tc != nil {
		switch tc.Mode {
		case openai.ToolChoiceAuto:
		case openai.ToolChoiceNone:
			out.ParseToolCalls = false
		case openai.ToolChoiceRequired, openai.ToolChoiceFunction:
			if e := forcedToolChoice(req.Tools, tc); e != nil {
				return out, e
			}
			out.ToolChoice = &host.ToolChoice{Function: tc.Function}
		default:
			return out, badRequest("tool_choice", `tool_choice must be "none", "auto", "required" or a function, got %q`, tc.Mode)
		}
	}
	// A forced tool choice is one call already.
	out.SingleToolCall = req.ParallelToolCalls != nil && !*req.ParallelToolCalls && out.ParseToolCalls && out.ToolChoice == nil
	if out.ResponseFormat != nil && out.ParseToolCalls {
		return out, unsupported("response_format", "response_format %q with tools is not supported yet: the answer is forced to be JSON, so the model could never call a tool; send tools or response_format, or tool_choice \"none\"", req.ResponseFormat.Type)
	}
	return out, nil
}

// jsonSchemaFormat reads response_format.json_schema as OpenAI defines it:
// a name (1–64 letters, digits, '_' or '-'), an optional description, the
// schema (a JSON Schema object; absent means any JSON value) and strict.
// Strict or not, the schema is enforced; a keyword the grammar cannot
// enforce is refused when the schema is compiled, never ignored.
func jsonSchemaFormat(raw json.RawMessage) (*host.ResponseFormat, *apiError) {
	const p = "response_format.json_schema"
	var js struct {
		Name        *string         `json:"name"`
		Description string          `json:"description"`
		Schema      json.RawMessage `json:"schema"`
		Strict      *bool           `json:"strict"`
	}
	if len(bytes.TrimSpace(raw)) == 0 || json.Unmarshal(raw, &js) != nil || !bytes.HasPrefix(bytes.TrimSpace(raw), []byte("{")) {
		return nil, badRequest(p, `%s must be an object {"name": ..., "schema": {...}, "strict": true}, got %.60s`, p, raw)
	}
	if js.Name == nil || !validToolName(*js.Name) {
		name := ""
		if js.Name != nil {
			name = *js.Name
		}
		return nil, badRequest(p+".name", "%s.name must be 1 to 64 letters, digits, '_' or '-', got %q", p, name)
	}
	schema := bytes.TrimSpace(js.Schema)
	switch {
	case len(schema) == 0 || bytes.Equal(schema, []byte("null")):
		schema = []byte("{}")
	case schema[0] != '{':
		return nil, badRequest(p+".schema", "%s.schema must be a JSON Schema object, got %.60s", p, schema)
	}
	return &host.ResponseFormat{Schema: schema}, nil
}

// forcedToolChoice checks tool_choice "required" or a named function
// against the tools: there must be tools, and a named one among them.
func forcedToolChoice(tools []json.RawMessage, tc *openai.ToolChoice) *apiError {
	if len(tools) == 0 {
		return badRequest("tool_choice", "tool_choice %q forces a tool call, but the request has no tools", tc.Mode)
	}
	if tc.Mode != openai.ToolChoiceFunction {
		return nil
	}
	for _, raw := range tools {
		var t struct {
			Function struct {
				Name string `json:"name"`
			} `json:"function"`
		}
		if json.Unmarshal(raw, &t) == nil && t.Function.Name == tc.Function {
			return nil
		}
	}
	return badRequest("tool_choice", "tool_choice names the function %q, which is not one of the tools", tc.Function)
}

var messageRoles = []string{"system", "developer", "user", "assistant", "tool", "function"}

// validateMessage checks a message's role and the shapes of its content
// and tool calls, as OpenAI and vLLM do: the chat template would render
// any JSON value, so a content object sent without its array (a common
// slip) reached the model as its JSON text.
func validateMessage(i int, raw json.RawMessage) *apiError {
	p := fmt.Sprintf("messages[%d]", i)
	var m struct {
		Role      *string         `json:"role"`
		Content   json.RawMessage `json:"content"`
		ToolCalls json.RawMessage `json:"tool_calls"`
	}
	if err := json.Unmarshal(raw, &m); err != nil || !bytes.HasPrefix(bytes.TrimSpace(raw), []byte("{")) {
		return badRequest(p, "%s must be a message object with a role, got %.60s", p, raw)
	}
	if m.Role == nil {
		return badRequest(p+".role", "%s has no role", p)
	}
	if !slices.Contains(messageRoles, *m.Role) {
		return badRequest(p+".role", "%s.role must be one of %s, got %q", p, strings.Join(messageRoles, ", "), *m.Role)
	}
	switch content := bytes.TrimSpace(m.Content); {
	case len(content) == 0, content[0] == '"', bytes.Equal(content, []byte("null")):
	case content[0] == '[':
		var parts []json.RawMessage
		json.Unmarshal(content, &parts) // valid: the body decoded
		for j, part := range parts {
			// A plain string stands for a text part, as vLLM reads it.
			if part = bytes.TrimSpace(part); part[0] != '{' && part[0] != '"' {
				return badRequest(fmt.Sprintf("%s.content[%d]", p, j), `%s.content[%d] must be a content part object {"type": "text", "text": ...}, got %.60s`, p, j, part)
			}
		}
	default:
		return badRequest(p+".content", "%s.content must be a string or an array of content parts, got %.60s", p, content)
	}
	if calls := bytes.TrimSpace(m.ToolCalls); len(calls) > 0 && !bytes.Equal(calls, []byte("null")) {
		var list []json.RawMessage
		if calls[0] != '[' || json.Unmarshal(calls, &list) != nil {
			return badRequest(p+".tool_calls", "%s.tool_calls must be an array of tool calls, got %.60s", p, calls)
		}
		for j, call := range list {
			if call = bytes.TrimSpace(call); call[0] != '{' {
				return badRequest(fmt.Sprintf("%s.tool_calls[%d]", p, j), `%s.tool_calls[%d] must be a tool call object {"id": ..., "type": "function", "function": {...}}, got %.60s`, p, j, call)
			}
		}
	}
	return nil
}

// canonicalTools re-encodes tools the way art.Tool does (type, then
// function: name, description, parameters, strict; parameters as sent), so
// that the prompt a rollout was sampled with renders the same tools text as
// the recorded trajectory does when it is trained: clients order keys
// differently (openai-go sends "function" before "type"), and a chat
// template prints them in the order it gets.
func canonicalTools(tools []json.RawMessage) ([]json.RawMessage, error) {
	out := make([]json.RawMessage, len(tools))
	for i, raw := range tools {
		var t art.Tool
		if err := json.Unmarshal(raw, &t); err != nil {
			return nil, fmt.Errorf("tools[%d]: %w", i, err)
		}
		b, err := json.Marshal(t)
		if err != nil {
			return nil, fmt.Errorf("tools[%d]: %w", i, err)
		}
		out[i] = b
	}
	return out, nil
}

// validateTools checks each tool the way OpenAI does: type "function", a
// name of 1–64 letters, digits, '_' or '-', unique, and parameters that are
// a JSON object when present.
func validateTools(tools []json.RawMessage) *apiError {
	seen := map[string]bool{}
	for i, raw := range tools {
		p := fmt.Sprintf("tools[%d]", i)
		var t struct {
			Type     *string `json:"type"`
			Function *struct {
				Name       *string         `json:"name"`
				Parameters json.RawMessage `json:"parameters"`
			} `json:"function"`
		}
		if err := json.Unmarshal(raw, &t); err != nil || !bytes.HasPrefix(bytes.TrimSpace(raw), []byte("{")) {
			return badRequest(p, "%s must be a tool object {\"type\":\"function\",\"function\":{...}}, got %.60s", p, raw)
		}
		if t.Type == nil || *t.Type != "function" {
			got := "nothing"
			if t.Type != nil {
				got = fmt.Sprintf("%q", *t.Type)
			}
			return badRequest(p+".type", `%s.type must be "function", got %s`, p, got)
		}
		if t.Function == nil {
			return badRequest(p+".function", "%s.function is required", p)
		}
		if t.Function.Name == nil || !validToolName(*t.Function.Name) {
			name := ""
			if t.Function.Name != nil {
				name = *t.Function.Name
			}
			return badRequest(p+".function.name", "%s.function.name must be 1 to 64 letters, digits, '_' or '-', got %q", p, name)
		}
		name := *t.Function.Name
		if seen[name] {
			return badRequest(p+".function.name", "%s.function.name %q is used by another tool", p, name)
		}
		seen[name] = true
		params := bytes.TrimSpace(t.Function.Parameters)
		if len(params) > 0 && !bytes.Equal(params, []byte("null")) && params[0] != '{' {
			return badRequest(p+".function.parameters", "%s.function.parameters must be a JSON Schema object, got %.60s", p, params)
		}
	}
	return nil
}

func validToolName(s string) bool {
	if len(s) == 0 || len(s) > 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// completion assembles the response of a finished chat. Top logprobs are
// included when the client asked (top).
func completion(resp host.ChatResponse, id string, created int64, top bool) openai.ChatCompletion {
	c := openai.ChatCompletion{ID: id, Object: openai.ObjectChatCompletion, Created: created, Model: resp.Model,
		Choices: make([]openai.Choice, len(resp.Choices)), PromptTokenIDs: resp.PromptTokenIDs, Usage: usage(resp)}
	for i, ch := range resp.Choices {
		msg := openai.Message{Role: "assistant", ToolCalls: toolCalls(ch.ToolCalls, false)}
		if ch.Content != "" || len(ch.ToolCalls) == 0 {
			content := ch.Content
			msg.Content = &content
		}
		ids := make([]int, len(ch.Tokens))
		for j, t := range ch.Tokens {
			ids[j] = t.ID
		}
		c.Choices[i] = openai.Choice{Index: ch.Index, Message: msg, FinishReason: ch.FinishReason,
			Logprobs: &openai.Logprobs{Content: logprobs(ch.Tokens, top)}, TokenIDs: ids}
	}
	return c
}

func usage(resp host.ChatResponse) *openai.Usage {
	return &openai.Usage{PromptTokens: len(resp.PromptTokenIDs), CompletionTokens: resp.CompletionTokens,
		TotalTokens: len(resp.PromptTokenIDs) + resp.CompletionTokens, PromptTokensDetails: openai.CachedTokensDetails{CachedTokens: resp.CachedTokens}}
}

func toolCalls(calls []host.ToolCall, indexed bool) []openai.ToolCall {
	if len(calls) == 0 {
		return nil
	}
	out := make([]openai.ToolCall, len(calls))
	for i, c := range calls {
		out[i] = openai.ToolCall{ID: c.ID, Type: "function", Function: openai.FunctionCall{Name: c.Name, Arguments: c.Arguments}}
		if indexed {
			out[i].Index = &i
		}
	}
	return out
}

func logprobs(tokens []host.Token, top bool) []openai.TokenLogprob {
	out := make([]openai.TokenLogprob, len(tokens))
	for i, t := range tokens {
		out[i] = logprob(t, top)
	}
	return out
}

func logprob(t host.Token, top bool) openai.TokenLogprob {
	lp := openai.TokenLogprob{Token: string(t.Bytes), TokenID: t.ID, Bytes: t.Bytes, Logprob: t.Logprob, TopLogprobs: []openai.TopLogprob{}}
	if top {
		for _, tt := range t.Top {
			lp.TopLogprobs = append(lp.TopLogprobs, openai.TopLogprob{Token: string(tt.Bytes), TokenID: tt.ID, Bytes: tt.Bytes, Logprob: tt.Logprob})
		}
	}
	return lp
}
