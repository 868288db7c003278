package service

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"

	"github.com/artgo/art/engine/chat"
	"github.com/artgo/art/engine/generate"
	"github.com/artgo/art/engine/tokenizer"
)

// ChatRequest is a chat completion request in engine terms.
type ChatRequest struct {
	Model       string            // "name@step" or "name"
	Messages    []json.RawMessage // OpenAI message objects
	Tools       []json.RawMessage // OpenAI tool objects; nil for none
	N           int               // choices; 0 means 1
	MaxTokens   int               // 0 means DefaultMaxTokens, capped by the context
	Temperature *float64          // nil means 1
	TopP        float64           // 0 means 1
	TopK        int
	Stop        []string
	Seed        *int64
	TopLogprobs int
	// ParseToolCalls turns tool-call text in the output into ToolCalls
	// (the server sets it unless tool_choice is "none").
	ParseToolCalls bool
	// TemplateKwargs are extra chat template variables (chat_template_kwargs).
	TemplateKwargs map[string]any
	// ResponseFormat, if set, constrains every choice to JSON (see
	// ResponseFormat); it cannot be combined with ParseToolCalls.
	ResponseFormat *ResponseFormat
}

// DefaultMaxTokens caps a completion when the request does not.
const DefaultMaxTokens = 1024

// Token is one sampled token with its log probability.
type Token struct {
	ID      int
	Bytes   []byte
	Logprob float64
	Top     []TopToken
}

// TopToken is one of the most likely tokens at a position.
type TopToken struct {
	ID      int
	Bytes   []byte
	Logprob float64
}

// ChatChoice is one generated answer.
type ChatChoice struct {
	Index        int
	Content      string
	ToolCalls    []chat.ToolCall
	FinishReason string // stop, length or tool_calls
	Tokens       []Token
}

// ChatResponse is a finished chat completion.
type ChatResponse struct {
	Model            string // the resolved "name@step"
	Step             int
	Choices          []ChatChoice
	PromptTokenIDs   []int
	CompletionTokens int
}

// StreamEvent is one increment of a streamed completion: the next sampled
// token of a choice and the text it completes (which may be empty while a
// multi-byte character is incomplete).
type StreamEvent struct {
	Choice int
	Token  Token
	Text   string
}

