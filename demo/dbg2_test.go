package demo

import (
	"context"
	"fmt"
	"testing"

	"github.com/artgo/art"
	"github.com/artgo/art/backend/local"
	"github.com/artgo/art/demo/tictactoe"
)

func TestDbgRollout(t *testing.T) {
	b := local.New(local.Options{Quiet: true})
	defer b.Close()
	m := &art.TrainableModel{Model: art.Model{Name: "dbg", Project: "demo", BasePath: t.TempDir()}, BaseModel: "/tmp/demo-art/demo/base-tictactoe"}
	if err := m.Register(context.Background(), b); err != nil {
		t.Skip(err)
	}
	c, _ := m.OpenAIClient()
	tr, err := tictactoe.Rollout(context.Background(), c, m.InferenceName(0), 5)
	if err != nil {
		t.Fatal(err)
	}
	hs := append([]art.History{tr.History()}, tr.AdditionalHistories...)
	for _, h := range hs {
		for _, mc := range h.MessagesAndChoices {
			if mc.Choice != nil {
				fmt.Printf("content %q finish %s:", mc.Choice.Message.Content.String(), mc.Choice.FinishReason)
				for _, l := range mc.Choice.Logprobs {
					fmt.Printf(" [%d %q %.3f]", l.TokenID, l.Token, l.Logprob)
				}
				fmt.Println()
			}
		}
	}
	fmt.Println("reward", tr.Reward, tr.Metrics)
}
