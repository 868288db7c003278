package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/artgo/art"
	"github.com/artgo/art/host"
	"github.com/artgo/art/openai"
)

// maxStoredResponses bounds the responses kept for previous_response_id
// and item_reference (the oldest are forgotten first).
const maxStoredResponses = 4096

// handleResponses answers POST /v1/responses, the Responses API: the input
// items (with instructions, tools, function-call outputs, a previous
// response or references to its items) become a chat request, generated
// like a chat completion, and the answer comes back as output items, plain
// or as streamed events. The response carries the answer as a chat
// "choice" with its token ids and logprobs, which art.ChoiceFromResponse
// (and the Recorder) turn into a trainable Choice.
//
// A streamed response's events go out as tokens are sampled (see
// responseFormat).
func (s *Server) handleResponses(w http.ResponseWriter, r *http.Request) {
	var req openai.ResponsesRequest
	if e := s.decode(w, r, &req); e != nil {
		s.fail(w, e)
		return
	}
	conv, creq, e := s.responsesRequest(&req)
	if e != nil {
		s.fail(w, e)
		return
	}
	if req.Stream {
		s.stream(w, r, creq, responsesHostParam, func(creq host.ChatRequest) streamFormat {
			return &responseFormat{s: s, req: &req, conv: conv, top: creq.TopLogprobs > 0, ids: newResponseIDs(), model: creq.Model}
		})
		return
	}
	resp, ok := s.generate(w, r, creq, responsesHostParam)
	if !ok {
		return
	}
	out := s.response(&req, resp, creq.TopLogprobs > 0, newResponseIDs())
	if req.Store == nil || *req.Store {
		s.remember(out, conv)
	}
	writeJSON(w, http.StatusOK, out)
}

// fail counts a request that failed before generating and writes e.
func (s *Server) fail(w http.ResponseWriter, e *apiError) {
	s.metrics.request(e.Status)
	writeError(w, e)
}

// generate answers creq without streaming, as the responses and legacy
// completions endpoints do (see startGeneration); on failure it writes the error
// (unless the client went away) and returns false. params names the
// host's request fields as the client's API does, in errors.
func (s *Server) generate(w http.ResponseWriter, r *http.Request, creq host.ChatRequest, params func(string) string) (host.ChatResponse, bool) {
	ctx, end, e := s.startGeneration(r, &creq, false)
	if e != nil {
		s.fail(w, e)
		return host.ChatResponse{}, false
	}
	defer end()
	resp, err := s.model.Chat(ctx, creq, nil)
	if err != nil {
		e := s.chatError(err, ctx, r.Context(), params)
		s.metrics.request(e.Status)
		if r.Context().Err() == nil {
			writeError(w, e)
		}
		return host.ChatResponse{}, false
	}
	s.countTokens(r.Context(), resp)
	s.metrics.request(http.StatusOK)
	return resp, true
}

// stream answers creq as a stream of format's events (see chatStream).
func (s *Server) stream(w http.ResponseWriter, r *http.Request, creq host.ChatRequest, params func(string) string, format func(host.ChatRequest) streamFormat) {
	ctx, end, e := s.startGeneration(r, &creq, true)
	if e != nil {
		s.fail(w, e)
		return
	}
	defer end()
	s.metrics.request(s.newStream(w, creq, params, format(creq)).run(ctx, r.Context()))
}

