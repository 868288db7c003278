package train

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/artgo/art/engine/chat"
	"github.com/artgo/art/engine/tokenizer"
	"github.com/artgo/art/internal/testassets"
)

// realTokenizer loads a real tokenizer with the chat template src, or the
// one its tokenizer_config.json ships when src is "".
func realTokenizer(t *testing.T, asset, src string) *Tokenizer {
	t.Helper()
	dir := testassets.Dir(t, asset)
	tok, err := tokenizer.LoadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := chat.LoadConfig(dir)
	if err != nil {
		t.Fatal(err)
	}
	if src == "" {
		if src, err = cfg.TemplateSource(false); err != nil {
			t.Fatal(err)
		}
	}
	tmpl, err := chat.NewTemplate(src)
	if err != nil {
		t.Fatal(err)
	}
	return &Tokenizer{Tok: tok, Template: tmpl, Render: chat.RenderOptions{BOSToken: cfg.BOSToken, EOSToken: cfg.EOSToken}}
}

// checkEachTurnOnItsPrompt asserts true on-policy tokenisation: every
// sampled turn of h is trained exactly once, on exactly its sampled ids,
// and the tokens before them in the sequence that trains it are exactly
// the prompt the server generated it from (EncodePrompt of the turns
// before it). It returns the sequences.
func checkEachTurnOnItsPrompt(t *testing.T, z *Tokenizer, h History) []Sequence {
	t.Helper()
	seqs, err := z.Tokenize(h)
	if err != nil {
		t.Fatal(err)
	}
	trained := 0
	for i, turn := range h.Turns {
		if turn.Sampled == nil {
			continue
		}
		prompt, err := z.EncodePrompt(h.Turns[:i], h.Tools, nil)
		if err != nil {
			t.Fatal(err)
		}
		found := 0
		for _, s := range seqs {
			at := len(prompt)
			if at+len(turn.Sampled.TokenIDs) > len(s.Tokens) || !slices.Equal(s.Tokens[:at], prompt) ||
				!slices.Equal(s.Tokens[at:at+len(turn.Sampled.TokenIDs)], turn.Sampled.TokenIDs) {
				continue
			}
			if !allTrue(s.Sampled[at : at+len(turn.Sampled.TokenIDs)]) {
				continue
			}
			found++
		}
		if found != 1 {
			for si, s := range seqs {
				t.Logf("sequence %d: %q", si, decodeMarked(t, z, s))
			}
			p, _ := z.Tok.Decode(prompt)
			t.Fatalf("turn %d: trained on its prompt %d times; want exactly once. Its prompt:\n%q", i, found, p)
		}
		trained += len(turn.Sampled.TokenIDs)
	}
	total := 0
	for _, s := range seqs {
		total += s.NumSampled()
	}
	if total != trained {
		t.Fatalf("%d tokens marked sampled across the sequences; the turns sampled %d", total, trained)
	}
	return seqs
}

func allTrue(b []bool) bool {
	for _, v := range b {
		if !v {
			return false
		}
	}
	return true
}

// decodeMarked shows a sequence with its sampled tokens in [[...]].
func decodeMarked(t *testing.T, z *Tokenizer, s Sequence) string {
	out := ""
	for i := 0; i < len(s.Tokens); {
		j := i
		for j < len(s.Tokens) && s.Sampled[j] == s.Sampled[i] {
			j++
		}
		text, err := z.Tok.Decode(s.Tokens[i:j])
		if err != nil {
			t.Fatal(err)
		}
		if s.Sampled[i] {
			text = "[[" + text + "]]"
		}
		out += text
		i = j
	}
	return out
}

