package main

import (
	"strings"
	"testing"
)

// Ensure a command that takes one argument says which one when it is
// missing or doubled (cobra's own error, "accepts 1 arg(s), received 0",
// named neither the argument nor the command), and that an unquoted AutoRL
// task is told to be quoted.
func TestOneArg(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"chart"}, `art: "art chart" needs MODEL_DIR, the model folder (<path>/<project>/models/<name>); see art chart --help`},
		{[]string{"chart", "a", "b"}, `art: "art chart" takes one argument, MODEL_DIR, the model folder (<path>/<project>/models/<name>); got 2: "a" "b"; see art chart --help`},
		{[]string{"show"}, `art: "art show" needs [PROJECT/]MODEL, the model to describe; see art show --help`},
		{[]string{"trajectories"}, `art: "art trajectories" needs FILE.parquet, a trajectories file that training logged; see art trajectories --help`},
		{[]string{"ruler", "--judge", "openai/o4-mini"}, `art: "art ruler" needs FILE.parquet, a trajectories file that training logged; see art ruler --help`},
		{[]string{"autorl"}, `art: "art autorl" needs "TASK", the task described in one quoted argument; see art autorl --help`},
		{[]string{"autorl", "Answer", "questions"}, `art: "art autorl" takes one argument, "TASK", the task described in one quoted argument; got 2: "Answer" "questions"; see art autorl --help`},
	} {
		code, _, errOut := runArgs(t, tt.args...)
		if code != 1 || strings.TrimSpace(errOut) != tt.want {
			t.Errorf("%q: exit %d, stderr %q; want 1 and %q", tt.args, code, errOut, tt.want)
		}
	}
}
