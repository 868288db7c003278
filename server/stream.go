package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/artgo/art/host"
	"github.com/artgo/art/openai"
)

// chatStream writes a streamed generation as server-sent events, token by
// token, for each of the APIs that stream: chat completions, the legacy
// completions and the Responses API differ only in the shape of their
// events (a streamFormat); what text may go out when, the writer and the
// errors are this type's, for all three.
//
// Every sampled token gets an event at once (for chat and completions,
// carrying its logprob entry and token id). Its text is released with a
// delay so that the concatenated content equals the non-streamed content
// exactly:
//
//   - the latest token of a choice is held back (it may be the stop token,
//     whose text is not content);
//   - with stop strings, the last len(longest stop)-1 bytes are held back
//     (they may begin the stop string, which is not content);
//   - with tools, text that may begin a tool call is held back, and once a
//     call begins no more content is streamed;
//   - an incomplete UTF-8 character is held back.
//
// When generation ends, the format's closing events carry the rest of
// each choice's final content, its tool calls and its finish reason.
type chatStream struct {
	s      *Server
	w      http.ResponseWriter
	rc     *http.ResponseController
	creq   host.ChatRequest
	format streamFormat
	// params names the host's request fields as the client's API does, in
	// errors.
	params func(string) string

	// firstToken, if set, is called at the first sampled token (and then
	// cleared): it records the time to first token.
	firstToken func()

	stopHold int             // bytes held back for stop strings
	tools    host.ToolFormat // ToolsNone unless tool calls are parsed
	choices  []choiceStream

	// Token events are queued by the generating goroutines and written by
	// a writer goroutine, so that generation never waits on the socket and
	// events sampled meanwhile go out in one write.
	mu      sync.Mutex // guards queue, werr and started
	queue   []byte     // encoded events not yet written
	werr    error      // the writer's error; stops generation
	started bool       // the response has begun (or will: the writer is running)
	wake    chan struct{}
	quit    chan struct{}
	stopped chan struct{}
}

// streamFormat shapes a stream's events as one API does. Its methods are
// called one at a time, in the order of the stream.
type streamFormat interface {
	// token returns the events of a sampled token of a choice; text is
	// the content released with it ("" if none).
	token(ev host.StreamEvent, text string) []any
	// finish returns the closing events once generation has ended; rest
	// holds each choice's content not sent yet.
	finish(resp host.ChatResponse, rest []string) []any
	// fail returns the event that reports e once the response has begun.
	fail(e *apiError) any
	// doneMarker says whether the stream ends with "data: [DONE]".
	doneMarker() bool
}

// choiceStream is the state of one choice of a stream.
type choiceStream struct {
	text     []byte // the bytes of every token but the latest
	latest   []byte // the bytes of the latest token
	sent     int    // bytes of text already sent as content
	toolHold bool   // a tool call may have begun: content waits for the end
}

func (s *Server) newStream(w http.ResponseWriter, creq host.ChatRequest, params func(string) string, format streamFormat) *chatStream {
	st := &chatStream{s: s, w: w, rc: http.NewResponseController(w), creq: creq, format: format, params: params,
		choices: make([]choiceStream, max(creq.N, 1)), wake: make(chan struct{}, 1), quit: make(chan struct{}), stopped: make(chan struct{})}
	start := time.Now()
	st.firstToken = func() { s.metrics.firstToken(time.Since(start)) }
	for _, stop := range creq.Stop {
		st.stopHold = max(st.stopHold, len(stop)-1)
	}
	if creq.ParseToolCalls && len(creq.Tools) > 0 {
		st.tools = s.model.Info().ToolFormat
	}
	return st
}

// run generates and streams the completion, and returns the status to
// count it under.
func (st *chatStream) run(ctx, clientCtx context.Context) int {
	resp, err := st.s.model.Chat(ctx, st.creq, st.onToken)
	st.stopWriter()
	if err != nil {
		if errors.Is(err, errClientGone) {
			st.s.log.Info("server: stream client went away; generation cancelled", "err", err)
			return statusClientClosed
		}
		e := st.s.chatError(err, ctx, clientCtx, st.params)
		if clientCtx.Err() != nil {
			return e.Status
		}
		if !st.started {
			writeError(st.w, e)
			return e.Status
		}
		// Headers are gone: report in band, as OpenAI and vLLM do.
		st.send(st.format.fail(e))
		st.done()
		return e.Status
	}
	st.s.countTokens(ctx, resp)
	rest := make([]string, len(resp.Choices))
	for i, ch := range resp.Choices {
		rest[i] = st.rest(i, ch)
	}
	for _, ev := range st.format.finish(resp, rest) {
		if st.send(ev) != nil {
			return statusClientClosed
		}
	}
	st.done()
	return http.StatusOK
}

