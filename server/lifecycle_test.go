package server

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	oai "github.com/openai/openai-go/v3"

	"github.com/artgo/art"
	"github.com/artgo/art/arttest"
	"github.com/artgo/art/server/api"
)

// serveLoopback runs srv on a real loopback listener and returns its URL
// and Serve's result channel.
func serveLoopback(t *testing.T, srv *Server) (string, <-chan error) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	t.Cleanup(func() { srv.Close() })
	return "http://" + ln.Addr().String(), served
}

// openStream starts a streamed completion of n choices and returns the
// response once its first event has arrived. With the tiny model a choice
// ends after about 130 tokens (its stop tokens are 2 of 259), and the
// server generates about 4000 tokens/s, so n = 32 runs for about a second.
func openStream(t *testing.T, ctx context.Context, url string, n int) (*http.Response, *bufio.Reader) {
	t.Helper()
	body := `{"model":"agent","messages":[{"role":"user","content":"hi"}],"stream":true,"temperature":1,"max_tokens":3900,"n":` + itoa(n) + `}`
	req, _ := http.NewRequestWithContext(ctx, "POST", url+"/v1/chat/completions", strings.NewReader(body))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 {
		t.Fatalf("stream: status %d", resp.StatusCode)
	}
	r := bufio.NewReader(resp.Body)
	if _, err := r.ReadString('\n'); err != nil {
		t.Fatal(err)
	}
	return resp, r
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

// Ensure Shutdown lets a request in flight finish, then stops serving.
func TestShutdown_WaitsForRequests(t *testing.T) {
	srv := New(Config{}, openHost(t, writeTinyModel(t)))
	url, served := serveLoopback(t, srv)
	resp, r := openStream(t, context.Background(), url, 2)
	defer resp.Body.Close()
	shut := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		shut <- srv.Shutdown(ctx)
	}()
	rest, err := readAll(r)
	if err != nil || !strings.HasSuffix(rest, "data: [DONE]\n\n") {
		t.Fatalf("stream during shutdown ended with %v, tail %q", err, tail(rest))
	}
	if err := <-shut; err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	if err := <-served; !errors.Is(err, http.ErrServerClosed) {
		t.Fatalf("Serve: %v", err)
	}
	if _, err := http.Get(url + "/healthz"); err == nil {
		t.Fatal("server still answers after Shutdown")
	}
}

// Ensure a Shutdown whose context ends cancels the requests in flight.
func TestShutdown_DeadlineCancels(t *testing.T) {
	srv := New(Config{}, openHost(t, writeTinyModel(t)))
	url, _ := serveLoopback(t, srv)
	resp, r := openStream(t, context.Background(), url, 32)
	defer resp.Body.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	start := time.Now()
	if err := srv.Shutdown(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Shutdown = %v; want DeadlineExceeded", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("Shutdown took %v", d)
	}
	if rest, _ := readAll(r); strings.Contains(rest, "[DONE]") {
		t.Error("the cancelled stream completed")
	}
}

// Ensure a client that goes away cancels its generation (counted as 499).
func TestClientDisconnectCancels(t *testing.T) {
	srv, ts := newTestServer(t, Config{})
	ctx, cancel := context.WithCancel(context.Background())
	resp, _ := openStream(t, ctx, ts.URL, 32)
	cancel()
	resp.Body.Close()
	if n, inFlight := waitClientClosed(srv, 10*time.Second); n != 1 || inFlight != 0 {
		t.Fatalf("generation not cancelled: %d requests counted 499, %d in flight", n, inFlight)
	}
}

