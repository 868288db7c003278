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

// oneSequence returns a check that a history tokenised into exactly one
// sequence, and that sequence: oneSequence(t)(z.Tokenize(h)).
func oneSequence(t testing.TB) func([]Sequence, error) Sequence {
	return func(seqs []Sequence, err error) Sequence {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		if len(seqs) != 1 {
			t.Fatalf("%d sequences; want 1", len(seqs))
		}
		return seqs[0]
	}
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
	seq := oneSequence(t)(z.Tokenize(h))
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
	seq := oneSequence(t)(z.Tokenize(h))
	var got []int
	for i, s := range seq.Sampled {
		if s {
			got = append(got, seq.Tokens[i])
		}
	}
	if !slices.Equal(got, odd) {
		t.Fatalf("sampled %v; want %v", got, odd)
	}
	if seqs, err := z.Tokenize(History{Turns: []Turn{{Message: msg("user", "x")}}}); len(seqs) != 0 || err != nil {
		t.Fatalf("history without sampled turns gave %d sequences, %v; want none", len(seqs), err)
	}
}

// Ensure an SFT turn that calls tools learns the turn as the template
// renders it (tool-call markup and the end token), and that histories with
// tools are rendered with the tool template when there is one.
func TestTokenize_LearnsToolCallTurns(t *testing.T) {
	z := qwenTokenizer(t)
	z.Render.EOSToken = "<|im_end|>"
	tool := json.RawMessage(`{"type":"function","function":{"name":"calc","parameters":{"type":"object"}}}`)
	call := json.RawMessage(`{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"calc","arguments":"{\"e\": \"1+1\"}"}}]}`)
	h := History{Tools: []json.RawMessage{tool}, Turns: []Turn{
		{Message: msg("user", "1+1?")},
		{Message: call, Sampled: &Sampled{}},
	}}
	seq := oneSequence(t)(z.Tokenize(h))
	var learned []int
	for i, s := range seq.Sampled {
		if s {
			learned = append(learned, seq.Tokens[i])
		}
	}
	want := z.Tok.Encode("<tool_call>\n{\"name\": \"calc\", \"arguments\": {\"e\": \"1+1\"}}\n</tool_call><|im_end|>")
	if !slices.Equal(learned, want) {
		t.Fatalf("learned %q; want %q", decode(t, z, learned), decode(t, z, want))
	}

	// A separate tool template is used for histories with tools only.
	marked, err := chat.NewTemplate(`TOOLS{% for m in messages %}<|im_start|>{{ m.role }}
{{ m.content }}<|im_end|>
{% endfor %}`)
	if err != nil {
		t.Fatal(err)
	}
	z.ToolTemplate = marked
	plain := History{Tools: []json.RawMessage{tool}, Turns: []Turn{{Message: msg("user", "hi")}, {Message: msg("assistant", "yo"), Sampled: &Sampled{}}}}
	seq = oneSequence(t)(z.Tokenize(plain))
	if got := decode(t, z, seq.Tokens); got[:5] != "TOOLS" {
		t.Errorf("a history with tools rendered %q; want the tool template", got)
	}
	plain.Tools = nil
	if seq = oneSequence(t)(z.Tokenize(plain)); decode(t, z, seq.Tokens)[:5] == "TOOLS" {
		t.Error("a history without tools used the tool template")
	}
}

func decode(t *testing.T, z *Tokenizer, ids []int) string {
	t.Helper()
	s, err := z.Tok.Decode(ids)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// Ensure the prompt a server builds for a later turn with EncodePrompt is
// exactly a prefix of the sequence the trainer builds for the whole
// conversation, with the earlier answer's ids as sampled even when they
// are a split the tokenizer would not produce (re-encoding the answer's
// text would give other ids and break the prefix), for the Qwen2.5
// template and the Qwen3 tokenizer's own.
func TestEncodePrompt_PrefixOfTrainingSequence(t *testing.T) {
	z := qwenTokenizer(t)
	cfg, err := chat.LoadConfig(testassets.Dir(t, testassets.Qwen3Tokenizer))
	if err != nil {
		t.Fatal(err)
	}
	src, err := cfg.TemplateSource(false)
	if err != nil {
		t.Fatal(err)
	}
	qwen3, err := chat.NewTemplate(src)
	if err != nil {
		t.Fatal(err)
	}
	imEnd, _ := z.Tok.ID("<|im_end|>")
	var odd []int
	for _, piece := range []string{"H", "el", "lo", " wor", "ld"} {
		odd = append(odd, z.Tok.Encode(piece)...)
	}
	if canonical := z.Tok.Encode("Hello world"); slices.Equal(canonical, odd) {
		t.Fatalf("the split %v is canonical; the test needs one the tokenizer would not produce", odd)
	}
	first := &Sampled{TokenIDs: append(odd, imEnd)}
	second := &Sampled{TokenIDs: append(z.Tok.Encode("Fine."), imEnd)}
	for name, tmpl := range map[string]*chat.Template{"qwen2.5": z.Template, "qwen3": qwen3} {
		t.Run(name, func(t *testing.T) {
			z := &Tokenizer{Tok: z.Tok, Template: tmpl}
			turns := []Turn{
				{Message: msg("system", "Be brief.")},
				{Message: msg("user", "Say hello.")},
				{Message: msg("assistant", "Hello world"), Sampled: first},
				{Message: msg("user", "How are you?")},
			}
			prompt, err := z.EncodePrompt(turns, nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			seq := oneSequence(t)(z.Tokenize(History{Turns: append(turns, Turn{Message: msg("assistant", "Fine."), Sampled: second})}))
			if len(prompt) >= len(seq.Tokens) || !slices.Equal(seq.Tokens[:len(prompt)], prompt) {
				t.Fatalf("prompt is not a prefix of the training sequence:\nprompt %v\ntrain  %v", prompt, seq.Tokens)
			}
			var after []int
			for i := len(prompt); i < len(seq.Tokens); i++ {
				if seq.Sampled[i] {
					after = append(after, seq.Tokens[i])
				}
			}
			if !slices.Equal(after, second.TokenIDs) {
				t.Fatalf("after the prompt the trainer samples %v; want the second answer's ids %v", after, second.TokenIDs)
			}
			if !slices.Contains(seq.Sampled[:len(prompt)], true) {
				t.Fatal("the first answer is not marked sampled inside the prompt")
			}
			// Without its ids the answer is re-encoded from its text: no
			// longer a prefix (what happens when the server forgot it).
			turns[2].Sampled = nil
			plain, err := z.EncodePrompt(turns, nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			if len(plain) <= len(seq.Tokens) && slices.Equal(seq.Tokens[:len(plain)], plain) {
				t.Fatal("the re-encoded prompt is a prefix too: the split tests nothing")
			}
		})
	}
}
