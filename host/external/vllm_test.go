package external_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/artgo/art"
	"github.com/artgo/art/arttest"
	"github.com/artgo/art/backend/remote"
	"github.com/artgo/art/host"
	"github.com/artgo/art/host/external"
	"github.com/artgo/art/host/native"
	"github.com/artgo/art/server"
)

// vllmArtServe is a real inference engine speaking vLLM's dialect: `art
// serve`'s server (which already returns vLLM's token_ids and
// prompt_token_ids) over its own native host of the model, behind vLLM's
// documented runtime adapter routes, POST /v1/load_lora_adapter
// {lora_name, lora_path} and POST /v1/unload_lora_adapter {lora_name}. As
// vLLM does, it answers a model only once its adapter is loaded (404
// otherwise), refuses to load one twice, and 404s an unknown unload. It
// also refuses chat requests that do not ask for logprobs and token ids.
type vllmArtServe struct {
	svc *native.Host
	srv *server.Server

	mu      sync.Mutex // guards the fields below
	loaded  map[string]string
	loads   []string
	unloads []string
}

func vllmError(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]any{"object": "error", "message": msg, "type": http.StatusText(status), "code": status})
}

func (e *vllmArtServe) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Model          string `json:"model"`
		LoraName       string `json:"lora_name"`
		LoraPath       string `json:"lora_path"`
		Logprobs       bool   `json:"logprobs"`
		ReturnTokenIDs bool   `json:"return_token_ids"`
	}
	if r.Method == http.MethodPost {
		b, _ := io.ReadAll(r.Body)
		json.Unmarshal(b, &body)
		r.Body = io.NopCloser(bytes.NewReader(b))
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	switch r.URL.Path {
	case "/v1/load_lora_adapter":
		if _, ok := e.loaded[body.LoraName]; ok {
			vllmError(w, 400, fmt.Sprintf("The lora adapter '%s' has already been loaded.", body.LoraName))
			return
		}
		step, err := e.svc.Resolve(body.LoraName)
		if err != nil || filepath.Clean(body.LoraPath) != e.svc.CheckpointPath(step) {
			vllmError(w, 400, fmt.Sprintf("Loading lora %s failed: no adapter at %s", body.LoraName, body.LoraPath))
			return
		}
		e.loaded[body.LoraName] = body.LoraPath
		e.loads = append(e.loads, body.LoraName)
		fmt.Fprintf(w, "Success: LoRA adapter '%s' added successfully.", body.LoraName)
	case "/v1/unload_lora_adapter":
		if _, ok := e.loaded[body.LoraName]; !ok {
			vllmError(w, 404, fmt.Sprintf("The lora adapter '%s' cannot be found.", body.LoraName))
			return
		}
		delete(e.loaded, body.LoraName)
		e.unloads = append(e.unloads, body.LoraName)
		fmt.Fprintf(w, "Success: LoRA adapter '%s' removed successfully.", body.LoraName)
	case "/v1/chat/completions":
		if _, ok := e.loaded[body.Model]; !ok {
			vllmError(w, 404, fmt.Sprintf("The model `%s` does not exist.", body.Model))
			return
		}
		if !body.Logprobs || !body.ReturnTokenIDs {
			vllmError(w, 400, "test engine: the client must ask for logprobs and return_token_ids")
			return
		}
		e.mu.Unlock()
		e.srv.Handler().ServeHTTP(w, r)
		e.mu.Lock()
	default:
		e.srv.Handler().ServeHTTP(w, r)
	}
}

// listen serves h on a loopback port until the test ends (or stop).
func listen(t *testing.T, h http.Handler) (url string, stop func()) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go hs.Serve(ln)
	var once sync.Once
	stop = func() {
		once.Do(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			hs.Shutdown(ctx)
		})
	}
	t.Cleanup(stop)
	return "http://" + ln.Addr().String(), stop
}

