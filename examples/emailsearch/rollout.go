package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/openai/openai-go/v3"

	"github.com/artgo/art"
)

// systemPrompt tells the model the task; %d is the turn budget.
const systemPrompt = "You answer questions about an email inbox of mails from 2002. Use search_inbox to find mails " +
	"and read_email to read one. When you know the answer, call return_final_answer with a short answer and the " +
	"message_ids of the mails it comes from. If you cannot find it, answer \"I don't know\". You have %d turns."

// tool is a function tool: its name, description and JSON Schema.
type tool struct {
	name, desc string
	params     map[string]any
}

var tools = []tool{
	{"search_inbox", "Search the inbox. Returns up to 10 mails (message_id, from, subject, date, snippet), best match first.",
		map[string]any{"type": "object", "properties": map[string]any{
			"keywords":    map[string]any{"type": "array", "items": map[string]any{"type": "string"}, "description": "words that must all occur in the subject or body"},
			"from":        map[string]any{"type": "string", "description": "part of the sender's address or name"},
			"to":          map[string]any{"type": "string", "description": "part of a recipient's address"},
			"sent_after":  map[string]any{"type": "string", "description": "YYYY-MM-DD: sent on or after this day (UTC)"},
			"sent_before": map[string]any{"type": "string", "description": "YYYY-MM-DD: sent before this day (UTC)"},
		}, "required": []string{"keywords"}}},
	{"read_email", "Read the mail with the given message_id.",
		map[string]any{"type": "object", "properties": map[string]any{
			"message_id": map[string]any{"type": "string"},
		}, "required": []string{"message_id"}}},
	{"return_final_answer", "Give the final answer and the message_ids of the mails it comes from. This ends the task.",
		map[string]any{"type": "object", "properties": map[string]any{
			"answer":  map[string]any{"type": "string"},
			"sources": map[string]any{"type": "array", "items": map[string]any{"type": "string"}},
		}, "required": []string{"answer", "sources"}}},
}

// trajectoryTools are the tools as the trajectory records them and the
// chat request carries them.
func trajectoryTools() []art.Tool {
	out := make([]art.Tool, len(tools))
	for i, t := range tools {
		params, err := json.Marshal(t.params)
		if err != nil {
			panic(err) // constant maps always encode
		}
		out[i] = art.FunctionTool(t.name, t.desc, params)
	}
	return out
}

// Rubric records what happened in an episode, as ART•E's rubric does.
type Rubric struct {
	Turns            int
	FormatError      bool // a reply with no tool call, an unknown tool, or arguments that do not decode
	Answered         bool // return_final_answer was called
	Correct          bool // ... with the right answer (CheckAnswer)
	IDontKnow        bool // ... saying it does not know (IsIDontKnow)
	RanOutOfTurns    bool
	FoundRightEmail  bool // a search returned the mail that answers the question
	ReadRightEmail   bool // read_email read it
	ReadInvalidEmail bool // read_email was given an unknown message_id
	SourcesCorrect   bool // the final answer cites the mail
	Searches, Reads  int
}

// Reward turns a rubric into a reward, on ART•E's scale:
//
//	correct answer          1   (+0.1 when the sources cite the right mail)
//	"I don't know", or out of turns   0 + partial
//	wrong answer           −1 + partial
//	format error           −2 + partial   (no tool call, unknown tool, bad arguments)
//
// where partial = 0.1 if a search found the right mail + 0.1 if it was read
// (at most 0.2, so the bands never overlap). A wrong answer scores below
// "I don't know": guessing does not pay.
func (r Rubric) Reward() float64 {
	partial := 0.0
	if r.FoundRightEmail {
		partial += 0.1
	}
	if r.ReadRightEmail {
		partial += 0.1
	}
	switch {
	case r.FormatError:
		return -2 + partial
	case r.Answered && r.Correct:
		if r.SourcesCorrect {
			return 1.1
		}
		return 1
	case r.Answered && !r.IDontKnow:
		return -1 + partial
	}
	return partial // I don't know, or out of turns
}

