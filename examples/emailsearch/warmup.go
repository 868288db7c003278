package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"unicode"

	"github.com/artgo/art"
)

// subjectKeywords returns up to n words of a subject to search for: words
// of at least three letters or digits, reply prefixes dropped.
func subjectKeywords(subject string, n int) []string {
	var out []string
	for _, w := range strings.Fields(replyPrefix.ReplaceAllString(subject, "")) {
		w = strings.TrimFunc(w, func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) })
		if len([]rune(w)) >= 3 && !strings.ContainsFunc(w, func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) }) {
			out = append(out, w)
		}
		if len(out) == n {
			break
		}
	}
	return out
}

// TeacherTranscript returns the scripted episode of --sft-warmup for q, as
// Rollout records one: search_inbox with words of the mail's subject,
// read_email of the mail, return_final_answer with the answer and the mail
// as source. The tool results are the real ones (toolResult). ok is false
// when the search does not find the mail (the question is skipped).
func TeacherTranscript(ctx context.Context, inbox *Inbox, q Question, maxTurns int, system string) (t art.Trajectory, ok bool, err error) {
	e, err := inbox.Read(ctx, q.MessageID)
	if err != nil {
		return art.Trajectory{}, false, err
	}
	kw := subjectKeywords(e.Subject, 4)
	if len(kw) == 0 {
		return art.Trajectory{}, false, nil
	}
	if system == "" {
		system = fmt.Sprintf(systemPrompt, maxTurns)
	}
	t = art.Trajectory{Tools: trajectoryTools(), Metadata: map[string]any{"scenario_id": q.ID, "kind": q.Kind, "answer": q.Answer}}
	t.AddMessage(art.SystemMsg(system))
	t.AddMessage(art.UserMsg(q.Text))
	var r Rubric
	call := func(i int, name string, args any) (string, error) {
		b, err := json.Marshal(args)
		if err != nil {
			return "", err
		}
		id := fmt.Sprintf("call_%d", i)
		t.AddMessage(art.Message{Role: art.RoleAssistant, ToolCalls: []art.ToolCall{{ID: id, Type: "function",
			Function: art.FunctionCall{Name: name, Arguments: string(b)}}}})
		res, final, err := toolResult(ctx, inbox, q, name, string(b), &r)
		if err != nil || final {
			return "", err
		}
		t.AddMessage(art.ToolMsg(id, res))
		return res, nil
	}
	if _, err := call(0, "search_inbox", map[string]any{"keywords": kw}); err != nil {
		return art.Trajectory{}, false, err
	}
	if !r.FoundRightEmail {
		return art.Trajectory{}, false, nil
	}
	if _, err := call(1, "read_email", map[string]any{"message_id": q.MessageID}); err != nil {
		return art.Trajectory{}, false, err
	}
	if _, err := call(2, "return_final_answer", map[string]any{"answer": q.Answer, "sources": []string{q.MessageID}}); err != nil {
		return art.Trajectory{}, false, err
	}
	if !r.Correct || !r.SourcesCorrect {
		return art.Trajectory{}, false, fmt.Errorf("emailsearch: the teacher's answer to %s is graded wrong", q.ID)
	}
	return t, true, nil
}

// TeacherTranscripts returns up to n scripted episodes (TeacherTranscript)
// on training questions taken in a seeded random order, each at most once.
func TeacherTranscripts(ctx context.Context, inbox *Inbox, questions []Question, n, maxTurns int, system string, seed uint64) ([]art.Trajectory, error) {
	r := rand.New(rand.NewPCG(seed, 0x7eac4e7))
	var out []art.Trajectory
	for _, i := range r.Perm(len(questions)) {
		if len(out) == n {
			break
		}
		t, ok, err := TeacherTranscript(ctx, inbox, questions[i], maxTurns, system)
		if err != nil {
			return nil, err
		}
		if ok {
			out = append(out, t)
		}
	}
	return out, nil
}