// onToken streams one sampled token. The service calls it from one
// generating goroutine at a time.
func (st *chatStream) onToken(ev host.StreamEvent) error {
	if st.firstToken != nil { // onToken runs on one goroutine at a time
		st.firstToken()
		st.firstToken = nil
	}
	cs := &st.choices[ev.Choice]
	cs.text = append(cs.text, cs.latest...)
	cs.latest = append(cs.latest[:0], ev.Token.Bytes...)
	return st.enqueue(st.format.token(ev, st.release(cs))...)
}

// rest returns the final content of choice i that was not streamed yet.
func (st *chatStream) rest(i int, ch host.ChatChoice) string {
	sent := string(st.choices[i].text[:st.choices[i].sent])
	rest, ok := strings.CutPrefix(ch.Content, sent)
	if !ok {
		// Only leading whitespace trimmed around a tool call can differ.
		rest, _ = strings.CutPrefix(ch.Content, strings.TrimLeft(sent, " \t\r\n"))
	}
	return rest
}

const hermesOpen = "<tool_call>"

// release returns the text of cs that can be sent now and marks it sent.
func (st *chatStream) release(cs *choiceStream) string {
	if cs.toolHold {
		return ""
	}
	text := cs.text
	end := len(text)
	if st.stopHold > 0 {
		end -= st.stopHold
	}
	switch st.tools {
	case host.ToolsHermes:
		from := max(0, cs.sent-len(hermesOpen))
		if k := bytes.Index(text[from:], []byte(hermesOpen)); k >= 0 {
			end = min(end, from+k)
			cs.toolHold = true
		} else {
			for j := min(len(hermesOpen)-1, len(text)); j > 0; j-- {
				if bytes.HasSuffix(text, []byte(hermesOpen[:j])) {
					end = min(end, len(text)-j)
					break
				}
			}
		}
		// Whitespace before a call is trimmed from the final content.
		if end > cs.sent {
			end = cs.sent + len(bytes.TrimRight(text[cs.sent:end], " \t\r\n"))
		}
	case host.ToolsLlama3JSON:
		// A Llama 3 call is the whole output: hold everything that may be one.
		trimmed := bytes.TrimLeft(text, " \t\r\n")
		const tag = "<|python_tag|>"
		switch {
		case len(trimmed) == 0:
			return ""
		case trimmed[0] == '{' || bytes.HasPrefix(trimmed, []byte(tag)) || strings.HasPrefix(tag, string(trimmed)):
			if cs.sent == 0 {
				cs.toolHold = true
				return ""
			}
		}
	}
	end = completeUTF8(text, end)
	if end <= cs.sent {
		return ""
	}
	out := string(text[cs.sent:end])
	cs.sent = end
	return out
}

// completeUTF8 moves end back over an incomplete UTF-8 character at the
// end of text[:end] (one that more bytes could complete).
func completeUTF8(text []byte, end int) int {
	for i := end - 1; i >= 0 && i >= end-utf8.UTFMax+1; i-- {
		if utf8.RuneStart(text[i]) {
			if !utf8.FullRune(text[i:end]) {
				return i
			}
			break
		}
	}
	return end
}

// enqueue queues events for the writer goroutine, starting it with the
// first event. It returns the writer's error once the client is gone.
func (st *chatStream) enqueue(events ...any) error {
	if len(events) == 0 {
		return nil
	}
	var buf []byte
	for _, ev := range events {
		var err error
		if buf, err = appendEvent(buf, ev); err != nil {
			return err
		}
	}
	st.mu.Lock()
	if st.werr != nil {
		err := st.werr
		st.mu.Unlock()
		return err
	}
	wake := len(st.queue) == 0 // else the writer has a wake-up pending
	st.queue = append(st.queue, buf...)
	if !st.started {
		st.started = true
		go st.writer()
	}
	st.mu.Unlock()
	if wake {
		select {
		case st.wake <- struct{}{}:
		default:
		}
	}
	return nil
}

// appendEvent appends ev as a server-sent event: its JSON as the data,
// after an "event:" line naming a Responses API event's type, as OpenAI
// sends them.
func appendEvent(dst []byte, ev any) ([]byte, error) {
	b, err := json.Marshal(ev)
	if err != nil {
		return dst, fmt.Errorf("server: encode event: %w", err)
	}
	if re, ok := ev.(openai.ResponseEvent); ok {
		dst = append(dst, "event: "+re.Type+"\n"...)
	}
	dst = append(dst, "data: "...)
	dst = append(dst, b...)
	return append(dst, "\n\n"...), nil
}

