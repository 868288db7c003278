package dashboard

import (
	"math"
	"strings"
	"testing"
)

// Ensure a trajectory whose sampled tokens include a logprob of -Inf (a
// token the sampler drew at probability 0, as servers report it) or NaN
// opens: the answer is JSON, with the tokens' logprobs spelled as JS
// numbers the page can read ("-Infinity", "NaN").
func TestAPI_NonFiniteLogprob(t *testing.T) {
	root := t.TempDir()
	d := writeRun(t, root, testRun{project: "p", name: "m", steps: 1})
	rows := trajectoryRows(2, 0)
	rows[0].Messages[4].Logprobs[1].Logprob = math.Inf(-1)
	rows[0].Messages[4].Logprobs[2].Logprob = math.NaN()
	if err := d.WriteTrajectories("train", 0, rows); err != nil {
		t.Fatal(err)
	}
	srv, _ := newTestServer(t, Config{Root: root})
	var tr struct{ Messages []messageView }
	if st := get(t, srv.Client(), srv.URL+DefaultBasePath+"api/trajectory?run=p/m&split=train&step=0&index=0", &tr); st != 200 {
		t.Fatalf("status %d", st)
	}
	tok := tr.Messages[4].Tokens
	if len(tok) != 5 || tok[1][0] != " took" || tok[1][1] != "-Infinity" || tok[2][1] != "NaN" || tok[3][1] != -2.9 {
		t.Fatalf("tokens %v; want \" took\" at -Infinity, \" the\" at NaN, \" corner\" at -2.9", tok)
	}
}

// Ensure malformed paging and index parameters are a 400 naming them, not
// silently read as 0 or answered as a missing trajectory.
func TestAPI_BadPaging(t *testing.T) {
	root := t.TempDir()
	writeRun(t, root, testRun{project: "p", name: "m", steps: 1, trajectories: 5, every: 1})
	srv, _ := newTestServer(t, Config{Root: root})
	base := srv.URL + DefaultBasePath + "api/"
	for _, tc := range []struct{ path, want string }{
		{"trajectories?run=p/m&split=train&step=0&offset=abc", `offset "abc": want a whole number ≥ 0`},
		{"trajectories?run=p/m&split=train&step=0&offset=-5", `offset "-5": want a whole number ≥ 0`},
		{"trajectories?run=p/m&split=train&step=0&limit=ten", `limit "ten": want a whole number ≥ 0`},
		{"trajectories?run=p/m&split=train&step=0&limit=2.5", `limit "2.5": want a whole number ≥ 0`},
		{"trajectory?run=p/m&split=train&step=0&index=x", `index "x": want a trajectory's number`},
		{"trajectory?run=p/m&split=train&step=0", `index "": want a trajectory's number`},
	} {
		var e apiError
		if st := get(t, srv.Client(), base+tc.path, &e); st != 400 || !strings.Contains(e.Error, tc.want) {
			t.Errorf("GET %s: %d %q; want 400 and %q", tc.path, st, e.Error, tc.want)
		}
	}
	var list struct{ Items []trajectorySummary }
	if st := get(t, srv.Client(), base+"trajectories?run=p/m&split=train&step=0&offset=4&limit=0", &list); st != 200 || len(list.Items) != 1 {
		t.Errorf("offset 4, limit 0 (the default): %d, %d items; want 200 and 1", st, len(list.Items))
	}
}
