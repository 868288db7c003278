package main

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"strings"
	"testing"
)

func TestCheckAnswer(t *testing.T) {
	sender := Question{Kind: KindSender, Answer: "kre@munnari.oz.au"}
	date := Question{Kind: KindDate, Answer: "2002-08-22"}
	subject := Question{Kind: KindSubject, Answer: "Re: New Sequences Window!"}
	for _, c := range []struct {
		q      Question
		answer string
		want   bool
	}{
		{sender, "kre@munnari.oz.au", true},
		{sender, "Robert Elz <KRE@munnari.OZ.AU>", true},
		{sender, "Robert Elz", false},
		{sender, "munnari.oz.au", false},
		{sender, "kre@munnari.oz.au or cwg@deepeddy.com", false}, // no hedging over addresses
		{date, "2002-08-22", true},
		{date, "It was sent on 2002-08-22.", true},
		{date, "2002-08-21", false},
		{date, "August 22, 2002", false}, // the asked format only
		{date, "2002-08-21 or 2002-08-22", false},
		{subject, "New Sequences Window", true},
		{subject, `"re: new  sequences window"`, true},
		{subject, "Sequences", false},
		{Question{Kind: "other", Answer: "x"}, "x", false},
	} {
		if got := CheckAnswer(c.q, c.answer); got != c.want {
			t.Errorf("CheckAnswer(%s %q, %q) = %v; want %v", c.q.Kind, c.q.Answer, c.answer, got, c.want)
		}
	}
	for _, a := range []string{"I don't know", "i do not know.", " Unknown ", ""} {
		if !IsIDontKnow(a) {
			t.Errorf("IsIDontKnow(%q) = false", a)
		}
	}
	if IsIDontKnow("I don't know, maybe kre@munnari.oz.au") {
		t.Error("a hedged answer counted as I don't know")
	}
}

// Ensure the reward bands are ordered as in ART•E: correct > I don't know
// > wrong > format error, whatever the partial credit.
func TestRubric_Reward(t *testing.T) {
	for _, c := range []struct {
		name string
		r    Rubric
		want float64
	}{
		{"correct with sources", Rubric{Answered: true, Correct: true, SourcesCorrect: true, FoundRightEmail: true, ReadRightEmail: true}, 1.1},
		{"correct", Rubric{Answered: true, Correct: true}, 1},
		{"I don't know after finding it", Rubric{Answered: true, IDontKnow: true, FoundRightEmail: true, ReadRightEmail: true}, 0.2},
		{"I don't know", Rubric{Answered: true, IDontKnow: true}, 0},
		{"out of turns", Rubric{RanOutOfTurns: true, FoundRightEmail: true}, 0.1},
		{"wrong after reading it", Rubric{Answered: true, FoundRightEmail: true, ReadRightEmail: true}, -0.8},
		{"wrong", Rubric{Answered: true}, -1},
		{"format error", Rubric{FormatError: true}, -2},
		{"format error after finding it", Rubric{FormatError: true, FoundRightEmail: true}, -1.9},
	} {
		if got := c.r.Reward(); math.Abs(got-c.want) > 1e-12 {
			t.Errorf("%s: Reward = %v; want %v", c.name, got, c.want)
		}
	}
}

