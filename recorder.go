package art

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/artgo/art/internal/tracing"
)

// Recorder is an http.RoundTripper that records the chat completions an
// agent makes into a Trajectory, whatever OpenAI-compatible client the
// agent uses (openai-go, go-openai, langchaingo, eino, ...): give the
// client Recorder.Client(), or the Recorder as its transport, run the
// rollout, then take Trajectory() and set its reward.
//
//	rec := art.NewRecorder(nil)
//	client := goopenai.NewClientWithConfig(cfg) // cfg.HTTPClient = rec.Client()
//	... run the agent ...
//	traj := rec.Trajectory()
//	traj.Reward = score
//
// Each successful POST to a path ending in "/chat/completions", plain or
// streamed (SSE), adds the response's first choice to a history, as ART's
// auto_trajectory does: to the first history (the main one, then the
// additional ones) whose messages are a prefix of the request's messages
// and whose tools are the request's, after appending the request's new
// messages; otherwise to a new additional history. The first request
// fills the main history. Choices keep the token ids and logprobs the
// server sent (an `art serve` endpoint always sends them), so they train.
// When the response's model is "name@step", the trajectory's initial and
// final policy versions record the steps that answered.
//
// A POST to a path ending in "/responses" (the Responses API) is recorded
// the same way: its input items, expanded with the responses this Recorder
// recorded before (previous_response_id, item_reference), become the
// request's messages (after the instructions), and the response's "choice"
// (which `art serve` adds) is the answer.
//
// A streamed response is recorded when the client has read it to its end
// ("data: [DONE]" or EOF). Responses that cannot be decoded are passed to
// the client unchanged and reported by Err. Use one Recorder per rollout;
// its methods are safe for concurrent use.
//
// In a gathered rollout, a chat request without a seed gets one (see
// GatherOptions.Seed), as through Model.OpenAIClient.
type Recorder struct {
	// Transport sends the requests; nil means http.DefaultTransport.
	Transport http.RoundTripper

	mu   sync.Mutex // guards traj, errs and conv
	traj Trajectory
	errs []error
	conv *ResponsesConversation // the responses recorded, for previous_response_id
}

// NewRecorder returns a Recorder sending requests through transport (nil
// means http.DefaultTransport).
func NewRecorder(transport http.RoundTripper) *Recorder { return &Recorder{Transport: transport} }

// Client returns an http.Client whose transport is r.
func (r *Recorder) Client() *http.Client { return &http.Client{Transport: r} }

// Trajectory returns a copy of the trajectory recorded so far.
func (r *Recorder) Trajectory() Trajectory {
	r.mu.Lock()
	defer r.mu.Unlock()
	t := r.traj
	t.MessagesAndChoices = slices.Clone(t.MessagesAndChoices)
	t.Tools = slices.Clone(t.Tools)
	t.AdditionalHistories = slices.Clone(t.AdditionalHistories)
	for i := range t.AdditionalHistories {
		h := &t.AdditionalHistories[i]
		h.MessagesAndChoices = slices.Clone(h.MessagesAndChoices)
		h.Tools = slices.Clone(h.Tools)
	}
	return t
}

// Err reports the exchanges that could not be recorded, or nil.
func (r *Recorder) Err() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return errors.Join(r.errs...)
}

func (r *Recorder) fail(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errs = append(r.errs, err)
}

// RoundTrip sends req and records it if it is a chat completion.
func (r *Recorder) RoundTrip(req *http.Request) (*http.Response, error) {
	t := tracing.Transport(r.Transport) // sends the trace context and trajectory id
	// Chat completions are seeded and recorded; responses are recorded as
	// they are (OpenAI's responses API takes no seed).
	responses := req.Method == http.MethodPost && req.Body != nil && strings.HasSuffix(req.URL.Path, "/responses")
	if !responses && !seedable(req) {
		return t.RoundTrip(req)
	}
	out, body, err := withBody(req, func(b []byte) []byte {
		if responses {
			return b
		}
		return seedBody(req.Context(), b)
	})
	if err != nil {
		return nil, fmt.Errorf("art: recorder: %w", err)
	}
	resp, err := t.RoundTrip(out)
	if err != nil || resp.StatusCode != http.StatusOK {
		return resp, err
	}
	if responses {
		r.recordResponse(body, resp)
		return resp, nil
	}
	var creq struct {
		Messages []Message `json:"messages"`
		Tools    []Tool    `json:"tools"`
		Stream   bool      `json:"stream"`
	}
	if err := json.Unmarshal(body, &creq); err != nil {
		r.fail(fmt.Errorf("art: recorder: decode chat request: %w", err))
		return resp, nil
	}
	record := func(model string, c Choice) { r.add(creq.Messages, creq.Tools, model, c) }
	if creq.Stream || strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		resp.Body = &sseRecorder{body: resp.Body, asm: &chunkAssembler{}, done: func(model string, c *Choice, err error) {
			if err != nil {
				r.fail(err)
			} else if c != nil {
				record(model, *c)
			}
		}}
		return resp, nil
	}
	data, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	resp.Body = io.NopCloser(bytes.NewReader(data))
	if err != nil {
		// The client sees the same truncated body and its own error.
		r.fail(fmt.Errorf("art: recorder: read response: %w", err))
		return resp, nil
	}
	var cresp struct {
		Model   string   `json:"model"`
		Choices []Choice `json:"choices"`
	}
	if err := json.Unmarshal(data, &cresp); err != nil {
		r.fail(fmt.Errorf("art: recorder: decode chat completion: %w", err))
	} else if len(cresp.Choices) > 0 {
		record(cresp.Model, cresp.Choices[0])
	}
	return resp, nil
}

