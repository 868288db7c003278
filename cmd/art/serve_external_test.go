package main

import (
	"net"
	"path/filepath"
	"strings"
	"testing"

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
