// Command server measures what serving over HTTP costs: the same chat
// generation (n choices, same seed, so the very same tokens) is timed in
// process through native.Host.Chat and through `art serve`'s handler
// on a loopback socket with the stock openai-go client, plain and
// streamed. Runs alternate between the paths so that machine noise hits
// both alike; the overhead is the median over runs of the paired ratio
// server/in-process - 1. It prints a markdown table row per path.
//
//	go run ./bench/server -shape small -n 8 -max-tokens 64 -runs 9
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	oai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/artgo/art"
	"github.com/artgo/art/engine/initmodel"
	"github.com/artgo/art/engine/kernels"
	"github.com/artgo/art/host"
	"github.com/artgo/art/host/native"
	"github.com/artgo/art/server"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "bench/server:", err)
		os.Exit(1)
	}
}

func run() error {
	shape := flag.String("shape", "small", "model shape (a model.Preset name: tiny, small, ...)")
	n := flag.Int("n", 8, "choices per request")
	maxTokens := flag.Int("max-tokens", 64, "tokens per choice at most")
	runs := flag.Int("runs", 9, "timed runs per path")
	seed := flag.Int64("seed", 1, "sampling seed (both paths sample the same tokens)")
	flag.Parse()

	load := "unknown"
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		load = strings.Join(strings.Fields(string(b))[:3], " ")
	}
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "art-bench-server-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	base := filepath.Join(dir, "model")
	if _, err := initmodel.Write(base, initmodel.Options{Arch: "qwen2", Shape: *shape, Tokenizer: initmodel.ByteTokenizer, DType: kernels.F32, Seed: 1, Std: 0.2}); err != nil {
		return err
	}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	svc, err := native.Open(ctx, native.Options{BaseModel: base, Name: "bench", Project: "bench", Path: filepath.Join(dir, ".art"), Seed: 1, Logger: quiet})
	if err != nil {
		return err
	}
	srv := server.New(server.Config{Logger: quiet}, svc)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	go srv.Serve(ln)
	defer srv.Close()
	client := oai.NewClient(option.WithBaseURL("http://"+ln.Addr().String()+"/v1"), option.WithAPIKey("x"), option.WithMaxRetries(0))

	msg, err := json.Marshal(art.UserMsg("Write a short story about a robot."))
	if err != nil {
		return err
	}
	temp := 1.0
	inProc := func() (int, error) {
		resp, err := svc.Chat(ctx, host.ChatRequest{Model: "bench", Messages: []json.RawMessage{msg}, N: *n, MaxTokens: *maxTokens, Seed: seed, Temperature: &temp}, nil)
		return resp.CompletionTokens, err
	}
	params := oai.ChatCompletionNewParams{Model: "bench", Messages: []oai.ChatCompletionMessageParamUnion{oai.UserMessage("Write a short story about a robot.")},
		N: oai.Int(int64(*n)), MaxTokens: oai.Int(int64(*maxTokens)), Seed: oai.Int(*seed), Temperature: oai.Float(temp)}
	plain := func() (int, error) {
		resp, err := client.Chat.Completions.New(ctx, params)
		if err != nil {
			return 0, err
		}
		return int(resp.Usage.CompletionTokens), nil
	}
	streamed := func() (int, error) {
		st := client.Chat.Completions.NewStreaming(ctx, params, option.WithJSONSet("stream_options", map[string]any{"include_usage": true}))
		tokens := 0
		for st.Next() {
			if c := st.Current(); c.JSON.Usage.Valid() {
				tokens = int(c.Usage.CompletionTokens)
			}
		}
		return tokens, st.Err()
	}

	// The raw paths read the answer without decoding it (only the usage),
	// to tell the server's cost from the client library's.
	url := "http://" + ln.Addr().String() + "/v1/chat/completions"
	rawBody := func(stream bool) []byte {
		b, _ := json.Marshal(map[string]any{"model": "bench", "messages": []json.RawMessage{msg}, "n": *n, "max_tokens": *maxTokens,
			"seed": *seed, "temperature": temp, "stream": stream, "stream_options": map[string]any{"include_usage": true}})
		return b
	}
	raw := func(stream bool) func() (int, error) {
		body := rawBody(stream)
		return func() (int, error) {
			resp, err := http.Post(url, "application/json", bytes.NewReader(body))
			if err != nil {
				return 0, err
			}
			defer resp.Body.Close()
			data, err := io.ReadAll(resp.Body)
			if err != nil || resp.StatusCode != http.StatusOK {
				return 0, fmt.Errorf("status %d: %v", resp.StatusCode, err)
			}
			if stream { // the usage is in the last event before [DONE]
				events := bytes.Split(bytes.TrimSpace(data), []byte("\n\n"))
				data = bytes.TrimPrefix(events[len(events)-2], []byte("data: "))
			}
			var u struct {
				Usage struct {
					CompletionTokens int `json:"completion_tokens"`
				} `json:"usage"`
			}
			err = json.Unmarshal(data, &u)
			return u.Usage.CompletionTokens, err
		}
	}

	type path struct {
		name string
		f    func() (int, error)
	}
	paths := []path{{"in-process", inProc}, {"server, openai-go", plain}, {"server, raw HTTP", raw(false)},
		{"server stream, openai-go", streamed}, {"server stream, raw HTTP", raw(true)}}
	times := make([][]float64, len(paths))
	tokens := make([]int, len(paths))
	for r := -1; r < *runs; r++ { // run -1 warms up
		for i := range paths {
			k := (i + r + 1) % len(paths) // rotate the order
			start := time.Now()
			tok, err := paths[k].f()
			d := time.Since(start).Seconds()
			if err != nil {
				return fmt.Errorf("%s: %w", paths[k].name, err)
			}
			if tokens[k] = tok; r >= 0 {
				times[k] = append(times[k], d)
			}
		}
	}
	for k := range paths {
		if tokens[k] != tokens[0] {
			return fmt.Errorf("%s generated %d tokens, in-process %d: the paths did not do the same work", paths[k].name, tokens[k], tokens[0])
		}
	}
	fmt.Printf("model %s (qwen2, byte vocab), n=%d, max_tokens=%d, %d tokens per request, %d runs, GOMAXPROCS=%d, %s, load average before: %s\n\n",
		*shape, *n, *maxTokens, tokens[0], *runs, runtime.GOMAXPROCS(0), runtime.Version(), load)
	fmt.Println("| path | median s | tokens/s | overhead vs in-process (median of paired ratios) |")
	fmt.Println("|---|---:|---:|---:|")
	for k, p := range paths {
		med := median(times[k])
		over := "—"
		if k > 0 {
			ratios := make([]float64, len(times[k]))
			for i := range ratios {
				ratios[i] = times[k][i]/times[0][i] - 1
			}
			over = fmt.Sprintf("%+.1f%%", 100*median(ratios))
		}
		fmt.Printf("| %s | %.3f | %.0f | %s |\n", p.name, med, float64(tokens[0])/med, over)
	}
	return nil
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
