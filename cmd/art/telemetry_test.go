package main

import (
	"reflect"
	"testing"

	"github.com/spf13/pflag"
)

func TestTelemetryFlags(t *testing.T) {
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://env:4318")
	t.Setenv("OTEL_EXPORTER_OTLP_HEADERS", "a=1")
	tests := []struct {
		args     []string
		endpoint string
		headers  map[string]string
	}{
		{nil, "http://env:4318/v1/traces", map[string]string{"a": "1"}},
		{[]string{"--otlp-endpoint", "https://cloud.langfuse.com/api/public/otel", "--otlp-header", "Authorization=Basic x=="},
			"https://cloud.langfuse.com/api/public/otel/v1/traces", map[string]string{"a": "1", "Authorization": "Basic x=="}},
		{[]string{"--otlp-endpoint", "http://c:4318/v1/traces"}, "http://c:4318/v1/traces", map[string]string{"a": "1"}},
	}
	for _, tt := range tests {
		var tf telemetryFlags
		f := pflag.NewFlagSet("x", pflag.ContinueOnError)
		tf.register(f)
		if err := f.Parse(tt.args); err != nil {
			t.Fatal(err)
		}
		cfg, err := tf.config()
		if err != nil {
			t.Fatal(err)
		}
		if cfg.Endpoint != tt.endpoint || !reflect.DeepEqual(cfg.Headers, tt.headers) {
			t.Errorf("%v: endpoint %q headers %v; want %q %v", tt.args, cfg.Endpoint, cfg.Headers, tt.endpoint, tt.headers)
		}
	}
	tf := telemetryFlags{headers: []string{"novalue"}}
	if _, err := tf.config(); err == nil {
		t.Error("--otlp-header without '=' accepted")
	}
}
