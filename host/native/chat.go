package native

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"

	"github.com/artgo/art/engine/chat"
	"github.com/artgo/art/engine/generate"
	"github.com/artgo/art/engine/tokenizer"
	"github.com/artgo/art/engine/train"
	"github.com/artgo/art/host"
	"github.com/artgo/art/internal/tracing"
)

// Chat generates req.N answers (see host.Inference.Chat).
func (h *Host) Chat(ctx context.Context, req host.ChatRequest, stream func(host.StreamEvent) error) (host.ChatResponse, error) {
	step, err := h.Resolve(req.Model)
	if err != nil {
		return host.ChatResponse{}, err
	}
	adapter, err := h.adapter(step)
	if err != nil {
		return host.ChatResponse{}, err
	}
	if len(req.Messages) == 0 && req.Prompt == nil {
		return host.ChatResponse{}, &host.RequestError{Param: "messages", Msg: "messages must not be empty"}
	}
	n := req.N
	if n == 0 {
		n = 1
	}
	if n < 0 || n > 128 {
		return host.ChatResponse{}, &host.RequestError{Param: "n", Msg: fmt.Sprintf("n must be in [1, 128], got %d", req.N)}
	}
	scope := tracing.TrajectoryIDFrom(ctx)
	prompt, err := h.promptIDs(req, scope)
	if err != nil {
		return host.ChatResponse{}, err
	}
	ctxLen := h.model.Config.MaxPositions
	room := ctxLen - len(prompt)
	promptParam := "messages"
	if req.Prompt != nil {
		promptParam = "prompt"
	}
	// The messages begin as OpenAI's and vLLM's do: clients (LiteLLM)
	// match them, others the code.
	if room <= 0 {
		return host.ChatResponse{}, &host.RequestError{Param: promptParam, Code: host.CodeContextLength,
			Msg: fmt.Sprintf("This model's maximum context length is %d tokens, but the prompt has %d; shorten the %s", ctxLen, len(prompt), promptParam)}
	}
	maxTokens := req.MaxTokens
	switch {
	case maxTokens < 0:
		return host.ChatResponse{}, &host.RequestError{Param: "max_tokens", Msg: fmt.Sprintf("max_tokens must be > 0, got %d", maxTokens)}
	case maxTokens == 0:
		maxTokens = min(host.DefaultMaxTokens, room)
	case maxTokens > room:
		return host.ChatResponse{}, &host.RequestError{Param: "max_tokens", Code: host.CodeContextLength,
			Msg: fmt.Sprintf("This model's maximum context length is %d tokens, but you requested %d: max_tokens %d and %d in the prompt; lower it or shorten the %s",
				ctxLen, maxTokens+len(prompt), maxTokens, len(prompt), promptParam)}
	}
	temp := 1.0
	if req.Temperature != nil {
		temp = *req.Temperature
	}
	params := generate.SamplingParams{Temperature: temp, TopP: req.TopP, TopK: req.TopK, TopLogprobs: req.TopLogprobs}
	if err := params.Validate(); err != nil {
		return host.ChatResponse{}, &host.RequestError{Msg: err.Error()}
	}
	var newConstraint func() generate.Constraint
	if rf := req.ResponseFormat; rf != nil {
		if req.ParseToolCalls && len(req.Tools) > 0 {
			return host.ChatResponse{}, &host.RequestError{Param: "response_format", Msg: "response_format cannot be combined with tool calls: the answer is forced to be JSON"}
		}
		if newConstraint, err = h.constraint(rf); err != nil {
			return host.ChatResponse{}, err
		}
	}
	if tc := req.ToolChoice; tc != nil {
		if rf := req.ResponseFormat; rf != nil || !req.ParseToolCalls {
			return host.ChatResponse{}, &host.RequestError{Param: "tool_choice", Msg: "tool_choice forces a tool call: it cannot be combined with response_format or with tool calls turned off"}
		}
		if newConstraint, err = h.toolChoiceConstraint(req.Tools, tc); err != nil {
			return host.ChatResponse{}, err
		}
	}
	if req.SingleToolCall && req.ParseToolCalls && newConstraint == nil {
		newConstraint = h.oneCallConstraint()
	}
	var baseSeed uint64
	if req.Seed != nil {
		baseSeed = uint64(*req.Seed)
	} else {
		baseSeed = rand.Uint64()
	}

	resp := host.ChatResponse{Model: h.opt.Name + "@" + strconv.Itoa(step), Step: step, PromptTokenIDs: prompt, Choices: make([]host.ChatChoice, n)}
	release, err := h.acquire(ctx, n)
	if err != nil {
		return host.ChatResponse{}, err
	}
	defer release()
	var onToken func(int, generate.Sample) error
	if stream != nil {
		decs := make([]*tokenizer.Decoder, n)
		for i := range decs {
			decs[i] = h.tok.NewDecoder()
		}
		onToken = func(i int, smp generate.Sample) error {
			return stream(host.StreamEvent{Choice: i, Token: h.token(smp), Text: decs[i].Next(smp.ID)})
		}
	}
	results, err := h.batcher.Generate(ctx, generate.Request{
		Prompt: prompt, MaxTokens: maxTokens, Sampling: params, Seed: baseSeed, VocabLimit: h.tok.VocabSize(),
		StopTokenIDs: h.folder.StopIDs, Stop: req.Stop, TokenBytes: h.tok.TokenBytes, Adapter: adapter, NewConstraint: newConstraint,
	}, n, onToken)
	if err != nil {
		return host.ChatResponse{}, err
	}
	for i, res := range results {
		resp.Choices[i] = h.choice(i, res, req)
		if req.Prompt == nil {
			h.answers.remember(resp.Choices[i], req.TemplateKwargs, scope)
		}
	}
	for _, c := range resp.Choices {
		resp.CompletionTokens += len(c.Tokens)
	}
	resp.CachedTokens = results[0].CachedTokens
	return resp, nil
}

