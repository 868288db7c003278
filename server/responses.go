package server

import (
	"bytes"
	"context"
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
// A streamed response's events are sent once generation has ended: the
// answer is only known to be text or a tool call then.
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
	resp, ok := s.generate(w, r, creq, "max_output_tokens")
	if !ok {
		return
	}
	out := s.response(&req, resp, creq.TopLogprobs > 0)
	if req.Store == nil || *req.Store {
		s.remember(out, conv)
	}
	if req.Stream {
		writeResponseEvents(w, out)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

// fail counts a request that failed before generating and writes e.
func (s *Server) fail(w http.ResponseWriter, e *apiError) {
	s.metrics.request(e.Status)
	writeError(w, e)
}

// generate answers creq without streaming, as the responses and legacy
// completions endpoints do: it resolves the model to "name@step", bounds
// the work by the request timeout, counts it in the metrics and, on
// failure, writes the error (unless the client went away) and returns
// false. maxTokensParam names the request's max-tokens field in errors.
func (s *Server) generate(w http.ResponseWriter, r *http.Request, creq host.ChatRequest, maxTokensParam string) (host.ChatResponse, bool) {
	step, err := s.model.Resolve(creq.Model)
	if err != nil {
		s.fail(w, hostError(err, "model"))
		return host.ChatResponse{}, false
	}
	creq.Model = s.modelID(step)
	ctx, cancel := r.Context(), context.CancelFunc(func() {})
	if s.cfg.RequestTimeout > 0 {
		ctx, cancel = context.WithTimeout(ctx, s.cfg.RequestTimeout)
	}
	defer cancel()
	n := max(creq.N, 1)
	s.metrics.start(n)
	defer s.metrics.finish(n)
	resp, err := s.model.Chat(ctx, creq, nil)
	if err != nil {
		e := s.chatError(err, ctx, r.Context(), maxTokensParam)
		s.metrics.request(e.Status)
		if r.Context().Err() == nil {
			writeError(w, e)
		}
		return host.ChatResponse{}, false
	}
	s.metrics.tokens(len(resp.PromptTokenIDs), resp.CompletionTokens)
	s.metrics.request(http.StatusOK)
	return resp, true
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

// response assembles the Responses API answer of a finished generation.
func (s *Server) response(req *openai.ResponsesRequest, resp host.ChatResponse, top bool) openai.Response {
	chat := completion(resp, "", 0, top)
	c := chat.Choices[0]
	hc := resp.Choices[0]
	out := openai.Response{ID: "resp_" + randomHex(), Object: openai.ObjectResponse, CreatedAt: time.Now().Unix(),
		Status: openai.ResponseCompleted, Model: resp.Model, Instructions: req.Instructions, Output: []openai.OutputItem{},
		ParallelToolCalls: true, Temperature: req.Temperature, TopP: req.TopP, ToolChoice: req.ToolChoice, Tools: req.Tools,
		Text: openai.ResponsesText{Format: &openai.ResponsesFormat{Type: "text"}}, Store: req.Store == nil || *req.Store,
		Metadata: req.Metadata, Choice: &c, PromptTokenIDs: resp.PromptTokenIDs}
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
	if hc.FinishReason == openai.FinishLength {
		out.Status = openai.ResponseIncomplete
		out.IncompleteDetails = &openai.IncompleteDetails{Reason: "max_output_tokens"}
	}
	if hc.Content != "" || len(hc.ToolCalls) == 0 {
		part := openai.OutputPart{Type: "output_text", Text: hc.Content, Annotations: []json.RawMessage{}, Logprobs: []openai.TokenLogprob{}}
		if top {
			part.Logprobs = c.Logprobs.Content
		}
		out.Output = append(out.Output, openai.OutputItem{Type: "message", ID: "msg_" + randomHex(), Status: out.Status,
			Role: "assistant", Content: []openai.OutputPart{part}})
	}
	for _, tc := range hc.ToolCalls {
		out.Output = append(out.Output, openai.OutputItem{Type: "function_call", ID: "fc_" + randomHex(), Status: openai.ResponseCompleted,
			CallID: tc.ID, Name: tc.Name, Arguments: tc.Arguments})
	}
	u := usage(resp)
	out.Usage = &openai.ResponsesUsage{InputTokens: u.PromptTokens, OutputTokens: u.CompletionTokens, TotalTokens: u.TotalTokens}
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

// writeResponseEvents writes a finished response as the Responses API's
// stream of events: created, in_progress, each output item (added, its
// text or arguments as one delta, done) and completed.
func writeResponseEvents(w http.ResponseWriter, out openai.Response) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	var buf bytes.Buffer
	seq := 0
	emit := func(ev openai.ResponseEvent) {
		ev.SequenceNumber = seq
		seq++
		b, _ := json.Marshal(ev)
		buf.WriteString("event: " + ev.Type + "\ndata: ")
		buf.Write(b)
		buf.WriteString("\n\n")
	}
	start := out
	start.Status, start.Output, start.Usage, start.IncompleteDetails = openai.ResponseInProgress, []openai.OutputItem{}, nil, nil
	emit(openai.ResponseEvent{Type: "response.created", Response: &start})
	emit(openai.ResponseEvent{Type: "response.in_progress", Response: &start})
	zero := 0
	for i, it := range out.Output {
		added := it
		added.Status = openai.ResponseInProgress
		switch it.Type {
		case "message":
			added.Content = []openai.OutputPart{}
			emit(openai.ResponseEvent{Type: "response.output_item.added", OutputIndex: &i, Item: &added})
			part := it.Content[0]
			empty := openai.OutputPart{Type: part.Type, Annotations: []json.RawMessage{}, Logprobs: []openai.TokenLogprob{}}
			emit(openai.ResponseEvent{Type: "response.content_part.added", ItemID: it.ID, OutputIndex: &i, ContentIndex: &zero, Part: &empty})
			emit(openai.ResponseEvent{Type: "response.output_text.delta", ItemID: it.ID, OutputIndex: &i, ContentIndex: &zero, Delta: &part.Text, Logprobs: part.Logprobs})
			emit(openai.ResponseEvent{Type: "response.output_text.done", ItemID: it.ID, OutputIndex: &i, ContentIndex: &zero, Text: &part.Text, Logprobs: part.Logprobs})
			emit(openai.ResponseEvent{Type: "response.content_part.done", ItemID: it.ID, OutputIndex: &i, ContentIndex: &zero, Part: &part})
		case "function_call":
			added.Arguments = ""
			emit(openai.ResponseEvent{Type: "response.output_item.added", OutputIndex: &i, Item: &added})
			emit(openai.ResponseEvent{Type: "response.function_call_arguments.delta", ItemID: it.ID, OutputIndex: &i, Delta: &it.Arguments})
			emit(openai.ResponseEvent{Type: "response.function_call_arguments.done", ItemID: it.ID, OutputIndex: &i, Arguments: &it.Arguments})
		}
		emit(openai.ResponseEvent{Type: "response.output_item.done", OutputIndex: &i, Item: &out.Output[i]})
	}
	final := "response.completed"
	if out.Status == openai.ResponseIncomplete {
		final = "response.incomplete"
	}
	emit(openai.ResponseEvent{Type: final, Response: &out})
	w.Write(buf.Bytes())
}
