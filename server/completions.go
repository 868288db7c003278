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
// prompt_token_ids. A streamed completion sends each choice's text in one
// chunk once generation has ended.
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
	resp, ok := s.generate(w, r, creq, "max_tokens")
	if !ok {
		return
	}
	out := textCompletion(resp, creq.TopLogprobs)
	if !req.Stream {
		writeJSON(w, http.StatusOK, out)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	var buf []byte
	for _, c := range out.Choices {
		chunk := out
		chunk.Usage, chunk.PromptTokenIDs, chunk.Choices = nil, nil, []openai.CompletionChoice{c}
		b, _ := json.Marshal(chunk)
		buf = appendEvent(buf, b)
	}
	if req.StreamOptions != nil && req.StreamOptions.IncludeUsage {
		last := out
		last.Choices = []openai.CompletionChoice{}
		b, _ := json.Marshal(last)
		buf = appendEvent(buf, b)
	}
	buf = appendEvent(buf, []byte("[DONE]"))
	w.Write(buf)
}

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
		TopLogprobs: req.Logprobs, FrequencyPenalty: req.FrequencyPenalty, PresencePenalty: req.PresencePenalty, LogitBias: req.LogitBias}
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
		lp := &openai.CompletionLogprobs{Tokens: []string{}, TokenLogprobs: []float64{}, TopLogprobs: []map[string]float64{}, TextOffset: []int{}}
		ids := make([]int, len(c.Tokens))
		offset := 0
		for i, t := range c.Tokens {
			ids[i] = t.ID
			lp.Tokens = append(lp.Tokens, string(t.Bytes))
			lp.TokenLogprobs = append(lp.TokenLogprobs, t.Logprob)
			lp.TextOffset = append(lp.TextOffset, offset)
			offset += len(t.Bytes)
			if top > 0 {
				alts := map[string]float64{}
				for _, a := range t.Top {
					alts[string(a.Bytes)] = a.Logprob
				}
				lp.TopLogprobs = append(lp.TopLogprobs, alts)
			}
		}
		out.Choices = append(out.Choices, openai.CompletionChoice{Index: c.Index, Text: c.Content, Logprobs: lp, FinishReason: &finish, TokenIDs: ids})
	}
	return out
}
