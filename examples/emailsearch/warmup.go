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

// teacherKeywords is how many words of the subject the teacher searches
// for in full mode. In compact mode it searches for the whole subject, as
// one keyword copied verbatim from the question: a tiny model trained from
// scratch learns a verbatim copy (as it copies ids and answers from tool
// results) but not the rule that picks words, and a search with all the
// subject's words finds the mail among the compactResults shown almost
// always.
const teacherKeywords = 4

// TeacherTranscript returns the scripted episode of --sft-warmup and
// --write-teacher for q, as Rollout with opt records one: search_inbox with
// words of the mail's subject, read_email of the mail, return_final_answer
// with the answer and the mail as source. The tool results are the real
// ones (toolResult). ok is false when the search does not find the mail
// (the question is skipped).
func TeacherTranscript(ctx context.Context, inbox *Inbox, q Question, opt RolloutOptions) (t art.Trajectory, ok bool, err error) {
	e, err := inbox.Read(ctx, q.MessageID)
	if err != nil {
		return art.Trajectory{}, false, err
	}
	kw, id := subjectKeywords(e.Subject, teacherKeywords), q.MessageID
	if opt.Compact {
		kw, id = []string{e.Subject}, shortID(e.Row)
	}
	if len(kw) == 0 {
		return art.Trajectory{}, false, nil
	}
	t = art.Trajectory{Tools: trajectoryTools(), Metadata: map[string]any{"scenario_id": q.ID, "kind": q.Kind, "answer": q.Answer}}
	t.AddMessage(art.SystemMsg(opt.system()))
	t.AddMessage(art.UserMsg(q.Text))
	var r Rubric
	call := func(i int, name string, args any) (string, error) {
		b, err := json.Marshal(args)
		if err != nil {
			return "", fmt.Errorf("emailsearch: teacher %s: %w", name, err)
		}
		callID := fmt.Sprintf("call_%d", i)
		t.AddMessage(art.Message{Role: art.RoleAssistant, ToolCalls: []art.ToolCall{{ID: callID, Type: "function",
			Function: art.FunctionCall{Name: name, Arguments: string(b)}}}})
		res, final, err := toolResult(ctx, inbox, q, name, string(b), opt.Compact, &r)
		if err != nil || final {
			return "", err
		}
		t.AddMessage(art.ToolMsg(callID, res))
		return res, nil
	}
	if _, err := call(0, "search_inbox", map[string]any{"keywords": kw}); err != nil {
		return art.Trajectory{}, false, err
	}
	if !r.FoundRightEmail {
		return art.Trajectory{}, false, nil
	}
	if _, err := call(1, "read_email", map[string]any{"message_id": id}); err != nil {
		return art.Trajectory{}, false, err
	}
	if _, err := call(2, "return_final_answer", map[string]any{"answer": q.Answer, "sources": []string{id}}); err != nil {
		return art.Trajectory{}, false, err
	}
	if !r.ReadRightEmail || !r.Correct || !r.SourcesCorrect {
		return art.Trajectory{}, false, fmt.Errorf("emailsearch: the teacher's answer to %s is graded wrong", q.ID)
	}
	t.Reward, t.Metrics = r.Reward(), r.Metrics()
	return t, true, nil
}

// TeacherTranscripts returns up to n scripted episodes (TeacherTranscript)
// on training questions taken in a seeded random order, each at most once.
func TeacherTranscripts(ctx context.Context, inbox *Inbox, questions []Question, n int, opt RolloutOptions, seed uint64) ([]art.Trajectory, error) {
	r := rand.New(rand.NewPCG(seed, 0x7eac4e7))
	var out []art.Trajectory
	for _, i := range r.Perm(len(questions)) {
		if len(out) == n {
			break
		}
		t, ok, err := TeacherTranscript(ctx, inbox, questions[i], opt)
		if err != nil {
			return nil, err
		}
		if ok {
			out = append(out, t)
		}
	}
	return out, nil
}
