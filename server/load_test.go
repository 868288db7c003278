package server

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	oai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/artgo/art"
)

// Ensure the server holds up under load while it trains: 64 clients with
// their own connections send plain, streamed, n > 1 and tool requests
// while three training steps run. Every request succeeds within its bound,
// the bare name switches to a new step exactly when its checkpoint lands
// (never before the step starts, always once it has returned), and no
// goroutine is left behind once the clients and the server are gone.
func TestLoadWhileTraining(t *testing.T) {
	if testing.Short() {
		t.Skip("load test")
	}
	const clients, perClient, maxSteps = 64, 4, 10
	srv, ts := newTestServer(t, Config{APIKey: testKey})
	groups := trainingGroups(t, ts.URL)
	ts.Client().CloseIdleConnections()
	base := runtime.NumGoroutine()

	type record struct {
		start, end time.Time
		model      string // the step that answered, as "name@step"
		bare       bool   // asked for the bare name
		kind       string
		err        error
	}
	var (
		mu      sync.Mutex
		records []record
	)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	tool := oai.ChatCompletionFunctionTool(oai.FunctionDefinitionParam{Name: "lookup", Description: oai.String("look a word up"),
		Parameters: oai.FunctionParameters{"type": "object", "properties": map[string]any{"word": map[string]any{"type": "string"}}}})
	transports := make([]*http.Transport, clients)
	var wg sync.WaitGroup
	for c := range clients {
		transports[c] = &http.Transport{}
		client := oai.NewClient(option.WithBaseURL(ts.URL+"/v1"), option.WithAPIKey(testKey), option.WithMaxRetries(0),
			option.WithHTTPClient(&http.Client{Transport: transports[c]}), option.WithRequestTimeout(time.Minute))
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := range perClient {
				kind := []string{"plain", "stream", "n3", "tools"}[(c+r)%4]
				model := testModel
				if r%2 == 1 {
					model = testModel + "@0"
				}
				params := oai.ChatCompletionNewParams{Model: model, Messages: userMsgs("client " + strconv.Itoa(c)),
					MaxTokens: oai.Int(6), Seed: oai.Int(int64(c*perClient + r))}
				rec := record{start: time.Now(), bare: model == testModel, kind: kind}
				switch kind {
				case "stream":
					st := client.Chat.Completions.NewStreaming(ctx, params)
					var acc oai.ChatCompletionAccumulator
					for st.Next() {
						acc.AddChunk(st.Current())
					}
					rec.err, rec.model = st.Err(), acc.Model
					if rec.err == nil && len(acc.Choices) != 1 {
						rec.err = fmt.Errorf("stream gave %d choices", len(acc.Choices))
					}
				default:
					if kind == "n3" {
						params.N = oai.Int(3)
					}
					if kind == "tools" {
						params.Tools = []oai.ChatCompletionToolUnionParam{tool}
					}
					resp, err := client.Chat.Completions.New(ctx, params)
					rec.err = err
					if err == nil {
						rec.model = resp.Model
						if want := int(params.N.Or(1)); len(resp.Choices) != want {
							rec.err = fmt.Errorf("%d choices, want %d", len(resp.Choices), want)
						}
					}
				}
				rec.end = time.Now()
				mu.Lock()
				records = append(records, rec)
				mu.Unlock()
			}
		}()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	// Train as long as the clients run; each step's checkpoint lands
	// somewhere between the call and its return.
	type window struct{ from, to time.Time }
	var trained []window
	for running := true; running && len(trained) < maxSteps; {
		select {
		case <-done:
			running = false
			continue
		default:
		}
		w := window{from: time.Now()}
		if _, err := srv.model.Train(ctx, groups, art.TrainConfig{LearningRate: 1e-3}, nil); err != nil {
			t.Fatal(err)
		}
		w.to = time.Now()
		trained = append(trained, w)
	}
	<-done
	if len(trained) < 2 {
		t.Errorf("only %d training steps ran during the load", len(trained))
	}

	if len(records) != clients*perClient {
		t.Fatalf("%d records, want %d", len(records), clients*perClient)
	}
	var lat []time.Duration
	for _, r := range records {
		if r.err != nil {
			t.Errorf("%s request failed: %v", r.kind, r.err)
			continue
		}
		lat = append(lat, r.end.Sub(r.start))
		step, err := strconv.Atoi(strings.TrimPrefix(r.model, testModel+"@"))
		if err != nil {
			t.Errorf("answered by %q", r.model)
			continue
		}
		if !r.bare {
			if step != 0 {
				t.Errorf("asked for %s@0, answered by %s", testModel, r.model)
			}
			continue
		}
		for k, w := range trained {
			if r.end.Before(w.from) && step > k {
				t.Errorf("a request that ended before step %d started was answered by %s", k+1, r.model)
			}
			if r.start.After(w.to) && step < k+1 {
				t.Errorf("a request that started after step %d landed was answered by %s", k+1, r.model)
			}
		}
	}
	slices.Sort(lat)
	if len(lat) > 0 {
		p := func(q float64) time.Duration { return lat[int(math.Ceil(q*float64(len(lat))))-1] }
		t.Logf("%d requests from %d clients during %d training steps: p50 %s, p99 %s, max %s",
			len(lat), clients, len(trained), p(0.5), p(0.99), lat[len(lat)-1])
	}

	for _, tr := range transports {
		tr.CloseIdleConnections()
	}
	deadline := time.Now().Add(10 * time.Second)
	for runtime.NumGoroutine() > base && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > base {
		buf := make([]byte, 1<<20)
		t.Errorf("%d goroutines after the load, %d before:\n%s", n, base, buf[:runtime.Stack(buf, true)])
	}
}
