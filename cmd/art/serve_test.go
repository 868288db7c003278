package main

import (
	"bytes"
	"context"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/artgo/art/arttest"
	"github.com/artgo/art/engine/initmodel"
	"github.com/artgo/art/engine/kernels"
)

// syncBuffer is a bytes.Buffer safe for concurrent writes.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// Ensure `art serve` serves a model with its API key, and stops cleanly
// (exit code 0) when its context is cancelled, as on SIGINT.
func TestServe(t *testing.T) {
	base := filepath.Join(t.TempDir(), "base")
	if _, err := initmodel.Write(base, initmodel.Options{Arch: "qwen2", Shape: "tiny", Tokenizer: initmodel.ByteTokenizer, DType: kernels.F32, Seed: 1, Std: 0.2}); err != nil {
		t.Fatal(err)
	}
	addr := freeAddr(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stdout, stderr syncBuffer
	code := make(chan int, 1)
	go func() {
		code <- run(ctx, []string{"serve", "--base-model", base, "--name", "agent", "--project", "p", "--addr", addr,
			"--api-key", "k", "--data", filepath.Join(t.TempDir(), ".art")}, &stdout, &stderr)
	}()
	url := "http://" + addr
	deadline := time.Now().Add(20 * time.Second)
	for {
		resp, err := http.Get(url + "/healthz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("server not healthy after 20s: %v\n%s", err, stderr.String())
		}
		select {
		case c := <-code:
			t.Fatalf("serve exited with %d:\n%s", c, stderr.String())
		case <-time.After(20 * time.Millisecond):
		}
	}
	post := func(key string) int {
		req, _ := http.NewRequest("POST", url+"/v1/chat/completions", strings.NewReader(`{"model":"agent","messages":[{"role":"user","content":"hi"}],"max_tokens":3}`))
		if key != "" {
			req.Header.Set("Authorization", "Bearer "+key)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if got := post("k"); got != http.StatusOK {
		t.Errorf("chat with the key: status %d; want 200", got)
	}
	if got := post(""); got != http.StatusUnauthorized {
		t.Errorf("chat without the key: status %d; want 401", got)
	}
	// The served model as a RULER judge: `art ruler` scores a logged step
	// through it, with structured outputs keeping the random model's
	// answers valid.
	t.Setenv("SERVE_TEST_KEY", "k")
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	parquet := loggedStep(t)
	var rout, rerr syncBuffer
	if c := run(ctx, []string{"ruler", parquet, "--judge", "agent@0", "--base-url", url + "/v1", "--api-key-env", "SERVE_TEST_KEY",
		"--max-explanation", "12", "--max-tokens", "400"}, &rout, &rerr); c != 0 {
		t.Fatalf("art ruler against art serve: exit %d: %s", c, rerr.String())
	}
	if !strings.Contains(rout.String(), "group 1 (3 trajectories)") || !strings.Contains(rerr.String(), "2 groups scored by agent@0: 2 judge calls (0 retries") {
		t.Errorf("art ruler against art serve:\n%s\n%s", rout.String(), rerr.String())
	}
	// The dashboard at /dashboard/: the key once as ?key=, then a cookie;
	// an open event stream does not hold the shutdown.
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	if resp, err := noRedirect.Get(url + "/dashboard/api/runs"); err != nil || resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("dashboard without the key: %v %v; want 401", resp.StatusCode, err)
	}
	resp, err := noRedirect.Get(url + "/dashboard/?key=k")
	if err != nil || resp.StatusCode != http.StatusSeeOther || len(resp.Cookies()) != 1 {
		t.Fatalf("dashboard ?key=: %v %v; want a redirect setting a cookie", resp.StatusCode, err)
	}
	events, _ := http.NewRequest("GET", url+"/dashboard/api/events", nil)
	events.AddCookie(resp.Cookies()[0])
	stream, err := http.DefaultClient.Do(events)
	if err != nil || stream.StatusCode != http.StatusOK {
		t.Fatalf("dashboard event stream with the cookie: %v %v", stream.StatusCode, err)
	}
	defer stream.Body.Close()
	cancel()
	select {
	case c := <-code:
		if c != 0 {
			t.Fatalf("exit code %d after cancel; want 0:\n%s", c, stderr.String())
		}
	case <-time.After(20 * time.Second):
		t.Fatal("serve did not stop within 20s of cancellation")
	}
	for _, want := range []string{"serve: ready", "agent@0", "serve: stopped"} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("log lacks %q:\n%s", want, stderr.String())
		}
	}
}

func TestServe_Flags(t *testing.T) {
	code, _, errOut := runArgs(t, "serve")
	if code != 1 || !strings.Contains(errOut, `required flag(s) "base-model", "name" not set`) {
		t.Fatalf("serve without flags: code %d, stderr %q", code, errOut)
	}
	code, _, errOut = runArgs(t, "serve", "--base-model", t.TempDir(), "--name", "agent")
	if code != 1 || !strings.Contains(errOut, "art: ") {
		t.Fatalf("serve on an empty folder: code %d, stderr %q", code, errOut)
	}
	code, _, errOut = runArgs(t, "serve", "--base-model", t.TempDir(), "--name", "agent", "--prefix-cache-mb", "-1")
	if code != 1 || !strings.Contains(errOut, "--prefix-cache-mb must be >= 0") {
		t.Fatalf("serve --prefix-cache-mb -1: code %d, stderr %q", code, errOut)
	}
}

// Ensure a signal while `art serve` loads its model stops it there, says
// so and exits 1, and writes nothing: it went on to load the whole model,
// create the step-0 checkpoint and log "serve: ready" before stopping.
func TestServe_InterruptedWhileLoading(t *testing.T) {
	base, data := arttest.TinyModel(t), filepath.Join(t.TempDir(), "data")
	code, errOut, _ := runCanceled(t, "serve", "--base-model", base, "--name", "agent", "--data", data, "--addr", "127.0.0.1:0")
	if code != 1 || !strings.Contains(errOut, "art: serve: interrupted while loading "+base+"; nothing served\n") ||
		strings.Contains(errOut, "serve: ready") {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
	time.Sleep(200 * time.Millisecond) // the abandoned load's goroutine, had it gone on, would write by now
	if _, err := os.Stat(data); !os.IsNotExist(err) {
		t.Fatalf("%s was written (%v)", data, err)
	}
}
