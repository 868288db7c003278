package native

import (
	"container/list"
	"encoding/json"
	"slices"
	"strings"
	"sync"

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
// shows it. Safe for concurrent use.
type answers struct {
	mu    sync.Mutex
	limit int                      // most ids kept
	size  int                      // ids kept
	order *list.List               // of *answer, most recently used first
	byKey map[string]*list.Element // answerKey -> element of order
}

type answer struct {
	key    string
	ids    []int
	kwargs map[string]any // the request's chat_template_kwargs (nil: none)
}

func newAnswers(limit int) *answers {
	return &answers{limit: limit, order: list.New(), byKey: map[string]*list.Element{}}
}

// answerKey identifies an answer by what a client sends back for it: its
// text and its tool calls' names and arguments (call ids and formatting of
// the message object do not matter).
func answerKey(content string, calls []host.ToolCall) string {
	var b strings.Builder
	b.WriteString(content)
	for _, c := range calls {
		b.WriteString("\x00")
		b.WriteString(c.Name)
		b.WriteString("\x00")
		b.WriteString(c.Arguments)
	}
	return b.String()
}

// remember keeps the sampled ids of an answer and the template kwargs of
// its request; an answer longer than the whole memory is not kept.
func (a *answers) remember(c host.ChatChoice, kwargs map[string]any) {
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
	if e, ok := a.byKey[key]; ok {
		a.size -= len(e.Value.(*answer).ids)
		a.order.Remove(e)
	}
	a.byKey[key] = a.order.PushFront(&answer{key: key, ids: ids, kwargs: kwargs})
	a.size += len(ids)
	for a.size > a.limit {
		old := a.order.Remove(a.order.Back()).(*answer)
		delete(a.byKey, old.key)
		a.size -= len(old.ids)
	}
}

// lookup returns a remembered answer (nil if forgotten); it is not to be
// modified.
func (a *answers) lookup(key string) *answer {
	a.mu.Lock()
	defer a.mu.Unlock()
	e, ok := a.byKey[key]
	if !ok {
		return nil
	}
	a.order.MoveToFront(e)
	return e.Value.(*answer)
}

// turns turns a request's messages into the trainer's turns: each
// assistant message the server remembers carries its sampled ids.
func (a *answers) turns(msgs []json.RawMessage) []train.Turn {
	out := make([]train.Turn, len(msgs))
	for i, m := range msgs {
		out[i] = train.Turn{Message: m}
		if key, ok := assistantKey(m); ok {
			if ans := a.lookup(key); ans != nil {
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
					if ans := a.lookup(key); ans != nil && ans.kwargs != nil && slices.Equal(ans.ids, turn.Sampled.TokenIDs) {
						turn.Sampled.TemplateKwargs = ans.kwargs
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
