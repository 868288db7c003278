package demo

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/artgo/art/demo/tictactoe"
	"github.com/artgo/art/engine/chat"
	"github.com/artgo/art/engine/generate"
	"github.com/artgo/art/engine/model"
	"github.com/artgo/art/engine/tokenizer"
)

// engineAgent plays with the engine directly (no server): used while the
// base model is built, before any endpoint exists.
func engineAgent(m *model.Model, ad model.Adapter, tok *tokenizer.Tokenizer, tmpl *chat.Template, eos []int, seed uint64) tictactoe.Agent {
	return func(ctx context.Context, board string) (string, error) {
		var msgs []json.RawMessage
		for _, mm := range Messages(board) {
			b, _ := json.Marshal(mm)
			msgs = append(msgs, b)
		}
		text, err := tmpl.Render(msgs, nil, chat.RenderOptions{AddGenerationPrompt: true})
		if err != nil {
			return "", fmt.Errorf("demo: render: %w", err)
		}
		seed++
		res, err := generate.Generate(ctx, m, generate.Request{Prompt: tok.Encode(text), MaxTokens: 4,
			Sampling: generate.SamplingParams{Temperature: 1}, Seed: seed, StopTokenIDs: eos, Adapter: ad})
		if err != nil {
			return "", err
		}
		ids := res.IDs()
		if res.FinishReason == generate.FinishStop {
			ids = ids[:len(ids)-1]
		}
		s, _ := tok.Decode(ids)
		return s, nil
	}
}
