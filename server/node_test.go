package server

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/artgo/art"
	"github.com/artgo/art/backend/remote"
	"github.com/artgo/art/internal/testassets"
)

// nodeOpenAI returns the folder holding the npm openai package, or skips
// the test (fails under ART_REQUIRE_ASSETS=1) when it is not installed.
func nodeOpenAI(t *testing.T) string {
	t.Helper()
	return nodePackages(t, "node-openai", "openai", "npm openai not installed: run scripts/install-node-openai.sh (needs node and npm)")
}

// nodePackages returns .assets/<folder> if it holds the npm package pkg
// and node is on the PATH; otherwise it skips the test saying msg (or
// fails under ART_REQUIRE_ASSETS=1).
func nodePackages(t *testing.T, folder, pkg, msg string) string {
	t.Helper()
	dir := filepath.Join(testassets.Root(t), ".assets", folder)
	_, errPkg := os.Stat(filepath.Join(dir, "node_modules", pkg, "package.json"))
	_, errNode := exec.LookPath("node")
	if errPkg != nil || errNode != nil {
		if os.Getenv("ART_REQUIRE_ASSETS") == "1" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	return dir
}

// nodeResult is what testdata/node_client.mjs prints.
type nodeResult struct {
	SDK   string `json:"sdk"`
	Plain struct {
		Model string `json:"model"`
		Usage struct {
			PromptTokens     int `json:"prompt_tokens"`
			CompletionTokens int `json:"completion_tokens"`
		} `json:"usage"`
		PromptTokenIDs []int             `json:"prompt_token_ids"`
		Choices        []json.RawMessage `json:"choices"`
	} `json:"plain"`
	TopLogprobs []int `json:"top_logprobs"`
	Tools       struct {
		PromptTokens int `json:"prompt_tokens"`
	} `json:"tools"`
	Stream struct {
		Model        string   `json:"model"`
		Content      []string `json:"content"`
		TokenIDs     [][]int  `json:"token_ids"`
		FinishReason []string `json:"finish_reason"`
		Usage        *struct {
			CompletionTokens int `json:"completion_tokens"`
		} `json:"usage"`
	} `json:"stream"`
	UnknownModel struct {
		Status  int    `json:"status"`
		Message string `json:"message"`
		Type    string `json:"type"`
	} `json:"unknown_model"`
	Models     []string `json:"models"`
	Structured []struct {
		FinishReason string `json:"finish_reason"`
		Content      string `json:"content"`
		Parsed       *struct {
			Verdict string   `json:"verdict"`
			Score   *float64 `json:"score"`
			Why     *string  `json:"why"`
		} `json:"parsed"`
	} `json:"structured"`
	StructuredStream string `json:"structured_stream"`
}

func runNode(t *testing.T, dir, url, model string) nodeResult {
	t.Helper()
	var res nodeResult
	runNodeScript(t, "node_client.mjs", dir, url, model, &res)
	return res
}

// runNodeScript runs testdata/script with the npm openai package of dir
// against the server at url and decodes the JSON it prints into res.
func runNodeScript(t *testing.T, script, dir, url, model string, res any) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", filepath.Join("testdata", script))
	cmd.Env = append(os.Environ(), "ART_NODE_OPENAI="+dir, "ART_BASE_URL="+url+"/v1", "ART_API_KEY="+testKey, "ART_MODEL="+model)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s: %v\n%s", script, err, stderr.String())
	}
	if err := json.Unmarshal(out, res); err != nil {
		t.Fatalf("%s printed %q: %v", script, out, err)
	}
}

