package external_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/artgo/art"
	"github.com/artgo/art/arttest"
	"github.com/artgo/art/host"
	"github.com/artgo/art/host/external"
	"github.com/artgo/art/host/native"
)

// standIn is a stand-in for an engine that cannot run here (SGLang needs a
// GPU; llama-server is not installed), answering as its documentation
// says: chat completions whose logprobs entries carry the sampled ids
// (SGLang: "token_id", llama.cpp: "id"), SGLang's /load_lora_adapter. It
// records every request body by path.
type standIn struct {
	field string // "token_id" or "id"
	load  string // the answer to /load_lora_adapter
	hang  bool   // /load_lora_adapter answers nothing until the client gives up

	mu   sync.Mutex
	reqs map[string][]map[string]any
}

func (s *standIn) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var body map[string]any
	b, _ := io.ReadAll(r.Body)
	json.Unmarshal(b, &body)
	s.mu.Lock()
	s.reqs[r.URL.Path] = append(s.reqs[r.URL.Path], body)
	load, hang := s.load, s.hang
	s.mu.Unlock()
	if hang && r.URL.Path == "/load_lora_adapter" {
		<-r.Context().Done()
		return
	}
	switch r.URL.Path {
	case "/v1/models":
		w.Write([]byte(`{"object":"list","data":[]}`))
	case "/load_lora_adapter", "/unload_lora_adapter":
		w.Write([]byte(load))
	case "/v1/chat/completions":
		// "hé" as three tokens, the é split over two: its bytes travel in
		// "bytes", its text alone would lose them.
		tok := func(id int, text string, bs []int, lp float64) map[string]any {
			return map[string]any{s.field: id, "token": text, "bytes": bs, "logprob": lp, "top_logprobs": []any{}}
		}
		n := 1
		if v, ok := body["n"].(float64); ok {
			n = int(v)
		}
		var choices []any
		for range n {
			choices = append(choices, map[string]any{"index": 0, "finish_reason": "stop",
				"message":  map[string]any{"role": "assistant", "content": "hé"},
				"logprobs": map[string]any{"content": []any{tok(104, "h", []int{104}, -0.25), tok(195, "\ufffd", []int{0xc3}, -0.5), tok(169, "\ufffd", []int{0xa9}, -0.75)}}})
		}
		json.NewEncoder(w).Encode(map[string]any{"choices": choices, "prompt_token_ids": []int{1, 2, 3}})
	default:
		http.NotFound(w, r)
	}
}

func (s *standIn) requests(path string) []map[string]any {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.reqs[path]
}

