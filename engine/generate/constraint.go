package generate

import (
	"errors"
	"fmt"
	"math"
	"math/bits"
	"slices"
)

// Constraint restricts the tokens one sequence may sample: grammar-
// constrained decoding, for structured outputs. It holds the state of one
// sequence (what has been generated so far) and is not shared between
// sequences; engine/grammar's Matcher is one.
type Constraint interface {
	// Allows reports whether token id may come next.
	Allows(id int) bool
	// FillMask sets bit id of mask for every token that may come next and
	// clears every other bit.
	FillMask(mask []uint64)
	// Accept advances the state past token id, which must be allowed.
	Accept(id int) error
}

// ErrNoAllowedToken is returned when a constraint allows no token of the
// model's vocabulary: the grammar and the vocabulary disagree (a grammar
// that needs bytes no token spells).
var ErrNoAllowedToken = errors.New("generate: the output constraint allows no token")

// nextConstrained draws the next token under s.c. The distribution is the
// constrained one of vLLM and OpenAI: the model's logits with every
// disallowed token removed, then temperature, top-k and top-p as usual.
// Logprobs stay those of the raw, unconstrained distribution (see Next):
// they are what the trainer recomputes, unaware of the grammar.
//
// Checking a token is cheap and building the full mask is not, so with
// plain temperature (or greedy) sampling the unconstrained draw is tried
// first and kept when the grammar allows it. That is exact: a draw from p
// that is kept with probability 1 when allowed, and otherwise replaced by
// a draw from p restricted to the allowed set A, lands on a ∈ A with
// probability p(a) + (1 − p(A))·p(a)/p(A) = p(a)/p(A). With top-k or top-p
// the truncation depends on the mask, so the mask is always built.
func (s *Sampler) nextConstrained(logits []float32, limit int, raw Sample, logZ float64) (Sample, error) {
	pick := logits
	if limit > 0 && limit < len(logits) {
		pick = logits[:limit]
	}
	out := raw
	plain := s.p.TopK == 0 && !(s.p.TopP > 0 && s.p.TopP < 1)
	if !plain || !s.c.Allows(raw.ID) {
		id, err := s.drawMasked(pick)
		if err != nil {
			return Sample{}, err
		}
		out.ID, out.Logprob = id, float64(logits[id])-logZ
	}
	if err := s.c.Accept(out.ID); err != nil {
		return Sample{}, fmt.Errorf("generate: constraint rejected token %d it allowed: %w", out.ID, err)
	}
	return out, nil
}

// drawMasked draws from the logits with every token the constraint does
// not allow removed.
func (s *Sampler) drawMasked(pick []float32) (int, error) {
	words := (len(pick) + 63) / 64
	s.mask = slices.Grow(s.mask[:0], words)[:words]
	clear(s.mask)
	s.c.FillMask(s.mask)
	s.masked = slices.Grow(s.masked[:0], len(pick))[:len(pick)]
	ninf := float32(math.Inf(-1))
	maxv, argmax := ninf, -1
	for i := range s.masked {
		s.masked[i] = ninf
	}
	for w, word := range s.mask {
		for word != 0 {
			i := w*64 + bits.TrailingZeros64(word)
			word &= word - 1
			if i >= len(pick) {
				break
			}
			v := pick[i]
			if v != v { // NaN: never sampled
				continue
			}
			s.masked[i] = v
			if argmax < 0 || v > maxv {
				maxv, argmax = v, i
			}
		}
	}
	if argmax < 0 {
		return 0, ErrNoAllowedToken
	}
	if s.p.greedy() || math.IsInf(float64(maxv), 1) {
		return argmax, nil
	}
	id := s.sample(s.masked, maxv, nil, 0)
	if s.masked[id] == ninf { // a zero-weight tail reached through rounding
		return argmax, nil
	}
	return id, nil
}
