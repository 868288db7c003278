package train

import (
	"encoding/json"
	"fmt"
	"math"
	"strings"

	"github.com/artgo/art/engine/chat"
	"github.com/artgo/art/engine/tokenizer"
)

// Sequence is one tokenised history ready for the loss.
type Sequence struct {
	Tokens []int
	// Sampled[t] is true when Tokens[t] was sampled by the policy; those are
	// the tokens that train (predicted from position t-1).
	Sampled []bool
	// OldLogprobs[t] is the sampling-time log probability of Tokens[t]
	// (NaN for unknown or non-sampled positions).
	OldLogprobs []float64
	// OrigLogprobs keeps the sampling-time logprobs when OldLogprobs were
	// recomputed by the trainer (Config.PrecalculateLogprobs); nil otherwise.
	OrigLogprobs []float64
	// Policy[t] names the weights that sampled Tokens[t] ("" when unknown
	// or not sampled); see Config.Policy.
	Policy    []string
	Advantage float64 // shared by the trajectory's histories
	Weight    float64 // per-token loss weight
	Traj      int     // index of the trajectory in the step
	Name      string
}

// NumSampled counts the trainable tokens.
func (s *Sequence) NumSampled() int {
	n := 0
	for _, b := range s.Sampled {
		if b {
			n++
		}
	}
	return n
}

// Tokenizer renders histories with a chat template and tokenises them.
type Tokenizer struct {
	Tok      *tokenizer.Tokenizer
	Template *chat.Template
	// ToolTemplate, if set, renders histories that offer tools (some models
	// ship a separate "tool_use" template); the server must pick the same.
	ToolTemplate *chat.Template
	Render       chat.RenderOptions // bos/eos tokens and chat_template_kwargs
}

// template returns the template that renders a history with tools.
func (z *Tokenizer) template(tools []json.RawMessage) *chat.Template {
	if len(tools) > 0 && z.ToolTemplate != nil {
		return z.ToolTemplate
	}
	return z.Template
}

// Tokenize turns a history into a sequence: it renders the conversation up
// to its last sampled turn with the chat template, with every sampled turn's
// content replaced by a sentinel token, and splices each turn's exact
// sampled token ids in place of its sentinel. Sampled text is never
// re-tokenised, so the ids are exactly those the server produced. A history
// without sampled turns gives ok == false.
func (z *Tokenizer) Tokenize(h History) (seq Sequence, ok bool, err error) {
	last := -1
	for i, t := range h.Turns {
		if t.Sampled != nil {
			last = i
		}
	}
	if last < 0 {
		return Sequence{}, false, nil
	}
	out, err := z.splice(h.Turns[:last+1], h.Tools, z.Render)
	if err != nil {
		return Sequence{}, false, err
	}
	if out.Sampled[0] {
		return Sequence{}, false, fmt.Errorf("train: a sampled turn starts the sequence; nothing precedes it to predict from")
	}
	return out, true, nil
}

// EncodePrompt returns the prompt ids a server generates the next turn of
// a conversation from: the turns rendered with the chat template and its
// generation prompt, each turn with Sampled ids spliced in exactly as
// Tokenize splices them. The prompt of a later turn is therefore a prefix
// of the sequence the trainer builds for the whole conversation (the
// earlier answers keep the token split they were sampled with); turns
// without Sampled ids are encoded from their text. kwargs are the
// request's chat_template_kwargs (nil: the trainer's own).
func (z *Tokenizer) EncodePrompt(turns []Turn, tools []json.RawMessage, kwargs map[string]any) ([]int, error) {
	opts := z.Render
	if kwargs != nil {
		opts.Kwargs = kwargs
	}
	opts.AddGenerationPrompt = true
	seq, err := z.splice(turns, tools, opts)
	if err != nil {
		return nil, err
	}
	return seq.Tokens, nil
}

