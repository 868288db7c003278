package main

import (
	"context"
	"encoding/json"
	"slices"
	"testing"

	"github.com/artgo/art"
)

// Ensure the scripted teacher finds, reads and answers real questions in
// the rollout's message shape, and report the length of its episodes (the
// reason a tiny byte-level model cannot learn this task in minutes).
func TestTeacherTranscripts(t *testing.T) {
	inbox, _, _ := realInbox(t)
	ctx := context.Background()
	headers, err := inbox.headers(ctx)
	if err != nil {
		t.Fatal(err)
	}
	trainSet, _ := SplitQuestions(GenerateQuestions(headers), 1, 50)
	ts, err := TeacherTranscripts(ctx, inbox, trainSet, 40, RolloutOptions{MaxTurns: 10}, 1, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(ts) != 40 {
		t.Fatalf("%d transcripts; want 40", len(ts))
	}
	var bytes, toolBytes int
	for _, tr := range ts {
		ms := tr.Messages()
		roles := ""
		for _, m := range ms {
			roles += m.Role[:1]
			bytes += len(m.Content.String())
			for _, tc := range m.ToolCalls {
				bytes += len(tc.Function.Arguments)
			}
			if m.Role == art.RoleTool {
				toolBytes += len(m.Content.String())
			}
		}
		if roles != "suatata" {
			t.Fatalf("transcript roles %q; want system, user, then search, read and answer calls with results", roles)
		}
		if got := ms[len(ms)-1].ToolCalls[0].Function.Name; got != "return_final_answer" {
			t.Fatalf("last call %q", got)
		}
	}
	t.Logf("%d scripted episodes: %.0f bytes of messages each on average, %.0f of them tool results",
		len(ts), float64(bytes)/float64(len(ts)), float64(toolBytes)/float64(len(ts)))
}

// Ensure --teacher-retry's recovery episodes replay against the real
// index: every tool result in a transcript is what the tool returns for
// its call, the reward is the rubric's, a fraction of up to retry of the
// episodes first search with a miscopied subject that misses the mail,
// and retry 0 gives exactly the plain teacher's episodes.
func TestTeacherTranscriptsRetry(t *testing.T) {
	inbox, _, _ := realInbox(t)
	ctx := context.Background()
	headers, err := inbox.headers(ctx)
	if err != nil {
		t.Fatal(err)
	}
	trainSet, _ := SplitQuestions(CompactQuestions(headers), 1, 100)
	opt := RolloutOptions{MaxTurns: 4, Compact: true}
	const n, retry = 400, 0.3
	ts, err := TeacherTranscripts(ctx, inbox, trainSet, n, opt, 1, retry)
	if err != nil {
		t.Fatal(err)
	}
	if len(ts) != n {
		t.Fatalf("%d transcripts; want %d", len(ts), n)
	}
	var retries, idk int
	for _, tr := range ts {
		q := trainSet[slices.IndexFunc(trainSet, func(q Question) bool { return q.ID == tr.Metadata["scenario_id"] })]
		ms := tr.Messages()
		var r Rubric
		roles, searches := "", 0
		for i, m := range ms {
			roles += m.Role[:1]
			if m.Role != art.RoleAssistant {
				continue
			}
			tc := m.ToolCalls[0].Function
			if tc.Name == "search_inbox" {
				searches++
			}
			res, final, err := toolResult(ctx, inbox, q, tc.Name, tc.Arguments, true, &r)
			if err != nil {
				t.Fatal(err)
			}
			if final {
				if i != len(ms)-1 {
					t.Fatalf("%s: final answer before the end", q.ID)
				}
				continue
			}
			if got := ms[i+1].Content.String(); ms[i+1].Role != art.RoleTool || got != res {
				t.Fatalf("%s: %s(%s) returns %q; transcript shows %q", q.ID, tc.Name, tc.Arguments, res, got)
			}
			if searches == 1 && tr.Metadata["teacher_retry"] == true && r.FoundRightEmail {
				t.Fatalf("%s: the miscopied search %s finds the mail", q.ID, tc.Arguments)
			}
		}
		if r.Reward() != tr.Reward {
			t.Fatalf("%s: replayed reward %v; transcript %v", q.ID, r.Reward(), tr.Reward)
		}
		switch {
		case tr.Metadata["teacher_retry"] == true && roles == "suatatata" && r.Correct:
			retries++
		case tr.Metadata["teacher_retry"] == true && roles == "suatata" && r.IDontKnow:
			retries++
			idk++
		case tr.Metadata["teacher_retry"] == nil && roles == "suatata" && r.Correct:
		default:
			t.Fatalf("%s: roles %q, metadata %v, rubric %+v", q.ID, roles, tr.Metadata, r)
		}
	}
	// Compact search matches any of the subject's words, so a miscopied
	// subject often still finds the mail, and such a drawn question gets
	// the usual episode: between a quarter and all of a fraction retry.
	if f := float64(retries) / n; f < retry/4 || f > retry+0.08 {
		t.Fatalf("%d of %d episodes are retries; want %.0f%% to %.0f%%", retries, n, 100*retry/4, 100*retry+8)
	}
	t.Logf("%d of %d episodes recover from a miscopied search (%d of them answer \"I don't know\")", retries, n, idk)

	plain, err := TeacherTranscripts(ctx, inbox, trainSet, 50, opt, 1, 0)
	if err != nil {
		t.Fatal(err)
	}
	for i, tr := range plain {
		want, ok, err := TeacherTranscript(ctx, inbox, trainSet[slices.IndexFunc(trainSet, func(q Question) bool { return q.ID == tr.Metadata["scenario_id"] })], opt)
		if err != nil || !ok {
			t.Fatalf("%d: ok=%v err=%v", i, ok, err)
		}
		a, _ := json.Marshal(tr)
		b, _ := json.Marshal(want)
		if string(a) != string(b) || tr.Metadata["teacher_retry"] != nil {
			t.Fatalf("%d: retry 0 gives %s; want %s", i, a, b)
		}
	}
}
