package external

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"unicode/utf8"

	"github.com/artgo/art/host"
)

// Chat forwards req to the engine (see host.Inference.Chat). The answer is
// complete before stream sees it: its tokens are replayed in order, so a
// streamed response carries the same ids as a plain one.
func (h *Host) Chat(ctx context.Context, req host.ChatRequest, stream func(host.StreamEvent) error) (host.ChatResponse, error) {
	step, err := h.Resolve(req.Model)
	if err != nil {
		return host.ChatResponse{}, err
	}
	if len(req.Messages) == 0 {
		return host.ChatResponse{}, &host.RequestError{Param: "messages", Msg: "messages must not be empty"}
	}
	n := max(req.N, 1)
	if req.N < 0 || n > 128 {
		return host.ChatResponse{}, &host.RequestError{Param: "n", Msg: fmt.Sprintf("n must be in [1, 128], got %d", req.N)}
	}
	name := h.Info().ModelID(step)
	if h.opt.Dialect == LlamaCpp {
		if step != h.opt.LlamaCppStep {
			return host.ChatResponse{}, h.notServed(step)
		}
	} else if err := h.ensureLoaded(ctx, step); err != nil {
		return host.ChatResponse{}, err
	}
	resp := host.ChatResponse{Model: name, Step: step}
	if h.opt.Dialect == LlamaCpp && n > 1 {
		// llama-server answers one choice per request.
		err = h.fanOut(ctx, req, name, n, &resp)
	} else {
		var a answer
		if a, err = h.send(ctx, req, name, n); err == nil {
			resp.PromptTokenIDs, resp.CachedTokens = a.PromptTokenIDs, a.Usage.PromptTokensDetails.CachedTokens
			resp.Choices, err = h.choices(a, n)
		}
	}
	if err != nil {
		return host.ChatResponse{}, err
	}
	for i := range resp.Choices {
		resp.Choices[i].Index = i
		resp.CompletionTokens += len(resp.Choices[i].Tokens)
	}
	if stream != nil {
		if err := replay(resp, stream); err != nil {
			return host.ChatResponse{}, err
		}
	}
	return resp, nil
}

// notServed explains that llama-server serves another step.
func (h *Host) notServed(step int) error {
	path := h.CheckpointPath(step) + "/" + GGUFLoRAFile
	return fmt.Errorf("%w: llama-server was started with step %d's adapter and cannot load another at run time; to serve %s restart it with --lora %s (art export gguf-lora --adapter %s --out FILE writes one) and art serve with --llamacpp-step %d",
		ErrStepNotServed, h.opt.LlamaCppStep, h.Info().ModelID(step), path, h.CheckpointPath(step), step)
}

