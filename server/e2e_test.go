package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	oai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/artgo/art"
	"github.com/artgo/art/backend/remote"
)

const testKey = "sk-test"

func newClient(url string) oai.Client {
	return oai.NewClient(option.WithBaseURL(url+"/v1"), option.WithAPIKey(testKey), option.WithMaxRetries(0))
}

func userMsgs(text string) []oai.ChatCompletionMessageParamUnion {
	return []oai.ChatCompletionMessageParamUnion{oai.UserMessage(text)}
}

// extraInts decodes an extra JSON field holding a list of ints.
func extraInts(t *testing.T, f interface{ Raw() string }) []int {
	t.Helper()
	var out []int
	if err := json.Unmarshal([]byte(f.Raw()), &out); err != nil {
		t.Fatalf("extra field %q: %v", f.Raw(), err)
	}
	return out
}

// Ensure the stock openai-go client gets OpenAI-shaped answers with our
// extras: plain chat, n > 1, logprobs and token ids (always), top logprobs
// (when asked), tools, and streaming equal to the plain answer.
func TestOpenAIGo(t *testing.T) {
	_, ts := newTestServer(t, Config{APIKey: testKey})
	client := newClient(ts.URL)
	ctx := context.Background()

	var plain *oai.ChatCompletion
	t.Run("Plain", func(t *testing.T) {
		var err error
		plain, err = client.Chat.Completions.New(ctx, oai.ChatCompletionNewParams{Model: testModel, Messages: userMsgs("hi"),
			N: oai.Int(3), MaxTokens: oai.Int(8), Seed: oai.Int(11)})
		if err != nil {
			t.Fatal(err)
		}
		if plain.Model != "agent@0" || plain.Object != "chat.completion" || !strings.HasPrefix(plain.ID, "chatcmpl-") || len(plain.Choices) != 3 {
			t.Fatalf("completion %s", plain.RawJSON())
		}
		prompt := extraInts(t, plain.JSON.ExtraFields["prompt_token_ids"])
		if int64(len(prompt)) != plain.Usage.PromptTokens || plain.Usage.TotalTokens != plain.Usage.PromptTokens+plain.Usage.CompletionTokens {
			t.Errorf("usage %+v with %d prompt ids", plain.Usage, len(prompt))
		}
		var completion int64
		for i, c := range plain.Choices {
			ids := extraInts(t, c.JSON.ExtraFields["token_ids"])
			completion += int64(len(ids))
			if c.Index != int64(i) || len(ids) == 0 || len(c.Logprobs.Content) != len(ids) {
				t.Fatalf("choice %d: %d ids, %d logprobs", i, len(ids), len(c.Logprobs.Content))
			}
			ac, err := art.ChoiceFromOpenAI(c)
			if err != nil {
				t.Fatal(err)
			}
			for j, lp := range ac.Logprobs {
				if lp.TokenID != ids[j] || lp.Logprob > 0 || len(lp.TopLogprobs) != 0 {
					t.Fatalf("choice %d token %d: %+v; want id %d and no top logprobs", i, j, lp, ids[j])
				}
			}
		}
		if completion != plain.Usage.CompletionTokens {
			t.Errorf("%d token ids; usage says %d", completion, plain.Usage.CompletionTokens)
		}
	})

	t.Run("TopLogprobs", func(t *testing.T) {
		resp, err := client.Chat.Completions.New(ctx, oai.ChatCompletionNewParams{Model: testModel, Messages: userMsgs("hi"),
			MaxTokens: oai.Int(4), Logprobs: oai.Bool(true), TopLogprobs: oai.Int(3)})
		if err != nil {
			t.Fatal(err)
		}
		for i, lp := range resp.Choices[0].Logprobs.Content {
			if len(lp.TopLogprobs) != 3 || lp.TopLogprobs[0].Logprob < lp.TopLogprobs[2].Logprob {
				t.Fatalf("token %d: top logprobs %+v", i, lp.TopLogprobs)
			}
		}
	})

	t.Run("Tools", func(t *testing.T) {
		tool := oai.ChatCompletionFunctionTool(oai.FunctionDefinitionParam{Name: "get_weather", Description: oai.String("Weather of a city"),
			Parameters: oai.FunctionParameters{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}}}})
		params := oai.ChatCompletionNewParams{Model: testModel, Messages: userMsgs("hi"), MaxTokens: oai.Int(4), Seed: oai.Int(1),
			Tools: []oai.ChatCompletionToolUnionParam{tool}}
		resp, err := client.Chat.Completions.New(ctx, params)
		if err != nil {
			t.Fatal(err)
		}
		// The tools are rendered into the prompt.
		if resp.Usage.PromptTokens <= plain.Usage.PromptTokens+20 {
			t.Errorf("prompt with a tool has %d tokens, without %d", resp.Usage.PromptTokens, plain.Usage.PromptTokens)
		}
		// A whole assistant turn with a tool call and its result goes back in.
		params.Messages = append(params.Messages,
			oai.ChatCompletionMessageParamUnion{OfAssistant: &oai.ChatCompletionAssistantMessageParam{ToolCalls: []oai.ChatCompletionMessageToolCallUnionParam{
				{OfFunction: &oai.ChatCompletionMessageFunctionToolCallParam{ID: "call_1", Function: oai.ChatCompletionMessageFunctionToolCallFunctionParam{Name: "get_weather", Arguments: `{"city":"Paris"}`}}}}}},
			oai.ToolMessage("sunny", "call_1"))
		params.ToolChoice = oai.ChatCompletionToolChoiceOptionUnionParam{OfAuto: oai.String("none")}
		if _, err := client.Chat.Completions.New(ctx, params); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("StreamEqualsPlain", func(t *testing.T) {
		stream := client.Chat.Completions.NewStreaming(ctx, oai.ChatCompletionNewParams{Model: testModel, Messages: userMsgs("hi"),
			N: oai.Int(3), MaxTokens: oai.Int(8), Seed: oai.Int(11), StreamOptions: oai.ChatCompletionStreamOptionsParam{IncludeUsage: oai.Bool(true)}})
		content := make([]string, 3)
		ids := make([][]int, 3)
		finish := make([]string, 3)
		var usage oai.CompletionUsage
		var acc oai.ChatCompletionAccumulator
		for stream.Next() {
			ch := stream.Current()
			acc.AddChunk(ch)
			if ch.Model != "agent@0" {
				t.Fatalf("chunk model %q", ch.Model)
			}
			if ch.JSON.Usage.Valid() {
				usage = ch.Usage
			}
			for _, c := range ch.Choices {
				content[c.Index] += c.Delta.Content
				if f, ok := c.JSON.ExtraFields["token_ids"]; ok {
					ids[c.Index] = append(ids[c.Index], extraInts(t, f)...)
				}
				if c.FinishReason != "" {
					finish[c.Index] = c.FinishReason
				}
			}
		}
		if err := stream.Err(); err != nil {
			t.Fatal(err)
		}
		for i, c := range plain.Choices {
			if content[i] != c.Message.Content || finish[i] != c.FinishReason || !slices.Equal(ids[i], extraInts(t, c.JSON.ExtraFields["token_ids"])) {
				t.Errorf("choice %d streamed %q (%s, ids %v); plain %q (%s, ids %s)", i, content[i], finish[i], ids[i],
					c.Message.Content, c.FinishReason, c.JSON.ExtraFields["token_ids"].Raw())
			}
			if acc.Choices[i].Message.Content != c.Message.Content {
				t.Errorf("accumulated choice %d: %q", i, acc.Choices[i].Message.Content)
			}
		}
		if usage.CompletionTokens != plain.Usage.CompletionTokens || usage.PromptTokens != plain.Usage.PromptTokens {
			t.Errorf("stream usage %+v; plain %+v", usage, plain.Usage)
		}
	})

	// A conversation's next turn reuses the keys and values of the turn
	// before, and usage says how many prompt tokens it did not prefill.
	t.Run("CachedTokens", func(t *testing.T) {
		msgs := []oai.ChatCompletionMessageParamUnion{
			oai.SystemMessage(strings.Repeat("You are a careful agent; think before each move. ", 3)),
			oai.UserMessage("Begin."),
		}
		first, err := client.Chat.Completions.New(ctx, oai.ChatCompletionNewParams{Model: testModel, Messages: msgs, MaxTokens: oai.Int(6), Seed: oai.Int(1)})
		if err != nil {
			t.Fatal(err)
		}
		if c := first.Usage.PromptTokensDetails.CachedTokens; c != 0 {
			t.Fatalf("the first turn reused %d tokens of a new server", c)
		}
		msgs = append(msgs, first.Choices[0].Message.ToParam(), oai.UserMessage("Go on."))
		second, err := client.Chat.Completions.New(ctx, oai.ChatCompletionNewParams{Model: testModel, Messages: msgs, MaxTokens: oai.Int(6), Seed: oai.Int(2)})
		if err != nil {
			t.Fatal(err)
		}
		if c := second.Usage.PromptTokensDetails.CachedTokens; c < first.Usage.PromptTokens || c >= second.Usage.PromptTokens {
			t.Fatalf("the second turn (%d prompt tokens) reused %d; the first turn's prompt alone has %d", second.Usage.PromptTokens, c, first.Usage.PromptTokens)
		}
		status, body := do(t, "GET", ts.URL+"/metrics", testKey, "")
		if status != 200 {
			t.Fatalf("GET /metrics: %d %s", status, body)
		}
		fams := parseMetrics(t, body)
		cached, kept := fams["art_prompt_tokens_cached_total"], fams["art_prefix_cache_bytes"]
		if cached == nil || cached.GetMetric()[0].GetCounter().GetValue() < float64(second.Usage.PromptTokensDetails.CachedTokens) {
			t.Fatalf("art_prompt_tokens_cached_total %v; the second turn alone reused %d", cached, second.Usage.PromptTokensDetails.CachedTokens)
		}
		if kept == nil || kept.GetMetric()[0].GetGauge().GetValue() <= 0 {
			t.Fatalf("art_prefix_cache_bytes %v: the answers above should be kept", kept)
		}
	})

	t.Run("TrainThenServeNewStep", func(t *testing.T) {
		b, err := remote.New(remote.Options{BaseURL: ts.URL, APIKey: testKey, Quiet: true})
		if err != nil {
			t.Fatal(err)
		}
		m := &art.TrainableModel{Model: art.Model{Name: testModel, Project: "p", BasePath: t.TempDir()}, BaseModel: "base"}
		if err := m.Register(ctx, b); err != nil {
			t.Fatal(err)
		}
		var g art.TrajectoryGroup
		for i, c := range plain.Choices {
			ac, err := art.ChoiceFromOpenAI(c)
			if err != nil {
				t.Fatal(err)
			}
			tr := art.Trajectory{Reward: float64(i)}
			tr.AddMessage(art.UserMsg("hi"))
			tr.AddChoice(ac)
			g.Trajectories = append(g.Trajectories, tr)
		}
		res, err := b.Train(ctx, m, []art.TrajectoryGroup{g}, art.TrainConfig{LearningRate: 1e-3})
		if err != nil || res.Step != 1 || res.Skipped {
			t.Fatalf("Train = %+v, %v; want step 1", res, err)
		}
		for _, model := range []string{"agent@1", "agent"} {
			resp, err := client.Chat.Completions.New(ctx, oai.ChatCompletionNewParams{Model: model, Messages: userMsgs("hi"), MaxTokens: oai.Int(4)})
			if err != nil || resp.Model != "agent@1" {
				t.Fatalf("chat with %s after training: %v, model %q; want agent@1", model, err, resp.Model)
			}
		}
		models := client.Models.ListAutoPaging(ctx)
		var ids []string
		for models.Next() {
			ids = append(ids, models.Current().ID)
		}
		if strings.Join(ids, ",") != "agent@0,agent@1" {
			t.Errorf("models %v; want agent@0,agent@1", ids)
		}
	})
}

