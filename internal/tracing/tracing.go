// Package tracing is the project's seam to OpenTelemetry: the one place
// that names spans' instrumentation scope, carries a rollout's trajectory id
// in a context and over HTTP, and ends spans with their errors. Packages
// that may not import telemetry (the SDK's root, ruler, server) trace
// through it.
//
// Spans go to the global TracerProvider, as OpenTelemetry asks of
// instrumented libraries: it drops them until a program installs one
// (telemetry.Start, or the program's own OpenTelemetry setup), so tracing
// costs nearly nothing when it is off.
package tracing

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"net/http"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// Scope is the instrumentation scope of every span the project makes.
const Scope = "github.com/artgo/art"

// TrajectoryHeader carries a rollout's trajectory id on the requests the
// SDK's clients send, so the server's spans and logs name the trajectory.
const TrajectoryHeader = "X-ART-Trajectory-ID"

// Attribute keys the project's spans use.
const (
	TrajectoryID = attribute.Key("art.trajectory_id")
	Model        = attribute.Key("art.model")
	Step         = attribute.Key("art.step")
	Split        = attribute.Key("art.split")
	Group        = attribute.Key("art.group")
	Rollout      = attribute.Key("art.rollout")
)

// Start starts a span named name as a child of the span in ctx. A
// trajectory id in ctx is set on the span.
func Start(ctx context.Context, name string, attrs ...attribute.KeyValue) (context.Context, trace.Span) {
	if id := TrajectoryIDFrom(ctx); id != "" {
		attrs = append(attrs, TrajectoryID.String(id))
	}
	return otel.Tracer(Scope).Start(ctx, name, trace.WithAttributes(attrs...))
}

// End ends span, marking it failed with err when err is not nil.
func End(span trace.Span, err error) {
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}

type trajectoryKey struct{}

// WithTrajectoryID returns ctx carrying the trajectory id id.
func WithTrajectoryID(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, trajectoryKey{}, id)
}

// TrajectoryIDFrom returns the trajectory id ctx carries, or "".
func TrajectoryIDFrom(ctx context.Context) string {
	id, _ := ctx.Value(trajectoryKey{}).(string)
	return id
}

// NewTrajectoryID returns a random id: 16 hex digits.
func NewTrajectoryID() string {
	var b [8]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// propagator writes and reads W3C trace context ("traceparent"); it is
// fixed rather than global so that a program's own propagator settings
// cannot turn the header off.
var propagator = propagation.TraceContext{}

// Inject sets ctx's span context ("traceparent") and trajectory id on h.
func Inject(ctx context.Context, h http.Header) {
	propagator.Inject(ctx, propagation.HeaderCarrier(h))
	if id := TrajectoryIDFrom(ctx); id != "" {
		h.Set(TrajectoryHeader, id)
	}
}

// Extract returns ctx with the remote span context and trajectory id that
// h carries, if any.
func Extract(ctx context.Context, h http.Header) context.Context {
	ctx = propagator.Extract(ctx, propagation.HeaderCarrier(h))
	if id := h.Get(TrajectoryHeader); id != "" && validID(id) {
		ctx = WithTrajectoryID(ctx, id)
	}
	return ctx
}

// validID accepts ids of at most 128 printable ASCII characters, so a
// client cannot put arbitrary bytes into spans and logs.
func validID(id string) bool {
	if len(id) > 128 {
		return false
	}
	for i := 0; i < len(id); i++ {
		if id[i] <= ' ' || id[i] > '~' {
			return false
		}
	}
	return true
}

// Transport returns a RoundTripper that sends each request's span context
// and trajectory id (see Inject) through next (nil: http.DefaultTransport).
func Transport(next http.RoundTripper) http.RoundTripper {
	if next == nil {
		next = http.DefaultTransport
	}
	return roundTripper{next}
}

type roundTripper struct{ next http.RoundTripper }

func (t roundTripper) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx := req.Context()
	if !trace.SpanContextFromContext(ctx).IsValid() && TrajectoryIDFrom(ctx) == "" {
		return t.next.RoundTrip(req)
	}
	req = req.Clone(ctx) // a RoundTripper must not modify its request
	Inject(ctx, req.Header)
	return t.next.RoundTrip(req)
}

// LogHandler returns a slog.Handler that adds to each record logged with a
// context (Logger.InfoContext and the like) the trajectory id and the trace
// and span ids that context carries, then passes it to next: logs and spans
// about the same work share their ids.
func LogHandler(next slog.Handler) slog.Handler { return logHandler{next} }

type logHandler struct{ next slog.Handler }

func (h logHandler) Enabled(ctx context.Context, l slog.Level) bool { return h.next.Enabled(ctx, l) }

func (h logHandler) Handle(ctx context.Context, r slog.Record) error {
	if ctx != nil {
		if id := TrajectoryIDFrom(ctx); id != "" {
			r.AddAttrs(slog.String("trajectory_id", id))
		}
		if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
			r.AddAttrs(slog.String("trace_id", sc.TraceID().String()), slog.String("span_id", sc.SpanID().String()))
		}
	}
	return h.next.Handle(ctx, r)
}

func (h logHandler) WithAttrs(as []slog.Attr) slog.Handler { return logHandler{h.next.WithAttrs(as)} }

func (h logHandler) WithGroup(name string) slog.Handler { return logHandler{h.next.WithGroup(name)} }