// setup opens the trainer of env's model, then a vLLM-speaking `art serve`
// on the same store as the engine, and the external host over both.
func setup(t *testing.T, env arttest.Env) (*external.Host, *vllmArtServe) {
	t.Helper()
	ctx := context.Background()
	opts := native.Options{BaseModel: env.BaseModel, Name: env.Name, Project: env.Project, Path: env.Path, Seed: 1}
	trainer, err := native.Open(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { trainer.Close() })
	svc, err := native.Open(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { svc.Close() })
	engine := &vllmArtServe{svc: svc, srv: server.New(server.Config{}, svc), loaded: map[string]string{}}
	url, _ := listen(t, engine)
	h, err := external.Open(ctx, trainer, external.Options{Dialect: external.VLLM, URL: url + "/v1", RequestTimeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	return h, engine
}

// Ensure a training loop runs unchanged when inference is on an external
// engine: the conformance suite through backend/remote against `art serve`
// whose inference goes to a second `art serve` speaking vLLM's dialect
// (chat with logprobs + return_token_ids, adapters hot-loaded with
// /v1/load_lora_adapter after each step and unloaded with
// /v1/unload_lora_adapter when checkpoints are deleted). No GPU runs here,
// so the engine is our own server behind vLLM's documented routes, not
// vLLM itself.
func TestConformance_VLLMDialect(t *testing.T) {
	var engines []*vllmArtServe
	arttest.RunBackendTests(t, func(t *testing.T, env arttest.Env) art.Backend {
		h, engine := setup(t, env)
		engines = append(engines, engine)
		srv := server.New(server.Config{}, h)
		url, stop := listen(t, srv.Handler())
		b, err := remote.New(remote.Options{BaseURL: url, Quiet: true})
		if err != nil {
			t.Fatal(err)
		}
		return stopping{b, stop}
	}, arttest.SFT, arttest.DeleteCheckpoints)
	first := engines[0]
	first.mu.Lock()
	defer first.mu.Unlock()
	// Step 0 at start, each trained step after it; step 1 unloaded when the
	// suite deleted it.
	if !slices.Equal(first.loads[:3], []string{"agent@0", "agent@1", "agent@2"}) || !slices.Contains(first.unloads, "agent@1") {
		t.Errorf("the engine loaded %v and unloaded %v; want agent@0, @1, @2 loaded in order and agent@1 unloaded", first.loads, first.unloads)
	}
}

// stopping is a backend whose Close also stops its server, so the suite's
// second backend gets a fresh one on the same store.
type stopping struct {
	*remote.Backend
	stop func()
}

func (b stopping) Close() error {
	err := b.Backend.Close()
	b.stop()
	return err
}

// Ensure the engine's failures are told apart and never hang: a stopped
// engine, one too slow for the timeout, one out of memory, and one that
// rejects the adapter of a new step (the step is saved; requests for it
// report the rejection and the load is retried).
func TestEngineFailures(t *testing.T) {
	env := arttest.NewEnv(t)
	ctx := context.Background()
	trainer, err := native.Open(ctx, native.Options{BaseModel: env.BaseModel, Name: env.Name, Project: env.Project, Path: env.Path, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer trainer.Close()

	t.Run("down", func(t *testing.T) {
		url, stop := listen(t, http.NotFoundHandler())
		stop()
		start := time.Now()
		_, err := external.Open(ctx, trainer, external.Options{Dialect: external.VLLM, URL: url, AdapterTimeout: 5 * time.Second})
		if !errors.Is(err, external.ErrEngineUnavailable) || time.Since(start) > 10*time.Second {
			t.Fatalf("Open on a stopped engine = %v after %s; want ErrEngineUnavailable at once", err, time.Since(start))
		}
	})

	// A stand-in following vLLM's documented API, scripted per test.
	var mu sync.Mutex
	chat := func(w http.ResponseWriter) { w.Write([]byte(`{}`)) }
	load := func(w http.ResponseWriter) { w.Write([]byte("Success")) }
	url, _ := listen(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		c, l := chat, load
		mu.Unlock()
		switch r.URL.Path {
		case "/v1/models":
			w.Write([]byte(`{"object":"list","data":[]}`))
		case "/v1/load_lora_adapter":
			l(w)
		case "/v1/chat/completions":
			c(w)
		default:
			http.NotFound(w, r)
		}
	}))
	script := func(c, l func(http.ResponseWriter)) {
		mu.Lock()
		defer mu.Unlock()
		chat, load = c, l
	}
	h, err := external.Open(ctx, trainer, external.Options{Dialect: external.VLLM, URL: url, RequestTimeout: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	req := chatRequest(env.Name + "@0")
	block := make(chan struct{})
	defer close(block)
	tests := []struct {
		name       string
		chat, load func(http.ResponseWriter)
		want       error
	}{
		{"slow", func(w http.ResponseWriter) { <-block }, nil, external.ErrEngineUnavailable},
		{"oom", func(w http.ResponseWriter) {
			vllmError(w, 500, "CUDA out of memory. Tried to allocate 2.00 GiB")
		}, nil, external.ErrEngineOOM},
		{"no token ids", func(w http.ResponseWriter) {
			w.Write([]byte(`{"choices":[{"message":{"content":"hi"},"finish_reason":"stop","logprobs":{"content":[{"token":"hi","logprob":-0.5}]}}]}`))
		}, nil, external.ErrNoTokenIDs},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			script(tt.chat, load)
			start := time.Now()
			_, err := h.Chat(ctx, req, nil)
			if !errors.Is(err, tt.want) || time.Since(start) > 10*time.Second {
				t.Fatalf("Chat = %v after %s; want %v", err, time.Since(start), tt.want)
			}
			t.Logf("%s: %v", tt.name, err)
		})
	}

	// A request the engine refuses keeps the engine's param and code, and
	// a prompt past the context is OpenAI's context_length_exceeded with
	// the engine's message first, as frameworks look for it.
	t.Run("refused", func(t *testing.T) {
		for _, c := range []struct {
			name, body             string
			param, code, msgPrefix string
		}{
			{"vllm context", `{"object":"error","message":"This model's maximum context length is 2048 tokens. However, you requested 2100 tokens (2090 in the messages, 10 in the completion). Please reduce the length of the messages or completion.","type":"BadRequestError","param":null,"code":400}`,
				"messages", host.CodeContextLength, "This model's maximum context length is 2048 tokens."},
			{"sglang context", `{"object":"error","message":"The input (3000 tokens) is longer than the model's context length (2048 tokens).","type":"BadRequestError","param":null,"code":400}`,
				"messages", host.CodeContextLength, "The input (3000 tokens)"},
			{"openai object", `{"error":{"message":"'temperature' must be at most 2","type":"invalid_request_error","param":"temperature","code":"invalid_value"}}`,
				"temperature", "invalid_value", "vLLM: 'temperature' must be"},
			{"plain", `{"object":"error","message":"bad things","type":"BadRequestError","code":400}`,
				"", "", "vLLM: bad things"},
		} {
			t.Run(c.name, func(t *testing.T) {
				script(func(w http.ResponseWriter) {
					w.Header().Set("Content-Type", "application/json")
					w.WriteHeader(400)
					w.Write([]byte(c.body))
				}, load)
				_, err := h.Chat(ctx, req, nil)
				var re *host.RequestError
				if !errors.As(err, &re) || re.Param != c.param || re.Code != c.code || !strings.HasPrefix(re.Msg, c.msgPrefix) {
					t.Fatalf("Chat = %#v (%v); want a RequestError with param %q, code %q, message starting %q", re, err, c.param, c.code, c.msgPrefix)
				}
			})
		}
	})

	t.Run("adapter rejected", func(t *testing.T) {
		script(chat, func(w http.ResponseWriter) {
			vllmError(w, 400, "Loading lora agent@1 failed: max_loras reached")
		})
		res, err := h.Train(ctx, equalGroups(), art.TrainConfig{LearningRate: 1e-3}, nil)
		if err != nil || res.Step != 1 {
			t.Fatalf("Train = %+v, %v; want step 1 saved despite the engine", res, err)
		}
		if _, err := os.Stat(h.CheckpointPath(1)); err != nil {
			t.Fatal(err)
		}
		_, err = h.Chat(ctx, chatRequest(env.Name+"@1"), nil)
		if !errors.Is(err, external.ErrAdapterRejected) {
			t.Fatalf("Chat with a rejected adapter = %v; want ErrAdapterRejected", err)
		}
		t.Logf("rejected: %v", err)
	})
}

func chatRequest(model string) host.ChatRequest {
	return host.ChatRequest{Model: model, Messages: []json.RawMessage{json.RawMessage(`{"role":"user","content":"hi"}`)}, MaxTokens: 4}
}

// equalGroups is one group with equal rewards: a step on it is skipped but
// still saved and published.
func equalGroups() []art.TrajectoryGroup {
	var g art.TrajectoryGroup
	for range 2 {
		var tr art.Trajectory
		tr.AddMessage(art.UserMsg("hi"), art.AssistantMsg("yo"))
		tr.Reward = 0.5
		g.Trajectories = append(g.Trajectories, tr)
	}
	return []art.TrajectoryGroup{g}
}

// Ensure the engine's count of reused prompt tokens reaches the answer
// (vLLM reports its automatic prefix caching as
// usage.prompt_tokens_details.cached_tokens): a second turn through the
// vLLM-speaking `art serve` reuses the first turn's prompt and says so.
func TestCachedTokensPassThrough(t *testing.T) {
	h, _ := setup(t, arttest.NewEnv(t))
	ctx := context.Background()
	msgs := []art.Message{art.SystemMsg(strings.Repeat("Keep every answer short and to the point. ", 3)), art.UserMsg("Begin.")}
	seed := int64(1)
	first, err := h.Chat(ctx, host.ChatRequest{Model: "agent@0", Messages: arttest.RawMessages(t, msgs...), MaxTokens: 4, Seed: &seed}, nil)
	if err != nil {
		t.Fatal(err)
	}
	second, err := h.Chat(ctx, host.ChatRequest{Model: "agent@0", Messages: arttest.RawMessages(t, append(msgs, art.AssistantMsg(first.Choices[0].Content), art.UserMsg("Go on."))...), MaxTokens: 4, Seed: &seed}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if first.CachedTokens != 0 || second.CachedTokens < len(first.PromptTokenIDs)-1 {
		t.Fatalf("cached tokens %d then %d; want 0, then at least the first prompt's %d less one", first.CachedTokens, second.CachedTokens, len(first.PromptTokenIDs))
	}
}
