// Package otlptest is an OTLP/HTTP trace receiver for tests: it listens on
// loopback, decodes each export request's protobuf body as the
// OpenTelemetry collector does (gzip included), and keeps the spans, so a
// test can check what a real exporter sent.
package otlptest

import (
	"compress/gzip"
	"context"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	"google.golang.org/protobuf/proto"

	"github.com/artgo/art/telemetry"
)

// Span is a received span, flattened for tests.
type Span struct {
	Name         string
	TraceID      string // hex
	SpanID       string // hex
	ParentSpanID string // hex; "" for a root span
	Attrs        map[string]string
	Service      string // the resource's service.name
	Error        bool   // status code ERROR
	Scope        string // instrumentation scope name
}

// Receiver is a loopback OTLP/HTTP endpoint.
type Receiver struct {
	URL string // the traces URL: http://127.0.0.1:PORT/v1/traces

	mu      sync.Mutex // guards the fields below
	spans   []Span
	headers []http.Header // of each export request
	errs    []error
}

// NewReceiver starts a receiver, stopped when t's test ends.
func NewReceiver(t testing.TB) *Receiver {
	t.Helper()
	r := &Receiver{}
	srv := httptest.NewServer(http.HandlerFunc(r.serve))
	t.Cleanup(srv.Close)
	r.URL = srv.URL + "/v1/traces"
	return r
}

func (r *Receiver) serve(w http.ResponseWriter, req *http.Request) {
	err := r.export(req)
	r.mu.Lock()
	r.headers = append(r.headers, req.Header.Clone())
	if err != nil {
		r.errs = append(r.errs, err)
	}
	r.mu.Unlock()
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	b, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	w.Write(b)
}

func (r *Receiver) export(req *http.Request) error {
	if req.Method != http.MethodPost || req.URL.Path != "/v1/traces" {
		return fmt.Errorf("otlptest: %s %s: want POST /v1/traces", req.Method, req.URL.Path)
	}
	if ct := req.Header.Get("Content-Type"); ct != "application/x-protobuf" {
		return fmt.Errorf("otlptest: content type %q: want application/x-protobuf", ct)
	}
	var body io.Reader = req.Body
	if req.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(req.Body)
		if err != nil {
			return fmt.Errorf("otlptest: gzip: %w", err)
		}
		body = zr
	}
	b, err := io.ReadAll(body)
	if err != nil {
		return fmt.Errorf("otlptest: read body: %w", err)
	}
	var msg coltracepb.ExportTraceServiceRequest
	if err := proto.Unmarshal(b, &msg); err != nil {
		return fmt.Errorf("otlptest: decode ExportTraceServiceRequest: %w", err)
	}
	var got []Span
	for _, rs := range msg.ResourceSpans {
		service := attrs(rs.GetResource().GetAttributes())["service.name"]
		for _, ss := range rs.ScopeSpans {
			for _, sp := range ss.Spans {
				got = append(got, Span{
					Name: sp.Name, TraceID: hex.EncodeToString(sp.TraceId), SpanID: hex.EncodeToString(sp.SpanId),
					ParentSpanID: hex.EncodeToString(sp.ParentSpanId), Attrs: attrs(sp.Attributes), Service: service,
					Error: sp.GetStatus().GetCode() == 2, Scope: ss.GetScope().GetName(),
				})
			}
		}
	}
	r.mu.Lock()
	r.spans = append(r.spans, got...)
	r.mu.Unlock()
	return nil
}

func attrs(kvs []*commonpb.KeyValue) map[string]string {
	m := make(map[string]string, len(kvs))
	for _, kv := range kvs {
		v := kv.GetValue()
		switch v.Value.(type) {
		case *commonpb.AnyValue_StringValue:
			m[kv.Key] = v.GetStringValue()
		case *commonpb.AnyValue_IntValue:
			m[kv.Key] = fmt.Sprint(v.GetIntValue())
		case *commonpb.AnyValue_DoubleValue:
			m[kv.Key] = fmt.Sprint(v.GetDoubleValue())
		case *commonpb.AnyValue_BoolValue:
			m[kv.Key] = fmt.Sprint(v.GetBoolValue())
		default:
			m[kv.Key] = v.String()
		}
	}
	return m
}

// Spans returns the spans received so far.
func (r *Receiver) Spans() []Span {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Span(nil), r.spans...)
}

// Named returns the received spans called name.
func (r *Receiver) Named(name string) []Span {
	var out []Span
	for _, s := range r.Spans() {
		if s.Name == name {
			out = append(out, s)
		}
	}
	return out
}

// Headers returns the headers of every export request so far.
func (r *Receiver) Headers() []http.Header {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]http.Header(nil), r.headers...)
}

// Err returns the first malformed export, if any.
func (r *Receiver) Err() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.errs) > 0 {
		return r.errs[0]
	}
	return nil
}

// String lists the received spans, for failure messages.
func (r *Receiver) String() string {
	var b strings.Builder
	for _, s := range r.Spans() {
		fmt.Fprintf(&b, "  %s span=%s parent=%s %v\n", s.Name, s.SpanID, s.ParentSpanID, s.Attrs)
	}
	return b.String()
}

// Install starts telemetry exporting to a new receiver and returns it with
// a flush function that delivers every span ended so far (then they are in
// Spans). Telemetry is shut down when t's test ends. It replaces the
// global TracerProvider meanwhile, so tests using it must not run in
// parallel with each other.
func Install(t testing.TB) (*Receiver, func()) {
	t.Helper()
	r := NewReceiver(t)
	tel, err := telemetry.Start(context.Background(), telemetry.Config{Endpoint: r.URL, ServiceName: "art-test"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := tel.Shutdown(ctx); err != nil {
			t.Errorf("telemetry shutdown: %v", err)
		}
	})
	flush := func() {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := tel.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		if err := r.Err(); err != nil {
			t.Fatal(err)
		}
	}
	return r, flush
}
