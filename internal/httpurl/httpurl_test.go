package httpurl

import (
	"strings"
	"testing"
)

func TestBase(t *testing.T) {
	for raw, want := range map[string]string{
		"http://h:8000":       "http://h:8000",
		"http://h:8000/":      "http://h:8000",
		"https://h/v1":        "https://h",
		"https://h/v1/":       "https://h",
		"http://h:1/prefix/":  "http://h:1/prefix",
		"http://h:1/v1/extra": "http://h:1/v1/extra",
	} {
		got, err := Base(raw, "http://host:port")
		if err != nil || got != want {
			t.Errorf("Base(%q) = %q, %v; want %q", raw, got, err, want)
		}
	}
}

func TestParseRejects(t *testing.T) {
	for raw, says := range map[string]string{
		"gpu:8000":        "scheme",
		"localhost:7999":  "scheme",
		"ftp://h/":        "scheme",
		"http://":         "no host",
		"/v1":             "scheme",
		"http://h:port/x": "invalid port",
		"http://[::1/":    "missing ']'",
		"":                "scheme",
	} {
		_, err := Parse(raw, "http://host:port")
		if err == nil || !strings.Contains(err.Error(), says) || !strings.Contains(err.Error(), "http://host:port") {
			t.Errorf("Parse(%q) = %v; want an error saying %q and the example", raw, err, says)
		}
	}
}
