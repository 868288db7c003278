package native

import (
	"container/list"
	"encoding/json"
	"slices"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/artgo/art/engine/train"
	"github.com/artgo/art/host"
)

// DefaultAnswerMemory is how many sampled token ids the server keeps of its
// recent answers (8 bytes each: 8 MiB), so that the next turn of a
// conversation is prompted with an answer's exact ids (see answers).
const DefaultAnswerMemory = 1 << 20

// answers remembers the exact token ids of recent answers by the message a
// client sends back for them (its content and tool calls). A later turn of
// the conversation is then prompted with the ids the model sampled, not
// with its text re-tokenised, which can give another split (and so other
// ids than the trainer splices). It also keeps the chat_template_kwargs the
// answer's prompt was rendered with, so the trainer renders that prompt
// alike (see templateKwargs). Memory is bounded by a number of ids; the
// least recently used answers are forgotten first. A forgotten (or edited)
// answer is re-tokenised from its text, as before: the prompt may then
// differ from the trainer's sequence, and loss/rollout_logprob_abs_diff
// shows it.
//
// Two rollouts of a group can write the same text with different ids (the
// sampler took another split of it). Keyed by text alone, the later would
// replace the earlier, and the earlier conversation's next turn would be
// prompted with the other rollout's ids: not the sequence the trainer
// builds for it, so those turns were off-policy (seen once in 200 MCP
// training steps, loss/rollout_logprob_abs_diff 0.0004). So an answer keeps
// every distinct tokenization of its text with the trajectory id its
// request carried (X-ART-Trajectory-ID, from the SDK's clients), and a
// later turn takes the one of its own trajectory; without one, the most
// recent. Safe for concurrent use.
type answers struct {
	mu    sync.Mutex
	limit int                      // most ids kept
	size  int                      // ids kept
	order *list.List               // of *answer, most recently used first
	byKey map[string]*list.Element // answerKey -> element of order
}

// answer is one answer text's tokenizations, oldest first.
type answer struct {
	key      string
	variants []variant
}

type variant struct {
	ids    []int
	kwargs map[string]any // the request's chat_template_kwargs (nil: none)
	scope  string         // the trajectory id of the request ("": none)
}

func (a *answer) size() int {
	n := 0
	for _, v := range a.variants {
		n += len(v.ids)
	}
	return n
}

// pick returns the variant of trajectory scope, or else the most recent.
func (a *answer) pick(scope string) *variant {
	if scope != "" {
		for i := range a.variants {
			if a.variants[i].scope == scope {
				return &a.variants[i]
			}
		}
	}
	return &a.variants[len(a.variants)-1]
}

func newAnswers(limit int) *answers {
	return &answers{limit: limit, order: list.New(), byKey: map[string]*list.Element{}}
}

// answerKey identifies an answer by what a client sends back for it: its
// text and its tool calls' names and arguments (call ids and formatting of
// the message object do not matter), as JSON carried them: a sampled answer
// need not be valid UTF-8, and encoding/json, which writes the server's
// answers, replaces each invalid byte with U+FFFD, so that is the text a
// client sends back (keyed by the raw bytes, such an answer was never
// found, and the next turn was prompted from re-tokenised text: off-policy,
// seen on one MCP training step).
func answerKey(content string, calls []host.ToolCall) string {
	var b strings.Builder
	writeAsJSONText(&b, content)
	for _, c := range calls {
		b.WriteString("\x00")
		writeAsJSONText(&b, c.Name)
		b.WriteString("\x00")
		writeAsJSONText(&b, c.Arguments)
	}
	return b.String()
}

// writeAsJSONText writes s as a JSON decoder gives it back after
// encoding/json wrote it: every byte that does not start a valid UTF-8
// sequence becomes U+FFFD.
func writeAsJSONText(b *strings.Builder, s string) {
	if utf8.ValidString(s) {
		b.WriteString(s)
		return
	}
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b.WriteRune(utf8.RuneError)
		} else {
			b.WriteString(s[i : i+size])
		}
		i += size
	}
}

