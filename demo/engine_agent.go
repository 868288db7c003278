package demo

import (
	"context"
	"encoding/json"
	"fmt"
	"math"

	"github.com/artgo/art/engine/chat"
	"github.com/artgo/art/engine/generate"
	"github.com/artgo/art/engine/hfmodel"
	"github.com/artgo/art/engine/model"
	"github.com/artgo/art/engine/tokenizer"
	"github.com/artgo/art/games/tictactoe"
)

// promptEncoder renders one move's chat with the model's template and
// tokenises it, ready for the assistant's reply.
type promptEncoder struct {
	tok   *tokenizer.Tokenizer
	tmpl  *chat.Template
	digit [9]int // token ids of "1".."9"
	end   int    // <|im_end|>
}

func newPromptEncoder(dir string) (*promptEncoder, error) {
	f, err := hfmodel.OpenText(dir)
	if err != nil {
		return nil, fmt.Errorf("demo: %w", err)
	}
	tok := f.Tokenizer
	e := &promptEncoder{tok: tok, tmpl: f.Template}
	for i := range e.digit {
		ids := tok.Encode(string(rune('1' + i)))
		if len(ids) != 1 {
			return nil, fmt.Errorf("demo: the tokenizer splits the digit %d", i+1)
		}
		e.digit[i] = ids[0]
	}
	var ok bool
	if e.end, ok = tok.ID("<|im_end|>"); !ok {
		return nil, fmt.Errorf("demo: the tokenizer has no <|im_end|>")
	}
	return e, nil
}

// encode returns the prompt tokens of the move shown by prompt.
func (e *promptEncoder) encode(prompt string) ([]int, error) {
	var msgs []json.RawMessage
	for _, m := range tictactoe.Messages(prompt) {
		b, err := json.Marshal(m)
		if err != nil {
			return nil, fmt.Errorf("demo: %w", err)
		}
		msgs = append(msgs, b)
	}
	text, err := e.tmpl.Render(msgs, nil, chat.RenderOptions{AddGenerationPrompt: true})
	if err != nil {
		return nil, fmt.Errorf("demo: render: %w", err)
	}
	return e.tok.Encode(text), nil
}

// enginePolicy is the model's move distribution, computed with the engine
// directly: the probability of each digit as the reply's first token.
// (Replies that continue after the digit are counted as the digit; a base
// model trained here ends its reply after one digit.) A prompt that cannot
// be rendered or run is an error, not an invalid move.
func enginePolicy(m *model.Model, ad model.Adapter, enc *promptEncoder) tictactoe.Policy {
	var ws model.Workspace
	logits := make([]float32, m.Config.VocabSize)
	C := m.Config.HiddenSize
	return func(b *tictactoe.Board) ([9]float64, error) {
		var p [9]float64
		ids, err := enc.encode(b.Prompt())
		if err != nil {
			return p, err
		}
		cache := m.NewKVCache(len(ids))
		h, err := m.Forward(&ws, ids, []model.Segment{{Cache: cache, N: len(ids), Adapter: ad}})
		if err != nil {
			return p, fmt.Errorf("demo: forward: %w", err)
		}
		m.Logits(logits, h[(len(ids)-1)*C:len(ids)*C], 1)
		maxv := math.Inf(-1)
		for _, v := range logits {
			maxv = math.Max(maxv, float64(v))
		}
		var sum float64
		for _, v := range logits {
			sum += math.Exp(float64(v) - maxv)
		}
		for i, id := range enc.digit {
			p[i] = math.Exp(float64(logits[id])-maxv) / sum
		}
		return p, nil
	}
}

// engineAgent plays with the engine directly (no server), sampling at
// temperature 1: used to check a base model without serving it.
func engineAgent(m *model.Model, ad model.Adapter, enc *promptEncoder, seed uint64) tictactoe.Agent {
	return func(ctx context.Context, board string) (string, error) {
		ids, err := enc.encode(board)
		if err != nil {
			return "", err
		}
		seed++
		res, err := generate.Generate(ctx, m, generate.Request{Prompt: ids, MaxTokens: 3,
			Sampling: generate.SamplingParams{Temperature: 1}, Seed: seed, StopTokenIDs: []int{enc.end}, Adapter: ad})
		if err != nil {
			return "", err
		}
		out := res.IDs()
		if res.FinishReason == generate.FinishStop {
			out = out[:len(out)-1]
		}
		s, err := enc.tok.Decode(out)
		if err != nil {
			return "", fmt.Errorf("demo: %w", err)
		}
		return s, nil
	}
}
