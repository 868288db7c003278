package server

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/artgo/art/host/native"
)

// Ensure every route but the liveness probe asks for the API key, and that
// a wrong or missing key learns nothing else (not even which routes exist).
func TestAPIKeyOnEveryRoute(t *testing.T) {
	srv, ts := newTestServer(t, Config{APIKey: testKey})
	if len(srv.routes) < 10 {
		t.Fatalf("only %d routes registered", len(srv.routes))
	}
	paths := []string{"/no/such/route"}
	for p := range srv.routes {
		paths = append(paths, p)
	}
	for _, p := range paths {
		methods := append([]string{http.MethodGet, http.MethodPost, http.MethodDelete}, srv.routes[p]...)
		url := ts.URL + strings.ReplaceAll(p, "{id}", testModel+"@0")
		for _, method := range methods {
			for _, key := range []string{"", "wrong", testKey + "x", testKey[:len(testKey)-1]} {
				status, body := do(t, method, url, key, `{}`)
				if p == "/healthz" { // the liveness probe needs no key and says nothing else
					if want := map[bool]int{true: http.StatusOK, false: http.StatusMethodNotAllowed}[method == http.MethodGet]; status != want {
						t.Errorf("%s /healthz with key %q: %d, want %d", method, key, status, want)
					}
					continue
				}
				if status != http.StatusUnauthorized || !strings.Contains(string(body), `"authentication_error"`) {
					t.Errorf("%s %s with key %q: %d %s; want 401", method, p, key, status, body)
				}
			}
		}
	}
}

// Ensure names from requests never reach outside the data directory: model
// names, splits and ids with path elements are refused, and nothing is
// written anywhere but the model's own folder.
func TestPathTraversal(t *testing.T) {
	root := t.TempDir()
	data := filepath.Join(root, "data")
	h, err := openHostAt(t, writeTinyModel(t), data)
	if err != nil {
		t.Fatal(err)
	}
	srv := New(Config{APIKey: testKey}, h)
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(func() { ts.Close(); srv.Close(); h.Close() })
	group := `{"trajectories":[{"messages_and_choices":[{"role":"user","content":"x"}],"reward":1}]}`
	for _, c := range []struct{ method, path, body string }{
		{"POST", "/v1/art/log", `{"groups":[` + group + `],"split":"../../escape"}`},
		{"POST", "/v1/art/log", `{"groups":[` + group + `],"split":"/tmp/escape"}`},
		{"POST", "/v1/art/log", `{"model":"../escape","groups":[` + group + `]}`},
		{"POST", "/v1/art/log", `{"groups":[` + group + `],"step":-1}`},
		{"POST", "/v1/art/train", `{"model":"agent/../../escape","groups":[]}`},
		{"POST", "/v1/art/checkpoints/delete", `{"model":"../escape","keep":[]}`},
		{"POST", "/v1/art/register", `{"name":"../escape"}`},
		{"POST", "/v1/art/register", `{"name":"agent","project":"../escape"}`},
		{"GET", "/v1/models/..%2F..%2Fescape", ""},
		{"GET", "/v1/models/agent@..%2F1", ""},
		{"GET", "/v1/art/step?model=..%2Fescape", ""},
		{"POST", "/v1/chat/completions", `{"model":"../../escape@0","messages":[{"role":"user","content":"x"}],"max_tokens":1}`},
	} {
		status, body := do(t, c.method, ts.URL+c.path, testKey, c.body)
		if status < 400 || status >= 500 {
			t.Errorf("%s %s %s: %d %s; want a 4xx refusal", c.method, c.path, c.body, status, body)
		}
	}
	// The only thing under root is the data directory, holding only the
	// model's folder.
	var outside []string
	filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err == nil && p != root && p != data && !strings.HasPrefix(p, filepath.Join(data, "p", "models", testModel)) &&
			p != filepath.Join(data, "p") && p != filepath.Join(data, "p", "models") {
			outside = append(outside, p)
		}
		return nil
	})
	if len(outside) > 0 {
		t.Errorf("written outside the model's folder: %v", outside)
	}
}

// Ensure the API key never appears in the server's log, whatever the
// requests (right key, wrong keys, failed requests, training).
func TestKeyNotLogged(t *testing.T) {
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	const secret = "sk-very-secret-key-1234"
	h, err := native.Open(context.Background(), native.Options{BaseModel: writeTinyModel(t), Name: testModel, Project: "p",
		Path: filepath.Join(t.TempDir(), ".art"), Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	srv := New(Config{APIKey: secret, Logger: log}, h)
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(func() { ts.Close(); srv.Close(); h.Close() })
	for _, key := range []string{secret, secret + "-wrong", "Bearer " + secret} {
		do(t, "POST", ts.URL+"/v1/chat/completions", key, chatBody(""))
		do(t, "POST", ts.URL+"/v1/chat/completions", key, `{"model":"nope","messages":[]}`)
		do(t, "POST", ts.URL+"/v1/art/train", key, `{"groups":[{"trajectories":[]}]}`)
		do(t, "GET", ts.URL+"/metrics", key, "")
	}
	if strings.Contains(logs.String(), "very-secret") {
		t.Fatalf("the API key is in the log:\n%s", logs.String())
	}
	if logs.Len() == 0 {
		t.Fatal("nothing was logged; the test sees no log")
	}
}

// Ensure registering a model whose LoRA config differs from its
// checkpoints' adapter is refused with 409, and the same config (defaults
// spelled out, modules in another order) is accepted.
func TestRegister_LoRAMismatch(t *testing.T) {
	_, ts := newTestServer(t, Config{APIKey: testKey})
	url := ts.URL + "/v1/art/register"
	status, body := do(t, "POST", url, testKey, `{"name":"agent","lora_config":{"rank":16}}`)
	if status != http.StatusConflict || !strings.Contains(string(body), `"lora_config"`) || !strings.Contains(string(body), `\"rank\":16`) {
		t.Errorf("rank 16 against a rank-8 adapter: %d %s; want 409 naming lora_config", status, body)
	}
	same := `{"name":"agent","lora_config":{"rank":8,"alpha":16,"target_modules":["down_proj","up_proj","gate_proj","o_proj","v_proj","k_proj","q_proj"]}}`
	if status, body := do(t, "POST", url, testKey, same); status != http.StatusOK || !strings.Contains(string(body), `"lora_config"`) {
		t.Errorf("the adapter's own config: %d %s; want 200 with the config", status, body)
	}
}

// Ensure Config.Dashboard is served at /dashboard/ with its own
// authentication, and the server's key still guards every other route.
func TestDashboardMount(t *testing.T) {
	dash := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte("dashboard " + r.URL.Path))
	})
	_, ts := newTestServer(t, Config{APIKey: testKey, Dashboard: dash})
	for _, c := range []struct {
		path   string
		status int
		body   string
	}{
		{"/dashboard/", 200, "dashboard /dashboard/"},
		{"/dashboard/api/runs", 200, "dashboard /dashboard/api/runs"},
		{"/dashboardx", 401, "missing API key"},
		{"/v1/models", 401, "missing API key"},
	} {
		res, err := http.Get(ts.URL + c.path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != c.status || !strings.Contains(string(body), c.body) {
			t.Errorf("GET %s: %d %q; want %d and %q", c.path, res.StatusCode, body, c.status, c.body)
		}
	}
}