// Chat generates req.N answers. If stream is non-nil it receives every
// token as it is sampled (from the generating goroutines, one at a time);
// an error from stream aborts the request.
func (s *Service) Chat(ctx context.Context, req ChatRequest, stream func(StreamEvent) error) (ChatResponse, error) {
	step, err := s.Resolve(req.Model)
	if err != nil {
		return ChatResponse{}, err
	}
	adapter, err := s.adapter(step)
	if err != nil {
		return ChatResponse{}, err
	}
	if len(req.Messages) == 0 {
		return ChatResponse{}, &RequestError{Param: "messages", Msg: "messages must not be empty"}
	}
	n := req.N
	if n == 0 {
		n = 1
	}
	if n < 0 || n > 128 {
		return ChatResponse{}, &RequestError{Param: "n", Msg: fmt.Sprintf("n must be in [1, 128], got %d", req.N)}
	}
	tmpl := s.tmpl
	if len(req.Tools) > 0 {
		tmpl = s.toolTmpl
	}
	opts := s.renderOptions(req.TemplateKwargs)
	opts.AddGenerationPrompt = true
	text, err := tmpl.Render(req.Messages, req.Tools, opts)
	if err != nil {
		return ChatResponse{}, &RequestError{Param: "messages", Msg: err.Error()}
	}
	prompt := s.tok.Encode(text)
	ctxLen := s.model.Config.MaxPositions
	room := ctxLen - len(prompt)
	if room <= 0 {
		return ChatResponse{}, &RequestError{Param: "messages", Msg: fmt.Sprintf("the prompt has %d tokens; the model's context length is %d", len(prompt), ctxLen)}
	}
	maxTokens := req.MaxTokens
	switch {
	case maxTokens < 0:
		return ChatResponse{}, &RequestError{Param: "max_tokens", Msg: fmt.Sprintf("max_tokens must be > 0, got %d", maxTokens)}
	case maxTokens == 0:
		maxTokens = min(DefaultMaxTokens, room)
	case maxTokens > room:
		return ChatResponse{}, &RequestError{Param: "max_tokens", Msg: fmt.Sprintf("max_tokens %d + prompt %d tokens exceeds the context length %d", maxTokens, len(prompt), ctxLen)}
	}
	temp := 1.0
	if req.Temperature != nil {
		temp = *req.Temperature
	}
	params := generate.SamplingParams{Temperature: temp, TopP: req.TopP, TopK: req.TopK, TopLogprobs: req.TopLogprobs}
	if err := params.Validate(); err != nil {
		return ChatResponse{}, &RequestError{Msg: err.Error()}
	}
	var newConstraint func() generate.Constraint
	if rf := req.ResponseFormat; rf != nil {
		if req.ParseToolCalls && len(req.Tools) > 0 {
			return ChatResponse{}, &RequestError{Param: "response_format", Msg: "response_format cannot be combined with tool calls: the answer is forced to be JSON"}
		}
		if newConstraint, err = s.constraint(rf); err != nil {
			return ChatResponse{}, err
		}
	}
	var baseSeed uint64
	if req.Seed != nil {
		baseSeed = uint64(*req.Seed)
	} else {
		baseSeed = rand.Uint64()
	}

	resp := ChatResponse{Model: s.opt.Name + "@" + strconv.Itoa(step), Step: step, PromptTokenIDs: prompt, Choices: make([]ChatChoice, n)}
	// One slot per sequence bounds the work in flight; the batcher decodes
	// every admitted sequence in shared forward passes.
	for i := 0; i < n; i++ {
		select {
		case s.slots <- struct{}{}:
			defer func() { <-s.slots }()
		case <-ctx.Done():
			return ChatResponse{}, fmt.Errorf("service: %w", ctx.Err())
		}
	}
	var onToken func(int, generate.Sample) error
	if stream != nil {
		decs := make([]*tokenizer.Decoder, n)
		for i := range decs {
			decs[i] = s.tok.NewDecoder()
		}
		onToken = func(i int, smp generate.Sample) error {
			return stream(StreamEvent{Choice: i, Token: s.token(smp), Text: decs[i].Next(smp.ID)})
		}
	}
	results, err := s.batcher.Generate(ctx, generate.Request{
		Prompt: prompt, MaxTokens: maxTokens, Sampling: params, Seed: baseSeed, VocabLimit: s.tok.VocabSize(),
		StopTokenIDs: s.stopIDs, Stop: req.Stop, TokenBytes: s.tok.TokenBytes, Adapter: adapter, NewConstraint: newConstraint,
	}, n, onToken)
	if err != nil {
		return ChatResponse{}, err
	}
	for i, res := range results {
		resp.Choices[i] = s.choice(i, res, req)
	}
	for _, c := range resp.Choices {
		resp.CompletionTokens += len(c.Tokens)
	}
	return resp, nil
}

func (s *Service) token(smp generate.Sample) Token {
	t := Token{ID: smp.ID, Bytes: s.tok.TokenBytes(smp.ID), Logprob: smp.Logprob}
	for _, tl := range smp.Top {
		t.Top = append(t.Top, TopToken{ID: tl.ID, Bytes: s.tok.TokenBytes(tl.ID), Logprob: tl.Logprob})
	}
	return t
}

// choice turns a generation into an answer: the text without the stop
// token (and cut at a matched stop string), tool calls parsed out.
func (s *Service) choice(i int, res generate.Result, req ChatRequest) ChatChoice {
	c := ChatChoice{Index: i, FinishReason: res.FinishReason}
	ids := res.IDs()
	textIDs := ids
	if res.FinishReason == generate.FinishStop && res.StopString == "" && len(ids) > 0 {
		textIDs = ids[:len(ids)-1] // the stop token is sampled (it trains) but not shown
	}
	var b []byte
	for _, id := range textIDs {
		b = append(b, s.tok.TokenBytes(id)...)
	}
	text := string(b)
	if res.StopString != "" {
		if k := strings.Index(text, res.StopString); k >= 0 {
			text = text[:k]
		}
	}
	c.Content = text
	if req.ParseToolCalls && len(req.Tools) > 0 {
		content, calls := chat.ParseToolCalls(text, s.format)
		if len(calls) > 0 {
			c.Content, c.ToolCalls = content, calls
			c.FinishReason = "tool_calls"
		}
	}
	for _, smp := range res.Tokens {
		c.Tokens = append(c.Tokens, s.token(smp))
	}
	return c
}

// RequestError is a problem with the request itself (the server answers
// 400 with Param naming the field).
type RequestError struct {
	Param string
	Msg   string
}

func (e *RequestError) Error() string { return "service: " + e.Msg }
