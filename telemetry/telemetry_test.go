package telemetry_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"go.opentelemetry.io/otel"

	"github.com/artgo/art/internal/otlptest"
	"github.com/artgo/art/internal/tracing"
	"github.com/artgo/art/telemetry"
)

func TestStartRejectsBadEndpoint(t *testing.T) {
	for _, e := range []string{"localhost:4318", "ftp://x/v1/traces", "http://"} {
		if _, err := telemetry.Start(context.Background(), telemetry.Config{Endpoint: e}); err == nil {
			t.Errorf("endpoint %q accepted", e)
		}
	}
}

func TestOffByDefault(t *testing.T) {
	before := otel.GetTracerProvider()
	tel, err := telemetry.Start(context.Background(), telemetry.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if otel.GetTracerProvider() != before {
		t.Error("Start with no endpoint installed a TracerProvider")
	}
	if err := tel.Shutdown(context.Background()); err != nil {
		t.Error(err)
	}
}

// TestExport sends spans to a loopback OTLP receiver that decodes them as
// the collector does, with the configured headers, and checks that a
// request's trace context and trajectory id reach the server side.
func TestExport(t *testing.T) {
	recv := otlptest.NewReceiver(t)
	before := otel.GetTracerProvider()
	tel, err := telemetry.Start(context.Background(), telemetry.Config{Endpoint: recv.URL, ServiceName: "svc",
		Headers: map[string]string{"Authorization": "Basic abc"}})
	if err != nil {
		t.Fatal(err)
	}
	defer tel.Shutdown(context.Background())

	// A client span calls a server over HTTP through tracing.Transport;
	// the server continues the trace.
	var serverTrajectory string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx := tracing.Extract(r.Context(), r.Header)
		serverTrajectory = tracing.TrajectoryIDFrom(ctx)
		_, span := tracing.Start(ctx, "server")
		span.End()
	}))
	defer srv.Close()
	ctx := tracing.WithTrajectoryID(context.Background(), "traj-1")
	ctx, span := tracing.Start(ctx, "client")
	req, _ := http.NewRequestWithContext(ctx, "GET", srv.URL, nil)
	resp, err := (&http.Client{Transport: tracing.Transport(nil)}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	tracing.End(span, nil)

	flush, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := tel.Flush(flush); err != nil {
		t.Fatal(err)
	}
	if err := recv.Err(); err != nil {
		t.Fatal(err)
	}
	client, server := recv.Named("client"), recv.Named("server")
	if len(client) != 1 || len(server) != 1 {
		t.Fatalf("got spans:\n%s", recv)
	}
	if server[0].TraceID != client[0].TraceID || server[0].ParentSpanID != client[0].SpanID {
		t.Errorf("server span %+v is not a child of client span %+v", server[0], client[0])
	}
	for _, s := range []otlptest.Span{client[0], server[0]} {
		if s.Attrs["art.trajectory_id"] != "traj-1" || s.Service != "svc" || s.Scope != tracing.Scope {
			t.Errorf("span %+v: want art.trajectory_id=traj-1, service svc, scope %s", s, tracing.Scope)
		}
	}
	if serverTrajectory != "traj-1" {
		t.Errorf("server saw trajectory id %q; want traj-1", serverTrajectory)
	}
	for _, h := range recv.Headers() {
		if got := h.Get("Authorization"); got != "Basic abc" {
			t.Errorf("export request Authorization = %q; want the configured header", got)
		}
	}

	if err := tel.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if otel.GetTracerProvider() != before {
		t.Error("Shutdown did not put back the previous TracerProvider")
	}
}

// TestLogHandler checks that log records carry the ids of the context's
// span and trajectory.
func TestLogHandler(t *testing.T) {
	recv := otlptest.NewReceiver(t)
	tel, err := telemetry.Start(context.Background(), telemetry.Config{Endpoint: recv.URL})
	if err != nil {
		t.Fatal(err)
	}
	defer tel.Shutdown(context.Background())
	var buf bytes.Buffer
	log := slog.New(telemetry.LogHandler(slog.NewJSONHandler(&buf, nil)))
	ctx, span := tracing.Start(tracing.WithTrajectoryID(context.Background(), "t7"), "work")
	log.InfoContext(ctx, "hello")
	span.End()
	var rec map[string]any
	if err := json.Unmarshal(buf.Bytes(), &rec); err != nil {
		t.Fatal(err)
	}
	sc := span.SpanContext()
	if rec["trajectory_id"] != "t7" || rec["trace_id"] != sc.TraceID().String() || rec["span_id"] != sc.SpanID().String() {
		t.Errorf("log record %v lacks the span's ids", rec)
	}
}