// writer writes queued events until stopWriter, starting the response.
func (st *chatStream) writer() {
	defer close(st.stopped)
	st.writeHeader()
	var buf []byte
	for {
		quit := false
		select {
		case <-st.wake:
		case <-st.quit:
			quit = true
		}
		st.mu.Lock()
		buf, st.queue = st.queue, buf[:0]
		failed := st.werr != nil
		st.mu.Unlock()
		if len(buf) > 0 && !failed {
			if err := st.write(buf); err != nil {
				st.mu.Lock()
				st.werr = err
				st.mu.Unlock()
			}
		}
		if quit {
			return
		}
	}
}

// stopWriter flushes the queue and stops the writer goroutine, if any;
// after it returns, the calling goroutine owns the response again.
func (st *chatStream) stopWriter() {
	st.mu.Lock()
	started := st.started
	st.mu.Unlock()
	if !started {
		return
	}
	close(st.quit)
	<-st.stopped
}

func (st *chatStream) writeHeader() {
	h := st.w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	st.w.WriteHeader(http.StatusOK)
}

func (st *chatStream) write(b []byte) error {
	if _, err := st.w.Write(b); err != nil {
		return fmt.Errorf("%w: %v", errClientGone, err)
	}
	if err := st.rc.Flush(); err != nil {
		return fmt.Errorf("%w: %v", errClientGone, err)
	}
	return nil
}

// send writes one event at once, starting the response if needed. Only
// the handler's goroutine calls it, after stopWriter.
func (st *chatStream) send(ev any) error {
	b, err := appendEvent(nil, ev)
	if err != nil {
		b, _ = appendEvent(nil, st.format.fail(internalError(err)))
	}
	if !st.started {
		st.started = true
		st.writeHeader()
	}
	return st.write(b)
}

// errClientGone marks a failed write to the client.
var errClientGone = errors.New("server: client connection lost")

// statusClientClosed counts requests whose client went away (nginx's 499);
// it is never written.
const statusClientClosed = 499

func (st *chatStream) done() {
	if !st.started || !st.format.doneMarker() {
		return
	}
	st.w.Write([]byte("data: [DONE]\n\n"))
	st.rc.Flush()
}

// chatFormat shapes a stream as chat completion chunks: one per token
// (its logprob entry and token id, the content released with it), then
// each choice's last chunk (the rest of its content, its tool calls and
// finish reason), the usage chunk if asked, and [DONE].
type chatFormat struct {
	req      *openai.ChatCompletionRequest
	id       string
	created  int64
	model    string
	top      bool
	roleSent []bool
}

func newChatFormat(req *openai.ChatCompletionRequest, creq host.ChatRequest) *chatFormat {
	return &chatFormat{req: req, id: completionID(), created: time.Now().Unix(), model: creq.Model, top: creq.TopLogprobs > 0,
		roleSent: make([]bool, max(creq.N, 1))}
}

func (f *chatFormat) chunk(cc openai.ChunkChoice) openai.ChatCompletionChunk {
	c := openai.ChatCompletionChunk{ID: f.id, Object: openai.ObjectChatCompletionChunk, Created: f.created, Model: f.model}
	if !f.roleSent[cc.Index] {
		cc.Delta.Role, f.roleSent[cc.Index] = "assistant", true
	}
	c.Choices = []openai.ChunkChoice{cc}
	return c
}

func (f *chatFormat) token(ev host.StreamEvent, text string) []any {
	cc := openai.ChunkChoice{Index: ev.Choice, TokenIDs: []int{ev.Token.ID},
		Logprobs: &openai.Logprobs{Content: []openai.TokenLogprob{logprob(ev.Token, f.top)}}}
	if text != "" || !f.roleSent[ev.Choice] {
		cc.Delta.Content = &text
	}
	return []any{f.chunk(cc)}
}

func (f *chatFormat) finish(resp host.ChatResponse, rest []string) []any {
	chunks := make([]openai.ChatCompletionChunk, 0, len(resp.Choices)+1)
	for i, ch := range resp.Choices {
		cc := openai.ChunkChoice{Index: i, FinishReason: &ch.FinishReason, Delta: openai.Delta{ToolCalls: toolCalls(ch.ToolCalls, true)}}
		if rest[i] != "" {
			cc.Delta.Content = &rest[i]
		}
		chunks = append(chunks, f.chunk(cc))
	}
	if f.req.IncludeUsage() {
		c := openai.ChatCompletionChunk{ID: f.id, Object: openai.ObjectChatCompletionChunk, Created: f.created, Model: f.model,
			Choices: []openai.ChunkChoice{}, Usage: usage(resp)}
		chunks = append(chunks, c)
	}
	chunks[len(chunks)-1].PromptTokenIDs = resp.PromptTokenIDs
	out := make([]any, len(chunks))
	for i, c := range chunks {
		out[i] = c
	}
	return out
}

func (f *chatFormat) fail(e *apiError) any { return errorBody(e) }
func (f *chatFormat) doneMarker() bool     { return true }
