package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
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
	return teacherTranscript(ctx, inbox, q, opt, nil)
}

// teacherRetryAttempts bounds the corrupted searches tried for a retry
// transcript: a corruption that still finds the mail is drawn again.
const teacherRetryAttempts = 8

// teacherTranscript is TeacherTranscript, and with retry non-nil the
// recovery episode of --teacher-retry: the teacher first searches with a
// miscopied keyword (corruptKeyword, drawn from retry) and gets the real
// result for it (never the right one: [] or other mails in full mode,
// other mails in compact mode, whose search matches any of the words),
// then searches again with the right keywords and goes on as usual; if
// that search does not find the mail either, it answers "I don't know"
// (reward 0 under the rubric) instead of skipping the question. If no
// corruption drawn misses the mail, the episode is the usual one.
func teacherTranscript(ctx context.Context, inbox *Inbox, q Question, opt RolloutOptions, retry *rand.Rand) (t art.Trajectory, ok bool, err error) {
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
	var wrong []string // the miscopied keywords of a retry episode
	if retry != nil {
		for range teacherRetryAttempts {
			c := slices.Clone(kw)
			i := retry.IntN(len(c))
			c[i] = corruptKeyword(c[i], retry)
			if c[i] == kw[i] {
				continue
			}
			var scratch Rubric
			b, err := json.Marshal(map[string]any{"keywords": c})
			if err != nil {
				return art.Trajectory{}, false, fmt.Errorf("emailsearch: teacher search_inbox: %w", err)
			}
			if _, _, err := toolResult(ctx, inbox, q, "search_inbox", string(b), opt.Compact, &scratch); err != nil {
				return art.Trajectory{}, false, err
			}
			if !scratch.FoundRightEmail {
				wrong = c
				break
			}
		}
	}
	t = art.Trajectory{Tools: trajectoryTools(), Metadata: map[string]any{"scenario_id": q.ID, "kind": q.Kind, "answer": q.Answer}}
	if wrong != nil {
		t.Metadata["teacher_retry"] = true
	}
	t.AddMessage(art.SystemMsg(opt.system()))
	t.AddMessage(art.UserMsg(q.Text))
	var r Rubric
	n := 0
	call := func(name string, args any) (string, error) {
		b, err := json.Marshal(args)
		if err != nil {
			return "", fmt.Errorf("emailsearch: teacher %s: %w", name, err)
		}
		callID := fmt.Sprintf("call_%d", n)
		n++
		t.AddMessage(art.Message{Role: art.RoleAssistant, ToolCalls: []art.ToolCall{{ID: callID, Type: "function",
			Function: art.FunctionCall{Name: name, Arguments: string(b)}}}})
		res, final, err := toolResult(ctx, inbox, q, name, string(b), opt.Compact, &r)
		if err != nil || final {
			return "", err
		}
		t.AddMessage(art.ToolMsg(callID, res))
		return res, nil
	}
	if wrong != nil {
		if _, err := call("search_inbox", map[string]any{"keywords": wrong}); err != nil {
			return art.Trajectory{}, false, err
		}
	}
	if _, err := call("search_inbox", map[string]any{"keywords": kw}); err != nil {
		return art.Trajectory{}, false, err
	}
	if !r.FoundRightEmail {
		if wrong == nil {
			return art.Trajectory{}, false, nil
		}
		if _, err := call("return_final_answer", map[string]any{"answer": "I don't know", "sources": []string{}}); err != nil {
			return art.Trajectory{}, false, err
		}
		if !r.IDontKnow {
			return art.Trajectory{}, false, fmt.Errorf("emailsearch: the teacher's \"I don't know\" to %s is not graded as such", q.ID)
		}
		t.Reward, t.Metrics = r.Reward(), r.Metrics()
		return t, true, nil
	}
	if _, err := call("read_email", map[string]any{"message_id": id}); err != nil {
		return art.Trajectory{}, false, err
	}
	if _, err := call("return_final_answer", map[string]any{"answer": q.Answer, "sources": []string{id}}); err != nil {
		return art.Trajectory{}, false, err
	}
	if !r.ReadRightEmail || !r.Correct || !r.SourcesCorrect {
		return art.Trajectory{}, false, fmt.Errorf("emailsearch: the teacher's answer to %s is graded wrong", q.ID)
	}
	t.Reward, t.Metrics = r.Reward(), r.Metrics()
	return t, true, nil
}

// corruptKeyword returns k with one to three random character edits
// (insertion, deletion, substitution or swap of neighbours; new characters
// are lower-case letters or characters of k), as a model that miscopies
// the subject writes it. It may return k itself when edits cancel out.
func corruptKeyword(k string, r *rand.Rand) string {
	rs := []rune(k)
	orig := slices.Clone(rs)
	pick := func() rune {
		if len(orig) > 0 && r.IntN(2) == 0 {
			return orig[r.IntN(len(orig))]
		}
		return rune('a' + r.IntN(26))
	}
	for range 1 + r.IntN(3) {
		switch op := r.IntN(4); {
		case len(rs) < 2 || op == 0:
			rs = slices.Insert(rs, r.IntN(len(rs)+1), pick())
		case op == 1:
			i := r.IntN(len(rs))
			rs = slices.Delete(rs, i, i+1)
		case op == 2:
			rs[r.IntN(len(rs))] = pick()
		default:
			i := r.IntN(len(rs) - 1)
			rs[i], rs[i+1] = rs[i+1], rs[i]
		}
	}
	return string(rs)
}

// TeacherTranscripts returns up to n scripted episodes (TeacherTranscript)
// on training questions taken in a seeded random order, each at most once.
// A fraction retry of them (each question independently, seeded by seed
// and its id) are drawn as recovery episodes: a miscopied search first,
// then the right one (see teacherTranscript). A drawn question whose
// miscopied searches all still find the mail gets the usual episode; in
// compact mode, whose search matches any of the words, that is about half
// of them.
func TeacherTranscripts(ctx context.Context, inbox *Inbox, questions []Question, n int, opt RolloutOptions, seed uint64, retry float64) ([]art.Trajectory, error) {
	r := rand.New(rand.NewPCG(seed, 0x7eac4e7))
	var out []art.Trajectory
	for _, i := range r.Perm(len(questions)) {
		if len(out) == n {
			break
		}
		var rr *rand.Rand
		if retry > 0 {
			rr = rand.New(rand.NewPCG(hash64(seed, questions[i].ID), 0x4e7a1))
			if rr.Float64() >= retry {
				rr = nil
			}
		}
		t, ok, err := teacherTranscript(ctx, inbox, questions[i], opt, rr)
		if err != nil {
			return nil, err
		}
		if ok {
			out = append(out, t)
		}
	}
	return out, nil
}
