package server

import (
	"context"
	"net/http/httptest"
	"path/filepath"
	"testing"

	"github.com/artgo/art/engine/initmodel"
	"github.com/artgo/art/engine/kernels"
	"github.com/artgo/art/host/native"
)

// testModel is the served model's name in these tests.
const testModel = "agent"

// writeTinyModel writes a tiny random Qwen2-shaped model with the byte
// tokenizer and returns its folder.
func writeTinyModel(tb testing.TB) string {
	tb.Helper()
	dir := filepath.Join(tb.TempDir(), "base")
	if _, err := initmodel.Write(dir, initmodel.Options{Arch: "qwen2", Shape: "tiny", Tokenizer: initmodel.ByteTokenizer, DType: kernels.F32, Seed: 1, Std: 0.2}); err != nil {
		tb.Fatal(err)
	}
	return dir
}

func openHost(tb testing.TB, base string) *native.Host {
	tb.Helper()
	h, err := openHostAt(tb, base, filepath.Join(tb.TempDir(), ".art"))
	if err != nil {
		tb.Fatal(err)
	}
	return h
}

// openHostAt opens the test model with its store under data.
func openHostAt(tb testing.TB, base, data string) (*native.Host, error) {
	tb.Helper()
	return native.Open(context.Background(), native.Options{BaseModel: base, Name: testModel, Project: "p", Path: data, Seed: 1})
}

// newTestServer serves a fresh tiny model on loopback with cfg.
func newTestServer(tb testing.TB, cfg Config) (*Server, *httptest.Server) {
	tb.Helper()
	srv := New(cfg, openHost(tb, writeTinyModel(tb)))
	ts := httptest.NewServer(srv.Handler())
	tb.Cleanup(func() {
		ts.Close()
		srv.Close()
	})
	return srv, ts
}
