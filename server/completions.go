package server

import (
	"bytes"
	"encoding/json"
	"net/http"
	"time"

	"github.com/artgo/art/host"
	"github.com/artgo/art/openai"
)

// defaultCompletionTokens is the legacy API's max_tokens default.
const defaultCompletionTokens = 16

// handleCompletions answers POST /v1/completions, the legacy completions
// API: the prompt is raw text (no chat template), sampled like a chat with
// the same parameters; choices carry token_ids and the response
// prompt_token_ids. A streamed completion sends a chunk per sampled token
// (see chatStream).
func (s *Server) handleCompletions(w http.ResponseWriter, r *http.Request) {
	var req openai.CompletionRequest
	if e := s.decode(w, r, &req); e != nil {
		s.fail(w, e)
		return
	}
	creq, e := s.completionRequest(&req)
	if e != nil {
		s.fail(w, e)
		return
	}
	if req.Stream {
		includeUsage := req.StreamOptions != nil && req.StreamOptions.IncludeUsage
		s.stream(w, r, creq, sameParams, func(creq host.ChatRequest) streamFormat {
			return &completionFormat{id: "cmpl-" + randomHex(), created: time.Now().Unix(), model: creq.Model, top: creq.TopLogprobs,
				includeUsage: includeUsage, offsets: make([]int, max(creq.N, 1))}
		})
		return
	}
	resp, ok := s.generate(w, r, creq, sameParams)
	if !ok {
		return
	}
	writeJSON(w, http.StatusOK, textCompletion(resp, creq.TopLogprobs))
}

// completionFormat shapes a stream as legacy completion chunks: one per
// token (the text released with it, its logprob and token id), then each
// choice's last chunk (the rest of its text and its finish reason), the
// usage chunk if asked, and [DONE].
type completionFormat struct {
	id           string
	created      int64
	model        string
	top          int // alternatives per token
	includeUsage bool
	offsets      []int // each choice's bytes so far, for text_offset
}

func (f *completionFormat) chunk(choices ...openai.CompletionChoice) openai.Completion {
	return openai.Completion{ID: f.id, Object: openai.ObjectTextCompletion, Created: f.created, Model: f.model, Choices: choices}
}

func (f *completionFormat) token(ev host.StreamEvent, text string) []any {
	lp := emptyCompletionLogprobs()
	appendCompletionLogprob(lp, ev.Token, f.offsets[ev.Choice], f.top)
	f.offsets[ev.Choice] += len(ev.Token.Bytes)
	return []any{f.chunk(openai.CompletionChoice{Index: ev.Choice, Text: text, Logprobs: lp, TokenIDs: []int{ev.Token.ID}})}
}

func (f *completionFormat) finish(resp host.ChatResponse, rest []string) []any {
	var out []any
	var last openai.Completion
	for i, c := range resp.Choices {
		if i > 0 {
			out = append(out, last)
		}
		finish := c.FinishReason
		last = f.chunk(openai.CompletionChoice{Index: c.Index, Text: rest[i], Logprobs: emptyCompletionLogprobs(), FinishReason: &finish})
	}
	if f.includeUsage {
		out = append(out, last)
		last = f.chunk()
		last.Choices, last.Usage = []openai.CompletionChoice{}, usage(resp)
	}
	last.PromptTokenIDs = resp.PromptTokenIDs
	return append(out, last)
}

func (f *completionFormat) fail(e *apiError) any { return errorBody(e) }
func (f *completionFormat) doneMarker() bool     { return true }

