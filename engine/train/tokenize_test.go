package train

import (
	"encoding/json"
	"math"
	"slices"
	"testing"

	"github.com/artgo/art/engine/chat"
	"github.com/artgo/art/engine/tokenizer"
	"github.com/artgo/art/internal/testassets"
)

func qwenTokenizer(t testing.TB) *Tokenizer {
	t.Helper()
	dir := testassets.Dir(t, testassets.Qwen3Tokenizer)
	tok, err := tokenizer.LoadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	tmpl, err := chat.NewTemplate(chat.Qwen25Template)
	if err != nil {
		t.Fatal(err)
	}
	return &Tokenizer{Tok: tok, Template: tmpl}
}

func msg(role, content string) json.RawMessage {
	b, _ := json.Marshal(map[string]string{"role": role, "content": content})
	return b
}

// Ensure splicing exact sampled ids reproduces the normally rendered chat
// when the ids are the canonical encoding, and marks exactly those tokens.
func TestTokenize_SplicesSampledIDs(t *testing.T) {
	z := qwenTokenizer(t)
	imEnd, _ := z.Tok.ID("<|im_end|>")
	sample := func(text string) *Sampled {
		ids := append(z.Tok.Encode(text), imEnd)
		lps := make([]float64, len(ids))
		for i := range lps {
			lps[i] = -0.1 * float64(i+1)
		}
		return &Sampled{TokenIDs: ids, Logprobs: lps}
	}
	first, second := sample("Hello there! 123"), sample("Fine, thanks.")
	h := History{Turns: []Turn{
		{Message: msg("system", "You are terse.")},
		{Message: msg("user", "Hi")},
		{Message: msg("assistant", "Hello there! 123"), Sampled: first},
		{Message: msg("user", "How are you?")},
		{Message: msg("assistant", "Fine, thanks."), Sampled: second},
		{Message: msg("user", "trailing context is cut")},
	}}
	seq, ok, err := z.Tokenize(h)
	if err != nil || !ok {
		t.Fatalf("Tokenize: ok=%v err=%v", ok, err)
	}
	full, err := z.Template.Render([]json.RawMessage{h.Turns[0].Message, h.Turns[1].Message, h.Turns[2].Message, h.Turns[3].Message, h.Turns[4].Message}, nil, chat.RenderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := z.Tok.Encode(full)
	// The template ends the final turn with "<|im_end|>\n"; the sampled
	// sequence stops at the sampled <|im_end|>.
	if got := seq.Tokens; !slices.Equal(got, want[:len(got)]) || len(want)-len(got) > 1 {
		t.Fatalf("tokens differ from the rendered chat:\n got %v\nwant %v", got, want)
	}
	var gotSampled []int
	var gotLp []float64
	for i, s := range seq.Sampled {
		if s {
			gotSampled = append(gotSampled, seq.Tokens[i])
			gotLp = append(gotLp, seq.OldLogprobs[i])
		} else if !math.IsNaN(seq.OldLogprobs[i]) {
			t.Fatalf("context token %d has logprob %v", i, seq.OldLogprobs[i])
		}
	}
	wantSampled := append(slices.Clone(first.TokenIDs), second.TokenIDs...)
	if !slices.Equal(gotSampled, wantSampled) {
		t.Fatalf("sampled tokens %v; want %v", gotSampled, wantSampled)
	}
	if !slices.Equal(gotLp, append(slices.Clone(first.Logprobs), second.Logprobs...)) {
		t.Fatalf("sampled logprobs %v", gotLp)
	}
}

// Ensure sampled ids are spliced verbatim even when they are not how the
// tokenizer would encode the text (the server's ids are the truth).
func TestTokenize_KeepsNonCanonicalIDs(t *testing.T) {
	z := qwenTokenizer(t)
	odd := []int{}
	for _, piece := range []string{"H", "el", "lo"} {
		odd = append(odd, z.Tok.Encode(piece)...)
	}
	h := History{Turns: []Turn{{Message: msg("user", "x")}, {Message: msg("assistant", "Hello"), Sampled: &Sampled{TokenIDs: odd}}}}
	seq, _, err := z.Tokenize(h)
	if err != nil {
		t.Fatal(err)
	}
	var got []int
	for i, s := range seq.Sampled {
		if s {
			got = append(got, seq.Tokens[i])
		}
	}
	if !slices.Equal(got, odd) {
		t.Fatalf("sampled %v; want %v", got, odd)
	}
	if _, ok, _ := z.Tokenize(History{Turns: []Turn{{Message: msg("user", "x")}}}); ok {
		t.Fatal("history without sampled turns should give ok=false")
	}
}
