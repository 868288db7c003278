// Package generate turns a model into text: sampling (temperature, top-k,
// top-p, seeded), stop conditions, and the per-token logprobs that training
// needs. Logprobs are always those of the model's raw distribution
// (temperature 1, before top-k/top-p), like vLLM's default, so they are the
// "old policy" logprobs the trainer's importance ratios compare against.
package generate

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"

	"github.com/artgo/art/engine/kernels"
)

// SamplingParams control how the next token is chosen.
type SamplingParams struct {
	Temperature float64 // 0 (or below greedyBelow) picks the most likely token (greedy)
	TopP        float64 // nucleus mass in (0, 1]; 0 or 1 turns it off
	TopK        int     // keep the k most likely tokens; 0 turns it off
	TopLogprobs int     // also report the n most likely tokens per step (0–20)
}

// greedyBelow is the temperature under which sampling is greedy (vLLM's
// threshold too). Scaling the logits by 1/T in float32 overflows to
// infinities, whose softmax is NaN, long before T reaches 0 (at 1e-40 the
// draw fell through to the vocabulary's last token); this far below 1 a
// draw is the most likely token anyway, but for exact ties.
const greedyBelow = 1e-5

// greedy reports whether p picks the most likely token.
func (p SamplingParams) greedy() bool { return p.Temperature < greedyBelow }

// Validate reports the first out-of-range field.
func (p SamplingParams) Validate() error {
	switch {
	case p.Temperature < 0 || math.IsNaN(p.Temperature):
		return fmt.Errorf("generate: temperature must be >= 0, got %v", p.Temperature)
	case p.TopP < 0 || p.TopP > 1 || math.IsNaN(p.TopP):
		return fmt.Errorf("generate: top_p must be in (0, 1], got %v", p.TopP)
	case p.TopK < 0:
		return fmt.Errorf("generate: top_k must be >= 0, got %d", p.TopK)
	case p.TopLogprobs < 0 || p.TopLogprobs > 20:
		return fmt.Errorf("generate: top_logprobs must be in [0, 20], got %d", p.TopLogprobs)
	}
	return nil
}

// TokenLogprob is one token with its log probability.
type TokenLogprob struct {
	ID      int
	Logprob float64
}

// Sample is one sampled token.
type Sample struct {
	ID      int
	Logprob float64        // under the raw distribution
	Top     []TokenLogprob // the TopLogprobs most likely tokens, best first
}

// Sampler picks tokens from logits. It owns a seeded random source and
// scratch buffers, so it is not safe for concurrent use: give each sequence
// its own.
type Sampler struct {
	p    SamplingParams
	rng  *rand.Rand
	idx  []int
	prob []float64
	buf  []float32

	c      Constraint // nil: unconstrained
	mask   []uint64
	masked []float32
}

// NewSampler returns a sampler whose choices are fully determined by seed.
func NewSampler(p SamplingParams, seed uint64) (*Sampler, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	return &Sampler{p: p, rng: rand.New(rand.NewPCG(seed, 0x73616d706c65))}, nil
}

// Constrain makes the sampler draw only tokens c allows and advance c past
// each token it draws (see Constraint); nil removes the constraint.
func (s *Sampler) Constrain(c Constraint) { s.c = c }

// Next chooses a token from one row of vocabulary logits, never an id >=
// limit when limit > 0 (padding rows). The logprobs are computed over the
// whole row. logits is only read. Only a constrained sampler fails: when
// its constraint allows no token, or rejects the token it allowed.
func (s *Sampler) Next(logits []float32, limit int) (Sample, error) {
	pick := logits
	if limit > 0 && limit < len(logits) {
		pick = logits[:limit]
	}
	maxv := kernels.Max(pick) // NaNs are skipped, as by a > comparison
	shift := maxv
	if len(pick) < len(logits) {
		shift = max(shift, kernels.Max(logits[len(pick):]))
	}
	s.buf = slices.Grow(s.buf[:0], len(logits))[:len(logits)]
	copy(s.buf, logits)
	sum := kernels.ExpShiftSum(s.buf, shift)
	logZ := float64(shift) + math.Log(sum)
	// A constrained sampler with top-k or top-p draws from the mask only
	// (nextConstrained: id is then replaced); otherwise the unconstrained
	// draw comes first. Only greedy decoding looks for the argmax (a
	// scalar pass over the vocabulary; a draw is 4 % faster without it).
	constrainedOnly := s.c != nil && (s.p.TopK > 0 || s.p.TopP > 0 && s.p.TopP < 1)
	id := 0
	switch {
	case s.p.greedy():
		id = max(0, slices.Index(pick, maxv))
	case !constrainedOnly:
		// s.buf holds exp(logit − maxv) of the sampled range when the
		// shift was its maximum: temperature 1 draws from it as it is.
		var exps []float32
		if shift == maxv && len(pick) == len(logits) {
			exps = s.buf
		}
		id = s.sample(pick, maxv, exps, sum)
	}
	out := Sample{ID: id, Logprob: float64(logits[id]) - logZ}
	if n := s.p.TopLogprobs; n > 0 {
		for _, j := range topIndices(pick, n) {
			out.Top = append(out.Top, TokenLogprob{ID: j, Logprob: float64(logits[j]) - logZ})
		}
	}
	if s.c != nil {
		return s.nextConstrained(logits, limit, out, logZ)
	}
	return out, nil
}

