package server

import (
	"context"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	oai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"

	"github.com/artgo/art/host"
	"github.com/artgo/art/host/native"
	"github.com/artgo/art/openai"
)

// gatedModel holds a streamed generation at its gateAt-th sampled token
// until the test opens the gate (or gateWait passes): a server that sends
// its events only when generation ends sends nothing while it waits, so
// an event that arrives before the gate opens was sent token by token.
// Generation without a stream callback (a plain request) is not held.
type gatedModel struct {
	*native.Host
	gateAt int
	open   chan struct{}
	// hold > 0 holds each streamed generation this long instead (for a
	// client in another process, which cannot open the gate).
	hold    time.Duration
	late    atomic.Bool  // the gate opened by itself, after gateWait
	running atomic.Int32 // generations under way, streamed or not
}

const gateWait = 30 * time.Second

func (g *gatedModel) Chat(ctx context.Context, req host.ChatRequest, stream func(host.StreamEvent) error) (host.ChatResponse, error) {
	g.running.Add(1)
	defer g.running.Add(-1)
	if stream == nil {
		return g.Host.Chat(ctx, req, nil)
	}
	n := 0
	return g.Host.Chat(ctx, req, func(ev host.StreamEvent) error {
		if err := stream(ev); err != nil {
			return err
		}
		if n++; n == g.gateAt && g.hold > 0 {
			return sleep(ctx, g.hold)
		}
		if n == g.gateAt {
			select {
			case <-g.open:
			case <-time.After(gateWait):
				g.late.Store(true)
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		return nil
	})
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// newGatedServer serves the tiny test model behind a gate at its gateAt-th
// token.
func newGatedServer(t *testing.T, gateAt int, hold time.Duration) (*gatedModel, *httptest.Server) {
	t.Helper()
	g := &gatedModel{Host: openHost(t, writeTinyModel(t)), gateAt: gateAt, open: make(chan struct{}), hold: hold}
	srv := New(Config{APIKey: testKey}, g)
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(func() {
		ts.Close()
		srv.Close()
	})
	return g, ts
}

// openGate opens g's gate after checking that the generation has not
// ended nor gone past the gate by itself: what the client got so far was
// sent while generating.
func (g *gatedModel) openGate(t *testing.T, what string) {
	t.Helper()
	if g.running.Load() == 0 || g.late.Load() {
		t.Fatalf("%s arrived after generation ended (the gate timed out: %v): not streamed token by token", what, g.late.Load())
	}
	close(g.open)
}

// Ensure a streamed Responses API answer, read with openai-go, sends its
// first text delta while generation is still running, and that what the
// stream carries adds up: the deltas concatenate to the final text, the
// events are in order and name the same items as response.completed,
// and the final response equals the plain one at the same seed.
func TestResponsesStream_TokenByToken(t *testing.T) {
	g, ts := newGatedServer(t, 6, 0)
	client := newClient(ts.URL)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	params := responses.ResponseNewParams{Model: testModel, Input: responses.ResponseNewParamsInputUnion{OfString: oai.String("Once upon")},
		Instructions: oai.String("be brief"), MaxOutputTokens: oai.Int(40)}
	seed := option.WithJSONSet("seed", 7)
	plain, err := client.Responses.New(ctx, params, seed)
	if err != nil {
		t.Fatal(err)
	}

	stream := client.Responses.NewStreaming(ctx, params, seed)
	var types []string
	var deltas strings.Builder
	var final responses.Response
	ndeltas, seq := 0, int64(-1)
	for stream.Next() {
		ev := stream.Current()
		types = append(types, ev.Type)
		if ev.SequenceNumber != seq+1 {
			t.Errorf("event %q has sequence number %d after %d", ev.Type, ev.SequenceNumber, seq)
		}
		seq = ev.SequenceNumber
		switch ev.Type {
		case "response.output_text.delta":
			if ndeltas == 0 {
				g.openGate(t, "the first output_text.delta")
			}
			ndeltas++
			deltas.WriteString(ev.Delta)
		case "response.completed", "response.incomplete":
			final = ev.Response
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if ndeltas < 2 {
		t.Fatalf("%d text deltas; events %v", ndeltas, types)
	}
	want := []string{"response.created", "response.in_progress", "response.output_item.added", "response.content_part.added", "response.output_text.delta"}
	if strings.Join(types[:len(want)], ",") != strings.Join(want, ",") {
		t.Errorf("events begin %v; want %v", types[:len(want)], want)
	}
	wantEnd := []string{"response.output_text.done", "response.content_part.done", "response.output_item.done", "response." + string(plain.Status)}
	if got := types[len(types)-len(wantEnd):]; strings.Join(got, ",") != strings.Join(wantEnd, ",") {
		t.Errorf("events end %v; want %v", got, wantEnd)
	}
	if deltas.String() != final.OutputText() || final.OutputText() != plain.OutputText() {
		t.Errorf("deltas %q, final text %q; the plain response at the same seed: %q", deltas.String(), final.OutputText(), plain.OutputText())
	}
	if final.Status != plain.Status || final.Usage.OutputTokens != plain.Usage.OutputTokens || final.Model != "agent@0" || len(final.Output) != 1 {
		t.Errorf("final: status %q, %d output tokens, model %q, %d items; plain: %q, %d", final.Status, final.Usage.OutputTokens, final.Model,
			len(final.Output), plain.Status, plain.Usage.OutputTokens)
	}
}

// Ensure a streamed function call (tool_choice "required") arrives as a
// function_call item whose argument deltas add up to the arguments of the
// plain answer at the same seed.
func TestResponsesStream_FunctionCall(t *testing.T) {
	_, ts := newTestServer(t, Config{APIKey: testKey})
	client := newClient(ts.URL)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	tool := responses.ToolUnionParam{OfFunction: &responses.FunctionToolParam{Name: "get_weather", Strict: oai.Bool(true),
		Parameters: map[string]any{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string", "maxLength": 6}},
			"required": []string{"city"}, "additionalProperties": false}}}
	params := responses.ResponseNewParams{Model: testModel, Input: responses.ResponseNewParamsInputUnion{OfString: oai.String("weather?")},
		Tools: []responses.ToolUnionParam{tool}, MaxOutputTokens: oai.Int(150),
		ToolChoice: responses.ResponseNewParamsToolChoiceUnion{OfToolChoiceMode: oai.Opt(responses.ToolChoiceOptionsRequired)}}
	seed := option.WithJSONSet("seed", 3)
	plain, err := client.Responses.New(ctx, params, seed)
	if err != nil {
		t.Fatal(err)
	}
	if len(plain.Output) != 1 || plain.Output[0].Type != "function_call" {
		t.Fatalf("plain output %+v; want one function call", plain.Output)
	}
	stream := client.Responses.NewStreaming(ctx, params, seed)
	var args strings.Builder
	var done, itemID string
	for stream.Next() {
		ev := stream.Current()
		switch ev.Type {
		case "response.output_item.added":
			itemID = ev.Item.ID
		case "response.function_call_arguments.delta":
			if ev.ItemID != itemID {
				t.Errorf("delta for item %q; the item added was %q", ev.ItemID, itemID)
			}
			args.WriteString(ev.Delta)
		case "response.function_call_arguments.done":
			done = ev.Arguments
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if want := plain.Output[0].Arguments.OfString; want == "" || args.String() != want || done != want {
		t.Errorf("streamed arguments %q (done %q); the plain call at the same seed: %q", args.String(), done, want)
	}
}

// Ensure a streamed legacy completion, read with openai-go, sends text
// while generation is still running, one token id per chunk, and adds up
// to the plain completion at the same seed.
func TestCompletionsStream_TokenByToken(t *testing.T) {
	g, ts := newGatedServer(t, 6, 0)
	client := newClient(ts.URL)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	params := oai.CompletionNewParams{Model: oai.CompletionNewParamsModel(testModel), Prompt: oai.CompletionNewParamsPromptUnion{OfString: oai.String("Once upon")},
		Seed: oai.Int(5), MaxTokens: oai.Int(40), StreamOptions: oai.ChatCompletionStreamOptionsParam{IncludeUsage: oai.Bool(true)}}
	plain, err := client.Completions.New(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	stream := client.Completions.NewStreaming(ctx, params)
	var text strings.Builder
	var ids []int
	var finish string
	var usage int64
	for stream.Next() {
		c := stream.Current()
		if c.Usage.CompletionTokens > 0 {
			usage = c.Usage.CompletionTokens
		}
		for _, ch := range c.Choices {
			if ch.Text != "" && text.Len() == 0 {
				g.openGate(t, "the first text")
			}
			text.WriteString(ch.Text)
			if f, ok := ch.JSON.ExtraFields["token_ids"]; ok {
				got := extraInts(t, f)
				if len(got) != 1 || len(ch.Logprobs.TokenLogprobs) != 1 {
					t.Errorf("a token chunk with ids %v and %d logprobs", got, len(ch.Logprobs.TokenLogprobs))
				}
				ids = append(ids, got...)
			}
			if ch.FinishReason != "" {
				finish = string(ch.FinishReason)
			}
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	want := plain.Choices[0]
	if text.String() != want.Text || finish != string(want.FinishReason) || usage != plain.Usage.CompletionTokens {
		t.Errorf("streamed %q (%s, %d tokens); the plain completion at the same seed: %q (%s, %d)", text.String(), finish, usage,
			want.Text, want.FinishReason, plain.Usage.CompletionTokens)
	}
	if wantIDs := extraInts(t, want.JSON.ExtraFields["token_ids"]); len(ids) != len(wantIDs) {
		t.Errorf("streamed %d token ids; the plain completion has %d", len(ids), len(wantIDs))
	}
}

// Ensure the official OpenAI Node SDK streams the Responses API (through
// its stream helper, which rebuilds the response from the events) and the
// legacy completions as they are generated: the server holds each
// streamed generation for holdFor after its sixth token, so a first delta
// sent token by token arrives at least that long before the end; and both
// add up to the plain answers at the same seed.
func TestNodeOpenAI_Streams(t *testing.T) {
	dir := nodeOpenAI(t)
	const holdFor = 2 * time.Second
	_, ts := newGatedServer(t, 6, holdFor)
	var res struct {
		Responses struct {
			Types        []string `json:"types"`
			Deltas       string   `json:"deltas"`
			FirstDeltaMS *int64   `json:"first_delta_ms"`
			End          int64    `json:"end_ms"`
			FinalText    string   `json:"final_text"`
			FinalStatus  string   `json:"final_status"`
			Plain        string   `json:"plain_text"`
			PlainStatus  string   `json:"plain_status"`
		} `json:"responses"`
		Completions struct {
			Text              string `json:"text"`
			TokenIDs          []int  `json:"token_ids"`
			FirstTextMS       *int64 `json:"first_text_ms"`
			End               int64  `json:"end_ms"`
			FinishReason      string `json:"finish_reason"`
			PlainText         string `json:"plain_text"`
			PlainTokenIDs     []int  `json:"plain_token_ids"`
			PlainFinishReason string `json:"plain_finish_reason"`
		} `json:"completions"`
	}
	runNodeScript(t, "node_stream.mjs", dir, ts.URL, "agent@0", &res)
	r := res.Responses
	if r.FirstDeltaMS == nil || time.Duration(r.End-*r.FirstDeltaMS)*time.Millisecond < holdFor*3/4 {
		t.Errorf("responses: first delta at %v ms, end at %d ms; a stream held %v after its first tokens", r.FirstDeltaMS, r.End, holdFor)
	}
	if r.Deltas != r.FinalText || r.FinalText != r.Plain || r.FinalStatus != r.PlainStatus || len(r.Types) < 8 {
		t.Errorf("responses: deltas %q, final %q (%s); plain at the same seed %q (%s); events %v", r.Deltas, r.FinalText, r.FinalStatus,
			r.Plain, r.PlainStatus, r.Types)
	}
	c := res.Completions
	if c.FirstTextMS == nil || time.Duration(c.End-*c.FirstTextMS)*time.Millisecond < holdFor*3/4 {
		t.Errorf("completions: first text at %v ms, end at %d ms; a stream held %v after its first tokens", c.FirstTextMS, c.End, holdFor)
	}
	if c.Text != c.PlainText || !slices.Equal(c.TokenIDs, c.PlainTokenIDs) || c.FinishReason != c.PlainFinishReason {
		t.Errorf("completions: streamed %q %v %s; plain at the same seed %q %v %s", c.Text, c.TokenIDs, c.FinishReason,
			c.PlainText, c.PlainTokenIDs, c.PlainFinishReason)
	}
}

// Ensure an error after a Responses stream has begun is OpenAI's "error"
// event, numbered in the stream's sequence, which openai-go decodes.
func TestResponsesStream_ErrorEvent(t *testing.T) {
	f := &responseFormat{req: &openai.ResponsesRequest{}, ids: newResponseIDs(), model: "agent@0"}
	began := f.begin()
	b, err := appendEvent(nil, f.fail(&apiError{Status: 504, Type: openai.ErrTimeout, Code: "timeout", Msg: "too slow"}))
	if err != nil {
		t.Fatal(err)
	}
	data, ok := strings.CutPrefix(string(b), "event: error\ndata: ")
	if !ok {
		t.Fatalf("event %q", b)
	}
	var ev responses.ResponseStreamEventUnion
	if err := ev.UnmarshalJSON([]byte(strings.TrimSpace(data))); err != nil {
		t.Fatal(err)
	}
	if ev.Type != "error" || ev.Code != "timeout" || ev.Message != "too slow" || ev.SequenceNumber != int64(len(began)) {
		t.Errorf("error event %s", data)
	}
}