// responsesRequest turns a Responses request into the conversation it
// continues (without instructions) and the host's chat request.
func (s *Server) responsesRequest(req *openai.ResponsesRequest) ([]art.Message, host.ChatRequest, *apiError) {
	if len(bytes.TrimSpace(req.Input)) == 0 && req.PreviousResponseID == "" {
		return nil, host.ChatRequest{}, badRequest("input", "input is required: a string or an array of input items")
	}
	input := req.Input
	if len(bytes.TrimSpace(input)) == 0 {
		input = json.RawMessage("[]")
	}
	conv, err := s.responses.Messages(req.PreviousResponseID, input)
	if err != nil {
		p := "input"
		if req.PreviousResponseID != "" && strings.HasPrefix(err.Error(), "previous response") {
			p = "previous_response_id"
		}
		if errors.Is(err, art.ErrUnknownResponse) {
			return nil, host.ChatRequest{}, &apiError{Status: http.StatusNotFound, Type: openai.ErrNotFound, Param: p, Code: "not_found", Msg: err.Error()}
		}
		return nil, host.ChatRequest{}, badRequest(p, "%v", err)
	}
	msgs := conv
	if req.Instructions != nil && *req.Instructions != "" {
		msgs = append([]art.Message{art.SystemMsg(*req.Instructions)}, conv...)
	}
	chat := openai.ChatCompletionRequest{Model: req.Model, Temperature: req.Temperature, TopP: req.TopP,
		MaxCompletionTokens: req.MaxOutputTokens, TopLogprobs: req.TopLogprobs, Seed: req.Seed, User: req.User}
	for _, m := range msgs {
		b, err := json.Marshal(m)
		if err != nil {
			return nil, host.ChatRequest{}, badRequest("input", "%v", err)
		}
		chat.Messages = append(chat.Messages, b)
	}
	tools, err := art.ResponsesTools(req.Tools)
	if err != nil {
		return nil, host.ChatRequest{}, badRequest("tools", "%v", err)
	}
	for _, t := range tools {
		b, err := json.Marshal(t)
		if err != nil {
			return nil, host.ChatRequest{}, badRequest("tools", "%v", err)
		}
		chat.Tools = append(chat.Tools, b)
	}
	if tc := bytes.TrimSpace(req.ToolChoice); len(tc) > 0 && !bytes.Equal(tc, []byte("null")) {
		choice, e := responsesToolChoice(tc)
		if e != nil {
			return nil, host.ChatRequest{}, e
		}
		chat.ToolChoice = choice
	}
	chat.ParallelToolCalls = req.ParallelToolCalls
	if t := req.Text; t != nil && t.Format != nil {
		f := t.Format
		switch f.Type {
		case "", "text":
		case "json_object":
			chat.ResponseFormat = &openai.ResponseFormat{Type: "json_object"}
		case "json_schema":
			js, _ := json.Marshal(map[string]any{"name": f.Name, "schema": f.Schema, "strict": f.Strict})
			chat.ResponseFormat = &openai.ResponseFormat{Type: "json_schema", JSONSchema: js}
		default:
			return nil, host.ChatRequest{}, badRequest("text.format.type", `text.format.type must be "text", "json_object" or "json_schema", got %q`, f.Type)
		}
	}
	creq, e := s.chatRequest(&chat)
	if e != nil {
		e.Param = responsesParam(e.Param)
		e.Msg = strings.ReplaceAll(e.Msg, "max_completion_tokens", "max_output_tokens")
		return nil, host.ChatRequest{}, e
	}
	return conv, creq, nil
}

// responsesHostParam names a host error's field as the Responses API does.
func responsesHostParam(p string) string {
	if p == "max_tokens" {
		return "max_output_tokens"
	}
	return responsesParam(p)
}

// responsesParam names a chat request's field as the Responses API does.
func responsesParam(p string) string {
	switch {
	case p == "max_completion_tokens":
		return "max_output_tokens"
	case strings.HasPrefix(p, "messages"):
		return "input"
	case strings.HasPrefix(p, "response_format"):
		return "text.format"
	}
	return p
}

// responsesToolChoice reads tool_choice: "none", "auto", "required" or
// {"type": "function", "name": ...}.
func responsesToolChoice(raw json.RawMessage) (*openai.ToolChoice, *apiError) {
	if raw[0] == '"' {
		var mode string
		json.Unmarshal(raw, &mode)
		return &openai.ToolChoice{Mode: mode}, nil
	}
	var o struct {
		Type string `json:"type"`
		Name string `json:"name"`
	}
	if json.Unmarshal(raw, &o) != nil || o.Type != "function" || o.Name == "" {
		return nil, badRequest("tool_choice", `tool_choice must be "none", "auto", "required" or {"type":"function","name":...}; got %.60s`, raw)
	}
	return &openai.ToolChoice{Mode: openai.ToolChoiceFunction, Function: o.Name}, nil
}

// responseIDs are the ids a response and its message item are given
// before generation, so that a stream's events name them.
type responseIDs struct {
	response, message string
	created           int64
}

func newResponseIDs() responseIDs {
	return responseIDs{response: "resp_" + randomHex(), message: "msg_" + randomHex(), created: time.Now().Unix()}
}

