package server

import (
	"context"
	"encoding/json"
	"maps"
	"slices"
	"strings"
	"testing"

	oai "github.com/openai/openai-go/v3"

	"github.com/artgo/art/internal/schemacheck"
)

// Bounded schemas (a random model never closes an unbounded string) that
// cover the strict subset: nested objects, arrays with item counts,
// numbers and integers with ranges, enums, const, type lists, nullable
// strings, anyOf, $defs/$ref, patterns, optional properties.
var structuredSchemas = map[string]string{
	"judge": `{"type":"object","properties":{"scores":{"type":"array","minItems":3,"maxItems":3,"items":{"type":"object",
		"properties":{"trajectory_id":{"type":"string","maxLength":4},"explanation":{"type":"string","maxLength":24},
		"score":{"type":"number","minimum":0,"maximum":1}},"required":["trajectory_id","explanation","score"],"additionalProperties":false}}},
		"required":["scores"],"additionalProperties":false}`,
	"enums": `{"type":"object","properties":{"verdict":{"enum":["win","loss","draw"]},"confident":{"type":"boolean"},
		"rank":{"type":"integer","minimum":1,"maximum":9},"note":{"type":["string","null"],"maxLength":10},"version":{"const":2}},
		"required":["verdict","confident","rank","note","version"],"additionalProperties":false}`,
	"refs": `{"$defs":{"cell":{"anyOf":[{"type":"integer","minimum":0,"maximum":9},{"type":"string","pattern":"^[XO]$"}]}},
		"type":"object","properties":{"row":{"type":"array","items":{"$ref":"#/$defs/cell"},"minItems":1,"maxItems":3},
		"meta":{"type":"object","properties":{"id":{"type":"string","pattern":"^[a-z]{2,5}$"}},"required":["id"],"additionalProperties":false}},
		"required":["row","meta"],"additionalProperties":false}`,
	"optional": `{"type":"object","properties":{"name":{"type":"string","minLength":2,"maxLength":8},
		"tags":{"type":"array","items":{"type":"string","maxLength":5},"maxItems":2}},"required":["name"],"additionalProperties":false}`,
}

// Ensure structured outputs hold with a random-weight model: 50 sampled
// answers for each of four schemas through the stock openai-go client
// (response_format json_schema, strict), every one complete ("stop") and
// valid against its schema; and json_object answers are JSON objects.
func TestStructuredOutputs_RandomModel(t *testing.T) {
	_, ts := newTestServer(t, Config{APIKey: testKey})
	client := newClient(ts.URL)
	ctx := context.Background()
	valid := 0
	for _, name := range slices.Sorted(maps.Keys(structuredSchemas)) {
		var schema map[string]any
		if err := json.Unmarshal([]byte(structuredSchemas[name]), &schema); err != nil {
			t.Fatal(err)
		}
		resp, err := client.Chat.Completions.New(ctx, oai.ChatCompletionNewParams{
			Model: testModel, Messages: userMsgs("answer in JSON"), N: oai.Int(50), MaxTokens: oai.Int(1000), Seed: oai.Int(7),
			ResponseFormat: oai.ChatCompletionNewParamsResponseFormatUnion{OfJSONSchema: &oai.ResponseFormatJSONSchemaParam{
				JSONSchema: oai.ResponseFormatJSONSchemaJSONSchemaParam{Name: name, Schema: schema, Strict: oai.Bool(true)}}},
		})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for i, c := range resp.Choices {
			if c.FinishReason != "stop" {
				t.Errorf("%s choice %d: finish_reason %q after %d tokens: %q", name, i, c.FinishReason, len(c.Logprobs.Content), c.Message.Content)
				continue
			}
			if err := schemacheck.Validate([]byte(structuredSchemas[name]), []byte(c.Message.Content)); err != nil {
				t.Errorf("%s choice %d: %v: %q", name, i, err, c.Message.Content)
				continue
			}
			valid++
		}
		t.Logf("%s: e.g. %s", name, resp.Choices[0].Message.Content)
	}
	if valid != 200 {
		t.Errorf("%d of 200 answers valid", valid)
	}

	resp, err := client.Chat.Completions.New(ctx, oai.ChatCompletionNewParams{
		Model: testModel, Messages: userMsgs("answer in JSON"), N: oai.Int(8), MaxTokens: oai.Int(2000), Seed: oai.Int(3),
		ResponseFormat: oai.ChatCompletionNewParamsResponseFormatUnion{OfJSONObject: &oai.ResponseFormatJSONObjectParam{}},
	})
	if err != nil {
		t.Fatal(err)
	}
	for i, c := range resp.Choices {
		var obj map[string]any
		switch c.FinishReason {
		case "stop":
			if err := json.Unmarshal([]byte(c.Message.Content), &obj); err != nil {
				t.Errorf("json_object choice %d: not a JSON object (%v): %q", i, err, c.Message.Content)
			}
		case "length": // an unbounded string may run to max_tokens: the text must still be a prefix of an object
			if !strings.HasPrefix(c.Message.Content, "{") {
				t.Errorf("json_object choice %d cut by length does not start an object: %q", i, c.Message.Content)
			}
		default:
			t.Errorf("json_object choice %d: finish_reason %q", i, c.FinishReason)
		}
	}
}