// Ensure Qwen3 trains on policy with its own chat template (issue #22):
// the template renders the last assistant turn of a conversation with a
// <think> block (empty when the turn has no reasoning) that the prompt the
// turn was sampled from did not have, so a turn's tokens must be trained
// after its prompt, not after the template's rendering of the whole
// conversation. Covered: a plain answer, an answer that thought, a
// tool-calling turn followed by a tool result, and enable_thinking=false,
// whose prompts end in an empty <think> block that the template drops from
// earlier turns (those turns are then trained in their own sequence).
func TestTokenize_Qwen3TrainsEachTurnOnItsPrompt(t *testing.T) {
	z := realTokenizer(t, testassets.Qwen3Tokenizer, "")
	imEnd, _ := z.Tok.ID("<|im_end|>")
	sampled := func(text string) *Sampled {
		ids := append(z.Tok.Encode(text), imEnd)
		lps := make([]float64, len(ids))
		for i := range lps {
			lps[i] = -0.01 * float64(i+1)
		}
		return &Sampled{TokenIDs: ids, Logprobs: lps}
	}
	tool := json.RawMessage(`{"type":"function","function":{"name":"calc","parameters":{"type":"object"}}}`)
	callText := "<tool_call>\n{\"name\": \"calc\", \"arguments\": {\"e\": \"6*7\"}}\n</tool_call>"
	call := json.RawMessage(`{"role":"assistant","content":"","tool_calls":[{"id":"c1","type":"function","function":{"name":"calc","arguments":"{\"e\": \"6*7\"}"}}]}`)
	histories := map[string]History{
		"one_answer": {Turns: []Turn{
			{Message: msg("user", "Hi")},
			{Message: msg("assistant", "Hello!"), Sampled: sampled("Hello!")},
		}},
		"multi_turn_thinking": {Turns: []Turn{
			{Message: msg("system", "Be brief.")},
			{Message: msg("user", "Say hello.")},
			{Message: msg("assistant", "<think>\nEasy.\n</think>\n\nHello world"), Sampled: sampled("<think>\nEasy.\n</think>\n\nHello world")},
			{Message: msg("user", "How are you?")},
			{Message: msg("assistant", "<think>\nBe kind.\n</think>\n\nFine."), Sampled: sampled("<think>\nBe kind.\n</think>\n\nFine.")},
		}},
		"tool_call": {Tools: []json.RawMessage{tool}, Turns: []Turn{
			{Message: msg("user", "What is 6*7?")},
			{Message: call, Sampled: sampled(callText)},
			{Message: json.RawMessage(`{"role":"tool","tool_call_id":"c1","content":"42"}`)},
			{Message: msg("assistant", "42."), Sampled: sampled("42.")},
		}},
	}
	for name, h := range histories {
		t.Run(name, func(t *testing.T) {
			seqs := checkEachTurnOnItsPrompt(t, z, h)
			if len(seqs) != 1 {
				t.Fatalf("%d sequences; the turns' prompts extend each other, so want one", len(seqs))
			}
		})
	}
	t.Run("enable_thinking_false", func(t *testing.T) {
		z := *z
		z.Render.Kwargs = map[string]any{"enable_thinking": false}
		seqs := checkEachTurnOnItsPrompt(t, &z, histories["tool_call"])
		if len(seqs) != 2 {
			t.Fatalf("%d sequences; want 2 (the first turn's prompt is not a prefix of the second's)", len(seqs))
		}
	})
}

// Ensure the [INST] templates of Llama 2 chat and Mistral Instruct (golden
// in engine/chat) train each turn on its prompt too, with the Llama 2
// SentencePiece tokenizer. Llama 2's template writes an answer after
// "[/INST]" with a leading space that the prompt, which ends at "[/INST]",
// did not have, so each of its turns trains in its own sequence; Mistral's
// renders an answer right after "[/INST]", as prompted: one sequence.
func TestTokenize_InstTemplatesTrainEachTurnOnItsPrompt(t *testing.T) {
	for _, c := range []struct {
		template string
		seqs     int
	}{{"llama2_chat", 2}, {"mistral_instruct", 1}} {
		t.Run(c.template, func(t *testing.T) {
			src, err := os.ReadFile(filepath.Join("..", "chat", "testdata", "templates", c.template+".jinja"))
			if err != nil {
				t.Fatal(err)
			}
			z := realTokenizer(t, testassets.Llama2Tokenizer, string(src))
			z.Render = chat.RenderOptions{BOSToken: "<s>", EOSToken: "</s>"}
			eos, _ := z.Tok.ID("</s>")
			sampled := func(text string) *Sampled { return &Sampled{TokenIDs: append(z.Tok.Encode(text), eos)} }
			h := History{Turns: []Turn{
				{Message: msg("user", "Say hello.")},
				{Message: msg("assistant", "Hello world"), Sampled: sampled("Hello world")},
				{Message: msg("user", "How are you?")},
				{Message: msg("assistant", "Fine."), Sampled: sampled("Fine.")},
			}}
			if seqs := checkEachTurnOnItsPrompt(t, z, h); len(seqs) != c.seqs {
				t.Fatalf("%d sequences; want %d", len(seqs), c.seqs)
			}
		})
	}
}
