package art

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// responsesRequest is what the Recorder reads of a Responses API request.
type responsesRequest struct {
	Input              json.RawMessage   `json:"input"`
	Instructions       string            `json:"instructions"`
	PreviousResponseID string            `json:"previous_response_id"`
	Tools              []json.RawMessage `json:"tools"`
	Stream             bool              `json:"stream"`
}

// recordedResponse is what the Recorder reads of a Responses API response
// from `art serve`: its id, model, output item ids and trainable choice.
type recordedResponse struct {
	ID     string `json:"id"`
	Model  string `json:"model"`
	Output []struct {
		Type string `json:"type"`
		ID   string `json:"id"`
	} `json:"output"`
	Choice *Choice `json:"choice"`
}

// recordResponse records a successful POST …/responses: the request's
// items (expanded with the responses recorded before, for
// previous_response_id and item_reference) and the response's choice.
func (r *Recorder) recordResponse(body []byte, resp *http.Response) {
	var req responsesRequest
	if err := json.Unmarshal(body, &req); err != nil {
		r.fail(fmt.Errorf("art: recorder: decode responses request: %w", err))
		return
	}
	r.mu.Lock()
	if r.conv == nil {
		r.conv = NewResponsesConversation(0)
	}
	conv := r.conv
	r.mu.Unlock()
	input := req.Input
	if len(bytes.TrimSpace(input)) == 0 {
		input = json.RawMessage("[]")
	}
	msgs, err := conv.Messages(req.PreviousResponseID, input)
	if err != nil {
		r.fail(fmt.Errorf("art: recorder: responses request: %w", err))
		return
	}
	tools, err := ResponsesTools(req.Tools)
	if err != nil {
		r.fail(fmt.Errorf("art: recorder: responses request: %w", err))
		return
	}
	record := func(data []byte) {
		var rr recordedResponse
		if err := json.Unmarshal(data, &rr); err != nil {
			r.fail(fmt.Errorf("art: recorder: decode response: %w", err))
			return
		}
		if rr.Choice == nil {
			r.fail(fmt.Errorf("art: recorder: response %s has no \"choice\" with token ids (is it from art serve?)", rr.ID))
			return
		}
		var msgID string
		var callIDs []string
		for _, it := range rr.Output {
			switch it.Type {
			case "message":
				msgID = it.ID
			case "function_call":
				callIDs = append(callIDs, it.ID)
			}
		}
		conv.Remember(rr.ID, msgs, *rr.Choice, msgID, callIDs)
		sent := msgs
		if req.Instructions != "" {
			sent = append([]Message{SystemMsg(req.Instructions)}, msgs...)
		}
		r.add(sent, tools, rr.Model, *rr.Choice)
	}
	if req.Stream || strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		asm := &responseEvents{}
		resp.Body = &sseRecorder{body: resp.Body, asm: asm, done: func(_ string, _ *Choice, err error) {
			switch {
			case err != nil:
				r.fail(err)
			case asm.final != nil:
				record(asm.final)
			}
		}}
		return
	}
	data, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	resp.Body = io.NopCloser(bytes.NewReader(data))
	if err != nil {
		r.fail(fmt.Errorf("art: recorder: read response: %w", err))
		return
	}
	record(data)
}

// responseEvents keeps the final response of a Responses API stream (the
// response.completed or response.incomplete event).
type responseEvents struct {
	final json.RawMessage
}

func (a *responseEvents) add(data []byte) error {
	var ev struct {
		Type     string          `json:"type"`
		Response json.RawMessage `json:"response"`
	}
	if err := json.Unmarshal(data, &ev); err != nil {
		return fmt.Errorf("art: recorder: decode response event: %w", err)
	}
	switch ev.Type {
	case "response.completed", "response.incomplete":
		a.final = ev.Response
	case "response.failed", "error":
		return fmt.Errorf("art: recorder: the stream reported an error: %s", data)
	}
	return nil
}

func (a *responseEvents) result() (string, *Choice, error) { return "", nil, nil }
