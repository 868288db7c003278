package main

import (
	"context"
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
	ts, err := TeacherTranscripts(ctx, inbox, trainSet, 40, RolloutOptions{MaxTurns: 10}, 1)
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