// add appends a request's new messages and its answer to the matching
// history.
func (r *Recorder) add(messages []Message, tools []Tool, model string, c Choice) {
	c.Model = model
	r.mu.Lock()
	defer r.mu.Unlock()
	t := &r.traj
	if _, s, ok := strings.Cut(model, "@"); ok {
		if step, err := strconv.Atoi(s); err == nil {
			if t.InitialPolicyVersion == nil {
				t.InitialPolicyVersion = &step
			}
			t.FinalPolicyVersion = &step
		}
	}
	if len(t.MessagesAndChoices) == 0 {
		t.Tools = tools
	}
	if extends(t.MessagesAndChoices, t.Tools, messages, tools) {
		for _, m := range messages[len(t.MessagesAndChoices):] {
			t.AddMessage(m)
		}
		t.AddChoice(c)
		return
	}
	for i := range t.AdditionalHistories {
		h := &t.AdditionalHistories[i]
		if extends(h.MessagesAndChoices, h.Tools, messages, tools) {
			for _, m := range messages[len(h.MessagesAndChoices):] {
				h.AddMessage(m)
			}
			h.AddChoice(c)
			return
		}
	}
	h := History{Tools: tools}
	for _, m := range messages {
		h.AddMessage(m)
	}
	h.AddChoice(c)
	t.AdditionalHistories = append(t.AdditionalHistories, h)
}

// extends reports whether a request (messages, tools) continues a history:
// the history's messages are a prefix of the request's and the tools are
// the same.
func extends(items []MessageOrChoice, htools []Tool, messages []Message, tools []Tool) bool {
	if len(items) > len(messages) || !sameJSON(htools, tools) {
		return false
	}
	for i, it := range items {
		if !sameMessage(it.AsMessage(), messages[i]) {
			return false
		}
	}
	return true
}

// sameMessage compares messages as a server would render them: null and
// empty content are the same, and tool-call arguments are compared as
// compact JSON.
func sameMessage(a, b Message) bool {
	if a.Role != b.Role || a.Name != b.Name || a.ToolCallID != b.ToolCallID || len(a.ToolCalls) != len(b.ToolCalls) {
		return false
	}
	if (a.Content.Parts == nil) != (b.Content.Parts == nil) {
		if a.Content.String() != b.Content.String() { // a text and a single text part are the same
			return false
		}
	} else if a.Content.Parts != nil {
		if !sameJSON(a.Content.Parts, b.Content.Parts) {
			return false
		}
	} else if a.Content.Text != b.Content.Text {
		return false
	}
	for i, ca := range a.ToolCalls {
		cb := b.ToolCalls[i]
		if ca.ID != cb.ID || ca.Function.Name != cb.Function.Name || !sameArguments(ca.Function.Arguments, cb.Function.Arguments) {
			return false
		}
	}
	return true
}

func sameArguments(a, b string) bool {
	if a == b {
		return true
	}
	var ca, cb bytes.Buffer
	return json.Compact(&ca, []byte(a)) == nil && json.Compact(&cb, []byte(b)) == nil && bytes.Equal(ca.Bytes(), cb.Bytes())
}

// sameJSON compares two values by their JSON encoding; empty lists and nil
// are the same.
func sameJSON[T any](a, b []T) bool {
	if len(a) == 0 || len(b) == 0 {
		return len(a) == len(b)
	}
	ja, err1 := json.Marshal(a)
	jb, err2 := json.Marshal(b)
	return err1 == nil && err2 == nil && bytes.Equal(ja, jb)
}

// sseRecorder passes a streamed chat completion through to the client and
// assembles its first choice from the chunks it reads.
type sseRecorder struct {
	body     io.ReadCloser
	done     func(model string, c *Choice, err error) // called once
	finished bool
	line     []byte // a partial line
	asm      streamAssembler
}

// streamAssembler puts together the answer of a stream from the payloads
// of its "data:" lines.
type streamAssembler interface {
	add(data []byte) error
	// result returns the model that answered and the answer, or nil if
	// the stream had none.
	result() (model string, c *Choice, err error)
}

