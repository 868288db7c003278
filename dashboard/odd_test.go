package dashboard

import (
	"math"
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
