package local_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"

	"github.com/artgo/art"
	"github.com/artgo/art/arttest"
	"github.com/artgo/art/backend/local"
	"github.com/artgo/art/backend/remote"
	"github.com/artgo/art/internal/testassets"
	"github.com/artgo/art/mcprl"
	"github.com/artgo/art/ruler"
)

// Ensure every kind of wait stops when its context is cancelled midway and
// leaves no goroutine behind: a chat call while it generates, a chat call
// waiting in the queue for a generation slot, a gather of rollouts, a
// RULER judge call, an MCP tool call, and a training step driven through the remote
// backend. Each must return within a second or two of the cancellation;
// at the end the goroutine count is back at its baseline.
func TestCancelMidwayLeavesNothing(t *testing.T) {
	base := arttest.TinyModel(t)
	ctx := context.Background()
	// One generation slot: the queue is the second chat's to wait in.
	b := local.New(local.Options{Path: filepath.Join(t.TempDir(), ".art"), Quiet: true, Seed: 1, MaxConcurrent: 1})
	defer b.Close()
	transport := &http.Transport{}
	hc := &http.Client{Transport: transport}
	m := &art.TrainableModel{Model: art.Model{Name: "agent", Project: "p", HTTPClient: hc}, BaseModel: base}
	if err := m.Register(ctx, b); err != nil {
		t.Fatal(err)
	}
	client, err := m.OpenAIClient()
	if err != nil {
		t.Fatal(err)
	}
	// A chat that generates for seconds: its schema asks for a string of
	// 3000 characters, so the random model cannot stop early.
	longString := openai.ChatCompletionNewParamsResponseFormatUnion{OfJSONSchema: &openai.ResponseFormatJSONSchemaParam{
		JSONSchema: openai.ResponseFormatJSONSchemaJSONSchemaParam{Name: "long", Schema: map[string]any{
			"type": "object", "properties": map[string]any{"a": map[string]any{"type": "string", "minLength": 3000}},
			"required": []string{"a"}, "additionalProperties": false}}}}
	long := func(ctx context.Context) error {
		var tr art.Trajectory
		tr.AddMessage(art.UserMsg("go on"))
		_, err := tr.Chat(ctx, client, openai.ChatCompletionNewParams{Model: m.InferenceName(-1), MaxTokens: openai.Int(3500), ResponseFormat: longString})
		return err
	}
	// Warm up (connections, the batcher), then take the baseline.
	var warm art.Trajectory
	warm.AddMessage(art.UserMsg("hi"))
	if _, err := warm.Chat(ctx, client, openai.ChatCompletionNewParams{Model: m.InferenceName(-1), MaxTokens: openai.Int(2)}); err != nil {
		t.Fatal(err)
	}
	transport.CloseIdleConnections()
	baseline := runtime.NumGoroutine()

	cancelled := func(kind string, after time.Duration, run func(ctx context.Context) error) {
		t.Helper()
		cctx, cancel := context.WithCancel(ctx)
		time.AfterFunc(after, cancel)
		start := time.Now()
		err := run(cctx)
		if d := time.Since(start) - after; d > 2*time.Second {
			t.Errorf("%s returned %s after the cancellation", kind, d)
		}
		if err == nil || !errors.Is(err, context.Canceled) {
			t.Errorf("%s: %v; want an error wrapping context.Canceled", kind, err)
		}
	}

	cancelled("chat while generating", 100*time.Millisecond, long)

	hold, release := context.WithCancel(ctx)
	holding := make(chan error, 1)
	go func() { holding <- long(hold) }()
	time.Sleep(50 * time.Millisecond) // the slot is taken
	cancelled("chat waiting for a slot", 100*time.Millisecond, long)
	release()
	<-holding

	cancelled("gather", 150*time.Millisecond, func(ctx context.Context) error {
		_, err := art.GatherGroups(ctx, []int{1, 2}, 3, func(ctx context.Context, _ int) (art.Trajectory, error) {
			return art.Trajectory{}, long(ctx)
		}, art.GatherOptions{Quiet: true})
		return err
	})

	ep, err := b.InferenceEndpoint(ctx, m, -1)
	if err != nil {
		t.Fatal(err)
	}
	judge := ruler.FromEndpoint(ep)
	judge.HTTPClient, judge.MaxTokens = hc, 2500
	histories := []art.History{{}, {}}
	for i := range histories {
		histories[i].AddMessage(art.UserMsg("play"), art.AssistantMsg(string(rune('a'+i))))
	}
	// The judge's answer may be short, so the call is made while a long
	// chat holds the only slot: it is in flight (queued on the server) when
	// it is cancelled.
	hold, release = context.WithCancel(ctx)
	go func() { holding <- long(hold) }()
	time.Sleep(50 * time.Millisecond)
	cancelled("RULER judge call", 100*time.Millisecond, func(ctx context.Context) error {
		_, err := ruler.Score(ctx, histories, judge, ruler.Options{NoCache: true, MaxExplanation: 2000, MaxRetries: -1})
		return err
	})
	release()
	<-holding

	// An MCP tool call (server-everything from npm, a 60 s operation) is
	// cancelled midway; closing the server then stops its process and the
	// session's goroutines.
	t.Run("MCP tool call", func(t *testing.T) {
		script := filepath.Join(testassets.Dir(t, testassets.MCPServers), "node_modules", "@modelcontextprotocol", "server-everything", "dist", "index.js")
		srv, err := mcprl.Start(ctx, mcprl.Options{StopTimeout: 500 * time.Millisecond}, "node", script, "stdio")
		if err != nil {
			t.Fatal(err)
		}
		defer srv.Close()
		cancelled("MCP tool call", 300*time.Millisecond, func(ctx context.Context) error {
			_, err := srv.Call(ctx, "trigger-long-running-operation", json.RawMessage(`{"duration":60,"steps":5}`))
			return err
		})
	})

	rb, err := remote.New(remote.Options{BaseURL: ep.BaseURL, APIKey: ep.APIKey, Quiet: true, HTTPClient: hc})
	if err != nil {
		t.Fatal(err)
	}
	if err := rb.Register(ctx, m); err != nil {
		t.Fatal(err)
	}
	groups, err := arttest.SampleGroups(ctx, client, m.InferenceName(-1), "x", 16, 24)
	if err != nil {
		t.Fatal(err)
	}
	before, err := rb.Step(ctx, m)
	if err != nil {
		t.Fatal(err)
	}
	// Cancelled once the server reports the step running.
	trainCtx, cancelTrain := context.WithCancel(ctx)
	var cancelledAt time.Time
	go func() {
		defer cancelTrain()
		for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
			req, _ := http.NewRequest(http.MethodGet, strings.TrimSuffix(ep.BaseURL, "/v1")+"/metrics", nil)
			req.Header.Set("Authorization", "Bearer "+ep.APIKey)
			resp, err := hc.Do(req)
			if err != nil {
				continue
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if strings.Contains(string(body), "\nart_training 1\n") {
				cancelledAt = time.Now()
				return
			}
		}
	}()
	_, err = rb.Train(trainCtx, m, groups, art.TrainConfig{LearningRate: 1e-3})
	if !errors.Is(err, context.Canceled) || cancelledAt.IsZero() {
		t.Errorf("remote training step cancelled while running: %v (seen running: %v)", err, !cancelledAt.IsZero())
	} else if d := time.Since(cancelledAt); d > 2*time.Second {
		t.Errorf("remote training step returned %s after the cancellation", d)
	}
	// The server abandons the step: no checkpoint appears.
	time.Sleep(500 * time.Millisecond)
	if after, err := rb.Step(ctx, m); err != nil || after != before {
		t.Errorf("step %d after a cancelled training call, %d before (%v)", after, before, err)
	}

	transport.CloseIdleConnections()
	deadline := time.Now().Add(10 * time.Second)
	for runtime.NumGoroutine() > baseline && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > baseline {
		buf := make([]byte, 1<<20)
		t.Errorf("%d goroutines after the cancellations, %d before:\n%s", n, baseline, buf[:runtime.Stack(buf, true)])
	}
}
