package generate

import (
	"bytes"
	"context"
	"fmt"
	"slices"

	"github.com/artgo/art/engine/model"
)

// Request is one single-sequence generation.
type Request struct {
	Prompt       []int
	MaxTokens    int // > 0
	Sampling     SamplingParams
	Seed         uint64
	StopTokenIDs []int    // finish with "stop" after sampling one of these (e.g. EOS)
	Stop         []string // finish with "stop" once the output text contains one
	// TokenBytes decodes a token to bytes; required when Stop is set.
	TokenBytes func(id int) []byte
	// Adapter is an optional LoRA adapter to sample from.
	Adapter model.Adapter
	// VocabLimit, when > 0, keeps ids >= it from being sampled: checkpoints
	// pad their vocabulary beyond the tokenizer's ids, and a padding row
	// has no text. Logprobs stay those of the full distribution.
	VocabLimit int
	// OnToken, if set, sees every token as it is sampled; an error from it
	// stops the generation and is returned.
	OnToken func(Sample) error
	// NewConstraint, if set, returns a fresh Constraint for each sequence
	// (structured outputs): only the tokens it allows are sampled. Put
	// the end-of-turn ids in StopTokenIDs so a completed value can end.
	NewConstraint func() Constraint
}

// Finish reasons, as in the OpenAI API.
const (
	FinishStop   = "stop"
	FinishLength = "length"
)

// Result is a finished generation. Tokens include the stop token or the
// tokens that completed a stop string: they were sampled, so they train.
type Result struct {
	Tokens       []Sample
	FinishReason string
	StopString   string // the stop string that matched, if any
	// CachedTokens is how many of the prompt's first tokens were not
	// prefilled but reused from another sequence (Batcher).
	CachedTokens int
}

// IDs returns the generated token ids.
func (r Result) IDs() []int {
	ids := make([]int, len(r.Tokens))
	for i, t := range r.Tokens {
		ids[i] = t.ID
	}
	return ids
}

// Generate samples up to req.MaxTokens tokens after req.Prompt, one
// sequence at a time, checking ctx between tokens.
func Generate(ctx context.Context, m *model.Model, req Request) (Result, error) {
	if len(req.Prompt) == 0 {
		return Result{}, fmt.Errorf("generate: empty prompt")
	}
	if req.MaxTokens <= 0 {
		return Result{}, fmt.Errorf("generate: max_tokens must be > 0, got %d", req.MaxTokens)
	}
	if len(req.Stop) > 0 && req.TokenBytes == nil {
		return Result{}, fmt.Errorf("generate: stop strings need a TokenBytes decoder")
	}
	limit := m.Config.MaxPositions
	if need := len(req.Prompt) + req.MaxTokens; limit > 0 && need > limit {
		return Result{}, fmt.Errorf("generate: prompt of %d tokens + max_tokens %d = %d exceeds the model's context length %d", len(req.Prompt), req.MaxTokens, need, limit)
	}
	sampler, err := NewSampler(req.Sampling, req.Seed)
	if err != nil {
		return Result{}, err
	}
	if req.NewConstraint != nil {
		sampler.Constrain(req.NewConstraint())
	}
	V := m.Config.VocabSize
	cache := m.NewKVCache(len(req.Prompt) + req.MaxTokens)
	var ws model.Workspace
	logits := make([]float32, V)
	var text []byte
	var res Result
	input := req.Prompt
	for {
		if err := ctx.Err(); err != nil {
			return res, fmt.Errorf("generate: %w", err)
		}
		hidden, err := m.Forward(&ws, input, []model.Segment{{Cache: cache, N: len(input), Adapter: req.Adapter}})
		if err != nil {
			return res, fmt.Errorf("generate: %w", err)
		}
		C := m.Config.HiddenSize
		m.Logits(logits, hidden[(len(input)-1)*C:len(input)*C], 1)
		s, err := sampler.Next(logits, req.VocabLimit)
		if err != nil {
			return res, err
		}
		res.Tokens = append(res.Tokens, s)
		if req.OnToken != nil {
			if err := req.OnToken(s); err != nil {
				return res, err
			}
		}
		if slices.Contains(req.StopTokenIDs, s.ID) {
			res.FinishReason = FinishStop
			return res, nil
		}
		if len(req.Stop) > 0 {
			if stop := MatchStop(&text, req.TokenBytes(s.ID), req.Stop); stop != "" {
				res.FinishReason, res.StopString = FinishStop, stop
				return res, nil
			}
		}
		if len(res.Tokens) == req.MaxTokens {
			res.FinishReason = FinishLength
			return res, nil
		}
		input = []int{s.ID}
	}
}

// MatchStop appends b, the bytes of a sampled token, to tail, the end of
// the text sampled so far, and returns the first of stops that the text
// now contains ("" if none). Each token is checked as it comes, so a match
// ends in b: only the bytes before b that a stop could start in (the
// longest stop's length less one) are kept in tail, and each token's check
// reads those and b, not the whole text again (a long answer with many
// stop strings made every token of every request in the batch slower).
// Constraints that watch the text for a marker use it too.
func MatchStop(tail *[]byte, b []byte, stops []string) string {
	t := append(*tail, b...)
	found, keep := "", 0
	for _, stop := range stops {
		if found == "" && stop != "" && bytes.Contains(t, []byte(stop)) {
			found = stop
		}
		keep = max(keep, len(stop)-1)
	}
	if len(t) > keep {
		t = t[:copy(t, t[len(t)-keep:])]
	}
	*tail = t
	return found
}
