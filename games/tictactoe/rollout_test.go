package tictactoe

import (
	"testing"

	"github.com/artgo/art"
)

// Ensure Turns reads each move's board and reply back as RolloutWith
// records them: behind a system prompt, and with the outcome appended to
// the last move (Outcome) not taken for a board.
func TestTurns(t *testing.T) {
	var traj art.Trajectory
	boards := []Board{boardOf("........."), boardOf("X...O....")}
	for i, b := range boards {
		var h art.History
		h.AddMessage(art.SystemMsg(Instructions), art.UserMsg(b.Prompt()))
		h.AddChoice(art.Choice{Message: art.AssistantMsg([]string{"1", "9"}[i])})
		traj.AddHistory(h)
	}
	AddOutcome(&traj, Outcome{Win: true, Reward: 1})
	turns := Turns(&traj)
	if len(turns) != 2 {
		t.Fatalf("%d turns; want 2", len(turns))
	}
	for i, want := range []Turn{{boards[0].Prompt(), "1"}, {boards[1].Prompt(), "9"}} {
		if turns[i] != want {
			t.Errorf("turn %d = %q; want %q", i, turns[i], want)
		}
	}
}
