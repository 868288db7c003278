package main

import (
	"cmp"
	"fmt"
	"hash/fnv"
	"regexp"
	"slices"
	"strings"
	"unicode"
)

// Question kinds.
const (
	KindSender  = "sender"  // who sent the mail with a given subject: its address
	KindDate    = "date"    // when a given sender wrote about a subject: YYYY-MM-DD, UTC
	KindSubject = "subject" // what a given sender wrote about on a given day: the subject
)

// Question is a question about one mail of the inbox with a known answer.
type Question struct {
	ID        string `json:"id"`
	Kind      string `json:"kind"`
	Text      string `json:"text"`
	Answer    string `json:"answer"`
	MessageID string `json:"message_id"` // the mail that answers it
}

// GenerateQuestions makes one question per mail whose subject identifies
// it: a subject of 3 to 12 words and 12 to 90 characters, with at least 8
// letters and no replacement characters, that no other mail has (compared
// without case, "Re:"/"Fwd:" prefixes or spacing). The kind is chosen by a
// hash of the Message-ID, so the questions do not depend on the order of
// emails; a subject question is asked only when the sender sent no other
// mail that day, else it becomes a sender question. Every answer is read
// off the mail itself (its From address, Date or Subject header).
func GenerateQuestions(emails []Email) []Question {
	count := map[string]int{}
	perDay := map[string]int{}
	for _, e := range emails {
		count[normSubject(e.Subject)]++
		perDay[e.FromAddr+" "+e.Date.Format(dateLayout)]++
	}
	var out []Question
	for _, e := range emails {
		if !goodSubject(e.Subject) || count[normSubject(e.Subject)] != 1 {
			continue
		}
		who := e.FromName
		if who == "" || strings.ContainsRune(who, '\uFFFD') || strings.Contains(who, "@") {
			who = e.FromAddr
		}
		day := e.Date.Format(dateLayout)
		q := Question{ID: "q-" + e.MessageID, MessageID: e.MessageID}
		switch kind := hash64(0, e.MessageID) % 3; {
		case kind == 2 && perDay[e.FromAddr+" "+day] == 1:
			q.Kind, q.Answer = KindSubject, e.Subject
			q.Text = fmt.Sprintf("What is the subject of the email that %s sent on %s (UTC)?", e.FromAddr, day)
		case kind == 1:
			q.Kind, q.Answer = KindDate, day
			q.Text = fmt.Sprintf("On what date did %s write the email with the subject %q? Answer as YYYY-MM-DD (UTC).", who, e.Subject)
		default:
			q.Kind, q.Answer = KindSender, e.FromAddr
			q.Text = fmt.Sprintf("Who sent the email with the subject %q? Answer with the sender's email address.", e.Subject)
		}
		out = append(out, q)
	}
	return out
}

// CompactQuestions are the questions of compact mode (--compact): the
// sender and date questions of GenerateQuestions, whose answers are copied
// from a short field that compact read_email shows, asked in fewer words.
// Subject questions are dropped: they are found by sender and day, not by
// subject words, and their answer is the longest to copy. Answers,
// Message-IDs and IDs are those of GenerateQuestions, so they are graded
// and re-checked against the mails exactly as in full mode. The subject is
// quoted as is, not escaped (%q would turn a non-ASCII character into an
// escape the search cannot use); goodSubject rules out quotes in it.
func CompactQuestions(emails []Email) []Question {
	subject := make(map[string]string, len(emails))
	for _, e := range emails {
		subject[e.MessageID] = e.Subject
	}
	var out []Question
	for _, q := range GenerateQuestions(emails) {
		switch q.Kind {
		case KindSender:
			q.Text = fmt.Sprintf(`Who sent "%s"?`, subject[q.MessageID])
		case KindDate:
			q.Text = fmt.Sprintf(`What day was "%s" sent?`, subject[q.MessageID])
		default:
			continue
		}
		out = append(out, q)
	}
	return out
}

// SplitQuestions orders the questions by a hash of (seed, id) and returns
// the first nVal as the held-out set and the rest for training. The split
// depends only on the seed and the questions themselves.
func SplitQuestions(qs []Question, seed uint64, nVal int) (train, val []Question) {
	qs = slices.Clone(qs)
	slices.SortFunc(qs, func(a, b Question) int {
		return cmp.Or(cmp.Compare(hash64(seed, a.ID), hash64(seed, b.ID)), strings.Compare(a.ID, b.ID))
	})
	nVal = min(max(nVal, 0), len(qs))
	return qs[nVal:], qs[:nVal]
}

func hash64(seed uint64, s string) uint64 {
	h := fnv.New64a()
	fmt.Fprintf(h, "%d\x00%s", seed, s)
	return h.Sum64()
}

var replyPrefix = regexp.MustCompile(`(?i)^\s*((re|fw|fwd|aw)\s*(\[\d+\])?\s*:\s*)+`)

// normSubject is the subject as compared for uniqueness: no reply
// prefixes, lower case, single spaces.
func normSubject(s string) string {
	return strings.Join(strings.Fields(strings.ToLower(replyPrefix.ReplaceAllString(s, ""))), " ")
}

func goodSubject(s string) bool {
	words := strings.Fields(s)
	letters := 0
	for _, r := range s {
		if unicode.IsLetter(r) {
			letters++
		}
	}
	return len(words) >= 3 && len(words) <= 12 && len(s) >= 12 && len(s) <= 90 && letters >= 8 &&
		!strings.ContainsRune(s, '\uFFFD') && !strings.ContainsRune(s, '"')
}

var dateRE = regexp.MustCompile(`\b\d{4}-\d{2}-\d{2}\b`)

// idkAnswers are the answers that say the model could not find out.
var idkAnswers = []string{"i don't know", "i do not know", "i dont know", "unknown", "not found", ""}

// normAnswer lower-cases an answer, collapses its spaces and trims quotes,
// brackets and final punctuation.
func normAnswer(s string) string {
	s = strings.Join(strings.Fields(strings.ToLower(s)), " ")
	return strings.Trim(s, " \"'`<>.!")
}

// IsIDontKnow reports whether an answer says the model does not know.
func IsIDontKnow(answer string) bool { return slices.Contains(idkAnswers, normAnswer(answer)) }

// CheckAnswer grades an answer exactly, with no model as judge: a sender
// answer must contain the address and no other; a date answer's first YYYY-MM-DD must be
// the date; a subject answer must contain the subject (both without case,
// reply prefixes or extra spaces).
func CheckAnswer(q Question, answer string) bool {
	a := normAnswer(answer)
	switch q.Kind {
	case KindSender:
		want := strings.ToLower(q.Answer)
		return strings.Contains(a, want) && !addrRE.MatchString(strings.ReplaceAll(a, want, ""))
	case KindDate:
		return dateRE.FindString(a) == q.Answer
	case KindSubject:
		want := normSubject(normAnswer(q.Answer))
		return want != "" && strings.Contains(normSubject(a), want)
	}
	return false
}