func (s *sseRecorder) Read(p []byte) (int, error) {
	n, err := s.body.Read(p)
	if !s.finished {
		s.feed(p[:n])
	}
	if err == io.EOF && !s.finished && len(s.line) > 0 {
		s.feed([]byte("\n"))
	}
	if err != nil && !s.finished {
		if err == io.EOF {
			s.finish(nil)
		} else {
			s.finish(fmt.Errorf("art: recorder: read stream: %w", err))
		}
	}
	return n, err
}

func (s *sseRecorder) Close() error {
	if !s.finished {
		s.finish(errors.New("art: recorder: stream closed before its end; not recorded"))
	}
	return s.body.Close()
}

// feed splits data into lines and handles each "data:" line.
func (s *sseRecorder) feed(data []byte) {
	for len(data) > 0 && !s.finished {
		i := bytes.IndexByte(data, '\n')
		if i < 0 {
			s.line = append(s.line, data...)
			return
		}
		line := append(s.line, data[:i]...)
		s.line = s.line[:0]
		data = data[i+1:]
		payload, ok := bytes.CutPrefix(bytes.TrimRight(line, "\r"), []byte("data:"))
		if !ok {
			continue // comments, event names, blank separators
		}
		payload = bytes.TrimSpace(payload)
		if bytes.Equal(payload, []byte("[DONE]")) {
			s.finish(nil)
			return
		}
		if err := s.asm.add(payload); err != nil {
			s.finish(err)
			return
		}
	}
}

func (s *sseRecorder) finish(err error) {
	s.finished = true
	if err != nil {
		s.done("", nil, err)
		return
	}
	s.done(s.asm.result())
}

// chunkAssembler accumulates the first choice of a stream of chunks.
type chunkAssembler struct {
	model    string
	seen     bool
	content  strings.Builder
	calls    []ToolCall
	finish   string
	logprobs []TokenLogprob
	tokenIDs []int
}

type chunkJSON struct {
	Model   string `json:"model"`
	Choices []struct {
		Index int `json:"index"`
		Delta struct {
			Content   *string `json:"content"`
			ToolCalls []struct {
				Index    int    `json:"index"`
				ID       string `json:"id"`
				Type     string `json:"type"`
				Function struct {
					Name      string `json:"name"`
					Arguments string `json:"arguments"`
				} `json:"function"`
			} `json:"tool_calls"`
		} `json:"delta"`
		Logprobs *struct {
			Content []TokenLogprob `json:"content"`
		} `json:"logprobs"`
		FinishReason *string `json:"finish_reason"`
		TokenIDs     []int   `json:"token_ids"`
	} `json:"choices"`
	Error json.RawMessage `json:"error"`
}

func (a *chunkAssembler) add(data []byte) error {
	var ch chunkJSON
	if err := json.Unmarshal(data, &ch); err != nil {
		return fmt.Errorf("art: recorder: decode stream chunk: %w", err)
	}
	if len(ch.Error) > 0 && !bytes.Equal(ch.Error, []byte("null")) {
		return fmt.Errorf("art: recorder: the stream reported an error: %s", ch.Error)
	}
	if ch.Model != "" {
		a.model = ch.Model
	}
	for _, c := range ch.Choices {
		if c.Index != 0 {
			continue
		}
		a.seen = true
		if c.Delta.Content != nil {
			a.content.WriteString(*c.Delta.Content)
		}
		for _, tc := range c.Delta.ToolCalls {
			for len(a.calls) <= tc.Index {
				a.calls = append(a.calls, ToolCall{Type: "function"})
			}
			call := &a.calls[tc.Index]
			if tc.ID != "" {
				call.ID = tc.ID
			}
			if tc.Type != "" {
				call.Type = tc.Type
			}
			call.Function.Name += tc.Function.Name
			call.Function.Arguments += tc.Function.Arguments
		}
		if c.Logprobs != nil {
			a.logprobs = append(a.logprobs, c.Logprobs.Content...)
		}
		a.tokenIDs = append(a.tokenIDs, c.TokenIDs...)
		if c.FinishReason != nil {
			a.finish = *c.FinishReason
		}
	}
	return nil
}

// result returns the assembled first choice, or nil if the stream had none.
func (a *chunkAssembler) result() (string, *Choice, error) {
	if !a.seen {
		return a.model, nil, nil
	}
	c := &Choice{Index: 0, FinishReason: a.finish,
		Message: Message{Role: RoleAssistant, Content: Text(a.content.String()), ToolCalls: a.calls}}
	if a.logprobs != nil {
		c.Logprobs = a.logprobs
		if len(a.tokenIDs) == len(a.logprobs) {
			for i := range c.Logprobs {
				if c.Logprobs[i].TokenID < 0 {
					c.Logprobs[i].TokenID = a.tokenIDs[i]
				}
			}
		}
	}
	return a.model, c, nil
}

var _ io.ReadCloser = (*sseRecorder)(nil)