// responseShell returns the response to req as it begins: in progress,
// without output.
func responseShell(req *openai.ResponsesRequest, model string, ids responseIDs) openai.Response {
	out := openai.Response{ID: ids.response, Object: openai.ObjectResponse, CreatedAt: ids.created, Status: openai.ResponseInProgress,
		Model: model, Instructions: req.Instructions, Output: []openai.OutputItem{}, ParallelToolCalls: req.ParallelToolCalls == nil || *req.ParallelToolCalls,
		Temperature: req.Temperature, TopP: req.TopP, ToolChoice: req.ToolChoice, Tools: req.Tools,
		Text: openai.ResponsesText{Format: &openai.ResponsesFormat{Type: "text"}}, Store: req.Store == nil || *req.Store, Metadata: req.Metadata}
	if out.ToolChoice == nil {
		out.ToolChoice = json.RawMessage(`"auto"`)
	}
	if out.Tools == nil {
		out.Tools = []json.RawMessage{}
	}
	if out.Metadata == nil {
		out.Metadata = map[string]string{}
	}
	if req.Text != nil && req.Text.Format != nil {
		out.Text = *req.Text
	}
	if req.PreviousResponseID != "" {
		out.PreviousResponseID = &req.PreviousResponseID
	}
	return out
}

// response assembles the Responses API answer of a finished generation.
func (s *Server) response(req *openai.ResponsesRequest, resp host.ChatResponse, top bool, ids responseIDs) openai.Response {
	chat := completion(resp, "", 0, top)
	c := chat.Choices[0]
	hc := resp.Choices[0]
	out := responseShell(req, resp.Model, ids)
	out.Status, out.Choice, out.PromptTokenIDs = openai.ResponseCompleted, &c, resp.PromptTokenIDs
	if hc.FinishReason == openai.FinishLength {
		out.Status = openai.ResponseIncomplete
		out.IncompleteDetails = &openai.IncompleteDetails{Reason: "max_output_tokens"}
	}
	if hc.Content != "" || len(hc.ToolCalls) == 0 {
		part := openai.OutputPart{Type: "output_text", Text: hc.Content, Annotations: []json.RawMessage{}, Logprobs: []openai.TokenLogprob{}}
		if top {
			part.Logprobs = c.Logprobs.Content
		}
		out.Output = append(out.Output, openai.OutputItem{Type: "message", ID: ids.message, Status: out.Status,
			Role: "assistant", Content: []openai.OutputPart{part}})
	}
	for _, tc := range hc.ToolCalls {
		out.Output = append(out.Output, openai.OutputItem{Type: "function_call", ID: "fc_" + randomHex(), Status: openai.ResponseCompleted,
			CallID: tc.ID, Name: tc.Name, Arguments: tc.Arguments})
	}
	u := usage(resp)
	out.Usage = &openai.ResponsesUsage{InputTokens: u.PromptTokens, InputTokensDetails: u.PromptTokensDetails, OutputTokens: u.CompletionTokens, TotalTokens: u.TotalTokens}
	return out
}

// remember keeps a response's conversation for previous_response_id and
// its items for item_reference.
func (s *Server) remember(out openai.Response, conv []art.Message) {
	b, err := json.Marshal(out.Choice)
	var c art.Choice
	if err == nil {
		err = json.Unmarshal(b, &c)
	}
	if err != nil {
		s.log.Error("server: keeping a response for previous_response_id", "err", err)
		return
	}
	msgID, callIDs := outputItemIDs(out.Output)
	s.responses.Remember(out.ID, conv, c, msgID, callIDs)
}

// outputItemIDs returns the id of the message item and those of the
// function calls, in order.
func outputItemIDs(items []openai.OutputItem) (msgID string, callIDs []string) {
	for _, it := range items {
		switch it.Type {
		case "message":
			msgID = it.ID
		case "function_call":
			callIDs = append(callIDs, it.ID)
		}
	}
	return msgID, callIDs
}

// responseFormat shapes a stream as the Responses API's typed events:
// response.created and response.in_progress with the first token; the
// message item (output_item.added, content_part.added) once its first
// text is released, then an output_text.delta per release; when
// generation ends, the rest of the text, output_text.done,
// content_part.done and output_item.done; each function call as an item
// whose arguments come in one function_call_arguments.delta (a call is
// only known to be one, and parsed, at the end); and response.completed
// (or response.incomplete) with the whole response, which is also the one
// kept for previous_response_id. Deltas carry the logprobs of the tokens
// sampled since the last one when top_logprobs asks for them.
type responseFormat struct {
	s     *Server
	req   *openai.ResponsesRequest
	conv  []art.Message
	top   bool
	ids   responseIDs
	model string // the step that answers, "name@step"

	seq     int                   // the next event's sequence number
	begun   bool                  // response.created was sent
	msgOpen bool                  // the message item was added
	pending []openai.TokenLogprob // logprobs not sent in a delta yet
}