// completionRequest validates a legacy completion request and turns it
// into the host's request (with a raw prompt). The sampling parameters are
// checked by chatRequest, on a stand-in message.
func (s *Server) completionRequest(req *openai.CompletionRequest) (host.ChatRequest, *apiError) {
	var prompt string
	raw := bytes.TrimSpace(req.Prompt)
	var list []string
	switch {
	case len(raw) > 0 && raw[0] == '"' && json.Unmarshal(raw, &prompt) == nil:
	case len(raw) > 0 && raw[0] == '[' && json.Unmarshal(raw, &list) == nil && len(list) == 1:
		prompt = list[0]
	default:
		return host.ChatRequest{}, badRequest("prompt", "prompt must be a string (or a list of one string); token arrays and batches are not supported, got %.60s", raw)
	}
	if prompt == "" {
		return host.ChatRequest{}, badRequest("prompt", "prompt must not be empty")
	}
	switch {
	case req.Echo:
		return host.ChatRequest{}, unsupported("echo", "echo is not supported")
	case req.Suffix != nil && *req.Suffix != "":
		return host.ChatRequest{}, unsupported("suffix", "suffix is not supported")
	case req.BestOf != nil && *req.BestOf > 1:
		return host.ChatRequest{}, unsupported("best_of", "best_of is not supported; use n")
	case req.Logprobs != nil && (*req.Logprobs < 0 || *req.Logprobs > 5):
		return host.ChatRequest{}, badRequest("logprobs", "logprobs must be in [0, 5], got %d", *req.Logprobs)
	}
	maxTokens := defaultCompletionTokens
	if req.MaxTokens != nil {
		maxTokens = *req.MaxTokens
	}
	chat := openai.ChatCompletionRequest{Model: req.Model, Messages: []json.RawMessage{json.RawMessage(`{"role":"user","content":""}`)},
		N: req.N, Temperature: req.Temperature, TopP: req.TopP, MaxTokens: &maxTokens, Stop: req.Stop, Seed: req.Seed,
		TopLogprobs: req.Logprobs, FrequencyPenalty: req.FrequencyPenalty, PresencePenalty: req.PresencePenalty, LogitBias: req.LogitBias,
		VLLMExtras: req.VLLMExtras}
	creq, e := s.chatRequest(&chat)
	if e != nil {
		if e.Param == "top_logprobs" {
			e.Param = "logprobs"
		}
		return host.ChatRequest{}, e
	}
	creq.Messages, creq.Prompt = nil, &prompt
	return creq, nil
}

// textCompletion assembles a legacy completion; top is the alternatives
// asked for per token.
func textCompletion(resp host.ChatResponse, top int) openai.Completion {
	out := openai.Completion{ID: "cmpl-" + randomHex(), Object: openai.ObjectTextCompletion, Created: time.Now().Unix(), Model: resp.Model,
		Usage: usage(resp), PromptTokenIDs: resp.PromptTokenIDs}
	for _, c := range resp.Choices {
		finish := c.FinishReason
		lp := emptyCompletionLogprobs()
		ids := make([]int, len(c.Tokens))
		offset := 0
		for i, t := range c.Tokens {
			ids[i] = t.ID
			appendCompletionLogprob(lp, t, offset, top)
			offset += len(t.Bytes)
		}
		out.Choices = append(out.Choices, openai.CompletionChoice{Index: c.Index, Text: c.Content, Logprobs: lp, FinishReason: &finish, TokenIDs: ids})
	}
	return out
}

func emptyCompletionLogprobs() *openai.CompletionLogprobs {
	return &openai.CompletionLogprobs{Tokens: []string{}, TokenLogprobs: []float64{}, TopLogprobs: []map[string]float64{}, TextOffset: []int{}}
}

// appendCompletionLogprob appends token t, at byte offset of its choice's
// text, to lp, with its top alternatives if asked for.
func appendCompletionLogprob(lp *openai.CompletionLogprobs, t host.Token, offset, top int) {
	lp.Tokens = append(lp.Tokens, string(t.Bytes))
	lp.TokenLogprobs = append(lp.TokenLogprobs, t.Logprob)
	lp.TextOffset = append(lp.TextOffset, offset)
	if top > 0 {
		alts := map[string]float64{}
		for _, a := range t.Top {
			alts[string(a.Bytes)] = a.Logprob
		}
		lp.TopLogprobs = append(lp.TopLogprobs, alts)
	}
}
