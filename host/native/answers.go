package native

import (
	"container/list"
	"encoding/json"
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
// ids than the trainer splices). Memory is bounded by a number of ids; the
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
	key string
	ids []int
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

// remember keeps the sampled ids of an answer; an answer longer than the
// whole memory is not kept.
func (a *answers) remember(c host.ChatChoice) {
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
	a.byKey[key] = a.order.PushFront(&answer{key: key, ids: ids})
	a.size += len(ids)
	for a.size > a.limit {
		old := a.order.Remove(a.order.Back()).(*answer)
		delete(a.byKey, old.key)
		a.size -= len(old.ids)
	}
}

// lookup returns the sampled ids of a remembered answer (nil if forgotten).
func (a *answers) lookup(key string) []int {
	a.mu.Lock()
	defer a.mu.Unlock()
	e, ok := a.byKey[key]
	if !ok {
		return nil
	}
	a.order.MoveToFront(e)
	return e.Value.(*answer).ids
}

// turns turns a request's messages into the trainer's turns: each
// assistant message the server remembers carries its sampled ids.
func (a *answers) turns(msgs []json.RawMessage) []train.Turn {
	out := make([]train.Turn, len(msgs))
	for i, m := range msgs {
		out[i] = train.Turn{Message: m}
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
			continue
		}
		var content string
		if am.Content != nil {
			content = *am.Content
		}
		calls := make([]host.ToolCall, len(am.ToolCalls))
		for j, c := range am.ToolCalls {
			calls[j] = host.ToolCall{Name: c.Function.Name, Arguments: c.Function.Arguments}
		}
		if ids := a.lookup(answerKey(content, calls)); ids != nil {
			out[i].Sampled = &train.Sampled{TokenIDs: ids}
		}
	}
	return out
}
