// Package telemetry sends the traces of a program that uses ART to any
// OpenTelemetry backend (Langfuse, Jaeger, Grafana Tempo, Honeycomb, an
// OpenTelemetry collector) over OTLP/HTTP. It is off unless an endpoint is
// configured, by Config or by OpenTelemetry's usual environment variables:
//
//	OTEL_EXPORTER_OTLP_ENDPOINT          base URL; /v1/traces is appended
//	OTEL_EXPORTER_OTLP_TRACES_ENDPOINT   the traces URL, used as it is
//	OTEL_EXPORTER_OTLP_HEADERS           "key=value,key2=value2" (values URL-encoded)
//	OTEL_EXPORTER_OTLP_TRACES_HEADERS    the same, for traces only (wins)
//	OTEL_SERVICE_NAME                    the service name (default "art")
//
// Once Start has installed the exporter, the SDK's spans arrive: gather
// and each rollout (with its trajectory id), every chat call the SDK's
// clients make (the server's span is a child of the rollout's, and carries
// the trajectory id the client sends in the X-ART-Trajectory-ID header),
// RULER's judge calls, and training steps. LogHandler gives slog records
// the same ids.
//
//	cfg, err := telemetry.FromEnv()
//	if err != nil { ... }
//	tel, err := telemetry.Start(ctx, cfg)
//	if err != nil { ... }
//	defer tel.Shutdown(context.Background())
package telemetry

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"strings"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/artgo/art/internal/httpurl"
	"github.com/artgo/art/internal/tracing"
)

// DefaultServiceName names the service when Config.ServiceName and
// OTEL_SERVICE_NAME are empty.
const DefaultServiceName = "art"

// DefaultTimeout bounds each export when Config.Timeout is 0.
const DefaultTimeout = 10 * time.Second

// Config says where traces go. The zero value sends none.
type Config struct {
	// Endpoint is the URL spans are posted to, with its path: e.g.
	// http://localhost:4318/v1/traces, or
	// https://cloud.langfuse.com/api/public/otel/v1/traces. "" turns
	// tracing off.
	Endpoint string
	// Headers are sent with every export (e.g. Authorization).
	Headers map[string]string
	// ServiceName is the resource's service.name ("" means
	// DefaultServiceName).
	ServiceName string
	// Timeout bounds each export (0 means DefaultTimeout).
	Timeout time.Duration
}

// Enabled reports whether c sends traces anywhere.
func (c Config) Enabled() bool { return c.Endpoint != "" }

// FromEnv reads a Config from OpenTelemetry's environment variables (see
// the package documentation).
func FromEnv() (Config, error) { return fromEnv(os.Getenv) }

func fromEnv(getenv func(string) string) (Config, error) {
	c := Config{ServiceName: getenv("OTEL_SERVICE_NAME")}
	if e := getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"); e != "" {
		c.Endpoint = e
	} else if e := getenv("OTEL_EXPORTER_OTLP_ENDPOINT"); e != "" {
		c.Endpoint = BaseEndpoint(e)
	}
	for _, name := range []string{"OTEL_EXPORTER_OTLP_HEADERS", "OTEL_EXPORTER_OTLP_TRACES_HEADERS"} {
		h, err := ParseHeaders(getenv(name))
		if err != nil {
			return Config{}, fmt.Errorf("telemetry: %s: %w", name, err)
		}
		if len(h) > 0 && c.Headers == nil {
			c.Headers = map[string]string{}
		}
		for k, v := range h {
			c.Headers[k] = v
		}
	}
	return c, nil
}

// BaseEndpoint returns the traces URL of an OTLP base URL, as
// OTEL_EXPORTER_OTLP_ENDPOINT is read: base + "/v1/traces".
func BaseEndpoint(base string) string {
	return strings.TrimSuffix(base, "/") + "/v1/traces"
}

// ParseHeaders parses OpenTelemetry's header list, "key=value,key2=value2"
// with URL-encoded values. An empty string is no headers.
func ParseHeaders(s string) (map[string]string, error) {
	out := map[string]string{}
	for _, pair := range strings.Split(s, ",") {
		if strings.TrimSpace(pair) == "" {
			continue
		}
		k, v, ok := strings.Cut(pair, "=")
		k = strings.TrimSpace(k)
		if !ok || k == "" {
			return nil, fmt.Errorf("header %q: want key=value", pair)
		}
		val, err := url.PathUnescape(strings.TrimSpace(v))
		if err != nil {
			return nil, fmt.Errorf("header %q: %w", k, err)
		}
		out[k] = val
	}
	return out, nil
}

// Tracing is an installed exporter; Shutdown flushes and removes it.
type Tracing struct {
	tp   *sdktrace.TracerProvider // nil when tracing is off
	prev trace.TracerProvider
}

// Start installs an OTLP/HTTP exporter for cfg as the global
// TracerProvider, which the SDK's spans use. With tracing off
// (cfg.Endpoint empty) it installs nothing and returns a Tracing whose
// Shutdown does nothing. Spans are batched and sent in the background;
// an unreachable endpoint only loses spans (and is logged by
// OpenTelemetry), it never slows or fails training.
func Start(ctx context.Context, cfg Config) (*Tracing, error) {
	if !cfg.Enabled() {
		return &Tracing{}, nil
	}
	if _, err := httpurl.Parse(cfg.Endpoint, "http://localhost:4318/v1/traces"); err != nil {
		return nil, fmt.Errorf("telemetry: the OTLP endpoint's %w", err)
	}
	timeout := cfg.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	exp, err := otlptracehttp.New(ctx,
		otlptracehttp.WithEndpointURL(cfg.Endpoint),
		otlptracehttp.WithHeaders(cfg.Headers),
		otlptracehttp.WithTimeout(timeout),
	)
	if err != nil {
		return nil, fmt.Errorf("telemetry: OTLP exporter: %w", err)
	}
	name := cfg.ServiceName
	if name == "" {
		name = DefaultServiceName
	}
	res := resource.NewSchemaless(attribute.String("service.name", name))
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	t := &Tracing{tp: tp, prev: otel.GetTracerProvider()}
	otel.SetTracerProvider(tp)
	return t, nil
}

// Flush exports every span ended so far.
func (t *Tracing) Flush(ctx context.Context) error {
	if t.tp == nil {
		return nil
	}
	if err := t.tp.ForceFlush(ctx); err != nil {
		return fmt.Errorf("telemetry: flush: %w", err)
	}
	return nil
}

// Shutdown exports the spans not yet sent, stops the exporter and puts
// back the TracerProvider that was installed before Start. It waits at
// most until ctx ends.
func (t *Tracing) Shutdown(ctx context.Context) error {
	if t.tp == nil {
		return nil
	}
	otel.SetTracerProvider(t.prev)
	if err := t.tp.Shutdown(ctx); err != nil {
		return fmt.Errorf("telemetry: shutdown: %w", err)
	}
	return nil
}

// LogHandler wraps next so that records logged with a context carry that
// context's trajectory_id, trace_id and span_id, the ids of the spans:
//
//	slog.SetDefault(slog.New(telemetry.LogHandler(slog.NewJSONHandler(os.Stderr, nil))))
func LogHandler(next slog.Handler) slog.Handler { return tracing.LogHandler(next) }