func openTrainer(t *testing.T, env arttest.Env) *native.Host {
	t.Helper()
	trainer, err := native.Open(context.Background(), native.Options{BaseModel: env.BaseModel, Name: env.Name, Project: env.Project, Path: env.Path, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { trainer.Close() })
	return trainer
}

// checkHe checks a choice holds the stand-in's three tokens and that a
// stream replays them with whole characters.
func checkHe(t *testing.T, h *external.Host, model string, n int) {
	t.Helper()
	req := chatRequest(model)
	req.N = n
	var texts []string
	resp, err := h.Chat(context.Background(), req, func(ev host.StreamEvent) error {
		if ev.Choice == 0 {
			texts = append(texts, ev.Text)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Choices) != n || resp.Model != model {
		t.Fatalf("got %d choices from %s; want %d from %s", len(resp.Choices), resp.Model, n, model)
	}
	for _, c := range resp.Choices {
		if len(c.Tokens) != 3 || c.Tokens[1].ID != 195 || c.Tokens[2].Logprob != -0.75 || string(c.Tokens[2].Bytes) != "\xa9" || c.Content != "hé" {
			t.Fatalf("choice %+v; want the ids, bytes and logprobs the engine sent", c)
		}
	}
	if strings.Join(texts, "|") != "h||é" {
		t.Errorf("streamed texts %q; want h, then nothing, then é", texts)
	}
}

// Ensure the SGLang dialect: the latest step is loaded at start through
// POST /load_lora_adapter, requests name it in "lora_path" and ask for
// logprobs and prompt ids, the ids come from each entry's token_id, and a
// load SGLang answers with {"success": false} is a rejected adapter.
func TestSGLangDialect(t *testing.T) {
	env := arttest.NewEnv(t)
	trainer := openTrainer(t, env)
	engine := &standIn{field: "token_id", load: `{"success": true}`, reqs: map[string][]map[string]any{}}
	url, _ := listen(t, engine)
	h, err := external.Open(context.Background(), trainer, external.Options{Dialect: external.SGLang, URL: url})
	if err != nil {
		t.Fatal(err)
	}
	loads := engine.requests("/load_lora_adapter")
	if len(loads) != 1 || loads[0]["lora_name"] != "agent@0" || loads[0]["lora_path"] != trainer.CheckpointPath(0) {
		t.Fatalf("loads %v; want agent@0 from %s", loads, trainer.CheckpointPath(0))
	}
	checkHe(t, h, "agent@0", 2)
	sent := engine.requests("/v1/chat/completions")[0]
	if sent["lora_path"] != "agent@0" || sent["logprobs"] != true || sent["return_prompt_token_ids"] != true || sent["n"] != 2.0 {
		t.Errorf("request %v; want lora_path agent@0, logprobs, return_prompt_token_ids and n 2", sent)
	}
	if _, ok := sent["parallel_tool_calls"]; ok {
		t.Errorf("a request without tools sent parallel_tool_calls: %v", sent)
	}
	one := chatRequest("agent@0")
	one.Tools = []json.RawMessage{json.RawMessage(`{"type":"function","function":{"name":"f"}}`)}
	one.ParseToolCalls, one.SingleToolCall = true, true
	if _, err := h.Chat(context.Background(), one, nil); err != nil {
		t.Fatal(err)
	}
	if chats := engine.requests("/v1/chat/completions"); chats[len(chats)-1]["parallel_tool_calls"] != false {
		t.Errorf("a request for one tool call sent %v; want parallel_tool_calls false", chats[len(chats)-1])
	}

	engine.mu.Lock()
	engine.load = `{"success": false, "error_message": "adapter rank 8 exceeds --max-lora-rank 4"}`
	engine.mu.Unlock()
	if _, err := h.Train(context.Background(), equalGroups(), art.TrainConfig{LearningRate: 1e-3}, nil); err != nil {
		t.Fatal(err)
	}
	_, err = h.Chat(context.Background(), chatRequest("agent@1"), nil)
	if !errors.Is(err, external.ErrAdapterRejected) || !strings.Contains(err.Error(), "max-lora-rank") {
		t.Fatalf("Chat with an adapter SGLang refused = %v; want ErrAdapterRejected with SGLang's message", err)
	}
}

// Ensure the llama.cpp dialect: nothing is loaded at run time, n > 1 is
// sent as n one-choice requests, ids come from each entry's "id", and a
// trained step is written as a GGUF LoRA beside its checkpoint while
// requests for it say how to restart llama-server.
func TestLlamaCppDialect(t *testing.T) {
	env := arttest.NewEnv(t)
	trainer := openTrainer(t, env)
	engine := &standIn{field: "id", reqs: map[string][]map[string]any{}}
	url, _ := listen(t, engine)
	h, err := external.Open(context.Background(), trainer, external.Options{Dialect: external.LlamaCpp, URL: url, RequestTimeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	checkHe(t, h, "agent@0", 3)
	if got := len(engine.requests("/v1/chat/completions")); got != 3 {
		t.Errorf("%d chat requests for n=3; want 3", got)
	}
	if _, err := h.Train(context.Background(), equalGroups(), art.TrainConfig{LearningRate: 1e-3}, nil); err != nil {
		t.Fatal(err)
	}
	gguf := filepath.Join(trainer.CheckpointPath(1), external.GGUFLoRAFile)
	if _, err := os.Stat(gguf); err != nil {
		t.Fatalf("no GGUF LoRA beside step 1: %v", err)
	}
	_, err = h.Chat(context.Background(), chatRequest("agent@1"), nil)
	if !errors.Is(err, external.ErrStepNotServed) || !strings.Contains(err.Error(), "--lora "+gguf) {
		t.Fatalf("Chat for a step llama-server lacks = %v; want ErrStepNotServed naming --lora %s", err, gguf)
	}
	_, err = h.Chat(context.Background(), chatRequest("agent"), nil) // the bare name is the latest step
	if !errors.Is(err, external.ErrStepNotServed) {
		t.Fatalf("Chat for the latest step = %v; want ErrStepNotServed", err)
	}
	if got := len(engine.requests("/load_lora_adapter")) + len(engine.requests("/v1/load_lora_adapter")); got != 0 {
		t.Errorf("%d adapter loads sent to llama-server; it has no such route", got)
	}
}

// Ensure a chat request waiting for another request's adapter load (the
// engine hanging on it) gives up when its own context ends, not when the
// other load times out: waits for a load queue up, and a request must
// never be held past its deadline by someone else's.
func TestChat_WaitForAnotherLoadHonoursContext(t *testing.T) {
	env := arttest.NewEnv(t)
	trainer := openTrainer(t, env)
	engine := &standIn{field: "token_id", load: `{"success": true}`, reqs: map[string][]map[string]any{}}
	url, _ := listen(t, engine)
	h, err := external.Open(context.Background(), trainer, external.Options{Dialect: external.SGLang, URL: url, AdapterTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	// Step 1 is trained but not loaded: the engine refused it.
	engine.mu.Lock()
	engine.load = `{"success": false, "error_message": "busy"}`
	engine.mu.Unlock()
	if _, err := h.Train(context.Background(), equalGroups(), art.TrainConfig{LearningRate: 1e-3}, nil); err != nil {
		t.Fatal(err)
	}
	engine.mu.Lock()
	engine.hang = true
	engine.mu.Unlock()

	first, stop := context.WithCancel(context.Background())
	defer stop()
	firstDone := make(chan error, 1)
	go func() { _, err := h.Chat(first, chatRequest("agent@1"), nil); firstDone <- err }()
	for deadline := time.Now().Add(15 * time.Second); len(engine.requests("/load_lora_adapter")) < 3; { // Open's, Train's, then this one's
		if time.Now().After(deadline) {
			t.Fatal("the first request did not ask the engine to load its adapter within 15 s")
		}
		time.Sleep(10 * time.Millisecond)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err = h.Chat(ctx, chatRequest("agent@1"), nil)
	if d := time.Since(start); d > 3*time.Second || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("a request with a 300ms deadline, queued behind a hanging load: %v after %s; want its deadline, promptly", err, d)
	}
	stop()
	select {
	case <-firstDone:
	case <-time.After(15 * time.Second):
		t.Fatal("the first request did not end after its cancellation")
	}
}

// TestOpenRejectsBadURL: a URL without a scheme (the most common slip:
// "gpu-box:8000") is refused before anything is contacted, saying why.
func TestOpenRejectsBadURL(t *testing.T) {
	for _, u := range []string{"gpu-box:8000", "ftp://gpu-box/", "http://"} {
		_, err := external.Open(context.Background(), nil, external.Options{Dialect: external.VLLM, URL: u})
		if err == nil || !strings.Contains(err.Error(), "http://gpu-box:8000") {
			t.Errorf("Open(URL %q) = %v; want an error showing a URL of the right form", u, err)
		}
	}
}
