package main

import (
	"bytes"
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/artgo/art/arttest"
)

// Ensure `art serve --inference` refuses bad combinations and an engine it
// cannot reach with one clear line, without hanging.
func TestServe_InferenceFlags(t *testing.T) {
	base := arttest.TinyModel(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	down := "http://" + ln.Addr().String()
	ln.Close()
	common := []string{"serve", "--base-model", base, "--name", "agent", "--addr", "127.0.0.1:0", "--data", filepath.Join(t.TempDir(), ".art")}
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"unknown engine", []string{"--inference", "tgi", "--inference-url", down}, `unknown inference engine "tgi"`},
		{"no url", []string{"--inference", "vllm"}, "needs --inference-url"},
		{"url without engine", []string{"--inference-url", down}, "--inference-url needs --inference"},
		{"engine down", []string{"--inference", "vllm", "--inference-url", down}, "inference engine unavailable"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, _, errOut := runArgs(t, append(append([]string{}, common...), tt.args...)...)
			if code == 0 || !strings.Contains(errOut, tt.want) {
				t.Fatalf("exit %d, stderr %q; want a failure saying %q", code, errOut, tt.want)
			}
		})
	}
}

// Ensure every flag of `art serve` that is out of range, and an address it
// cannot bind, fail before the model loads: one clear line, and no step-0
// checkpoint left in --data.
func TestServe_BadFlagsBeforeLoad(t *testing.T) {
	base := arttest.TinyModel(t)
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"--max-concurrent", "-3"}, "--max-concurrent must be in [0, 4096]"},
		{[]string{"--max-concurrent", "100000"}, "--max-concurrent must be in [0, 4096]"},
		{[]string{"--max-body-bytes", "-5"}, "--max-body-bytes must be > 0"},
		{[]string{"--request-timeout", "-1s"}, "--request-timeout must be >= 0"},
		{[]string{"--shutdown-timeout", "-1s"}, "--shutdown-timeout must be >= 0"},
		{[]string{"--write-stall", "-1s"}, "--write-stall must be >= 0"},
		{[]string{"--lora-rank", "-1"}, "--lora-rank must be in [0, 1024]"},
		{[]string{"--lora-rank", "100000"}, "--lora-rank must be in [0, 1024]"},
		{[]string{"--lora-alpha", "-2"}, "--lora-alpha must be a finite number >= 0"},
		{[]string{"--lora-alpha", "NaN"}, "--lora-alpha must be a finite number >= 0"},
		{[]string{"--lora-alpha", "+Inf"}, "--lora-alpha must be a finite number >= 0"},
		{[]string{"--llamacpp-step", "-1"}, "--llamacpp-step must be >= 0"},
		{[]string{"--quantize", "q5"}, "q5"},
		{[]string{"--inference", "foo", "--inference-url", "http://127.0.0.1:1"}, `unknown inference engine "foo"`},
		{[]string{"--inference", "vllm"}, "needs --inference-url"},
		{[]string{"--inference-url", "http://127.0.0.1:1"}, "--inference-url needs --inference"},
		{[]string{"--addr", "nonsense"}, "--addr"},
		{[]string{"--addr", busy.Addr().String()}, "address already in use"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			data := filepath.Join(t.TempDir(), ".art")
			args := append([]string{"serve", "--base-model", base, "--name", "agent", "--addr", "127.0.0.1:0", "--data", data}, tt.args...)
			// Bounded: a server that starts despite the flag stops when
			// the context ends, with exit 0.
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			var out, stderr bytes.Buffer
			code := run(ctx, args, &out, &stderr)
			errOut := stderr.String()
			if code != 1 || !strings.Contains(errOut, tt.want) {
				t.Fatalf("exit %d, stderr %q; want a failure saying %q", code, errOut, tt.want)
			}
			if strings.Contains(errOut, "loading") || strings.Contains(errOut, "step 0") {
				t.Errorf("the model loaded before the flags were checked:\n%s", errOut)
			}
			if _, err := os.Stat(data); !os.IsNotExist(err) {
				t.Errorf("--data %s exists after a bad flag (err %v): something was written", data, err)
			}
		})
	}
}