// sample draws from softmax(logits/T) restricted by top-k and top-p. exps,
// if not nil, is exp(logits − maxv) and sum its sum.
func (s *Sampler) sample(logits []float32, maxv float32, exps []float32, sum float64) int {
	V := len(logits)
	invT := 1 / s.p.Temperature
	k := s.p.TopK
	nucleus := s.p.TopP > 0 && s.p.TopP < 1
	if k <= 0 || k > V {
		k = V
	}
	if k == V && !nucleus { // plain temperature sampling over the whole vocabulary
		if invT == 1 && exps != nil {
			return pickBlocks(exps[:V], sum*s.rng.Float64())
		}
		w := s.buf[:V]
		copy(w, logits)
		kernels.Scale(float32(invT), w)
		total, _ := kernels.ExpShift(w, maxv*float32(invT))
		return pickBlocks(w, total*s.rng.Float64())
	}
	var idx []int
	full := -1.0 // the whole vocabulary's mass when idx is only a part of it
	if k < V {
		idx = topIndices(logits, k)
	} else {
		idx, full = s.nucleusCandidates(logits, maxv, invT)
	}
	s.prob = slices.Grow(s.prob[:0], len(idx))[:len(idx)]
	var total float64
	for i, j := range idx {
		e := math.Exp((float64(logits[j]) - float64(maxv)) * invT)
		s.prob[i] = e
		total += e
	}
	if full >= 0 {
		total = full
	}
	n := len(idx)
	if nucleus {
		var cum float64
		for i := range idx {
			cum += s.prob[i]
			if cum >= s.p.TopP*total {
				n = i + 1
				break
			}
		}
		total = cum
	}
	return pick(s.prob[:n], total*s.rng.Float64(), idx[:n])
}

// nucleusCandidates returns, most likely first (ties by lower id), the
// tokens whose logits lie within some distance of the largest, the
// distance doubling until they hold TopP of the mass of softmax(logits/T);
// and that mass over the whole vocabulary. Every token left out is less
// likely than every token kept, so the nucleus is a prefix of the list:
// sorting only the candidates (a few hundred of 152k tokens, typically)
// gives the same nucleus as sorting the whole row.
func (s *Sampler) nucleusCandidates(logits []float32, maxv float32, invT float64) ([]int, float64) {
	w := s.buf[:len(logits)]
	for i, v := range logits {
		w[i] = v * float32(invT)
	}
	total, _ := kernels.ExpShift(w, maxv*float32(invT))
	need := s.p.TopP * total
	for d := 1.0; ; d *= 2 {
		// Past a distance of 128 temperatures the rest weighs nothing in
		// float32: take every token.
		cut := float32(math.Inf(-1))
		if d <= 128 {
			cut = maxv - float32(d/invT)
		}
		s.idx = s.idx[:0]
		var mass float64
		for i, v := range logits {
			if v >= cut || d > 128 {
				s.idx = append(s.idx, i)
				mass += float64(w[i])
			}
		}
		if mass >= need || d > 128 {
			break
		}
	}
	slices.SortStableFunc(s.idx, func(a, b int) int {
		switch {
		case logits[a] > logits[b]:
			return -1
		case logits[a] < logits[b]:
			return 1
		}
		return 0
	})
	return s.idx, total
}

// pickBlocks is pick over a whole vocabulary's weights: it steps over
// blocks of 64 whose sum (four partial sums in float64) u does not reach,
// then runs pick in the block that holds the draw. A whole row one weight
// at a time waited on each subtraction: ~0.2 ms a sample at 152k tokens.
// Only the rounding of the running sum differs from pick's.
func pickBlocks(w []float32, u float64) int {
	const block = 64
	i := 0
	for ; i+block <= len(w); i += block {
		var s0, s1, s2, s3 float64
		for j := i; j < i+block; j += 4 {
			s0 += float64(w[j])
			s1 += float64(w[j+1])
			s2 += float64(w[j+2])
			s3 += float64(w[j+3])
		}
		sum := (s0 + s1) + (s2 + s3)
		if u < sum {
			return i + pick(w[i:i+block], u, nil)
		}
		u -= sum
	}
	if i == len(w) { // rounding left u past the last block: its last weight
		return len(w) - 1
	}
	return i + pick(w[i:], u, nil)
}

// pick returns the index (mapped through idx when non-nil) where the running
// sum of w first exceeds u.
func pick[F float32 | float64](w []F, u float64, idx []int) int {
	last := len(w) - 1
	for i, v := range w {
		u -= float64(v)
		if u < 0 {
			last = i
			break
		}
	}
	if idx != nil {
		return idx[last]
	}
	return last
}

// topIndices returns the indices of the n largest logits, largest first
// (ties broken by lower index).
func topIndices(logits []float32, n int) []int {
	n = min(n, len(logits))
	top := make([]int, 0, n+1)
	less := func(a, b int) bool { // a ranks below b
		return logits[a] < logits[b] || (logits[a] == logits[b] && a > b)
	}
	for i := range logits {
		if len(top) == n && !less(top[n-1], i) {
			continue
		}
		pos := len(top)
		for pos > 0 && less(top[pos-1], i) {
			pos--
		}
		top = slices.Insert(top, pos, i)
		if len(top) > n {
			top = top[:n]
		}
	}
	return top
}
