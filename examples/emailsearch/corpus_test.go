package main

import (
	"context"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/artgo/art/internal/testassets"
)

// Three mails in the corpus's raw form (an mbox "From " line first).
var testMails = map[string]string{
	"ham/00001.txt": "From alice@example.com  Thu Aug 22 12:36:23 2002\n" +
		"From: Alice Liddell <Alice@Example.com>\n" +
		"To: bob@example.org\n" +
		"Cc: Carol <carol@example.net>\n" +
		"Subject: =?iso-8859-1?q?Caf=E9?= budget for the garden party\n" +
		"Date: Thu, 22 Aug 2002 07:36:16 -0400\n" +
		"Message-Id: <party.1@example.com>\n" +
		"MIME-Version: 1.0\n" +
		"Content-Type: multipart/alternative; boundary=\"XYZ\"\n\n" +
		"--XYZ\nContent-Type: text/html\n\n<p>html version</p>\n" +
		"--XYZ\nContent-Type: text/plain; charset=us-ascii\nContent-Transfer-Encoding: quoted-printable\n\n" +
		"We need 40 teacups and a hedgehog croquet =\nset for the party.\n--XYZ--\n",
	"ham/00002.txt": "From: bob@example.org\n" +
		"To: alice@example.com\n" +
		"Subject: Re: Cafe budget for the garden party\n" +
		"Date: Fri, 23 Aug 2002 01:00:00 +0200\n" +
		"Message-Id: <party.2@example.org>\n\n" +
		"Teacups are fine, but the croquet set is over budget.\n",
	"spam/00003.txt": "From: \"WIN NOW\" <winner@lottery.example>\n" +
		"To: undisclosed-recipients:;\n" +
		"Subject: You have won a million dollars today\n" +
		"Date: Mon, 2 Sep 2002 10:00:00 +0000\n" +
		"Message-Id: <spam.3@lottery.example>\n" +
		"Content-Type: text/plain\nContent-Transfer-Encoding: base64\n\n" +
		"Q2xhaW0geW91ciBwcml6ZSBub3chIFNlbmQgeW91ciBiYW5r\nIGRldGFpbHMu\n",
	"spam/00004.txt": "From: nobody@example.com\nSubject: no message id\nDate: Mon, 2 Sep 2002 10:00:00 +0000\n\nbody\n",
}

func writeCorpus(tb testing.TB) string {
	tb.Helper()
	dir := tb.TempDir()
	for name, text := range testMails {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			tb.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			tb.Fatal(err)
		}
	}
	return dir
}

func TestParseEmail(t *testing.T) {
	e, err := ParseEmail([]byte(testMails["ham/00001.txt"]), "ham/00001.txt")
	if err != nil {
		t.Fatal(err)
	}
	want := Email{MessageID: "party.1@example.com", File: "ham/00001.txt", FromAddr: "alice@example.com",
		FromName: "Alice Liddell", To: []string{"bob@example.org", "carol@example.net"},
		Subject: "Café budget for the garden party", Date: time.Date(2002, 8, 22, 11, 36, 16, 0, time.UTC),
		Body: "We need 40 teacups and a hedgehog croquet set for the party."} // the newline before a boundary belongs to it
	if e.MessageID != want.MessageID || e.FromAddr != want.FromAddr || e.FromName != want.FromName ||
		strings.Join(e.To, ",") != strings.Join(want.To, ",") || e.Subject != want.Subject || !e.Date.Equal(want.Date) || e.Body != want.Body {
		t.Errorf("got  %+v\nwant %+v", e, want)
	}
	if got := e.From(); got != `"Alice Liddell" <alice@example.com>` {
		t.Errorf("From() = %s", got)
	}
	spam, err := ParseEmail([]byte(testMails["spam/00003.txt"]), "spam/00003.txt")
	if err != nil || spam.Body != "Claim your prize now! Send your bank details." || spam.FromName != "WIN NOW" {
		t.Errorf("base64 mail: %+v, %v", spam, err)
	}
	if _, err := ParseEmail([]byte(testMails["spam/00004.txt"]), "spam/00004.txt"); !errors.Is(err, ErrSkip) {
		t.Errorf("mail without Message-ID: err = %v; want ErrSkip", err)
	}
}