// waitClientClosed waits up to d for one request counted 499 and none in
// flight, and returns the counts it saw last.
func waitClientClosed(srv *Server, d time.Duration) (closed, inFlight int64) {
	deadline := time.Now().Add(d)
	for {
		srv.metrics.mu.Lock()
		closed = srv.metrics.requests[statusClientClosed]
		srv.metrics.mu.Unlock()
		inFlight = srv.metrics.inFlight.Load()
		if (closed == 1 && inFlight == 0) || time.Now().After(deadline) {
			return closed, inFlight
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func readAll(r *bufio.Reader) (string, error) {
	var b strings.Builder
	_, err := r.WriteTo(&b)
	return b.String(), err
}

func tail(s string) string { return s[max(0, len(s)-200):] }

// trainingGroups samples two groups of choices from the server and gives
// them varied rewards.
func trainingGroups(t *testing.T, url string) []art.TrajectoryGroup {
	t.Helper()
	groups, err := arttest.SampleGroups(context.Background(), newClient(url), testModel, "hi", 2, 6)
	if err != nil {
		t.Fatal(err)
	}
	return groups
}

// Ensure POST /v1/art/train streams NDJSON progress and then the result,
// and the other training routes see the new step.
func TestTrainAPI(t *testing.T) {
	_, ts := newTestServer(t, Config{APIKey: testKey})
	groups := trainingGroups(t, ts.URL)
	body, _ := json.Marshal(api.TrainRequest{Model: testModel, Groups: groups, Config: art.TrainConfig{LearningRate: 1e-3}})
	req, _ := http.NewRequest("POST", ts.URL+"/v1/art/train", strings.NewReader(string(body)))
	req.Header.Set("Authorization", "Bearer "+testKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); resp.StatusCode != 200 || ct != "application/x-ndjson" {
		t.Fatalf("status %d, content type %q", resp.StatusCode, ct)
	}
	var events []api.TrainEvent
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if len(sc.Bytes()) == 0 {
			continue // a keep-alive
		}
		var ev api.TrainEvent
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		events = append(events, ev)
	}
	if len(events) < 2 {
		t.Fatalf("events %+v", events)
	}
	for i, ev := range events[:len(events)-1] {
		if ev.Type != api.EventProgress || ev.Done != i+1 || ev.Total != len(events)-1 {
			t.Errorf("event %d: %+v", i, ev)
		}
	}
	last := events[len(events)-1]
	if last.Type != api.EventResult || last.Result.Step != 1 || last.Result.Skipped || last.Result.Metrics["loss/train"] == 0 {
		t.Fatalf("last event %+v", last)
	}

	get := func(path string, out any) {
		status, b := do(t, "GET", ts.URL+path, testKey, "")
		if status != 200 || json.Unmarshal(b, out) != nil {
			t.Fatalf("GET %s: %d %s", path, status, b)
		}
	}
	var step api.StepResponse
	get("/v1/art/step?model=agent", &step)
	var info api.ModelInfo
	get("/v1/art/model", &info)
	if step.Step != 1 || info.Step != 1 || strings.Join(info.Models, ",") != "agent@0,agent@1" || info.MaxModelLen != 4096 {
		t.Fatalf("step %+v, info %+v", step, info)
	}
	status, b := do(t, "POST", ts.URL+"/v1/art/checkpoints/delete", testKey, `{"keep":[]}`)
	var cps api.CheckpointsResponse
	if status != 200 || json.Unmarshal(b, &cps) != nil || len(cps.Steps) != 1 || cps.Steps[0] != 1 {
		t.Fatalf("delete: %d %s; want only step 1 left", status, b)
	}
	if status, b := do(t, "POST", ts.URL+"/v1/chat/completions", testKey, chatBody(`"stream":true`)); status != 200 {
		t.Fatalf("streamed chat: %d %s", status, b)
	}
	status, b = do(t, "GET", ts.URL+"/metrics", testKey, "")
	for _, want := range []string{"art_time_to_first_token_seconds_count 1", `art_time_to_first_token_seconds_bucket{le="+Inf"} 1`,
		"# TYPE art_train_tokens_total counter", `art_model_step{model="agent"} 1`, `art_train_steps_total{skipped="false"} 1`,
		`art_reward_mean{split="train"} 0.5`, "art_generated_tokens_total ", `art_chat_requests_total{code="200"} 3`,
		"# TYPE art_sequences_waiting gauge"} {
		if status != 200 || !strings.Contains(string(b), want) {
			t.Errorf("metrics lack %q:\n%s", want, b)
		}
	}
	if strings.Contains(string(b), "\nart_train_tokens_total 0\n") {
		t.Error("art_train_tokens_total is 0 after a trained step")
	}
}

// Ensure inference keeps serving while a training step runs: requests for
// the previous step and for the bare name are answered by the previous
// adapter mid-step, and the new step is served once the step ends.
func TestInferenceDuringTraining(t *testing.T) {
	srv, ts := newTestServer(t, Config{APIKey: testKey})
	groups := trainingGroups(t, ts.URL)
	client := newClient(ts.URL)
	ctx := context.Background()
	var during []string
	var errs []error
	_, err := srv.model.Train(ctx, groups, art.TrainConfig{LearningRate: 1e-3}, func(done, total int) {
		if done != 1 {
			return
		}
		// The step is paused here, halfway through.
		if srv.model.Stats().Running != 1 {
			errs = append(errs, errors.New("training gauge is not 1 during the step"))
		}
		for _, model := range []string{"agent@0", "agent"} {
			cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			resp, err := client.Chat.Completions.New(cctx, oai.ChatCompletionNewParams{Model: model, Messages: userMsgs("hi"), MaxTokens: oai.Int(3)})
			cancel()
			if err != nil {
				errs = append(errs, err)
				continue
			}
			during = append(during, resp.Model)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	if strings.Join(during, ",") != "agent@0,agent@0" {
		t.Fatalf("answered during training by %v; want agent@0 twice", during)
	}
	resp, err := client.Chat.Completions.New(ctx, oai.ChatCompletionNewParams{Model: "agent", Messages: userMsgs("hi"), MaxTokens: oai.Int(3)})
	if err != nil || resp.Model != "agent@1" {
		t.Fatalf("after training: %v, %q; want agent@1", err, resp.Model)
	}
}

// smallBuffers is a listener whose connections have small send buffers,
// so that a client that reads nothing blocks the server's writes after a
// few kilobytes instead of megabytes.
type smallBuffers struct{ net.Listener }

func (l smallBuffers) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if tc, ok := c.(*net.TCPConn); ok {
		tc.SetWriteBuffer(4096)
	}
	return c, err
}

// serveStalling serves a fresh tiny model with a WriteStall of 300 ms on
// loopback through smallBuffers, and returns it and its address.
func serveStalling(t *testing.T) (*Server, string) {
	t.Helper()
	srv := New(Config{WriteStall: 300 * time.Millisecond}, openHost(t, writeTinyModel(t)))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(smallBuffers{ln})
	t.Cleanup(func() { srv.Close() })
	return srv, ln.Addr().String()
}

// postRaw sends a JSON POST of body to path on addr over a new connection
// with a small receive buffer, and returns the connection, nothing read.
func postRaw(t *testing.T, addr, path, body string) net.Conn {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	conn.(*net.TCPConn).SetReadBuffer(4096)
	req := "POST " + path + " HTTP/1.1\r\nHost: test\r\nContent-Type: application/json\r\nContent-Length: " + itoa(len(body)) + "\r\n\r\n" + body
	if _, err := conn.Write([]byte(req)); err != nil {
		t.Fatal(err)
	}
	return conn
}

// Ensure a streaming client that stops reading loses its connection after
// Config.WriteStall and its generation is cancelled (counted as 499): the
// stream's writer blocked on the full socket for good before, and its
// handler with it.
func TestWriteStall_ClientThatStopsReading(t *testing.T) {
	srv, addr := serveStalling(t)
	// 32 choices of ~130 tokens with 20 alternatives each: megabytes of
	// events, far more than both sockets hold.
	conn := postRaw(t, addr, "/v1/chat/completions", `{"model":"agent","messages":[{"role":"user","content":"hi"}],"stream":true,"temperature":1,"max_tokens":3900,"n":32,"logprobs":true,"top_logprobs":20}`)
	if n, inFlight := waitClientClosed(srv, 30*time.Second); n != 1 || inFlight != 0 {
		t.Fatalf("the stream to a client that reads nothing is still open after 30 s (%d requests counted 499, %d in flight)", n, inFlight)
	}
	// What the client gets now is cut short: no [DONE].
	conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	var got strings.Builder
	_, err := bufio.NewReader(conn).WriteTo(&got)
	if strings.Contains(got.String(), "[DONE]") {
		t.Fatal("the stream completed after the server gave up on it")
	}
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Fatalf("the server kept the connection open after cancelling (read %d bytes)", got.Len())
	}
	// The server still serves others.
	resp, err := http.Get("http://" + addr + "/healthz")
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("healthz after the stalled stream: %v %v", resp, err)
	}
	resp.Body.Close()
}

// Ensure a training stream whose client stops reading is cancelled after
// Config.WriteStall: no checkpoint from it, and the next step runs. Its
// progress lines are short, so the step has many batches to fill the
// small socket buffers.
func TestWriteStall_TrainingClientThatStopsReading(t *testing.T) {
	_, addr := serveStalling(t)
	url := "http://" + addr

	sft := func(n int) string {
		traj := `{"messages_and_choices":[{"role":"user","content":"hi"},{"role":"assistant","content":"ok"}]}`
		return `{"trajectories":[` + strings.TrimSuffix(strings.Repeat(traj+",", n), ",") + `],"config":{"batch_size":1,"learning_rate":1e-5}}`
	}
	conn := postRaw(t, addr, "/v1/art/train_sft", sft(3000)) // 3000 progress lines, ~130 KB
	// Read until the step is under way, then nothing more.
	conn.SetReadDeadline(time.Now().Add(30 * time.Second))
	br := bufio.NewReaderSize(conn, 16)
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatalf("waiting for the first progress line: %v", err)
		}
		if strings.Contains(line, `"type":"progress"`) {
			break
		}
	}

	// The next step runs once the stalled one is cancelled.
	client := &http.Client{Timeout: 30 * time.Second}
	deadline := time.Now().Add(60 * time.Second)
	for {
		resp, err := client.Post(url+"/v1/art/train_sft", "application/json", strings.NewReader(sft(1)))
		if err != nil {
			t.Fatalf("a training step after the stalled one: %v", err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode == 200 && strings.Contains(string(b), `"type":"result"`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no training step ran within 60 s of a stalled one: %d %s", resp.StatusCode, b)
		}
		time.Sleep(100 * time.Millisecond)
	}
	resp, err := http.Get(url + "/v1/art/step")
	if err != nil {
		t.Fatal(err)
	}
	var st api.StepResponse
	json.NewDecoder(resp.Body).Decode(&st)
	resp.Body.Close()
	if st.Step != 1 {
		t.Fatalf("step %d after one stalled and one finished step; want 1 (the stalled one wrote no checkpoint)", st.Step)
	}
}