// splice renders turns with opts, every turn with Sampled set rendered as
// a sentinel token, and replaces each sentinel with the turn's ids.
func (z *Tokenizer) splice(turns []Turn, tools []json.RawMessage, opts chat.RenderOptions) (Sequence, error) {
	var sentinel string
	sentinelID := -1
	msgs := make([]json.RawMessage, len(turns))
	var sampled []*Sampled
	for i, t := range turns {
		if t.Sampled == nil {
			msgs[i] = t.Message
			continue
		}
		if sentinelID < 0 {
			var err error
			if sentinel, sentinelID, err = z.pickSentinel(turns); err != nil {
				return Sequence{}, err
			}
		}
		smp := t.Sampled
		if len(smp.TokenIDs) == 0 {
			// A trainable turn without sampled ids (SFT, or training
			// without logprobs): learn its text as the tokenizer encodes it.
			text, err := z.learnText(turns[:i], t.Message, tools)
			if err != nil {
				return Sequence{}, fmt.Errorf("train: turn %d: %w", i, err)
			}
			smp = &Sampled{TokenIDs: z.Tok.Encode(text), LearnEnd: true}
		}
		if len(smp.Logprobs) != 0 && len(t.Sampled.Logprobs) != len(t.Sampled.TokenIDs) {
			return Sequence{}, fmt.Errorf("train: turn %d has %d token ids but %d logprobs", i, len(smp.TokenIDs), len(smp.Logprobs))
		}
		// The sampled tokens already hold the content and any tool-call
		// text, so render the turn as the bare sentinel.
		b, err := json.Marshal(map[string]string{"role": "assistant", "content": sentinel})
		if err != nil {
			return Sequence{}, err
		}
		msgs[i] = b
		sampled = append(sampled, smp)
	}
	text, err := z.template(tools).Render(msgs, tools, opts)
	if err != nil {
		return Sequence{}, fmt.Errorf("train: render chat: %w", err)
	}
	ids := z.Tok.Encode(text)
	var out Sequence
	k := 0
	for i := 0; i < len(ids); i++ {
		if ids[i] != sentinelID {
			out.Tokens = append(out.Tokens, ids[i])
			out.Sampled = append(out.Sampled, false)
			out.OldLogprobs = append(out.OldLogprobs, math.NaN())
			out.Policy = append(out.Policy, "")
			continue
		}
		if k == len(sampled) {
			return Sequence{}, fmt.Errorf("train: the chat template rendered more sentinels than sampled turns")
		}
		s := sampled[k]
		k++
		for j, id := range s.TokenIDs {
			out.Tokens = append(out.Tokens, id)
			out.Sampled = append(out.Sampled, true)
			lp := math.NaN()
			if len(s.Logprobs) > 0 {
				lp = s.Logprobs[j]
			}
			out.OldLogprobs = append(out.OldLogprobs, lp)
			out.Policy = append(out.Policy, s.Policy)
		}
		switch {
		case s.LearnEnd && i+1 < len(ids):
			i++
			out.Tokens = append(out.Tokens, ids[i])
			out.Sampled = append(out.Sampled, true)
			out.OldLogprobs = append(out.OldLogprobs, math.NaN())
			out.Policy = append(out.Policy, "")
		case i+1 < len(ids) && ids[i+1] == s.TokenIDs[len(s.TokenIDs)-1]:
			// A turn that ended with its stop token (e.g. <|im_end|>) would
			// see it again from the template: keep the sampled one only.
			i++
		}
	}
	if k != len(sampled) {
		return Sequence{}, fmt.Errorf("train: the chat template dropped %d of %d sampled turns (does it render assistant content?)", len(sampled)-k, len(sampled))
	}
	return out, nil
}

// learnText returns the text an assistant turn without sampled ids teaches:
// its content, or, when it calls tools, the turn exactly as the chat
// template renders it after the preceding turns (content and tool-call
// markup, up to the end-of-turn token, which is learned separately).
func (z *Tokenizer) learnText(prev []Turn, msg json.RawMessage, tools []json.RawMessage) (string, error) {
	var m struct {
		Role      string          `json:"role"`
		Content   *string         `json:"content"`
		ToolCalls json.RawMessage `json:"tool_calls"`
	}
	if err := json.Unmarshal(msg, &m); err != nil {
		return "", fmt.Errorf("decode message: %w", err)
	}
	if m.Role != "assistant" {
		return "", fmt.Errorf("only assistant turns can be trained, got role %q", m.Role)
	}
	if len(m.ToolCalls) == 0 || string(m.ToolCalls) == "null" || string(m.ToolCalls) == "[]" {
		if m.Content == nil || *m.Content == "" {
			return "", fmt.Errorf("assistant turn has no text content to learn")
		}
		return *m.Content, nil
	}
	if z.Render.EOSToken == "" {
		return "", fmt.Errorf("learning a turn with tool calls needs the template's end-of-turn token (eos_token)")
	}
	msgs := make([]json.RawMessage, 0, len(prev)+1)
	for _, t := range prev {
		msgs = append(msgs, t.Message)
	}
	opt := z.Render
	opt.AddGenerationPrompt = true
	head, err := z.template(tools).Render(msgs, tools, opt)
	if err != nil {
		return "", fmt.Errorf("render chat: %w", err)
	}
	opt.AddGenerationPrompt = false
	full, err := z.template(tools).Render(append(msgs, msg), tools, opt)
	if err != nil {
		return "", fmt.Errorf("render chat: %w", err)
	}
	rest, ok := strings.CutPrefix(full, head)
	if !ok {
		return "", fmt.Errorf("the chat template renders earlier turns differently once the tool-call turn follows; cannot isolate the turn to learn")
	}
	text, _, ok := strings.Cut(rest, z.Render.EOSToken)
	if !ok || text == "" {
		return "", fmt.Errorf("the chat template rendered the tool-call turn without content or end token %q", z.Render.EOSToken)
	}
	return text, nil
}

// pickSentinel chooses an added (special) token that the conversation does
// not contain, so it survives rendering and tokenisation as one id.
func (z *Tokenizer) pickSentinel(turns []Turn) (string, int, error) {
	added := z.Tok.AddedTokens()
	for i := len(added) - 1; i >= 0; i-- {
		a := added[i]
		if !a.Special || a.LStrip || a.RStrip || a.Content == "" {
			continue
		}
		if z.Render.BOSToken == a.Content || z.Render.EOSToken == a.Content {
			continue
		}
		used := false
		for _, t := range turns {
			if strings.Contains(string(t.Message), a.Content) {
				used = true
				break
			}
		}
		if !used && !templateMentions(z.Template, a.Content) && (z.ToolTemplate == nil || !templateMentions(z.ToolTemplate, a.Content)) {
			return a.Content, a.ID, nil
		}
	}
	return "", 0, fmt.Errorf("train: no unused special token to mark sampled turns with")
}

func templateMentions(t *chat.Template, s string) bool {
	return strings.Contains(t.Source(), s)
}
