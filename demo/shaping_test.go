package demo

import (
	"testing"

	"github.com/artgo/art"
	"github.com/artgo/art/games/tictactoe"
)

// Ensure the training-only shapings read a game's moves from its
// trajectory as the rollout records them (a board prompt, then the
// sampled reply) and leave the given groups untouched.
func TestPenalizeBlunders(t *testing.T) {
	game := func(moves ...struct {
		board string
		reply string
	}) art.Trajectory {
		var traj art.Trajectory
		for _, m := range moves {
			var b tictactoe.Board
			for i := range b {
				if m.board[i] != '.' {
					b[i] = m.board[i]
				}
			}
			var h art.History
			h.AddMessage(art.UserMsg(b.Prompt()))
			h.AddChoice(art.Choice{Message: art.AssistantMsg(m.reply)})
			traj.AddHistory(h)
		}
		traj.Reward = 1
		return traj
	}
	type move = struct{ board, reply string }
	groups := []art.TrajectoryGroup{{Trajectories: []art.Trajectory{
		game(move{".........", "5"}, move{"X..OX....", "9"}), // wins at once: no blunder
		game(move{".........", "5"}, move{"X..OX....", "3"}), // misses the win at 9
		game(move{"XX.OO....", "7"}, move{"XXOOO.X..", "6"}), // misses 3 (a win), then plays the block
		game(move{"X..OO....", "6"}, move{"X..OOX..O", "x"}), // blocks; an unreadable reply is no blunder
		game(move{"X..OO....", "1"}, move{"X.XOO..O.", "2"}), // an occupied cell: invalid, not a blunder
		game(move{"X..OO....", "9"}),                         // leaves O its line 4-5-6
	}}}
	want := []int{0, 1, 1, 0, 0, 1}
	for i, tr := range groups[0].Trajectories {
		if got := blunders(&tr); got != want[i] {
			t.Errorf("game %d: %d blunders; want %d", i, got, want[i])
		}
	}
	shaped := penalizeBlunders(groups, 0.25)
	for i, tr := range shaped[0].Trajectories {
		if w := 1 - 0.25*float64(want[i]); tr.Reward != w {
			t.Errorf("game %d: shaped reward %v; want %v", i, tr.Reward, w)
		}
		if groups[0].Trajectories[i].Reward != 1 {
			t.Fatalf("penalizeBlunders changed its input")
		}
	}
}