// Ensure each tool runs against a real index and scores the rubric.
func TestToolResult(t *testing.T) {
	ctx := context.Background()
	inbox, _, err := OpenInbox(ctx, writeCorpus(t), t.TempDir()+"/index.db")
	if err != nil {
		t.Fatal(err)
	}
	defer inbox.Close()
	q := Question{ID: "q1", Kind: KindSender, Answer: "bob@example.org", MessageID: "party.2@example.org"}
	var r Rubric

	out, final, err := toolResult(ctx, inbox, q, "search_inbox", `{"keywords": ["croquet"], "from": "bob"}`, false, &r)
	var res []SearchResult
	if err != nil || final || json.Unmarshal([]byte(out), &res) != nil || len(res) != 1 || !r.FoundRightEmail || r.Searches != 1 {
		t.Fatalf("search: %s, %v, %v, %+v", out, final, err, r)
	}
	out, _, err = toolResult(ctx, inbox, q, "search_inbox", `{"keywords": ["zebra"]}`, false, &r)
	if err != nil || out != "[]" {
		t.Fatalf("empty search: %s, %v", out, err)
	}
	out, _, err = toolResult(ctx, inbox, q, "search_inbox", `{"keywords": [], "sent_after": "yesterday"}`, false, &r)
	if err != nil || !strings.HasPrefix(out, "error: ") {
		t.Fatalf("bad date: %s, %v", out, err)
	}
	out, _, err = toolResult(ctx, inbox, q, "read_email", `{"message_id": "nope"}`, false, &r)
	if err != nil || !strings.HasPrefix(out, "error: ") || !r.ReadInvalidEmail || r.ReadRightEmail {
		t.Fatalf("read unknown: %s, %v, %+v", out, err, r)
	}
	out, _, err = toolResult(ctx, inbox, q, "read_email", `{"message_id": "party.2@example.org"}`, false, &r)
	var mail map[string]any
	if err != nil || json.Unmarshal([]byte(out), &mail) != nil || mail["from"] != "bob@example.org" || !r.ReadRightEmail {
		t.Fatalf("read: %s, %v, %+v", out, err, r)
	}
	_, final, err = toolResult(ctx, inbox, q, "return_final_answer", `{"answer": "bob@example.org", "sources": ["<party.2@example.org>"]}`, false, &r)
	if err != nil || !final || !r.Answered || !r.Correct || !r.SourcesCorrect || r.Reward() != 1.1 {
		t.Fatalf("final answer: %v, %v, %+v", final, err, r)
	}
	for _, c := range []struct{ name, args string }{
		{"send_email", `{}`},
		{"search_inbox", `{"keywords": "not a list"}`},
		{"read_email", `not json`},
		{"return_final_answer", `{"sources": []}`},
	} {
		if _, _, err := toolResult(ctx, inbox, q, c.name, c.args, false, &Rubric{}); !errors.Is(err, errFormat) {
			t.Errorf("%s(%s): err = %v; want a format error", c.name, c.args, err)
		}
	}
}

// Ensure compact mode runs the same tools with short results: search shows
// short ids and cut subjects, read_email takes a short id (or a Message-ID)
// and shows the sender's address and day, the final answer may cite the
// short id, and the rubric is scored as in full mode.
func TestToolResult_Compact(t *testing.T) {
	ctx := context.Background()
	inbox, _, err := OpenInbox(ctx, writeCorpus(t), t.TempDir()+"/index.db")
	if err != nil {
		t.Fatal(err)
	}
	defer inbox.Close()
	e, err := inbox.Read(ctx, "party.2@example.org")
	if err != nil {
		t.Fatal(err)
	}
	id := shortID(e.Row)
	q := Question{ID: "q1", Kind: KindSender, Answer: "bob@example.org", MessageID: "party.2@example.org"}
	var r Rubric
	out, _, err := toolResult(ctx, inbox, q, "search_inbox", `{"keywords": ["croquet"], "from": "bob"}`, true, &r)
	var res []map[string]string
	if err != nil || json.Unmarshal([]byte(out), &res) != nil || len(res) != 1 || res[0]["id"] != id ||
		len(res[0]) != 2 || len([]rune(res[0]["subject"])) > compactSubjectRunes || !r.FoundRightEmail {
		t.Fatalf("search: %s, %v, %+v", out, err, r)
	}
	out, _, err = toolResult(ctx, inbox, q, "search_inbox", `{"keywords": ["zebra"]}`, true, &r)
	if err != nil || out != "[]" {
		t.Fatalf("empty search: %s, %v", out, err)
	}
	out, _, err = toolResult(ctx, inbox, q, "read_email", `{"message_id": "99999"}`, true, &r)
	if err != nil || !strings.HasPrefix(out, "error: ") || !r.ReadInvalidEmail {
		t.Fatalf("read unknown short id: %s, %v, %+v", out, err, r)
	}
	for _, arg := range []string{id, "<party.2@example.org>"} {
		r.ReadRightEmail = false
		out, _, err = toolResult(ctx, inbox, q, "read_email", `{"message_id": "`+arg+`"}`, true, &r)
		if want := `{"from":"bob@example.org","date":"` + e.Date.Format(dateLayout) + `"}`; err != nil || out != want || !r.ReadRightEmail {
			t.Fatalf("read %s: %s, %v; want %s", arg, out, err, want)
		}
	}
	for _, c := range []struct {
		source  string
		compact bool
		want    bool
	}{
		{id, true, true},
		{"party.2@example.org", true, true},
		{id, false, false}, // short ids are compact mode's only
		{"1" + id, true, false},
		{"bob", true, false},
	} {
		var r Rubric
		_, final, err := toolResult(ctx, inbox, q, "return_final_answer", `{"answer": "bob@example.org", "sources": ["`+c.source+`"]}`, c.compact, &r)
		if err != nil || !final || !r.Correct || r.SourcesCorrect != c.want {
			t.Errorf("final answer citing %q (compact %v): %v, %v, %+v; want sources correct %v", c.source, c.compact, final, err, r, c.want)
		}
	}
}