// Ensure many concurrent clients get correct, independent answers: each
// seeded request returns what the same request returns alone.
func TestConcurrentClients(t *testing.T) {
	_, ts := newTestServer(t, Config{APIKey: testKey})
	client := newClient(ts.URL)
	ctx := context.Background()
	const clients = 32
	params := func(i int) oai.ChatCompletionNewParams {
		return oai.ChatCompletionNewParams{Model: testModel, Messages: userMsgs(fmt.Sprintf("q%d", i%7)),
			N: oai.Int(int64(1 + i%2)), MaxTokens: oai.Int(int64(3 + i%4)), Seed: oai.Int(int64(i))}
	}
	answer := func(resp *oai.ChatCompletion) string {
		var b strings.Builder
		for _, c := range resp.Choices {
			fmt.Fprintf(&b, "%d|%s|%s;", c.Index, c.Message.Content, c.JSON.ExtraFields["token_ids"].Raw())
		}
		return b.String()
	}
	alone := make([]string, clients)
	for i := range clients {
		resp, err := client.Chat.Completions.New(ctx, params(i))
		if err != nil {
			t.Fatal(err)
		}
		alone[i] = answer(resp)
	}
	var wg sync.WaitGroup
	errs := make([]error, clients)
	for i := range clients {
		wg.Go(func() {
			// Half the clients stream, half do not.
			if i%2 == 0 {
				resp, err := client.Chat.Completions.New(ctx, params(i))
				if err != nil {
					errs[i] = err
				} else if got := answer(resp); got != alone[i] {
					errs[i] = fmt.Errorf("client %d: got %s; alone %s", i, got, alone[i])
				}
				return
			}
			stream := client.Chat.Completions.NewStreaming(ctx, params(i))
			var acc oai.ChatCompletionAccumulator
			for stream.Next() {
				acc.AddChunk(stream.Current())
			}
			if err := stream.Err(); err != nil {
				errs[i] = err
				return
			}
			for _, c := range acc.Choices {
				if !strings.Contains(alone[i], fmt.Sprintf("%d|%s|", c.Index, c.Message.Content)) {
					errs[i] = fmt.Errorf("client %d streamed choice %d %q; alone %s", i, c.Index, c.Message.Content, alone[i])
				}
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
}
