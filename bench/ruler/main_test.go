package main

import (
	"context"
	"strings"
	"testing"

	"github.com/artgo/art/games/tictactoe"
)

// Ensure the whole comparison runs end to end in a smoke configuration:
// the judge is built and served, RULER scores become the training reward
// through the real server and grammar-constrained answers, nothing is
// dropped, and the table is printed.
func TestSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a judge and a base model (about 20 s)")
	}
	var out strings.Builder
	c := config{path: t.TempDir(), steps: 2, groups: 2, groupSize: 4, evalGames: 8, seed: 1,
		judge:       judgeOptions{Shape: "tiny", Groups: 40, GroupSize: 4, Epochs: 1, LR: 3e-3, Seed: 1},
		agreeGroups: 4, arms: "hand,ruler", out: &out, quiet: true}
	if err := run(context.Background(), c, t.Logf); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Spearman ρ within groups", "| hand | the game's", "| ruler | RULER scores only", "| 4 (0, 0) |"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}

// Ensure the judge's transcripts carry each game's outcome and the answer
// the rubric gives, in RULER's prompt.
func TestMakeExample(t *testing.T) {
	ex, err := makeExample(context.Background(), newRNG(3), 7, 4)
	if err != nil {
		t.Fatal(err)
	}
	user := ex.prompt.Messages[1].Content.Text
	if ex.prompt.Identical {
		t.Skip("identical games drawn")
	}
	for i, out := range ex.outcomes {
		e, _ := verdict(out)
		if !strings.Contains(ex.answer, `"explanation":"`+e+`"`) || !strings.Contains(user, tictactoe.OutcomeMessage(out)) {
			t.Errorf("game %d (%+v): answer %s", i, out, ex.answer)
		}
	}
	if got := strings.Count(user, "<trajectory id="); got != 4 {
		t.Errorf("%d trajectory blocks", got)
	}
}

func TestSpearman(t *testing.T) {
	if r, ok := spearman([]float64{1, 0.5, 0.1, 0}, []float64{1, 0.5, 0, 0}); !ok || r < 0.94 {
		t.Errorf("ρ = %v, %v", r, ok)
	}
	if _, ok := spearman([]float64{1, 1}, []float64{0, 1}); ok {
		t.Error("a constant side has a correlation")
	}
}
