package server

import (
	"context"
	"net/http"
	"strings"
	"testing"

	oai "github.com/openai/openai-go/v3"
)

// Ensure the legacy completions API answers the stock openai-go client: a
// raw prompt (no chat template: its tokens are the prompt's bytes with the
// byte tokenizer), n choices with token ids and logprobs, the 16-token
// default, a stream with the same text for the same seed, and clear errors.
func TestCompletions(t *testing.T) {
	_, ts := newTestServer(t, Config{APIKey: testKey})
	client := newClient(ts.URL)
	ctx := context.Background()
	params := oai.CompletionNewParams{Model: oai.CompletionNewParamsModel(testModel), Prompt: oai.CompletionNewParamsPromptUnion{OfString: oai.String("Once upon")},
		N: oai.Int(2), Seed: oai.Int(5), Logprobs: oai.Int(2)}
	resp, err := client.Completions.New(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Model != "agent@0" || resp.Object != "text_completion" || len(resp.Choices) != 2 || resp.Usage.PromptTokens != int64(len("Once upon")) {
		t.Fatalf("model %q, object %q, %d choices, %d prompt tokens", resp.Model, resp.Object, len(resp.Choices), resp.Usage.PromptTokens)
	}
	for i, c := range resp.Choices {
		ids := extraInts(t, c.JSON.ExtraFields["token_ids"])
		if len(ids) == 0 || len(ids) > 16 || len(c.Logprobs.TokenLogprobs) != len(ids) || len(c.Logprobs.TopLogprobs) != len(ids) {
			t.Fatalf("choice %d: %d ids, %d logprobs", i, len(ids), len(c.Logprobs.TokenLogprobs))
		}
		if len(ids) == 16 && c.FinishReason != "length" {
			t.Errorf("choice %d: 16 tokens, finish %q", i, c.FinishReason)
		}
	}
	params.N = oai.Int(1)
	stream := client.Completions.NewStreaming(ctx, params)
	var text strings.Builder
	for stream.Next() {
		for _, c := range stream.Current().Choices {
			text.WriteString(c.Text)
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if text.String() != resp.Choices[0].Text {
		t.Errorf("stream %q; the same seed gave %q", text.String(), resp.Choices[0].Text)
	}
	for _, c := range []struct{ body, param, msg string }{
		{`{"model":"agent","prompt":""}`, "prompt", "must not be empty"},
		{`{"model":"agent","prompt":[1,2]}`, "prompt", "token arrays"},
		{`{"model":"agent","prompt":"x","echo":true}`, "echo", "not supported"},
		{`{"model":"agent","prompt":"x","logprobs":9}`, "logprobs", "[0, 5]"},
	} {
		status, body := postAPI(t, http.DefaultClient, ts.URL+"/v1/completions", c.body)
		if status != 400 || !strings.Contains(string(body[0]), `"param":"`+c.param+`"`) || !strings.Contains(string(body[0]), c.msg) {
			t.Errorf("%s: %d %s", c.body, status, body[0])
		}
	}
}