// Metrics are the rubric as trajectory metrics.
func (r Rubric) Metrics() map[string]float64 {
	return map[string]float64{
		"turns": float64(r.Turns), "format_error": b2f(r.FormatError), "answered": b2f(r.Answered),
		"correct": b2f(r.Correct), "i_dont_know": b2f(r.IDontKnow), "ran_out_of_turns": b2f(r.RanOutOfTurns),
		"found_right_email": b2f(r.FoundRightEmail), "read_right_email": b2f(r.ReadRightEmail),
		"read_invalid_email": b2f(r.ReadInvalidEmail), "sources_correct": b2f(r.SourcesCorrect),
		"searches": float64(r.Searches), "reads": float64(r.Reads),
	}
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// MaxReadBytes bounds the body read_email returns, to keep the
// conversation within the model's context.
const MaxReadBytes = 2000

// errFormat marks a tool call the model got wrong; the episode ends.
var errFormat = errors.New("format error")

// Compact mode (--compact) shows the model the same inbox through the same
// tools with short results, so that a whole episode is a few hundred bytes
// (about as many tokens for a byte-level model) instead of ~3.5 kB: a tiny
// model trained from scratch can learn that in minutes. Its search ranks
// the mails with any of the query's words by bm25 (SearchQuery.AnyWord), so
// a subject copied with a few wrong words still finds its mail.
const (
	compactResults      = 3  // search results shown
	compactSubjectRunes = 40 // of each result's subject
)

// compactSystemPrompt is the default system message in compact mode; %d is
// the turn budget.
const compactSystemPrompt = "Find the mail with search_inbox, read it with read_email, answer with return_final_answer. %d turns."

// compactResult is one search result in compact mode: the mail's short id
// (its row in the index) and the start of its subject.
type compactResult struct {
	ID      string `json:"id"`
	Subject string `json:"subject"`
}

// compactMail is read_email's result in compact mode: the two header
// fields compact questions ask about (see CompactQuestions).
type compactMail struct {
	From string `json:"from"` // the sender's address
	Date string `json:"date"` // YYYY-MM-DD, UTC
}

// shortID is a mail's id as compact mode shows it.
func shortID(row int64) string { return strconv.FormatInt(row, 10) }

// readID reads the mail a model names: by Message-ID, or in compact mode
// also by short id (a row number, which no Message-ID is: they contain @).
func readID(ctx context.Context, inbox *Inbox, id string, compact bool) (Email, error) {
	if compact {
		if row, err := strconv.ParseInt(strings.TrimSpace(id), 10, 64); err == nil {
			return inbox.ReadRow(ctx, row)
		}
	}
	return inbox.Read(ctx, id)
}

// isSource reports whether a source the model cites names the mail with the
// given Message-ID (by short id too, in compact mode).
func isSource(ctx context.Context, inbox *Inbox, source, messageID string, compact bool) (bool, error) {
	if strings.Trim(strings.TrimSpace(source), "<>") == messageID {
		return true, nil
	}
	if !compact {
		return false, nil
	}
	row, err := strconv.ParseInt(strings.TrimSpace(source), 10, 64)
	if err != nil {
		return false, nil
	}
	e, err := inbox.ReadRow(ctx, row)
	if errors.Is(err, ErrNoEmail) {
		return false, nil
	}
	return err == nil && e.MessageID == messageID, err
}

// toolResult runs one tool call against the inbox and updates the rubric.
// It returns the tool message's text, whether the call was the final
// answer, or an error wrapping errFormat for a call that cannot be run.
// Other failures (a malformed date, an unknown message_id) are returned to
// the model as an error text. compact selects compact mode's short results
// and ids; the rubric is scored the same way in both modes.
func toolResult(ctx context.Context, inbox *Inbox, q Question, name, arguments string, compact bool, r *Rubric) (result string, final bool, err error) {
	decode := func(v any) error {
		if err := json.Unmarshal([]byte(arguments), v); err != nil {
			return fmt.Errorf("%w: %s arguments: %v", errFormat, name, err)
		}
		return nil
	}
	switch name {
	case "search_inbox":
		var a struct {
			Keywords   []string `json:"keywords"`
			From       string   `json:"from"`
			To         string   `json:"to"`
			SentAfter  string   `json:"sent_after"`
			SentBefore string   `json:"sent_before"`
		}
		if err := decode(&a); err != nil {
			return "", false, err
		}
		r.Searches++
		sq := SearchQuery{Keywords: a.Keywords, From: a.From, To: a.To, SentAfter: a.SentAfter, SentBefore: a.SentBefore}
		if compact {
			sq.Limit, sq.AnyWord = compactResults, true
		}
		res, err := inbox.Search(ctx, sq)
		if errors.Is(err, ErrBadQuery) {
			return "error: " + err.Error(), false, nil
		} else if err != nil {
			return "", false, err
		}
		if slices.ContainsFunc(res, func(s SearchResult) bool { return s.MessageID == q.MessageID }) {
			r.FoundRightEmail = true
		}
		var out any = res
		if compact {
			short := make([]compactResult, len(res))
			for i, s := range res {
				short[i] = compactResult{ID: shortID(s.Row), Subject: truncateRunes(s.Subject, compactSubjectRunes)}
			}
			out = short
		} else if res == nil {
			out = []SearchResult{}
		}
		b, err := json.Marshal(out)
		return string(b), false, err
	case "read_email":
		var a struct {
			MessageID string `json:"message_id"`
		}
		if err := decode(&a); err != nil {
			return "", false, err
		}
		r.Reads++
		e, err := readID(ctx, inbox, a.MessageID, compact)
		if errors.Is(err, ErrNoEmail) {
			r.ReadInvalidEmail = true
			return "error: " + err.Error(), false, nil
		} else if err != nil {
			return "", false, err
		}
		if e.MessageID == q.MessageID {
			r.ReadRightEmail = true
		}
		if compact {
			b, err := json.Marshal(compactMail{From: e.FromAddr, Date: e.Date.Format(dateLayout)})
			return string(b), false, err
		}
		body := e.Body
		if len(body) > MaxReadBytes {
			body = strings.ToValidUTF8(body[:MaxReadBytes], "") + " [...]"
		}
		b, err := json.Marshal(map[string]any{"message_id": e.MessageID, "from": e.From(), "to": e.To,
			"date": formatDate(e.Date.Unix()), "subject": e.Subject, "body": body})
		return string(b), false, err
	case "return_final_answer":
		var a struct {
			Answer  *string  `json:"answer"`
			Sources []string `json:"sources"`
		}
		if err := decode(&a); err != nil {
			return "", false, err
		}
		if a.Answer == nil {
			return "", false, fmt.Errorf("%w: return_final_answer without an answer", errFormat)
		}
		r.Answered = true
		r.IDontKnow = IsIDontKnow(*a.Answer)
		r.Correct = !r.IDontKnow && CheckAnswer(q, *a.Answer)
		for _, s := range a.Sources {
			ok, err := isSource(ctx, inbox, s, q.MessageID, compact)
			if err != nil {
				return "", false, err
			}
			if ok {
				r.SourcesCorrect = true
				break
			}
		}
		return "", true, nil
	}
	return "", false, fmt.Errorf("%w: unknown tool %q", errFormat, name)
}

// truncateRunes returns s cut to at most n runes.
func truncateRunes(s string, n int) string {
	if r := []rune(s); len(r) > n {
		return string(r[:n])
	}
	return s
}

// RolloutOptions configure Rollout.
type RolloutOptions struct {
	MaxTurns    int           // model calls per episode
	MaxTokens   int           // completion tokens per model call
	CallTimeout time.Duration // bound on each chat completion, retries included
	// System is the system message; "" means the mode's task instructions
	// (systemPrompt or compactSystemPrompt, with the turn budget).
	System string
	// Compact selects compact mode: short tool results and short mail ids
	// (see compactResults), and compactSystemPrompt as the default system
	// message.
	Compact bool
	// SampleSeed, if set, makes sampling reproducible: the k-th call's
	// request carries the seed *SampleSeed+k (for held-out evaluations).
	SampleSeed *uint64
}

// system returns the system message: System, else the task instructions
// of the mode with the turn budget.
func (opt RolloutOptions) system() string {
	switch {
	case opt.System != "":
		return opt.System
	case opt.Compact:
		return fmt.Sprintf(compactSystemPrompt, opt.MaxTurns)
	}
	return fmt.Sprintf(systemPrompt, opt.MaxTurns)
}

// Rollout answers one question through an OpenAI-compatible chat endpoint
// with the inbox tools, ART•E style: the model is called with the
// conversation so far and every tool call it makes is run (toolResult)
// until it calls return_final_answer, makes a format error, or has used
// MaxTurns calls. The reward comes from the episode's Rubric. The whole
// episode is the trajectory's main history, every model turn a Choice.
func Rollout(ctx context.Context, client openai.Client, modelName string, inbox *Inbox, q Question, opt RolloutOptions) (art.Trajectory, error) {
	if opt.MaxTurns < 1 {
		return art.Trajectory{}, errors.New("emailsearch: MaxTurns must be >= 1")
	}
	traj := art.Trajectory{Tools: trajectoryTools(),
		Metadata: map[string]any{"scenario_id": q.ID, "kind": q.Kind, "answer": q.Answer}}
	traj.AddMessage(art.SystemMsg(opt.system()), art.UserMsg(q.Text))
	var r Rubric
	done := false
	for !done {
		if r.Turns == opt.MaxTurns {
			r.RanOutOfTurns = true
			break
		}
		r.Turns++
		params := openai.ChatCompletionNewParams{Model: modelName, MaxTokens: openai.Int(int64(opt.MaxTokens)), Temperature: openai.Float(1)}
		if opt.SampleSeed != nil {
			params.Seed = openai.Int(int64((*opt.SampleSeed + uint64(r.Turns)) & math.MaxInt64))
		}
		cctx, cancel := context.WithTimeout(ctx, opt.CallTimeout)
		choice, err := traj.Chat(cctx, client, params)
		cancel()
		if err != nil {
			return art.Trajectory{}, fmt.Errorf("emailsearch: question %s turn %d: %w", q.ID, r.Turns, err)
		}
		if len(choice.Message.ToolCalls) == 0 {
			r.FormatError = true
			traj.Logf("turn %d: no tool call", r.Turns)
			break
		}
		for _, tc := range choice.Message.ToolCalls {
			result, final, err := toolResult(ctx, inbox, q, tc.Function.Name, tc.Function.Arguments, opt.Compact, &r)
			if errors.Is(err, errFormat) {
				r.FormatError = true
				traj.Logf("turn %d: %v", r.Turns, err)
				done = true
				break
			} else if err != nil {
				return art.Trajectory{}, err
			}
			if final {
				done = true
				break
			}
			traj.AddMessage(art.ToolMsg(tc.ID, result))
		}
	}
	traj.Reward = r.Reward()
	traj.Metrics = r.Metrics()
	traj.Finish()
	return traj, nil
}
