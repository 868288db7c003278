package demo

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/artgo/art"
	"github.com/artgo/art/backend/local"
	"github.com/artgo/art/demo/tictactoe"
	"github.com/artgo/art/engine/chat"
	"github.com/artgo/art/engine/lora"
	"github.com/artgo/art/engine/model"
	"github.com/artgo/art/engine/tokenizer"
)

func TestDbgDirection(t *testing.T) {
	ctx := context.Background()
	base := "/tmp/demo-art/demo/base-tictactoe"
	b := local.New(local.Options{Quiet: true})
	defer b.Close()
	dir := t.TempDir()
	m := &art.TrainableModel{Model: art.Model{Name: "dbg", Project: "demo", BasePath: dir}, BaseModel: base}
	if err := m.Register(ctx, b); err != nil {
		t.Skip(err)
	}
	c, _ := m.OpenAIClient()
	groups, err := art.GatherGroups(ctx, []uint64{1, 2, 3, 4, 5, 6, 7, 8}, 8, func(ctx context.Context, s uint64) (art.Trajectory, error) {
		return tictactoe.Rollout(ctx, c, m.InferenceName(0), s)
	}, art.GatherOptions{Quiet: true})
	if err != nil {
		t.Fatal(err)
	}
	res, err := b.Train(ctx, m, groups, art.TrainConfig{LearningRate: 2e-3, GradAccumulationSequences: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	fmt.Println(res.Metrics)
	mm, _ := model.Load(base)
	tok, _ := tokenizer.LoadDir(base)
	cfg, _ := chat.LoadConfig(base)
	src, _ := cfg.TemplateSource(false)
	tmpl, _ := chat.NewTemplate(src)
	a0, _ := lora.Load(filepath.Join(dir, "demo/models/dbg/checkpoints/0000"), mm.Config)
	a1, _ := lora.Load(filepath.Join(dir, "demo/models/dbg/checkpoints/0001"), mm.Config)
	var pos, neg, posN, negN float64
	for _, g := range groups {
		var mean float64
		for _, tr := range g.Trajectories {
			mean += tr.Reward
		}
		mean /= float64(len(g.Trajectories))
		for _, tr := range g.Trajectories {
			adv := tr.Reward - mean
			for _, h := range append([]art.History{tr.History()}, tr.AdditionalHistories...) {
				msgs := h.Messages()
				var raw [][]byte
				_ = raw
				text, _ := tmpl.Render(rawJSON(msgs[:2]), nil, chat.RenderOptions{AddGenerationPrompt: true})
				ids := tok.Encode(text)
				ch := h.MessagesAndChoices[2].Choice
				for _, l := range ch.Logprobs {
					ids = append(ids, l.TokenID)
				}
				lp0, _ := mm.LogProbs(ids, a0)
				lp1, _ := mm.LogProbs(ids, a1)
				n := len(ch.Logprobs)
				var d float64
				for k := len(lp0) - n; k < len(lp0); k++ {
					d += lp1[k] - lp0[k]
				}
				if adv > 0 {
					pos += d
					posN++
				} else if adv < 0 {
					neg += d
					negN++
				}
			}
		}
	}
	fmt.Printf("mean Δlogprob: positive-advantage %.4f (%v), negative %.4f (%v)\n", pos/posN, posN, neg/negN, negN)
}

func rawJSON(ms []art.Message) []json.RawMessage {
	var out []json.RawMessage
	for _, m := range ms {
		b, _ := json.Marshal(m)
		out = append(out, b)
	}
	return out
}
