package server

import (
	"maps"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/artgo/art/internal/promtext"
)

// metrics are the server's counters and gauges of inference, exposed on
// /metrics in Prometheus' text format (version 0.0.4) beside the hosted
// model's training counts (host.Meter).
type metrics struct {
	inFlight         atomic.Int64 // chat requests being answered
	sequences        atomic.Int64 // sequences those requests asked for
	promptTokens     atomic.Int64
	cachedTokens     atomic.Int64 // prompt tokens reused, not prefilled
	completionTokens atomic.Int64

	mu       sync.Mutex         // guards the fields below
	requests map[int]int64      // finished chat requests by status
	ttft     promtext.Histogram // time to first token of streamed requests
	recent   tokenWindow        // generated tokens of the last minute
}

// ttftBuckets are the upper bounds (seconds) of the time-to-first-token
// histogram.
var ttftBuckets = []float64{0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30}

// tokenWindow counts tokens per second over the last len(counts) seconds,
// for a tokens-per-second gauge that needs no PromQL.
type tokenWindow struct {
	counts [60]int64
	secs   [60]int64 // the Unix second each count belongs to
}

func (w *tokenWindow) add(now time.Time, n int) {
	sec := now.Unix()
	i := sec % int64(len(w.counts))
	if w.secs[i] != sec {
		w.secs[i], w.counts[i] = sec, 0
	}
	w.counts[i] += int64(n)
}

// rate returns the tokens per second over the window's full seconds before
// now.
func (w *tokenWindow) rate(now time.Time) float64 {
	sec := now.Unix()
	var sum int64
	for i, s := range w.secs {
		if s < sec && s >= sec-int64(len(w.counts)) {
			sum += w.counts[i]
		}
	}
	return float64(sum) / float64(len(w.counts))
}

func (m *metrics) firstToken(d time.Duration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.ttft.Counts == nil {
		m.ttft = promtext.NewHistogram(ttftBuckets...)
	}
	m.ttft.Observe(d.Seconds())
}

func (m *metrics) start(n int) {
	m.inFlight.Add(1)
	m.sequences.Add(int64(n))
}

func (m *metrics) finish(n int) {
	m.inFlight.Add(-1)
	m.sequences.Add(-int64(n))
}

func (m *metrics) tokens(prompt, cached, completion int) {
	m.promptTokens.Add(int64(prompt))
	m.cachedTokens.Add(int64(cached))
	m.completionTokens.Add(int64(completion))
	m.mu.Lock()
	m.recent.add(time.Now(), completion)
	m.mu.Unlock()
}

func (m *metrics) request(status int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.requests == nil {
		m.requests = map[int]int64{}
	}
	m.requests[status]++
}

func (s *Server) handleMetrics(w http.ResponseWriter, r *http.Request) {
	var p promtext.Writer
	m := &s.metrics
	running, capacity := s.model.Load()
	info := s.model.Info()
	train := s.model.Stats()
	p.Metric("art_requests_in_flight", "gauge", "Chat completion requests being answered.")
	p.Sample("art_requests_in_flight", "", float64(m.inFlight.Load()))
	p.Metric("art_sequences_running", "gauge", "Sequences being generated.")
	p.Sample("art_sequences_running", "", float64(running))
	p.Metric("art_sequences_waiting", "gauge", "Sequences waiting for a generation slot (queue depth).")
	p.Sample("art_sequences_waiting", "", float64(max(0, m.sequences.Load()-int64(running))))
	p.Metric("art_sequence_slots", "gauge", "Sequences generated at once at most.")
	p.Sample("art_sequence_slots", "", float64(capacity))
	p.Metric("art_prompt_tokens_total", "counter", "Prompt tokens of answered chat completions.")
	p.Sample("art_prompt_tokens_total", "", float64(m.promptTokens.Load()))
	p.Metric("art_prompt_tokens_cached_total", "counter", "Prompt tokens whose keys and values were reused from another request instead of prefilled.")
	p.Sample("art_prompt_tokens_cached_total", "", float64(m.cachedTokens.Load()))
	if pc, ok := s.model.Model.(prefixCache); ok {
		p.Metric("art_prefix_cache_bytes", "gauge", "Memory of finished answers' keys and values kept for later prompts (art serve --prefix-cache-mb).")
		p.Sample("art_prefix_cache_bytes", "", float64(pc.PrefixCacheBytes()))
	}
	p.Metric("art_generated_tokens_total", "counter", "Tokens generated for answered chat completions.")
	p.Sample("art_generated_tokens_total", "", float64(m.completionTokens.Load()))
	p.Metric("art_model_step", "gauge", "Latest checkpoint step (served as name@step and as the bare name).")
	p.Sample("art_model_step", promtext.Label("model", info.Name), float64(s.model.Step()))
	p.Metric("art_training", "gauge", "Training steps running now.")
	p.Sample("art_training", "", float64(train.Running))

	m.mu.Lock()
	requests := maps.Clone(m.requests)
	ttft := m.ttft.Clone()
	tokensPerSecond := m.recent.rate(time.Now())
	m.mu.Unlock()
	p.Metric("art_generated_tokens_per_second", "gauge", "Tokens generated per second over the last minute (answered requests).")
	p.Sample("art_generated_tokens_per_second", "", tokensPerSecond)
	p.Metric("art_chat_requests_total", "counter", "Finished chat completion requests by HTTP status (499: the client went away).")
	for _, code := range slices.Sorted(maps.Keys(requests)) {
		p.Sample("art_chat_requests_total", promtext.Label("code", strconv.Itoa(code)), float64(requests[code]))
	}
	if ttft.N > 0 {
		p.Histogram("art_time_to_first_token_seconds", "Time from a streamed chat request's start to its first sampled token.", ttft)
	}
	p.Metric("art_train_tokens_total", "counter", "Tokens trained on (data/step_trainer_tokens summed over steps).")
	p.Sample("art_train_tokens_total", "", train.Tokens)
	p.Metric("art_train_steps_total", "counter", "Finished training steps; skipped=\"true\" when nothing was trained.")
	for _, skipped := range []bool{false, true} {
		p.Sample("art_train_steps_total", promtext.Label("skipped", strconv.FormatBool(skipped)), float64(train.Steps[skipped]))
	}
	if len(train.Steps) > 0 {
		p.Metric("art_train_step_seconds", "gauge", "Duration of the last training step.")
		p.Sample("art_train_step_seconds", "", train.StepSeconds)
		p.Histogram("art_train_step_duration_seconds", "Durations of finished training steps.", train.StepDurations)
	}
	if len(train.RewardMean) > 0 {
		p.Metric("art_reward_mean", "gauge", "Mean reward of the last trajectory groups trained on (split=\"train\") or logged, by split.")
		for _, split := range slices.Sorted(maps.Keys(train.RewardMean)) {
			p.Sample("art_reward_mean", promtext.Label("split", split), train.RewardMean[split])
		}
	}
	w.Header().Set("Content-Type", promtext.ContentType)
	w.Write([]byte(p.String()))
}

// prefixCache is implemented by hosts that keep finished answers' keys and
// values for later prompts (the native host).
type prefixCache interface {
	PrefixCacheBytes() int64
}