// remember keeps the sampled ids of an answer, the template kwargs of its
// request and the trajectory id (scope) the request carried; an answer
// longer than the whole memory is not kept.
func (a *answers) remember(c host.ChatChoice, kwargs map[string]any, scope string) {
	if len(c.Tokens) == 0 || len(c.Tokens) > a.limit {
		return
	}
	ids := make([]int, len(c.Tokens))
	for i, t := range c.Tokens {
		ids[i] = t.ID
	}
	key := answerKey(c.Content, c.ToolCalls)
	a.mu.Lock()
	defer a.mu.Unlock()
	ans := &answer{key: key}
	if e, ok := a.byKey[key]; ok {
		ans = a.order.Remove(e).(*answer)
		a.size -= ans.size()
	}
	// The same ids, or the same trajectory's earlier answer: replaced.
	ans.variants = slices.DeleteFunc(ans.variants, func(v variant) bool {
		return slices.Equal(v.ids, ids) || scope != "" && v.scope == scope
	})
	ans.variants = append(ans.variants, variant{ids: ids, kwargs: kwargs, scope: scope})
	a.byKey[key] = a.order.PushFront(ans)
	a.size += ans.size()
	for a.size > a.limit {
		old := a.order.Remove(a.order.Back()).(*answer)
		delete(a.byKey, old.key)
		a.size -= old.size()
	}
}

// lookup returns the remembered tokenization of an answer for trajectory
// scope (nil if forgotten); it is not to be modified.
func (a *answers) lookup(key, scope string) *variant {
	a.mu.Lock()
	defer a.mu.Unlock()
	e, ok := a.byKey[key]
	if !ok {
		return nil
	}
	a.order.MoveToFront(e)
	return e.Value.(*answer).pick(scope)
}

// kwargsOf returns the template kwargs remembered with the tokenization
// ids of an answer (nil if none, or forgotten).
func (a *answers) kwargsOf(key string, ids []int) map[string]any {
	a.mu.Lock()
	defer a.mu.Unlock()
	e, ok := a.byKey[key]
	if !ok {
		return nil
	}
	for _, v := range e.Value.(*answer).variants {
		if slices.Equal(v.ids, ids) {
			return v.kwargs
		}
	}
	return nil
}

// turns turns a request's messages into the trainer's turns: each
// assistant message the server remembers carries its sampled ids (those of
// trajectory scope where it wrote the same text more than one way).
func (a *answers) turns(msgs []json.RawMessage, scope string) []train.Turn {
	out := make([]train.Turn, len(msgs))
	for i, m := range msgs {
		out[i] = train.Turn{Message: m}
		if key, ok := assistantKey(m); ok {
			if ans := a.lookup(key, scope); ans != nil {
				out[i].Sampled = &train.Sampled{TokenIDs: ans.ids}
			}
		}
	}
	return out
}

// templateKwargs gives each sampled turn of groups that the server
// remembers, with the same ids, the chat_template_kwargs its prompt was
// rendered with, so the trainer renders the prompt as the server did (a
// request's kwargs, such as Qwen3's enable_thinking, change the prompt).
func (a *answers) templateKwargs(groups []train.Group) {
	for _, g := range groups {
		for _, t := range g.Trajectories {
			for _, h := range t.Histories {
				for _, turn := range h.Turns {
					if turn.Sampled == nil || len(turn.Sampled.TokenIDs) == 0 {
						continue
					}
					key, ok := assistantKey(turn.Message)
					if !ok {
						continue
					}
					if kw := a.kwargsOf(key, turn.Sampled.TokenIDs); kw != nil {
						turn.Sampled.TemplateKwargs = kw
					}
				}
			}
		}
	}
}

// assistantKey is the answerKey of an assistant message; ok is false for
// other messages.
func assistantKey(m json.RawMessage) (key string, ok bool) {
	var am struct {
		Role      string  `json:"role"`
		Content   *string `json:"content"`
		ToolCalls []struct {
			Function struct {
				Name      string `json:"name"`
				Arguments string `json:"arguments"`
			} `json:"function"`
		} `json:"tool_calls"`
	}
	if json.Unmarshal(m, &am) != nil || am.Role != "assistant" {
		return "", false
	}
	var content string
	if am.Content != nil {
		content = *am.Content
	}
	calls := make([]host.ToolCall, len(am.ToolCalls))
	for j, c := range am.ToolCalls {
		calls[j] = host.ToolCall{Name: c.Function.Name, Arguments: c.Function.Arguments}
	}
	return answerKey(content, calls), true
}
