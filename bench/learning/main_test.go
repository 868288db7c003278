package main

import (
	"strings"
	"testing"
	"time"

	"github.com/artgo/art/demo"
)

// Ensure the time to each reward is the first evaluation at or above it,
// with the evaluations' own time taken out beside it, and a threshold never
// reached says so.
func TestTimesToReach(t *testing.T) {
	evals := []demo.Eval{
		{Step: 0, Elapsed: 10 * time.Second, Reward: 0.5},
		{Step: 25, Elapsed: 20 * time.Second, Evaluating: 2 * time.Second, Reward: 0.72},
		{Step: 50, Elapsed: 30 * time.Second, Evaluating: 4 * time.Second, Reward: 0.85},
		{Step: 75, Elapsed: 40 * time.Second, Evaluating: 6 * time.Second, Reward: 0.81},
	}
	got := timesToReach(evals, 75)
	want := []string{"**20 s** (18 s without evaluations; step 25: 0.720)", "**30 s** (26 s without evaluations; step 50: 0.850)", "not in 75 steps"}
	if got != strings.Join(want, " | ") {
		t.Errorf("timesToReach = %q; want %q", got, strings.Join(want, " | "))
	}
}