// intp returns a pointer to a copy of i, for the events' indexes.
func intp(i int) *int { return &i }

func (f *responseFormat) event(ev openai.ResponseEvent) any {
	ev.SequenceNumber = f.seq
	f.seq++
	return ev
}

// begin returns the events that start the response, once.
func (f *responseFormat) begin() []any {
	if f.begun {
		return nil
	}
	f.begun = true
	shell := responseShell(f.req, f.model, f.ids)
	return []any{f.event(openai.ResponseEvent{Type: "response.created", Response: &shell}),
		f.event(openai.ResponseEvent{Type: "response.in_progress", Response: &shell})}
}

// openMessage returns the events that add the message item, once.
func (f *responseFormat) openMessage() []any {
	if f.msgOpen {
		return nil
	}
	f.msgOpen = true
	item := openai.OutputItem{Type: "message", ID: f.ids.message, Status: openai.ResponseInProgress, Role: "assistant", Content: []openai.OutputPart{}}
	part := openai.OutputPart{Type: "output_text", Annotations: []json.RawMessage{}, Logprobs: []openai.TokenLogprob{}}
	return []any{f.event(openai.ResponseEvent{Type: "response.output_item.added", OutputIndex: intp(0), Item: &item}),
		f.event(openai.ResponseEvent{Type: "response.content_part.added", ItemID: f.ids.message, OutputIndex: intp(0), ContentIndex: intp(0), Part: &part})}
}

func (f *responseFormat) delta(text string) any {
	lps := f.pending
	f.pending = nil
	return f.event(openai.ResponseEvent{Type: "response.output_text.delta", ItemID: f.ids.message, OutputIndex: intp(0), ContentIndex: intp(0),
		Delta: &text, Logprobs: lps})
}

func (f *responseFormat) token(ev host.StreamEvent, text string) []any {
	out := f.begin()
	if f.top {
		f.pending = append(f.pending, logprob(ev.Token, true))
	}
	if text != "" {
		out = append(out, f.openMessage()...)
		out = append(out, f.delta(text))
	}
	return out
}

func (f *responseFormat) finish(resp host.ChatResponse, rest []string) []any {
	out := f.s.response(f.req, resp, f.top, f.ids)
	if f.req.Store == nil || *f.req.Store {
		f.s.remember(out, f.conv)
	}
	events := f.begin()
	for i := range out.Output {
		it := &out.Output[i]
		switch it.Type {
		case "message":
			events = append(events, f.openMessage()...)
			if rest[0] != "" {
				events = append(events, f.delta(rest[0]))
			}
			part := &it.Content[0]
			events = append(events,
				f.event(openai.ResponseEvent{Type: "response.output_text.done", ItemID: it.ID, OutputIndex: intp(i), ContentIndex: intp(0), Text: &part.Text, Logprobs: part.Logprobs}),
				f.event(openai.ResponseEvent{Type: "response.content_part.done", ItemID: it.ID, OutputIndex: intp(i), ContentIndex: intp(0), Part: part}))
		case "function_call":
			added := *it
			added.Status, added.Arguments = openai.ResponseInProgress, ""
			events = append(events,
				f.event(openai.ResponseEvent{Type: "response.output_item.added", OutputIndex: intp(i), Item: &added}),
				f.event(openai.ResponseEvent{Type: "response.function_call_arguments.delta", ItemID: it.ID, OutputIndex: intp(i), Delta: &it.Arguments}),
				f.event(openai.ResponseEvent{Type: "response.function_call_arguments.done", ItemID: it.ID, OutputIndex: intp(i), Arguments: &it.Arguments}))
		}
		events = append(events, f.event(openai.ResponseEvent{Type: "response.output_item.done", OutputIndex: intp(i), Item: it}))
	}
	final := "response.completed"
	if out.Status == openai.ResponseIncomplete {
		final = "response.incomplete"
	}
	return append(events, f.event(openai.ResponseEvent{Type: final, Response: &out}))
}

func (f *responseFormat) fail(e *apiError) any {
	ev := openai.ResponseEvent{Type: "error", Code: e.Code, Message: e.Msg}
	if ev.Code == "" {
		ev.Code = e.Type
	}
	if e.Param != "" {
		ev.Param = &e.Param
	}
	return f.event(ev)
}

func (f *responseFormat) doneMarker() bool { return false }