// Ensure the official OpenAI Node SDK works against the server: plain
// chat, n > 1, logprobs and token ids, tools, streaming, errors, the model
// list; then that its choices train a step and the new step is served.
func TestNodeOpenAI(t *testing.T) {
	dir := nodeOpenAI(t)
	_, ts := newTestServer(t, Config{APIKey: testKey})
	res := runNode(t, dir, ts.URL, "agent@0")
	t.Logf("npm openai %s", res.SDK)

	p := res.Plain
	if p.Model != "agent@0" || len(p.Choices) != 2 || len(p.PromptTokenIDs) != p.Usage.PromptTokens {
		t.Fatalf("plain: model %q, %d choices, %d prompt ids for %d prompt tokens", p.Model, len(p.Choices), len(p.PromptTokenIDs), p.Usage.PromptTokens)
	}
	var choices []art.Choice
	for i, raw := range p.Choices {
		var c art.Choice
		if err := json.Unmarshal(raw, &c); err != nil {
			t.Fatal(err)
		}
		var extra struct {
			TokenIDs []int `json:"token_ids"`
		}
		json.Unmarshal(raw, &extra)
		if len(c.Logprobs) == 0 || len(c.Logprobs) != len(extra.TokenIDs) {
			t.Fatalf("choice %d: %d logprobs, token_ids %v", i, len(c.Logprobs), extra.TokenIDs)
		}
		for j, lp := range c.Logprobs {
			if lp.TokenID != extra.TokenIDs[j] {
				t.Fatalf("choice %d token %d: id %d; token_ids says %d", i, j, lp.TokenID, extra.TokenIDs[j])
			}
		}
		// The stream had the same seed: the same tokens.
		if !slices.Equal(res.Stream.TokenIDs[i], extra.TokenIDs) || res.Stream.Content[i] != c.Message.Content.String() || res.Stream.FinishReason[i] != c.FinishReason {
			t.Errorf("choice %d streamed %q %v %s; plain %q %v %s", i, res.Stream.Content[i], res.Stream.TokenIDs[i], res.Stream.FinishReason[i],
				c.Message.Content.String(), extra.TokenIDs, c.FinishReason)
		}
		choices = append(choices, c)
	}
	if res.Stream.Model != "agent@0" || res.Stream.Usage == nil || res.Stream.Usage.CompletionTokens != p.Usage.CompletionTokens {
		t.Errorf("stream: model %q, usage %+v; plain completion tokens %d", res.Stream.Model, res.Stream.Usage, p.Usage.CompletionTokens)
	}
	if len(res.TopLogprobs) == 0 || slices.ContainsFunc(res.TopLogprobs, func(n int) bool { return n != 2 }) {
		t.Errorf("top logprobs per token %v; want 2 each", res.TopLogprobs)
	}
	if res.Tools.PromptTokens <= p.Usage.PromptTokens {
		t.Errorf("prompt with tools has %d tokens, without %d", res.Tools.PromptTokens, p.Usage.PromptTokens)
	}
	if u := res.UnknownModel; u.Status != 404 || !strings.Contains(u.Message, "served: agent@0") {
		t.Errorf("unknown model: %+v", u)
	}
	if strings.Join(res.Models, ",") != "agent@0" {
		t.Errorf("models %v", res.Models)
	}
	// Structured outputs: the SDK's parse helper gets schema-valid JSON.
	if len(res.Structured) != 4 {
		t.Errorf("structured: %d choices, want 4", len(res.Structured))
	}
	for i, c := range res.Structured {
		p := c.Parsed
		if c.FinishReason != "stop" || p == nil || !slices.Contains([]string{"win", "loss", "draw"}, p.Verdict) ||
			p.Score == nil || *p.Score < 0 || *p.Score > 1 || p.Why == nil || len([]rune(*p.Why)) > 12 {
			t.Errorf("structured choice %d: finish %q, content %q", i, c.FinishReason, c.Content)
		}
	}
	if len(res.Structured) > 0 && res.StructuredStream != res.Structured[0].Content {
		t.Errorf("structured stream %q; the same seed gave %q", res.StructuredStream, res.Structured[0].Content)
	}

	// Train on the Node client's choices, then ask for the new step.
	b, err := remote.New(remote.Options{BaseURL: ts.URL, APIKey: testKey, Quiet: true})
	if err != nil {
		t.Fatal(err)
	}
	m := &art.TrainableModel{Model: art.Model{Name: testModel, Project: "p", BasePath: t.TempDir()}, BaseModel: "base"}
	ctx := context.Background()
	if err := m.Register(ctx, b); err != nil {
		t.Fatal(err)
	}
	var g art.TrajectoryGroup
	for i, c := range choices {
		tr := art.Trajectory{Reward: float64(i)}
		tr.AddMessage(art.UserMsg("hi"))
		tr.AddChoice(c)
		g.Trajectories = append(g.Trajectories, tr)
	}
	tres, err := b.Train(ctx, m, []art.TrajectoryGroup{g}, art.TrainConfig{LearningRate: 1e-3})
	if err != nil || tres.Step != 1 || tres.Skipped {
		t.Fatalf("Train = %+v, %v", tres, err)
	}
	res = runNode(t, dir, ts.URL, "agent")
	if res.Plain.Model != "agent@1" || res.Stream.Model != "agent@1" || strings.Join(res.Models, ",") != "agent@0,agent@1" {
		t.Fatalf("after training: plain %q, stream %q, models %v; want agent@1", res.Plain.Model, res.Stream.Model, res.Models)
	}
}