func (h *Host) token(smp generate.Sample) host.Token {
	t := host.Token{ID: smp.ID, Bytes: h.tok.TokenBytes(smp.ID), Logprob: smp.Logprob}
	for _, tl := range smp.Top {
		t.Top = append(t.Top, host.TopToken{ID: tl.ID, Bytes: h.tok.TokenBytes(tl.ID), Logprob: tl.Logprob})
	}
	return t
}

// choice turns a generation into an answer: the text without the stop
// token (and cut at a matched stop string), tool calls parsed out.
func (h *Host) choice(i int, res generate.Result, req host.ChatRequest) host.ChatChoice {
	c := host.ChatChoice{Index: i, FinishReason: res.FinishReason}
	ids := res.IDs()
	textIDs := ids
	if res.FinishReason == generate.FinishStop && res.StopString == "" && len(ids) > 0 {
		textIDs = ids[:len(ids)-1] // the stop token is sampled (it trains) but not shown
	}
	var b []byte
	for _, id := range textIDs {
		b = append(b, h.tok.TokenBytes(id)...)
	}
	text := string(b)
	if res.StopString != "" {
		if k := strings.Index(text, res.StopString); k >= 0 {
			text = text[:k]
		}
	}
	c.Content = text
	if req.ParseToolCalls && len(req.Tools) > 0 {
		content, calls := chat.ParseToolCalls(text, h.folder.ToolFormat)
		if len(calls) > 0 {
			c.Content = content
			for _, tc := range calls {
				c.ToolCalls = append(c.ToolCalls, host.ToolCall{ID: tc.ID, Name: tc.Name, Arguments: tc.Arguments})
			}
			c.FinishReason = "tool_calls"
		}
	}
	for _, smp := range res.Tokens {
		c.Tokens = append(c.Tokens, h.token(smp))
	}
	return c
}

// acquire takes one generation slot per sequence of a request, at most all
// of them (a request with more sequences than slots runs alone; the batcher
// admits it whole). Slots bound the work in flight; the batcher decodes
// every admitted sequence in shared forward passes. One request gathers
// its slots at a time: two requests each holding part of what they need
// would otherwise wait for each other forever.
func (h *Host) acquire(ctx context.Context, n int) (release func(), err error) {
	k := min(n, cap(h.slots))
	select {
	case h.admit <- struct{}{}:
	case <-ctx.Done():
		return nil, fmt.Errorf("native: %w", ctx.Err())
	}
	defer func() { <-h.admit }()
	for i := range k {
		select {
		case h.slots <- struct{}{}:
		case <-ctx.Done():
			for range i {
				<-h.slots
			}
			return nil, fmt.Errorf("native: %w", ctx.Err())
		}
	}
	return func() {
		for range k {
			<-h.slots
		}
	}, nil
}

// promptIDs is a request's prompt: the raw prompt encoded, or the messages
// and tools rendered by the chat template, each assistant message the
// server remembers spliced in as the ids it sampled (the trainer's
// train.Tokenizer splice, so the prompt is a prefix of the sequence the
// trainer builds for the conversation); forgotten ones are re-tokenised.
func (h *Host) promptIDs(req host.ChatRequest, scope string) ([]int, error) {
	if req.Prompt != nil {
		if len(req.Messages) > 0 || len(req.Tools) > 0 {
			return nil, &host.RequestError{Param: "prompt", Msg: "a raw prompt cannot be combined with messages or tools"}
		}
		return h.tok.Encode(*req.Prompt), nil
	}
	turns := h.answers.turns(req.Messages, scope)
	ids, err := h.prompts.EncodePrompt(turns, req.Tools, req.TemplateKwargs)
	if err != nil && slices.ContainsFunc(turns, func(t train.Turn) bool { return t.Sampled != nil }) {
		// The splice failed (say, no special token is free to mark the
		// answers with): prompt from the text, as the trainer's metric shows.
		h.log.Warn("native: prompting from the answers' text, not their sampled ids", "err", err)
		for i := range turns {
			turns[i].Sampled = nil
		}
		ids, err = h.prompts.EncodePrompt(turns, req.Tools, req.TemplateKwargs)
	}
	if err != nil {
		return nil, &host.RequestError{Param: "messages", Msg: err.Error()}
	}
	return ids, nil
}
