package train

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
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

// Tokenize turns a history into the sequences that train its sampled
// turns, true to what the sampler saw: each sampled turn's exact token ids
// follow exactly the prompt it was generated from, the turns before it
// rendered with the chat template and its generation prompt as a server
// renders them (EncodePrompt, with each earlier sampled turn's ids spliced
// in place of a sentinel token). Sampled text is never re-tokenised.
//
// Usually every turn's prompt is a prefix of the last one's, and the
// history is one sequence: the last sampled turn's prompt and ids, the
// earlier turns trained where they sit inside that prompt. A template that
// renders a finished turn unlike the prompt that produced it (Qwen3 with
// enable_thinking=false ends a prompt with an empty <think> block that it
// drops from earlier turns) breaks the chain; a turn whose prompt is not a
// prefix is then trained in a sequence of its own, so no turn is trained
// on a context it was not sampled from. The conversation's rendering as a
// whole is not used: templates render an assistant turn unlike its prompt
// (Qwen3 gives the last one an empty <think> block, Llama 2 chat puts a
// space before each), which would put tokens between a turn's prompt and
// its ids that the sampler never saw.
// Each turn's prompt is rendered, as the server rendered it to sample the
// turn, so a history costs one render per sampled turn. A history without
// sampled turns gives no sequences.
func (z *Tokenizer) Tokenize(h History) ([]Sequence, error) {
	var turns []int // indexes of the sampled turns
	for i, t := range h.Turns {
		if t.Sampled != nil {
			turns = append(turns, i)
		}
	}
	if len(turns) == 0 {
		return nil, nil
	}
	last := turns[len(turns)-1]
	// The whole conversation up to its last sampled turn supplies each
	// turn's span (ids, and the closing token a LearnEnd turn learns) and
	// what follows the last one; each turn's own prompt supplies the rest.
	full, fullSpans, err := z.splice(h.Turns[:last+1], h.Tools, z.Render)
	if err != nil {
		return nil, err
	}
	opts := z.Render
	opts.AddGenerationPrompt = true
	prompts := make([]Sequence, len(turns))
	promptSpans := make([][]span, len(turns))
	for k, i := range turns {
		o := opts
		if kw := h.Turns[i].Sampled.TemplateKwargs; kw != nil {
			o.Kwargs = kw
		}
		if prompts[k], promptSpans[k], err = z.splice(h.Turns[:i], h.Tools, o); err != nil {
			return nil, err
		}
	}
	trained := make([]bool, len(turns))
	var out []Sequence
	for j := len(turns) - 1; j >= 0; j-- {
		if trained[j] {
			continue
		}
		trained[j] = true
		seq := prompts[j].clone()
		// Earlier turns train here when this prompt extends theirs exactly;
		// the others become context here and train in their own sequence.
		for _, sp := range promptSpans[j] {
			k := slices.Index(turns, sp.turn)
			if !trained[k] && sp.start == len(prompts[k].Tokens) && slices.Equal(seq.Tokens[:sp.start], prompts[k].Tokens) {
				trained[k] = true
				continue
			}
			for t := sp.start; t < sp.end; t++ {
				seq.Sampled[t], seq.OldLogprobs[t], seq.Policy[t] = false, math.NaN(), ""
			}
		}
		from, to := fullSpans[j].start, fullSpans[j].end
		if j == len(turns)-1 {
			to = len(full.Tokens) // keep the template's tail, as before
		}
		seq.appendRange(full, from, to)
		if len(seq.Tokens) == 0 || seq.Sampled[0] {
			return nil, fmt.Errorf("train: a sampled turn starts the sequence; nothing precedes it to predict from")
		}
		out = append(out, seq)
	}
	return out, nil
}

// EncodePrompt returns the prompt ids a server generates the next turn of
// a conversation from: the turns rendered with the chat template and its
// generation prompt, each turn with Sampled ids spliced in exactly as
// Tokenize splices them. The prompt of a later turn is therefore a prefix
// of the sequence the trainer builds for it (the earlier answers keep the
// token split they were sampled with); turns without Sampled ids are
// encoded from their text. kwargs are the request's chat_template_kwargs
// (nil: the trainer's own).
func (z *Tokenizer) EncodePrompt(turns []Turn, tools []json.RawMessage, kwargs map[string]any) ([]int, error) {
	opts := z.Render
	if kwargs != nil {
		opts.Kwargs = kwargs
	}
	opts.AddGenerationPrompt = true
	seq, _, err := z.splice(turns, tools, opts)
	if err != nil {
		return nil, err
	}
	return seq.Tokens, nil
}

// span is where a sampled turn's tokens sit in a spliced sequence:
// Tokens[start:end] (its ids, plus the closing token a LearnEnd turn
// learns) come from turns[turn].
type span struct{ turn, start, end int }

