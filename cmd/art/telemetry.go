package main

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/artgo/art/telemetry"
)

// telemetryFlags are the tracing flags of commands that serve or train.
type telemetryFlags struct {
	endpoint string
	headers  []string
}

func (t *telemetryFlags) register(f *pflag.FlagSet) {
	f.StringVar(&t.endpoint, "otlp-endpoint", "", "send traces over OTLP/HTTP to this base URL (/v1/traces is appended unless given), e.g. http://localhost:4318 or https://cloud.langfuse.com/api/public/otel (default $OTEL_EXPORTER_OTLP_ENDPOINT; off if both are empty)")
	f.StringArrayVar(&t.headers, "otlp-header", nil, "KEY=VALUE header sent with traces, e.g. \"Authorization=Basic ...\" (repeatable; added to $OTEL_EXPORTER_OTLP_HEADERS)")
}

// config merges the flags over OpenTelemetry's environment variables.
func (t *telemetryFlags) config() (telemetry.Config, error) {
	cfg, err := telemetry.FromEnv()
	if err != nil {
		return cfg, err
	}
	if t.endpoint != "" {
		cfg.Endpoint = t.endpoint
		if !strings.HasSuffix(strings.TrimSuffix(t.endpoint, "/"), "/v1/traces") {
			cfg.Endpoint = telemetry.BaseEndpoint(t.endpoint)
		}
	}
	for _, h := range t.headers {
		k, v, ok := strings.Cut(h, "=")
		if !ok || strings.TrimSpace(k) == "" {
			return cfg, fmt.Errorf("--otlp-header %q: want KEY=VALUE", h)
		}
		if cfg.Headers == nil {
			cfg.Headers = map[string]string{}
		}
		cfg.Headers[strings.TrimSpace(k)] = v
	}
	return cfg, nil
}

// start turns tracing on if configured and returns a logger whose records
// carry the trace and trajectory ids, and a function that flushes the last
// spans (for up to 10 seconds).
func (t *telemetryFlags) start(ctx context.Context, log *slog.Logger) (*slog.Logger, func(), error) {
	cfg, err := t.config()
	if err != nil {
		return nil, nil, err
	}
	tel, err := telemetry.Start(ctx, cfg)
	if err != nil {
		return nil, nil, err
	}
	if cfg.Enabled() {
		log.Info("telemetry: sending traces", "endpoint", cfg.Endpoint)
	}
	stop := func() {
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := tel.Shutdown(sctx); err != nil {
			log.Warn("telemetry: last spans not sent", "err", err)
		}
	}
	return slog.New(telemetry.LogHandler(log.Handler())), stop, nil
}
