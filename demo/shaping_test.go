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
	groups := []art.TrajectoryGroup{{Trajectories: []art.Trajectory{
		game(1, move{".........", "5"}, move{"X..OX....", "9"}), // wins at once: no blunder
		game(1, move{".........", "5"}, move{"X..OX....", "3"}), // misses the win at 9
		game(1, move{"XX.OO....", "7"}, move{"XXOOO.X..", "6"}), // misses 3 (a win), then plays the block
		game(1, move{"X..OO....", "6"}, move{"X..OOX..O", "x"}), // blocks; an unreadable reply is no blunder
		game(1, move{"X..OO....", "1"}, move{"X.XOO..O.", "2"}), // an occupied cell: invalid, not a blunder
		game(1, move{"X..OO....", "9"}),                         // leaves O its line 4-5-6
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

type move = struct{ board, reply string }

// game records a game as RolloutWith does: one history a move, the board
// ('.' for an empty cell) as its prompt and the reply as its answer.
func game(reward float64, moves ...move) art.Trajectory {
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
	traj.Reward = reward
	return traj
}

// Ensure splitByBoard makes one group per board that two games of a group
// met with different moves, each move its own one-history trajectory with
// its game's reward, and leaves out boards one game met, boards where all
// chose alike, and boards of different groups.
func TestSplitByBoard(t *testing.T) {
	groups := []art.TrajectoryGroup{
		{Trajectories: []art.Trajectory{
			game(1, move{".........", "5"}, move{"X..OX....", "9"}),
			game(0, move{".........", "5"}, move{"X..OX....", "3"}),
			game(0.5, move{".........", "1"}, move{"X..OX....", "3"}, move{"XO.......", "5"}),
			game(0, move{".........", "1"}, move{"XO.......", "5"}), // XO....... met twice, the same move both times
		}},
		{Trajectories: []art.Trajectory{
			game(1, move{".........", "9"}), // its own group: one game, no comparison
			game(0, move{"X..OX....", "7"}), // the board of the group above, but another group
		}},
	}
	got := splitByBoard(groups)
	type want struct {
		board   string
		replies []string
		rewards []float64
	}
	wants := []want{
		{".........", []string{"5", "5", "1", "1"}, []float64{1, 0, 0.5, 0}},
		{"X..OX....", []string{"9", "3", "3"}, []float64{1, 0, 0.5}},
	}
	if len(got) != len(wants) {
		t.Fatalf("%d groups; want %d", len(got), len(wants))
	}
	for i, w := range wants {
		trajs := got[i].Trajectories
		if len(trajs) != len(w.replies) {
			t.Fatalf("group %d: %d moves; want %d", i, len(trajs), len(w.replies))
		}
		for j := range trajs {
			turns := tictactoe.Turns(&trajs[j])
			b := game(0, move{w.board, w.replies[j]})
			if len(trajs[j].AdditionalHistories) != 0 || len(turns) != 1 || turns[0] != tictactoe.Turns(&b)[0] || trajs[j].Reward != w.rewards[j] {
				t.Errorf("group %d move %d: %d histories, turns %q, reward %v; want board %q, reply %q, reward %v",
					i, j, 1+len(trajs[j].AdditionalHistories), turns, trajs[j].Reward, w.board, w.replies[j], w.rewards[j])
			}
		}
	}
}