// clone returns a copy of s whose slices can be changed and appended to.
func (s Sequence) clone() Sequence {
	s.Tokens = slices.Clone(s.Tokens)
	s.Sampled = slices.Clone(s.Sampled)
	s.OldLogprobs = slices.Clone(s.OldLogprobs)
	s.Policy = slices.Clone(s.Policy)
	return s
}

// appendRange appends positions [from, to) of src.
func (s *Sequence) appendRange(src Sequence, from, to int) {
	s.Tokens = append(s.Tokens, src.Tokens[from:to]...)
	s.Sampled = append(s.Sampled, src.Sampled[from:to]...)
	s.OldLogprobs = append(s.OldLogprobs, src.OldLogprobs[from:to]...)
	s.Policy = append(s.Policy, src.Policy[from:to]...)
}

// push appends one position.
func (s *Sequence) push(id int, sampled bool, lp float64, policy string) {
	s.Tokens = append(s.Tokens, id)
	s.Sampled = append(s.Sampled, sampled)
	s.OldLogprobs = append(s.OldLogprobs, lp)
	s.Policy = append(s.Policy, policy)
}

// splice renders turns with opts, every turn with Sampled set rendered as
// a sentinel token, and replaces each sentinel with the turn's ids. It
// returns where each sampled turn's tokens went, in order.
func (z *Tokenizer) splice(turns []Turn, tools []json.RawMessage, opts chat.RenderOptions) (Sequence, []span, error) {
	var sentinel string
	sentinelID := -1
	msgs := make([]json.RawMessage, len(turns))
	var sampled []*Sampled
	var turnOf []int // turnOf[k] is the index in turns of sampled[k]
	for i, t := range turns {
		if t.Sampled == nil {
			msgs[i] = t.Message
			continue
		}
		if sentinelID < 0 {
			var err error
			if sentinel, sentinelID, err = z.pickSentinel(turns); err != nil {
				return Sequence{}, nil, err
			}
		}
		smp := t.Sampled
		if len(smp.TokenIDs) == 0 {
			// A trainable turn without sampled ids (SFT, or training
			// without logprobs): learn its text as the tokenizer encodes it.
			text, err := z.learnText(turns[:i], t.Message, tools)
			if err != nil {
				return Sequence{}, nil, fmt.Errorf("train: turn %d: %w", i, err)
			}
			smp = &Sampled{TokenIDs: z.Tok.Encode(text), LearnEnd: true}
		}
		if len(smp.Logprobs) != 0 && len(t.Sampled.Logprobs) != len(t.Sampled.TokenIDs) {
			return Sequence{}, nil, fmt.Errorf("train: turn %d has %d token ids but %d logprobs", i, len(smp.TokenIDs), len(smp.Logprobs))
		}
		// The sampled tokens already hold the content and any tool-call
		// text, so render the turn as the bare sentinel.
		b, err := json.Marshal(map[string]string{"role": "assistant", "content": sentinel})
		if err != nil {
			return Sequence{}, nil, err
		}
		msgs[i] = b
		sampled = append(sampled, smp)
		turnOf = append(turnOf, i)
	}
	text, err := z.template(tools).Render(msgs, tools, opts)
	if err != nil {
		return Sequence{}, nil, fmt.Errorf("train: render chat: %w", err)
	}
	ids := z.Tok.Encode(text)
	var out Sequence
	var spans []span
	k := 0
	for i := 0; i < len(ids); i++ {
		if ids[i] != sentinelID {
			out.push(ids[i], false, math.NaN(), "")
			continue
		}
		if k == len(sampled) {
			return Sequence{}, nil, fmt.Errorf("train: the chat template rendered more sentinels than sampled turns")
		}
		s := sampled[k]
		sp := span{turn: turnOf[k], start: len(out.Tokens)}
		k++
		for j, id := range s.TokenIDs {
			lp := math.NaN()
			if len(s.Logprobs) > 0 {
				lp = s.Logprobs[j]
			}
			out.push(id, true, lp, s.Policy)
		}
		switch {
		case s.LearnEnd && i+1 < len(ids):
			i++
			out.push(ids[i], true, math.NaN(), "")
		case i+1 < len(ids) && ids[i+1] == s.TokenIDs[len(s.TokenIDs)-1]:
			// A turn that ended with its stop token (e.g. <|im_end|>) would
			// see it again from the template: keep the sampled one only.
			i++
		}
		sp.end = len(out.Tokens)
		spans = append(spans, sp)
	}
	if k != len(sampled) {
		return Sequence{}, nil, fmt.Errorf("train: the chat template dropped %d of %d sampled turns (does it render assistant content?)", len(sampled)-k, len(sampled))
	}
	return out, spans, nil
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
