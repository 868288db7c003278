package local_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"

	goopenai "github.com/sashabaranov/go-openai"

	"github.com/artgo/art"
	"github.com/artgo/art/backend/local"
	"github.com/artgo/art/engine/initmodel"
	"github.com/artgo/art/engine/kernels"
)

// agent is an agent written with go-openai, a client ART knows nothing
// about: a two-turn chat, the second turn streamed.
func agent(ctx context.Context, client *goopenai.Client, model, question string) error {
	msgs := []goopenai.ChatCompletionMessage{{Role: goopenai.ChatMessageRoleUser, Content: question}}
	resp, err := client.CreateChatCompletion(ctx, goopenai.ChatCompletionRequest{Model: model, Messages: msgs, MaxTokens: 6})
	if err != nil {
		return err
	}
	msgs = append(msgs, resp.Choices[0].Message, goopenai.ChatCompletionMessage{Role: goopenai.ChatMessageRoleUser, Content: "and then?"})
	stream, err := client.CreateChatCompletionStream(ctx, goopenai.ChatCompletionRequest{Model: model, Messages: msgs, MaxTokens: 6})
	if err != nil {
		return err
	}
	defer stream.Close()
	for {
		if _, err := stream.Recv(); errors.Is(err, io.EOF) {
			return nil
		} else if err != nil {
			return err
		}
	}
}

// An art.Recorder captures the chat completions of an agent built on any
// OpenAI-compatible Go client (here go-openai, with streaming) into a
// trajectory with the exact sampled token ids, ready to train: the agent
// only needs the recorder's http.Client.
func Example_recorder() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "art-example-")
	defer os.RemoveAll(dir)
	base := filepath.Join(dir, "tiny-model")
	if _, err := initmodel.Write(base, initmodel.Options{Arch: "qwen2", Shape: "tiny", Tokenizer: initmodel.ByteTokenizer, DType: kernels.F32, Seed: 1, Std: 0.2}); err != nil {
		fmt.Println(err)
		return
	}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	b := local.New(local.Options{Quiet: true, Logger: quiet})
	defer b.Close()
	model := &art.TrainableModel{Model: art.Model{Name: "agent", Project: "example", BasePath: filepath.Join(dir, ".art"), Logger: quiet}, BaseModel: base}
	if err := model.Register(ctx, b); err != nil {
		fmt.Println(err)
		return
	}

	var group art.TrajectoryGroup
	for i := range 4 {
		rec := art.NewRecorder(nil)
		cfg := goopenai.DefaultConfig(model.InferenceAPIKey)
		cfg.BaseURL = model.InferenceBaseURL
		cfg.HTTPClient = rec.Client()
		if err := agent(ctx, goopenai.NewClientWithConfig(cfg), model.InferenceName(-1), "hello"); err != nil {
			fmt.Println(err)
			return
		}
		traj := rec.Trajectory()
		traj.Reward = float64(i % 2) // the agent's score
		group.Trajectories = append(group.Trajectories, traj)
	}

	traj := group.Trajectories[0]
	var items []string
	for _, it := range traj.MessagesAndChoices {
		if it.Choice != nil {
			items = append(items, "choice")
		} else {
			items = append(items, it.Message.Role)
		}
	}
	fmt.Println("history:", strings.Join(items, ", "))
	withIDs := true
	for _, it := range traj.MessagesAndChoices {
		if it.Choice != nil {
			withIDs = withIDs && len(it.Choice.Logprobs) > 0 &&
				!slices.ContainsFunc(it.Choice.Logprobs, func(l art.TokenLogprob) bool { return l.TokenID < 0 })
		}
	}
	fmt.Println("every sampled token has its id:", withIDs)

	res, err := model.Train(ctx, []art.TrajectoryGroup{group}, art.TrainConfig{LearningRate: 1e-3}) // trains, logs, serves agent@1
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("trained step %d (skipped: %v)\n", res.Step, res.Skipped)
	// Output:
	// history: user, choice, user, choice
	// every sampled token has its id: true
	// trained step 1 (skipped: false)
}
