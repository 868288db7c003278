package local_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"path/filepath"
	"testing"

	"github.com/openai/openai-go/v3"

	"github.com/artgo/art"
	"github.com/artgo/art/backend/local"
	"github.com/artgo/art/engine/initmodel"
	"github.com/artgo/art/engine/kernels"
)

// Ensure the whole tool path works end to end with a model that really
// calls a tool: a tiny random model is taught by TrainSFT (through the SDK)
// to answer a question with a calculator call and, after the tool's
// result, with the answer; then a stock openai-go client offering the tool
// gets a parsed tool call (finish reason tool_calls), sends the result back,
// and gets the answer. The recorded choices train a GRPO step.
func TestToolCallEndToEnd(t *testing.T) {
	if raceDetector {
		t.Skip("60 SFT steps take minutes under -race; the plain test run covers this (its server paths race-test elsewhere)")
	}
	ctx := context.Background()
	dir := t.TempDir()
	base := filepath.Join(dir, "tiny")
	// Qwen2.5's chat template (the byte tokenizer's default) renders tools
	// and parses <tool_call> blocks; std 0.5 lets LoRA make outputs peaked.
	if _, err := initmodel.Write(base, initmodel.Options{Arch: "qwen2", Shape: "tiny", Tokenizer: initmodel.ByteTokenizer,
		DType: kernels.F32, Seed: 7, Std: 0.5, RopeTheta: 10000}); err != nil {
		t.Fatal(err)
	}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	b := local.New(local.Options{Quiet: true, Logger: quiet})
	defer b.Close()
	model := &art.TrainableModel{Model: art.Model{Name: "calc", Project: "e2e", BasePath: filepath.Join(dir, ".art"), Logger: quiet},
		BaseModel: base, LoRA: art.LoRAConfig{Rank: 16, Alpha: 32}}
	if err := model.Register(ctx, b); err != nil {
		t.Fatal(err)
	}

	tool := art.Tool{Function: art.FunctionDefinition{Name: "calc", Description: "Evaluate arithmetic.",
		Parameters: json.RawMessage(`{"properties":{"e":{"type":"string"}},"required":["e"],"type":"object"}`)}} // key order as openai-go sends its map
	const question, args, result, answer = "2+3?", `{"e": "2+3"}`, "5", "It is 5."
	call := art.ToolCall{ID: "call_1", Function: art.FunctionCall{Name: "calc", Arguments: args}}
	var transcript art.Trajectory
	transcript.Tools = []art.Tool{tool}
	transcript.AddMessage(art.UserMsg(question))
	transcript.AddMessage(art.Message{Role: art.RoleAssistant, ToolCalls: []art.ToolCall{call}})
	transcript.AddMessage(art.ToolMsg("call_1", result))
	transcript.AddMessage(art.AssistantMsg(answer))
	trajs := []art.Trajectory{transcript, transcript, transcript, transcript}
	for i := range 60 {
		// lr 1e-2 oscillates (loss 0.03–0.3); the last steps at a lower
		// rate settle it, so the greedy reply does not hang on the last
		// bits of the weights.
		lr := 1e-2
		if i >= 40 {
			lr = 2e-3
		}
		res, err := model.TrainSFT(ctx, trajs, art.TrainSFTConfig{LearningRate: lr, BatchSize: 4})
		if err != nil {
			t.Fatal(err)
		}
		if i%10 == 0 {
			t.Logf("sft %d: loss %.4f tokens %v", i, res.Metrics["loss/train"], res.Metrics["data/step_trainer_tokens"])
		}
	}

	client, err := model.OpenAIClient()
	if err != nil {
		t.Fatal(err)
	}
	params := openai.ChatCompletionNewParams{
		Model:       model.InferenceName(-1),
		Messages:    []openai.ChatCompletionMessageParamUnion{openai.UserMessage(question)},
		Tools:       []openai.ChatCompletionToolUnionParam{openai.ChatCompletionFunctionTool(openai.FunctionDefinitionParam{Name: "calc", Description: openai.String("Evaluate arithmetic."), Parameters: openai.FunctionParameters{"type": "object", "properties": map[string]any{"e": map[string]any{"type": "string"}}, "required": []string{"e"}}})},
		Temperature: openai.Float(0),
		MaxTokens:   openai.Int(100),
		Logprobs:    openai.Bool(true),
	}
	first, err := client.Chat.Completions.New(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	c := first.Choices[0]
	if c.FinishReason != "tool_calls" || len(c.Message.ToolCalls) != 1 {
		t.Fatalf("first reply: finish %q, content %q, %d tool calls; want one tool call", c.FinishReason, c.Message.Content, len(c.Message.ToolCalls))
	}
	tc := c.Message.ToolCalls[0]
	var got map[string]string
	if tc.Function.Name != "calc" || json.Unmarshal([]byte(tc.Function.Arguments), &got) != nil || got["e"] != "2+3" || tc.ID == "" {
		t.Fatalf("tool call %+v; want calc with e=2+3 and an id", tc)
	}

	params.Messages = append(params.Messages, c.Message.ToParam(), openai.ToolMessage(result, tc.ID))
	second, err := client.Chat.Completions.New(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	if s := second.Choices[0]; s.FinishReason != "stop" || s.Message.Content != answer {
		t.Fatalf("after the tool result: finish %q, content %q; want %q", s.FinishReason, s.Message.Content, answer)
	}

	// The recorded turns (tool call included) are trainable as they are.
	var traj art.Trajectory
	traj.Tools = []art.Tool{tool}
	traj.AddMessage(art.UserMsg(question))
	for i, ch := range []openai.ChatCompletionChoice{c, second.Choices[0]} {
		choice, err := art.ChoiceFromOpenAI(ch)
		if err != nil {
			t.Fatalf("choice %d: %v", i, err)
		}
		traj.AddChoice(choice)
		if i == 0 {
			traj.AddMessage(art.ToolMsg(tc.ID, result))
		}
	}

	// The same episode through Trajectory.Chat, which sends the tools as
	// the trajectory records them, gives the same turns.
	var viaChat art.Trajectory
	viaChat.Tools = []art.Tool{tool}
	viaChat.AddMessage(art.UserMsg(question))
	chatParams := openai.ChatCompletionNewParams{Model: model.InferenceName(-1), Temperature: openai.Float(0), MaxTokens: openai.Int(100)}
	first2, err := viaChat.Chat(ctx, client, chatParams)
	if err != nil || len(first2.Message.ToolCalls) != 1 || first2.Message.ToolCalls[0].Function.Arguments != tc.Function.Arguments {
		t.Fatalf("Chat, first turn: %+v, %v; want the tool call %s", first2.Message, err, tc.Function.Arguments)
	}
	viaChat.AddMessage(art.ToolMsg(first2.Message.ToolCalls[0].ID, result))
	if second2, err := viaChat.Chat(ctx, client, chatParams); err != nil || second2.Message.Content.String() != answer {
		t.Fatalf("Chat, after the tool result: %+v, %v; want %q", second2.Message, err, answer)
	}

	worse := art.Trajectory{Tools: traj.Tools, MessagesAndChoices: traj.MessagesAndChoices[:2], Reward: 0}
	traj.Reward = 1
	res, err := model.Train(ctx, []art.TrajectoryGroup{{Trajectories: []art.Trajectory{traj, worse}}}, art.TrainConfig{LearningRate: 1e-4})
	if err != nil || res.Skipped {
		t.Fatalf("GRPO step on recorded tool-call turns: %+v, %v", res, err)
	}
}
