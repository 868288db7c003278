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

	mu       sync.Mutex    // guards requests
	requests map[int]int64 // finished chat requests by status
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
	m.mu.Unlock()
	steps, rewards, stepSeconds := train.Steps, train.RewardMean, train.StepSeconds
	metric("art_chat_requests_total", "counter", "Finished chat completion requests by HTTP status (499: the client went away).")
	for _, code := range slices.Sorted(maps.Keys(requests)) {
		sample("art_chat_requests_total", `code="`+strconv.Itoa(code)+`"`, float64(requests[code]))
	}
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