// Ensure the index is built once, reused while the corpus is unchanged,
// rebuilt when it changes, and searched and read correctly.
func TestInbox_SmallCorpus(t *testing.T) {
	ctx := context.Background()
	dir := writeCorpus(t)
	cache := filepath.Join(t.TempDir(), "cache", "index.db")
	inbox, built, err := OpenInbox(ctx, dir, cache)
	if err != nil || !built {
		t.Fatalf("first open: built=%v err=%v", built, err)
	}
	inbox.Close()
	inbox, built, err = OpenInbox(ctx, dir, cache)
	if err != nil || built {
		t.Fatalf("second open: built=%v err=%v; want the cached index", built, err)
	}
	defer inbox.Close()
	if m, _ := filepath.Glob(filepath.Join(filepath.Dir(cache), "*.tmp")); len(m) != 0 {
		t.Errorf("temporary files left behind: %v", m)
	}

	ids := func(rs []SearchResult) string {
		var s []string
		for _, r := range rs {
			s = append(s, r.MessageID)
		}
		slices.Sort(s) // the ranking among equally good matches is bm25's business
		return strings.Join(s, " ")
	}
	for _, c := range []struct {
		name string
		q    SearchQuery
		want string
	}{
		{"keyword in one body", SearchQuery{Keywords: []string{"hedgehog"}}, "party.1@example.com"},
		{"keyword case and stemming-free", SearchQuery{Keywords: []string{"TEACUPS"}}, "party.1@example.com party.2@example.org"},
		{"all keywords must match", SearchQuery{Keywords: []string{"croquet", "budget"}}, "party.1@example.com party.2@example.org"},
		{"keywords as one string", SearchQuery{Keywords: []string{"croquet over budget"}}, "party.2@example.org"},
		{"subject words", SearchQuery{Keywords: []string{"million"}}, "spam.3@lottery.example"},
		{"from filter", SearchQuery{Keywords: []string{"croquet"}, From: "bob@"}, "party.2@example.org"},
		{"from name", SearchQuery{From: "liddell"}, "party.1@example.com"},
		{"to filter", SearchQuery{To: "carol"}, "party.1@example.com"},
		{"sent after", SearchQuery{Keywords: []string{"teacups"}, SentAfter: "2002-08-23"}, ""}, // bob wrote 2002-08-22 23:00 UTC
		{"sent before", SearchQuery{SentBefore: "2002-08-23"}, "party.1@example.com party.2@example.org"},
		{"date window", SearchQuery{SentAfter: "2002-09-01", SentBefore: "2002-09-03"}, "spam.3@lottery.example"},
		{"quotes are literal", SearchQuery{Keywords: []string{`"hedgehog" OR`}}, ""},
		{"no match", SearchQuery{Keywords: []string{"zebra"}}, ""},
	} {
		rs, err := inbox.Search(ctx, c.q)
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		if got := ids(rs); got != c.want {
			t.Errorf("%s: got [%s]; want [%s]", c.name, got, c.want)
		}
	}
	rs, _ := inbox.Search(ctx, SearchQuery{Keywords: []string{"hedgehog"}})
	if len(rs) != 1 || !strings.Contains(rs[0].Snippet, "hedgehog") || rs[0].Date != "2002-08-22 11:36 UTC" {
		t.Errorf("result %+v", rs)
	}
	for _, q := range []SearchQuery{{}, {Keywords: []string{"!!"}}, {SentAfter: "22/08/2002"}} {
		if _, err := inbox.Search(ctx, q); !errors.Is(err, ErrBadQuery) {
			t.Errorf("Search(%+v) err = %v; want ErrBadQuery", q, err)
		}
	}

	e, err := inbox.Read(ctx, "<party.2@example.org>")
	if err != nil || e.FromAddr != "bob@example.org" || !strings.Contains(e.Body, "over budget") {
		t.Errorf("Read: %+v, %v", e, err)
	}
	if _, err := inbox.Read(ctx, "nope@example.com"); !errors.Is(err, ErrNoEmail) {
		t.Errorf("Read of an unknown id: %v; want ErrNoEmail", err)
	}

	// A changed corpus makes the cached index stale.
	if err := os.WriteFile(filepath.Join(dir, "ham", "00005.txt"), []byte("From: d@example.com\nSubject: new mail here\n"+
		"Date: Tue, 3 Sep 2002 10:00:00 +0000\nMessage-Id: <new.5@example.com>\n\nzebra\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	inbox2, built, err := OpenInbox(ctx, dir, cache)
	if err != nil || !built {
		t.Fatalf("open after a change: built=%v err=%v; want a rebuild", built, err)
	}
	defer inbox2.Close()
	if rs, err := inbox2.Search(ctx, SearchQuery{Keywords: []string{"zebra"}}); err != nil || ids(rs) != "new.5@example.com" {
		t.Errorf("rebuilt index: %v, %v", rs, err)
	}
}

func TestQuestions_SmallCorpus(t *testing.T) {
	emails, skipped, err := LoadCorpus(writeCorpus(t))
	if err != nil || skipped != 1 || len(emails) != 3 {
		t.Fatalf("LoadCorpus: %d mails, %d skipped, %v", len(emails), skipped, err)
	}
	qs := GenerateQuestions(emails)
	// "Café budget..." and "Re: Cafe budget..." differ (é), so both count as
	// unique; the spam subject is unique too.
	if len(qs) != 3 {
		t.Fatalf("%d questions: %+v", len(qs), qs)
	}
}

// The real corpus, indexed once for all tests that need it.
var (
	realOnce  sync.Once
	realIndex string // the cache file
	realErr   error
)

// realInbox opens the index of the fetched SpamAssassin corpus, building it
// on first use, or skips (fails under ART_REQUIRE_ASSETS=1) without it.
func realInbox(tb testing.TB) (*Inbox, string, string) {
	tb.Helper()
	corpus := testassets.Dir(tb, testassets.SpamAssassin)
	realOnce.Do(func() {
		dir, err := os.MkdirTemp("", "emailsearch-test-")
		if err != nil {
			realErr = err
			return
		}
		realIndex = filepath.Join(dir, "index.db")
		var in *Inbox
		if in, _, realErr = OpenInbox(context.Background(), corpus, realIndex); realErr == nil {
			in.Close()
		}
	})
	if realErr != nil {
		tb.Fatal(realErr)
	}
	in, built, err := OpenInbox(context.Background(), corpus, realIndex)
	if err != nil || built {
		tb.Fatalf("reopen the index: built=%v err=%v", built, err)
	}
	tb.Cleanup(func() { in.Close() })
	return in, corpus, realIndex
}

func TestMain(m *testing.M) {
	code := m.Run()
	if realIndex != "" {
		os.RemoveAll(filepath.Dir(realIndex))
	}
	os.Exit(code)
}

// Ensure the real corpus parses (a few mails lack a Message-ID or repeat
// one) and a known mail is found by the words of its subject.
func TestInbox_SpamAssassin(t *testing.T) {
	ctx := context.Background()
	inbox, corpus, _ := realInbox(t)
	emails, skipped, err := LoadCorpus(corpus)
	if err != nil || len(emails)+skipped != 6046 || len(emails) < 5800 {
		t.Fatalf("LoadCorpus: %d mails, %d skipped, %v", len(emails), skipped, err)
	}
	const id = "13258.1030015585@munnari.OZ.AU" // easy-ham-1/00001: Robert Elz, "Re: New Sequences Window"
	rs, err := inbox.Search(ctx, SearchQuery{Keywords: []string{"pick", "mercury", "lbrace"}})
	if err != nil || len(rs) == 0 || rs[0].MessageID != id {
		t.Fatalf("search: %+v, %v", rs, err)
	}
	rs, err = inbox.Search(ctx, SearchQuery{Keywords: []string{"sequences window"}, From: "munnari", SentAfter: "2002-08-22", SentBefore: "2002-08-23"})
	if err != nil || !slices.ContainsFunc(rs, func(r SearchResult) bool { return r.MessageID == id }) {
		t.Fatalf("search by subject words, sender and day: %+v, %v", rs, err)
	}
	e, err := inbox.Read(ctx, id)
	if err != nil || e.FromName != "Robert Elz" || e.Subject != "Re: New Sequences Window" ||
		e.File != "easy-ham-1/00001.7c53336b37003a9286aba55d2945844c.txt" || e.Date.Format(dateLayout) != "2002-08-22" {
		t.Fatalf("read: %+v, %v", e, err)
	}
	rs, err = inbox.Search(ctx, SearchQuery{Keywords: []string{"sequences"}, SentAfter: "2002-08-22", SentBefore: "2002-08-23"})
	if err != nil || len(rs) == 0 {
		t.Fatalf("date-bounded search: %+v, %v", rs, err)
	}
	for _, r := range rs {
		if !strings.HasPrefix(r.Date, "2002-08-22") {
			t.Errorf("result outside the window: %+v", r)
		}
	}
}

// Ensure every generated question's answer is what the mail's own headers
// say, re-read from the raw file, and that the split is deterministic and
// disjoint.
func TestQuestions_SpamAssassin(t *testing.T) {
	ctx := context.Background()
	inbox, corpus, _ := realInbox(t)
	headers, err := inbox.headers(ctx)
	if err != nil {
		t.Fatal(err)
	}
	qs := GenerateQuestions(headers)
	kinds := map[string]int{}
	for _, q := range qs {
		kinds[q.Kind]++
	}
	if len(qs) < 1000 || kinds[KindSender] == 0 || kinds[KindDate] == 0 || kinds[KindSubject] == 0 {
		t.Fatalf("%d questions, kinds %v", len(qs), kinds)
	}
	for i, q := range qs {
		if i%7 != 0 && !testing.Short() && i > 400 { // every question up to 400, then a sample
			continue
		}
		e, err := inbox.Read(ctx, q.MessageID)
		if err != nil {
			t.Fatal(err)
		}
		raw, err := os.ReadFile(filepath.Join(corpus, e.File))
		if err != nil {
			t.Fatal(err)
		}
		fresh, err := ParseEmail(raw, e.File)
		if err != nil {
			t.Fatal(err)
		}
		switch q.Kind {
		case KindSender:
			if fresh.FromAddr != q.Answer || !strings.Contains(strings.ToLower(string(raw)), q.Answer) {
				t.Errorf("%s: answer %q, mail from %q", q.ID, q.Answer, fresh.FromAddr)
			}
		case KindDate:
			if fresh.Date.UTC().Format(dateLayout) != q.Answer {
				t.Errorf("%s: answer %q, mail sent %v", q.ID, q.Answer, fresh.Date)
			}
		case KindSubject:
			if fresh.Subject != q.Answer || !strings.Contains(q.Text, fresh.FromAddr) {
				t.Errorf("%s: answer %q, mail subject %q", q.ID, q.Answer, fresh.Subject)
			}
		}
		if !CheckAnswer(q, q.Answer) || CheckAnswer(q, "I don't know") {
			t.Errorf("%s: CheckAnswer disagrees with the answer %q", q.ID, q.Answer)
		}
	}
	train, val := SplitQuestions(qs, 1, 50)
	train2, val2 := SplitQuestions(qs, 1, 50)
	if len(val) != 50 || len(train) != len(qs)-50 || val[0] != val2[0] || train[0] != train2[0] {
		t.Fatalf("split: %d/%d, not deterministic or wrong sizes", len(train), len(val))
	}
	held := map[string]bool{}
	for _, q := range val {
		held[q.ID] = true
	}
	for _, q := range train {
		if held[q.ID] {
			t.Fatalf("%s is in both sets", q.ID)
		}
	}
}

// Ensure compact mode's questions are generated questions, filtered: the
// sender and date questions only, each with the ID, kind, answer and mail
// of its full-mode question, the mail's subject in its short text, and
// enough of them to train and hold out.
func TestCompactQuestions_SpamAssassin(t *testing.T) {
	ctx := context.Background()
	inbox, _, _ := realInbox(t)
	headers, err := inbox.headers(ctx)
	if err != nil {
		t.Fatal(err)
	}
	full := map[string]Question{}
	for _, q := range GenerateQuestions(headers) {
		full[q.ID] = q
	}
	subject := map[string]string{}
	for _, e := range headers {
		subject[e.MessageID] = e.Subject
	}
	qs := CompactQuestions(headers)
	kinds := map[string]int{}
	for _, q := range qs {
		kinds[q.Kind]++
		f, ok := full[q.ID]
		if !ok || f.Kind != q.Kind || f.Answer != q.Answer || f.MessageID != q.MessageID {
			t.Fatalf("compact %+v; full-mode question %+v", q, f)
		}
		if !strings.Contains(q.Text, subject[q.MessageID]) || len(q.Text) > len(subject[q.MessageID])+30 {
			t.Fatalf("%s: text %q for the subject %q", q.ID, q.Text, subject[q.MessageID])
		}
	}
	if len(qs) < 1500 || kinds[KindSender] < 500 || kinds[KindDate] < 500 || kinds[KindSubject] != 0 {
		t.Fatalf("%d compact questions, kinds %v; want >= 1500, sender and date only", len(qs), kinds)
	}
}

// Ensure compact mode's search ranks like a search engine: a subject with
// one or two miscopied words still finds its mail, first for most of the
// compact questions (an AND of the words would find none of them).
func TestSearchAnyWord_MiscopiedSubject(t *testing.T) {
	inbox, _, _ := realInbox(t)
	ctx := context.Background()
	headers, err := inbox.headers(ctx)
	if err != nil {
		t.Fatal(err)
	}
	_, qs := SplitQuestions(CompactQuestions(headers), 1, 200)
	r := rand.New(rand.NewPCG(1, 2))
	var n, first, top, and int
	for _, q := range qs {
		e, err := inbox.Read(ctx, q.MessageID)
		if err != nil {
			t.Fatal(err)
		}
		words := strings.Fields(e.Subject)
		if len(words) < 2 {
			continue
		}
		for range 1 + r.IntN(2) {
			i := r.IntN(len(words))
			for c := words[i]; words[i] == c; {
				words[i] = corruptKeyword(c, r)
			}
		}
		kw := []string{strings.Join(words, " ")}
		n++
		res, err := inbox.Search(ctx, SearchQuery{Keywords: kw, Limit: compactResults, AnyWord: true})
		if err != nil {
			t.Fatal(err)
		}
		if len(res) > 0 && res[0].MessageID == q.MessageID {
			first++
		}
		if slices.ContainsFunc(res, func(s SearchResult) bool { return s.MessageID == q.MessageID }) {
			top++
		}
		res, err = inbox.Search(ctx, SearchQuery{Keywords: kw, Limit: compactResults})
		if err != nil {
			t.Fatal(err)
		}
		if slices.ContainsFunc(res, func(s SearchResult) bool { return s.MessageID == q.MessageID }) {
			and++
		}
	}
	t.Logf("%d miscopied subjects: the mail first for %d, in the top %d for %d (all words required: %d)", n, first, compactResults, top, and)
	if n < 150 || float64(first) < 0.75*float64(n) || top < first {
		t.Fatalf("%d miscopied subjects: the mail first for only %d, in the top %d for %d", n, first, compactResults, top)
	}
}

// Ensure any text a model writes is a safe search in both modes: quotes,
// dashes, brackets, FTS5 operators and column filters are searched as
// words, never as query syntax, and an empty query is a bad query.
func TestSearch_QuotesUserText(t *testing.T) {
	ctx := context.Background()
	inbox, _, err := OpenInbox(ctx, writeCorpus(t), t.TempDir()+"/index.db")
	if err != nil {
		t.Fatal(err)
	}
	defer inbox.Close()
	for _, anyWord := range []bool{false, true} {
		for _, kw := range []string{`"croquet`, `croquet"`, `"croquet" OR`, `-croquet`, `croquet -`, `(croquet`, `[croquet]`, `{croquet}`,
			`croquet*`, `^croquet`, `NOT croquet`, `croquet NEAR`, `subject: croquet`, `croquet AND`, `'croquet'`, `croquet; DROP TABLE emails`} {
			res, err := inbox.Search(ctx, SearchQuery{Keywords: []string{kw}, AnyWord: anyWord})
			if err != nil {
				t.Fatalf("search %q (any word %v): %v", kw, anyWord, err)
			}
			if anyWord && !slices.ContainsFunc(res, func(s SearchResult) bool { return s.MessageID == "party.2@example.org" }) {
				t.Errorf("search %q (any word): %+v; want the croquet mail", kw, res)
			}
		}
		for _, kw := range [][]string{nil, {""}, {" "}, {`"`}, {`""`}, {"-", "()"}} {
			if _, err := inbox.Search(ctx, SearchQuery{Keywords: kw, AnyWord: anyWord}); !errors.Is(err, ErrBadQuery) {
				t.Errorf("search %q (any word %v): %v; want a bad query", kw, anyWord, err)
			}
		}
	}
}