// fanOut sends n one-choice requests at once and gathers their choices.
func (h *Host) fanOut(ctx context.Context, req host.ChatRequest, name string, n int, resp *host.ChatResponse) error {
	resp.Choices = make([]host.ChatChoice, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			r := req
			if r.Seed != nil {
				s := *r.Seed + int64(i)
				r.Seed = &s
			}
			a, err := h.send(ctx, r, name, 1)
			var cs []host.ChatChoice
			if err == nil {
				cs, err = h.choices(a, 1)
			}
			if err != nil {
				errs[i] = err
				return
			}
			resp.Choices[i] = cs[0]
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// send posts one chat request in the engine's dialect.
func (h *Host) send(ctx context.Context, req host.ChatRequest, name string, n int) (answer, error) {
	select {
	case h.slots <- struct{}{}:
	case <-ctx.Done():
		return answer{}, fmt.Errorf("external: %w", ctx.Err())
	}
	defer func() { <-h.slots }()
	b, err := h.call(ctx, "/v1/chat/completions", h.body(req, name, n), h.opt.RequestTimeout)
	var se *statusError
	if errors.As(err, &se) && !errors.Is(err, ErrEngineOOM) {
		switch {
		case se.status == http.StatusNotFound:
			return answer{}, fmt.Errorf("%w %q: %s", host.ErrUnknownModel, name, se.msg)
		case se.status == http.StatusBadRequest || se.status == http.StatusUnprocessableEntity:
			return answer{}, requestError(h.opt.Dialect, se)
		}
	}
	if err != nil {
		return answer{}, err
	}
	var a answer
	if err := json.Unmarshal(b, &a); err != nil {
		return answer{}, fmt.Errorf("external: %s answered with malformed JSON: %w", h.opt.Dialect, err)
	}
	return a, nil
}

// requestError is the client's error for a request the engine refused:
// the engine's param and code pass through, and a prompt too long for the
// context is OpenAI's context_length_exceeded with the engine's message
// first (frameworks trim a conversation on the code or on the message's
// start, "This model's maximum context length is").
func requestError(engine Dialect, se *statusError) *host.RequestError {
	e := &host.RequestError{Param: se.param, Code: se.code, Msg: fmt.Sprintf("%s: %s", engine, se.msg)}
	if isContextLength(se.msg) {
		e.Code, e.Msg = host.CodeContextLength, fmt.Sprintf("%s (%s)", se.msg, engine)
		if e.Param == "" {
			e.Param = "messages"
		}
	}
	return e
}

// body is the chat request in the engine's dialect: the OpenAI fields plus
// whatever makes the engine return each sampled token's id and logprob.
func (h *Host) body(req host.ChatRequest, name string, n int) map[string]any {
	b := map[string]any{"model": name, "messages": req.Messages, "logprobs": true, "n": n}
	if req.TopLogprobs > 0 {
		b["top_logprobs"] = req.TopLogprobs
	}
	if len(req.Tools) > 0 {
		b["tools"] = req.Tools
		if !req.ParseToolCalls {
			b["tool_choice"] = "none"
		}
		if req.SingleToolCall {
			b["parallel_tool_calls"] = false
		}
	}
	if req.MaxTokens > 0 {
		b["max_tokens"] = req.MaxTokens
	}
	if req.Temperature != nil {
		b["temperature"] = *req.Temperature
	}
	if req.TopP > 0 {
		b["top_p"] = req.TopP
	}
	if req.TopK > 0 {
		b["top_k"] = req.TopK
	}
	if len(req.Stop) > 0 {
		b["stop"] = req.Stop
	}
	if req.Seed != nil {
		b["seed"] = *req.Seed
	}
	if len(req.TemplateKwargs) > 0 {
		b["chat_template_kwargs"] = req.TemplateKwargs
	}
	if rf := req.ResponseFormat; rf != nil {
		if rf.Schema != nil {
			b["response_format"] = map[string]any{"type": "json_schema", "json_schema": map[string]any{"name": "answer", "schema": rf.Schema, "strict": true}}
		} else {
			b["response_format"] = map[string]any{"type": "json_object"}
		}
	}
	switch h.opt.Dialect {
	case VLLM:
		b["return_token_ids"] = true
	case SGLang:
		b["return_prompt_token_ids"] = true
		b["lora_path"] = name
	}
	return b
}

// answer is a chat completion as the engines send it; the token id fields
// of all three dialects are read.
type answer struct {
	Choices []struct {
		Message struct {
			Content   *string `json:"content"`
			ToolCalls []struct {
				ID       string `json:"id"`
				Function struct {
					Name      string `json:"name"`
					Arguments string `json:"arguments"`
				} `json:"function"`
			} `json:"tool_calls"`
		} `json:"message"`
		FinishReason string `json:"finish_reason"`
		Logprobs     *struct {
			Content []tokenLogprob `json:"content"`
		} `json:"logprobs"`
		TokenIDs []int `json:"token_ids"` // vLLM
	} `json:"choices"`
	PromptTokenIDs []int `json:"prompt_token_ids"` // vLLM, SGLang
	Usage          struct {
		PromptTokensDetails struct {
			CachedTokens int `json:"cached_tokens"`
		} `json:"prompt_tokens_details"`
	} `json:"usage"`
}

type tokenLogprob struct {
	Token       string  `json:"token"`
	Logprob     float64 `json:"logprob"`
	Bytes       []int   `json:"bytes"`
	TokenID     *int    `json:"token_id"` // SGLang
	ID          *int    `json:"id"`       // llama.cpp
	TopLogprobs []struct {
		Token   string  `json:"token"`
		Logprob float64 `json:"logprob"`
		Bytes   []int   `json:"bytes"`
		TokenID *int    `json:"token_id"`
		ID      *int    `json:"id"`
	} `json:"top_logprobs"`
}

// choices turns an answer into trainable choices: every sampled token with
// its id and logprob, or ErrNoTokenIDs.
func (h *Host) choices(a answer, n int) ([]host.ChatChoice, error) {
	if len(a.Choices) != n {
		return nil, fmt.Errorf("external: %s returned %d choices; %d were asked for", h.opt.Dialect, len(a.Choices), n)
	}
	out := make([]host.ChatChoice, n)
	for i, c := range a.Choices {
		if c.Logprobs == nil {
			return nil, fmt.Errorf("%w: %s sent choice %d without logprobs", ErrNoTokenIDs, h.opt.Dialect, i)
		}
		lps := c.Logprobs.Content
		var ids []int
		switch {
		case h.opt.Dialect == VLLM:
			if len(c.TokenIDs) != len(lps) {
				return nil, fmt.Errorf("%w: vLLM sent %d token_ids for %d logprobs in choice %d (return_token_ids needs vLLM >= 0.10.2)", ErrNoTokenIDs, len(c.TokenIDs), len(lps), i)
			}
			ids = c.TokenIDs
		default:
			for k, lp := range lps {
				id := lp.TokenID
				if id == nil {
					id = lp.ID
				}
				if id == nil {
					return nil, fmt.Errorf("%w: %s sent token %d of choice %d (%q) without its id", ErrNoTokenIDs, h.opt.Dialect, k, i, lp.Token)
				}
				ids = append(ids, *id)
			}
		}
		ch := host.ChatChoice{FinishReason: c.FinishReason}
		if c.Message.Content != nil {
			ch.Content = *c.Message.Content
		}
		for _, tc := range c.Message.ToolCalls {
			ch.ToolCalls = append(ch.ToolCalls, host.ToolCall{ID: tc.ID, Name: tc.Function.Name, Arguments: tc.Function.Arguments})
		}
		for k, lp := range lps {
			t := host.Token{ID: ids[k], Bytes: tokenBytes(lp.Bytes, lp.Token), Logprob: lp.Logprob}
			for _, tl := range lp.TopLogprobs {
				id := -1 // vLLM names alternatives by text only
				if tl.TokenID != nil {
					id = *tl.TokenID
				} else if tl.ID != nil {
					id = *tl.ID
				}
				t.Top = append(t.Top, host.TopToken{ID: id, Bytes: tokenBytes(tl.Bytes, tl.Token), Logprob: tl.Logprob})
			}
			ch.Tokens = append(ch.Tokens, t)
		}
		out[i] = ch
	}
	return out, nil
}

// tokenBytes returns a token's UTF-8 bytes, from its "bytes" when sent.
func tokenBytes(bs []int, text string) []byte {
	if bs == nil {
		return []byte(text)
	}
	b := make([]byte, len(bs))
	for i, x := range bs {
		b[i] = byte(x)
	}
	return b
}

// replay sends a finished response's tokens to stream, choice after
// choice, each with the text it completes.
func replay(resp host.ChatResponse, stream func(host.StreamEvent) error) error {
	for i, c := range resp.Choices {
		var pending []byte
		for _, t := range c.Tokens {
			pending = append(pending, t.Bytes...)
			k := completeUTF8(pending)
			text := string(pending[:k])
			pending = pending[k:]
			if err := stream(host.StreamEvent{Choice: i, Token: t, Text: text}); err != nil {
				return err
			}
		}
	}
	return nil
}

// completeUTF8 returns the length of b's longest prefix that does not end
// inside a multi-byte character.
func completeUTF8(b []byte) int {
	for k := len(b) - 1; k >= 0 && k >= len(b)-utf8.UTFMax; k-- {
		if utf8.RuneStart(b[k]) {
			if !utf8.FullRune(b[k:]) {
				return k
			}
			break
		}
	}
	return len(b)
}
