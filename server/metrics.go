package server

import (
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// metrics are the server's counters and gauges of inference, exposed on
// /metrics in Prometheus' text format (version 0.0.4) beside the hosted
// model's training counts (host.Meter). Tokens per second is
// rate(art_generated_tokens_total[1m]).
type metrics struct {
	inFlight         atomic.Int64 // chat requests being answered
	sequences        atomic.Int64 // sequences those requests asked for
	promptTokens     atomic.Int64
	completionTokens atomic.Int64

	mu       sync.Mutex    // guards requests and ttft
	requests map[int]int64 // finished chat requests by status
	ttft     histogram     // time to first token of streamed requests
}

// ttftBuckets are the upper bounds (seconds) of the time-to-first-token
// histogram.
var ttftBuckets = []float64{0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30}

// histogram is a Prometheus histogram: cumulative counts per upper bound.
type histogram struct {
	counts []int64 // per bucket of ttftBuckets, not cumulative; the last is +Inf
	sum    float64
	n      int64
}

func (m *metrics) firstToken(d time.Duration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	h := &m.ttft
	if h.counts == nil {
		h.counts = make([]int64, len(ttftBuckets)+1)
	}
	sec := d.Seconds()
	i := 0
	for i < len(ttftBuckets) && sec > ttftBuckets[i] {
		i++
	}
	h.counts[i]++
	h.sum += sec
	h.n++
}

func (m *metrics) start(n int) {
	m.inFlight.Add(1)
	m.sequences.Add(int64(n))
}

func (m *metrics) finish(n int) {
	m.inFlight.Add(-1)
	m.sequences.Add(-int64(n))
}

func (m *metrics) tokens(prompt, completion int) {
	m.promptTokens.Add(int64(prompt))
	m.completionTokens.Add(int64(completion))
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
	var b strings.Builder
	m := &s.metrics
	metric := func(name, typ, help string) {
		fmt.Fprintf(&b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, typ)
	}
	sample := func(name, labels string, v float64) {
		b.WriteString(name)
		if labels != "" {
			b.WriteString("{" + labels + "}")
		}
		b.WriteString(" " + strconv.FormatFloat(v, 'g', -1, 64) + "\n")
	}
	running, capacity := s.model.Load()
	info := s.model.Info()
	train := s.model.Stats()
	metric("art_requests_in_flight", "gauge", "Chat completion requests being answered.")
	sample("art_requests_in_flight", "", float64(m.inFlight.Load()))
	metric("art_sequences_running", "gauge", "Sequences being generated.")
	sample("art_sequences_running", "", float64(running))
	metric("art_sequences_waiting", "gauge", "Sequences waiting for a generation slot (queue depth).")
	sample("art_sequences_waiting", "", float64(max(0, m.sequences.Load()-int64(running))))
	metric("art_sequence_slots", "gauge", "Sequences generated at once at most.")
	sample("art_sequence_slots", "", float64(capacity))
	metric("art_prompt_tokens_total", "counter", "Prompt tokens of answered chat completions.")
	sample("art_prompt_tokens_total", "", float64(m.promptTokens.Load()))
	metric("art_generated_tokens_total", "counter", "Tokens generated for answered chat completions.")
	sample("art_generated_tokens_total", "", float64(m.completionTokens.Load()))
	metric("art_model_step", "gauge", "Latest checkpoint step (served as name@step and as the bare name).")
	sample("art_model_step", `model="`+escapeLabel(info.Name)+`"`, float64(s.model.Step()))
	metric("art_training", "gauge", "Training steps running now.")
	sample("art_training", "", float64(train.Running))

	m.mu.Lock()
	requests := maps.Clone(m.requests)
	ttft := m.ttft
	ttft.counts = slices.Clone(ttft.counts)
	m.mu.Unlock()
	steps, rewards, stepSeconds := train.Steps, train.RewardMean, train.StepSeconds
	metric("art_chat_requests_total", "counter", "Finished chat completion requests by HTTP status (499: the client went away).")
	for _, code := range slices.Sorted(maps.Keys(requests)) {
		sample("art_chat_requests_total", `code="`+strconv.Itoa(code)+`"`, float64(requests[code]))
	}
	if ttft.n > 0 {
		metric("art_time_to_first_token_seconds", "histogram", "Time from a streamed chat request's start to its first sampled token.")
		var cum int64
		for i, le := range ttftBuckets {
			cum += ttft.counts[i]
			sample("art_time_to_first_token_seconds_bucket", `le="`+strconv.FormatFloat(le, 'g', -1, 64)+`"`, float64(cum))
		}
		sample("art_time_to_first_token_seconds_bucket", `le="+Inf"`, float64(ttft.n))
		sample("art_time_to_first_token_seconds_sum", "", ttft.sum)
		sample("art_time_to_first_token_seconds_count", "", float64(ttft.n))
	}
	metric("art_train_tokens_total", "counter", "Tokens trained on (data/step_trainer_tokens summed over steps).")
	sample("art_train_tokens_total", "", train.Tokens)
	metric("art_train_steps_total", "counter", "Finished training steps; skipped=\"true\" when nothing was trained.")
	for _, skipped := range []bool{false, true} {
		sample("art_train_steps_total", `skipped="`+strconv.FormatBool(skipped)+`"`, float64(steps[skipped]))
	}
	if len(steps) > 0 {
		metric("art_train_step_seconds", "gauge", "Duration of the last training step.")
		sample("art_train_step_seconds", "", stepSeconds)
	}
	if len(rewards) > 0 {
		metric("art_reward_mean", "gauge", "Mean reward of the last trajectory groups trained on (split=\"train\") or logged, by split.")
		for _, split := range slices.Sorted(maps.Keys(rewards)) {
			sample("art_reward_mean", `split="`+escapeLabel(split)+`"`, rewards[split])
		}
	}
	w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
	w.Write([]byte(b.String()))
}

func escapeLabel(s string) string {
	return strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`).Replace(s)
}
