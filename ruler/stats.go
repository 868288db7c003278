package ruler

import (
	"strings"
	"sync/atomic"
)

// Stats counts what scoring did; share one across calls (Options.Stats)
// and log its Take at each step. It is safe for concurrent use.
type Stats struct {
	calls, retries, cacheHits, failed, dropped atomic.Int64
	promptTokens, completionTokens             atomic.Int64
	microUSD                                   atomic.Int64
	unpriced                                   atomic.Int64 // calls to a model the price table does not know
}

// Take returns the counts since the last Take, as metrics for model.Log,
// and resets them: ruler/judge_calls, ruler/judge_retries,
// ruler/cache_hits, ruler/failed_groups, ruler/dropped_groups,
// ruler/judge_prompt_tokens, ruler/judge_completion_tokens, and, when the
// judge's price is known, ART's cost key in USD: costs/train/judge/ruler
// for split "train", costs/eval/judge/ruler for any other split (ART files
// validation and test judging under "eval"). Groups dropped under
// SwallowErrors count here too: their judge calls were paid for.
func (s *Stats) Take(split string) map[string]float64 {
	if split != "train" {
		split = "eval"
	}
	m := map[string]float64{
		"ruler/judge_calls":             float64(s.calls.Swap(0)),
		"ruler/judge_retries":           float64(s.retries.Swap(0)),
		"ruler/cache_hits":              float64(s.cacheHits.Swap(0)),
		"ruler/failed_groups":           float64(s.failed.Swap(0)),
		"ruler/dropped_groups":          float64(s.dropped.Swap(0)),
		"ruler/judge_prompt_tokens":     float64(s.promptTokens.Swap(0)),
		"ruler/judge_completion_tokens": float64(s.completionTokens.Swap(0)),
	}
	usd := s.microUSD.Swap(0)
	if s.unpriced.Swap(0) == 0 || usd > 0 {
		m["costs/"+split+"/judge/ruler"] = float64(usd) / 1e6
	}
	return m
}

// Dropped returns the groups dropped so far (since the last Take).
func (s *Stats) Dropped() int64 { return s.dropped.Load() }

// price is a model's list price in USD per million tokens.
type price struct{ in, out float64 }

// PricesAsOf dates the price table: public list prices per million tokens
// (input, output) of common judge models, from OpenAI's and Anthropic's
// pricing pages on that day; a provider's actual bill may differ, and
// prices change. Unknown models are not priced (their cost metric is left
// out, never guessed).
const PricesAsOf = "2025-07-01"

// prices is the table PricesAsOf dates.
var prices = map[string]price{
	"o3": {2, 8}, "o3-mini": {1.1, 4.4}, "o4-mini": {1.1, 4.4},
	"gpt-4.1": {2, 8}, "gpt-4.1-mini": {0.4, 1.6}, "gpt-4.1-nano": {0.1, 0.4},
	"gpt-4o": {2.5, 10}, "gpt-4o-mini": {0.15, 0.6},
	"claude-opus-4": {15, 75}, "claude-sonnet-4": {3, 15}, "claude-3-7-sonnet": {3, 15},
	"claude-3-5-haiku": {0.8, 4},
}

// priceOf finds a model's price: its name without a provider path or a
// date suffix ("anthropic/claude-sonnet-4-20250514" → claude-sonnet-4).
func priceOf(model string) (price, bool) {
	if i := strings.LastIndex(model, "/"); i >= 0 {
		model = model[i+1:]
	}
	for name := model; name != ""; {
		if p, ok := prices[name]; ok {
			return p, true
		}
		i := strings.LastIndex(name, "-")
		if i < 0 {
			break
		}
		name = name[:i]
	}
	return price{}, false
}

// record counts an answer's tokens and returns its cost in USD, if the
// model's price is known.
func (s *Stats) record(model string, a Answer) (usd float64, priced bool) {
	s.promptTokens.Add(a.PromptTokens)
	s.completionTokens.Add(a.CompletionTokens)
	p, ok := priceOf(model)
	if !ok {
		s.unpriced.Add(1)
		return 0, false
	}
	micro := int64(float64(a.PromptTokens)*p.in + float64(a.CompletionTokens)*p.out)
	s.microUSD.Add(micro)
	return float64(micro) / 1e6, true
}
