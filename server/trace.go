package server

import (
	"context"
	"net/http"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/artgo/art/host"
	"github.com/artgo/art/internal/tracing"
)

// untraced are the operational routes, polled too often to be worth a
// span each.
var untraced = map[string]bool{"/healthz": true, "/metrics": true}

// traced wraps a route's handler in a span named "METHOD /path", which
// continues the caller's trace (W3C traceparent) and carries the
// trajectory id the SDK's clients send (X-ART-Trajectory-ID), the answer's
// status, and whatever the handler adds to trace.SpanFromContext. Every
// route registered in routesHandler gets one; the request is logged at
// debug level with the same ids.
func (s *Server) traced(method, path string, next http.Handler) http.Handler {
	if untraced[path] {
		return next
	}
	name := method + " " + path
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx := tracing.Extract(r.Context(), r.Header)
		ctx, span := tracing.Start(ctx, name, attribute.String("http.request.method", method), attribute.String("http.route", path))
		sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
		start := time.Now()
		defer func() {
			span.SetAttributes(attribute.Int("http.response.status_code", sw.status))
			if sw.status >= 500 {
				span.SetStatus(codes.Error, http.StatusText(sw.status))
			}
			if v := recover(); v != nil {
				span.SetStatus(codes.Error, "panic")
				span.End()
				panic(v)
			}
			span.End()
			s.log.DebugContext(ctx, "server: request", "route", name, "status", sw.status, "duration", time.Since(start))
		}()
		next.ServeHTTP(sw, r.WithContext(ctx))
	})
}

// statusWriter remembers the status a handler answered with.
type statusWriter struct {
	http.ResponseWriter
	status      int
	wroteHeader bool
}

func (w *statusWriter) WriteHeader(code int) {
	if !w.wroteHeader {
		w.status, w.wroteHeader = code, true
	}
	w.ResponseWriter.WriteHeader(code)
}

// Unwrap lets http.ResponseController reach the connection (flushes,
// deadlines) through the wrapper.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// countTokens counts an answered request's tokens for /metrics and on
// its span.
func (s *Server) countTokens(ctx context.Context, resp host.ChatResponse) {
	prompt, completion := len(resp.PromptTokenIDs), resp.CompletionTokens
	s.metrics.tokens(prompt, resp.CachedTokens, completion)
	trace.SpanFromContext(ctx).SetAttributes(attribute.Int("gen_ai.usage.input_tokens", prompt), attribute.Int("gen_ai.usage.output_tokens", completion))
}
