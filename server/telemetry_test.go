package server

import (
	"context"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/artgo/art"
	"github.com/artgo/art/internal/otlptest"
	"github.com/artgo/art/internal/tracing"
)

// TestMetrics_Parse checks /metrics with Prometheus' own text parser after
// a training step and a streamed request: the inference gauges (queue,
// running sequences, tokens per second), the time-to-first-token and
// step-duration histograms.
func TestMetrics_Parse(t *testing.T) {
	srv, ts := newTestServer(t, Config{APIKey: testKey})
	groups := trainingGroups(t, ts.URL)
	if _, err := srv.model.Train(context.Background(), groups, art.TrainConfig{LearningRate: 1e-3}, nil); err != nil {
		t.Fatal(err)
	}
	if status, b := do(t, "POST", ts.URL+"/v1/chat/completions", testKey, chatBody(`"stream":true`)); status != 200 {
		t.Fatalf("streamed chat: %d %s", status, b)
	}
	status, b := do(t, "GET", ts.URL+"/metrics", testKey, "")
	if status != 200 {
		t.Fatalf("GET /metrics: %d %s", status, b)
	}
	fams := parseMetrics(t, b)
	for _, name := range []string{"art_sequences_waiting", "art_sequences_running", "art_requests_in_flight", "art_generated_tokens_per_second"} {
		if f := fams[name]; f == nil || f.GetType().String() != "GAUGE" {
			t.Errorf("%s: want a gauge, got %v", name, f)
		}
	}
	if v := fams["art_generated_tokens_per_second"].GetMetric()[0].GetGauge().GetValue(); v <= 0 {
		// Tokens counted this very second are left out of the window;
		// the requests above ran over at least one earlier second only on
		// a slow machine, so accept 0 only with the counter also 0.
		if fams["art_generated_tokens_total"].GetMetric()[0].GetCounter().GetValue() == 0 {
			t.Error("no generated tokens counted")
		}
	}
	for name, count := range map[string]uint64{"art_train_step_duration_seconds": 1, "art_time_to_first_token_seconds": 1} {
		f := fams[name]
		if f == nil || f.GetType().String() != "HISTOGRAM" {
			t.Errorf("%s: want a histogram, got %v", name, f)
			continue
		}
		h := f.GetMetric()[0].GetHistogram()
		if h.GetSampleCount() != count || h.GetSampleSum() <= 0 || len(h.GetBucket()) == 0 {
			t.Errorf("%s: count %d sum %v; want %d observation(s) with a positive sum", name, h.GetSampleCount(), h.GetSampleSum(), count)
		}
	}
	steps := fams["art_train_steps_total"]
	if steps == nil || len(steps.GetMetric()) != 2 {
		t.Fatalf("art_train_steps_total: %v", steps)
	}
}

// TestTraces checks the server's spans, exported over OTLP/HTTP to a
// loopback receiver: a chat request from the SDK's client, made inside a
// rollout's span with a trajectory id, gets a server span that continues
// the client's trace and carries the trajectory id and the model that
// answered.
func TestTraces(t *testing.T) {
	recv, flush := otlptest.Install(t)
	_, ts := newTestServer(t, Config{APIKey: testKey})
	m := &art.Model{Name: "c", Project: "p", BasePath: t.TempDir(), InferenceBaseURL: ts.URL + "/v1", InferenceAPIKey: testKey}
	client, err := m.OpenAIClient()
	if err != nil {
		t.Fatal(err)
	}
	ctx := art.WithTrajectoryID(context.Background(), "traj-42")
	ctx, span := tracing.Start(ctx, "test.rollout")
	var tr art.Trajectory
	tr.AddMessage(art.UserMsg("hi"))
	if _, err := tr.Chat(ctx, client, openai.ChatCompletionNewParams{Model: testModel, MaxTokens: openai.Int(4)}); err != nil {
		t.Fatal(err)
	}
	span.End()
	if status, b := do(t, "GET", ts.URL+"/v1/models", testKey, ""); status != 200 {
		t.Fatalf("GET /v1/models: %d %s", status, b)
	}
	flush()

	chats, servers := recv.Named("art.chat"), recv.Named("POST /v1/chat/completions")
	if len(chats) != 1 || len(servers) != 1 {
		t.Fatalf("want one art.chat and one server span; got:\n%s", recv)
	}
	s := servers[0]
	if s.TraceID != chats[0].TraceID || s.ParentSpanID != chats[0].SpanID {
		t.Errorf("server span %+v does not continue the client's span %+v", s, chats[0])
	}
	for k, want := range map[string]string{"art.trajectory_id": "traj-42", "art.model": testModel + "@0",
		"http.response.status_code": "200", "http.route": "/v1/chat/completions"} {
		if s.Attrs[k] != want {
			t.Errorf("server span %s = %q; want %q (attributes %v)", k, s.Attrs[k], want, s.Attrs)
		}
	}
	if s.Attrs["gen_ai.usage.output_tokens"] == "" {
		t.Errorf("server span lacks token counts: %v", s.Attrs)
	}
	if got := recv.Named("GET /v1/models"); len(got) != 1 || got[0].ParentSpanID != "" {
		t.Errorf("GET /v1/models: want one root span, got %+v", got)
	}
	if len(recv.Named("GET /metrics")) != 0 || len(recv.Named("GET /healthz")) != 0 {
		t.Error("operational routes are traced")
	}
}

// parseMetrics reads a /metrics body with Prometheus' own text parser.
func parseMetrics(t *testing.T, b []byte) map[string]*dto.MetricFamily {
	t.Helper()
	parser := expfmt.NewTextParser(model.LegacyValidation)
	fams, err := parser.TextToMetricFamilies(strings.NewReader(string(b)))
	if err != nil {
		t.Fatalf("Prometheus' parser refuses /metrics: %v\n%s", err, b)
	}
	return fams
}
