package telemetry

import (
	"reflect"
	"testing"
)

func TestFromEnv(t *testing.T) {
	tests := []struct {
		name string
		env  map[string]string
		want Config
	}{
		{"off", nil, Config{}},
		{"base", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "https://cloud.langfuse.com/api/public/otel/"},
			Config{Endpoint: "https://cloud.langfuse.com/api/public/otel/v1/traces"}},
		{"traces wins", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://a:4318", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://b:9/x"},
			Config{Endpoint: "http://b:9/x"}},
		{"headers", map[string]string{
			"OTEL_EXPORTER_OTLP_ENDPOINT":       "http://a:4318",
			"OTEL_EXPORTER_OTLP_HEADERS":        "Authorization=Basic%20cGs6c2s=, x-a = 1",
			"OTEL_EXPORTER_OTLP_TRACES_HEADERS": "x-a=2",
			"OTEL_SERVICE_NAME":                 "agent",
		}, Config{Endpoint: "http://a:4318/v1/traces", ServiceName: "agent",
			Headers: map[string]string{"Authorization": "Basic cGs6c2s=", "x-a": "2"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := fromEnv(func(k string) string { return tt.env[k] })
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %+v; want %+v", got, tt.want)
			}
		})
	}
	if _, err := fromEnv(func(k string) string {
		if k == "OTEL_EXPORTER_OTLP_HEADERS" {
			return "novalue"
		}
		return ""
	}); err == nil {
		t.Error("a header without '=' was accepted")
	}
}
