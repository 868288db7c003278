package ruler

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/artgo/art"
)

var update = flag.Bool("update", false, "rewrite the golden files")

func traj(msgs ...art.MessageOrChoice) []art.History {
	return []art.History{{MessagesAndChoices: msgs}}
}

func msg(m art.Message) art.MessageOrChoice { return art.MessageOrChoice{Message: &m} }

func choice(text string) art.MessageOrChoice {
	c := art.Choice{FinishReason: "stop", Message: art.AssistantMsg(text)}
	return art.MessageOrChoice{Choice: &c}
}

// golden compares got with testdata/name.golden (rewritten with -update).
func golden(t *testing.T, name string, got string) {
	t.Helper()
	path := filepath.Join("testdata", name+".golden")
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if got != string(want) {
		t.Errorf("%s: got\n%s\nwant\n%s", name, got, want)
	}
}

func render(p Prompt) string {
	var b strings.Builder
	for _, m := range p.Messages {
		b.WriteString("=== " + m.Role + "\n" + m.Content.String() + "\n")
	}
	fmt.Fprintf(&b, "=== expected scores: %d, identical: %v\n", p.Expected, p.Identical)
	return b.String()
}

// Ensure the judge's prompt is exactly as documented, for each shape of
// group.
func TestNewPrompt_Golden(t *testing.T) {
	sys := msg(art.SystemMsg("You play tic-tac-toe as X. <reply> with a cell & nothing else."))
	user := msg(art.UserMsg("1|2|3\n4|5|6\n7|8|9"))
	tools := []art.Tool{{Type: "function", Function: art.FunctionDefinition{Name: "search", Description: "Search the inbox",
		Parameters: json.RawMessage(`{"type":"object","properties":{"q":{"type":"string"}},"required":["q"]}`)}}}
	withTools := func(hs []art.History) []art.History { hs[0].Tools = tools; return hs }
	moves := func(first, second string) []art.History {
		return []art.History{
			{MessagesAndChoices: []art.MessageOrChoice{user, choice(first)}},
			{MessagesAndChoices: []art.MessageOrChoice{msg(art.UserMsg("X|2|O\n4|5|6\n7|8|9")), choice(second), msg(art.UserMsg("Game over: you won"))}},
		}
	}
	for _, tc := range []struct {
		name   string
		group  [][]art.History
		rubric string
	}{
		{"prefix", [][]art.History{traj(sys, user, choice("5")), traj(sys, user, choice("1")), traj(sys, user, choice("9"))}, ""},
		{"no_prefix", [][]art.History{traj(msg(art.UserMsg("a")), choice("x")), traj(msg(art.UserMsg("b")), choice("y"))}, ""},
		{"identical", [][]art.History{traj(sys, user, choice("5")), traj(sys, user, choice("5"))}, ""},
		{"tools_rubric", [][]art.History{withTools(traj(sys, user, choice("search"))), withTools(traj(sys, user, choice("done")))}, "- Finding the mail is all that counts."},
		{"additional_histories", [][]art.History{moves("1", "5"), moves("3", "3")}, ""},
	} {
		p, err := NewPrompt(tc.group, tc.rubric)
		if err != nil {
			t.Fatal(err)
		}
		golden(t, tc.name, render(p))
	}
	if _, err := NewPrompt(nil, ""); err == nil {
		t.Error("NewPrompt(nil) succeeded")
	}
}

// Ensure answers are checked and mapped: by id when the ids are 1..n in
// any order, by position otherwise; bad answers say what is wrong.
func TestParseAnswer(t *testing.T) {
	s, err := ParseAnswer(`{"scores":[{"trajectory_id":"2","explanation":"b","score":0.2},{"trajectory_id":"1","explanation":"a","score":1}]}`, 2)
	if err != nil || s[0].Explanation != "a" || s[0].Score != 1 || s[1].Score != 0.2 {
		t.Errorf("by id: %+v, %v", s, err)
	}
	s, err = ParseAnswer(`{"scores":[{"trajectory_id":"x","explanation":"a","score":0.5},{"trajectory_id":"x","explanation":"b","score":0}]}`, 2)
	if err != nil || s[0].Explanation != "a" || s[1].Explanation != "b" {
		t.Errorf("by position: %+v, %v", s, err)
	}
	for _, tc := range []struct{ answer, want string }{
		{`{"scores":[]}`, "0 scores for 2 trajectories"},
		{`not json`, "not the JSON object"},
		{`{"scores":[{"trajectory_id":"1","explanation":"","score":1.5},{"trajectory_id":"2","explanation":"","score":0}]}`, "outside [0, 1]"},
		{`{"scores":[{"trajectory_id":"1","explanation":""},{"trajectory_id":"2","explanation":"","score":0}]}`, `no "score"`},
	} {
		if _, err := ParseAnswer(tc.answer, 2); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ParseAnswer(%s) = %v; want %q", tc.answer, err, tc.want)
		}
	}
}

// Ensure the answer's schema asks for the keys in RULER's order (a
// constrained decoder writes them in the schema's order) and is a schema
// the grammar enforces, with bounds when asked.
func TestResponseSchema(t *testing.T) {
	s := string(ResponseSchema(3, 0))
	if i, j, k := strings.Index(s, `"trajectory_id"`), strings.Index(s, `"explanation"`), strings.Index(s, `"score":`); !(i < j && j < k) {
		t.Errorf("keys out of order: %s", s)
	}
	var v map[string]any
	if err := json.Unmarshal(ResponseSchema(2, 16), &v); err != nil || !strings.Contains(string(ResponseSchema(2, 16)), `"maxLength":16`) {
		t.Errorf("bounded schema: %v", err)
	}
}
