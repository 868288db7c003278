package server

import (
	"context"
	"slices"
	"testing"

	oai "github.com/openai/openai-go/v3"
)

// Ensure a tiny positive temperature samples as temperature 0 (greedy)
// does: scaled by 1/T, the logits overflowed to infinities whose softmax
// is NaN, and the draw fell through to the vocabulary's last token.
func TestTinyTemperatureIsGreedy(t *testing.T) {
	_, ts := newTestServer(t, Config{APIKey: testKey})
	client := newClient(ts.URL)
	ctx := context.Background()
	answer := func(temp float64) []int {
		t.Helper()
		resp, err := client.Chat.Completions.New(ctx, oai.ChatCompletionNewParams{Model: testModel, Messages: userMsgs("hi"),
			MaxTokens: oai.Int(8), Seed: oai.Int(5), Temperature: oai.Float(temp)})
		if err != nil {
			t.Fatal(err)
		}
		return extraInts(t, resp.Choices[0].JSON.ExtraFields["token_ids"])
	}
	greedy := answer(0)
	for _, temp := range []float64{1e-6, 1e-30, 1e-40, 1e-300, 5e-324} {
		if got := answer(temp); !slices.Equal(got, greedy) {
			t.Errorf("temperature %g sampled %v; temperature 0 samples %v", temp, got, greedy)
		}
	}
}
