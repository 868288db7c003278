package main

import (
	"math/rand/v2"

	"github.com/artgo/art"
)

// teacherSeed is the seed of the k-th teacher game of a run: training
// games (see scenarios) are seed<<32 | index with small indices, teacher
// games start at 1<<30, held-out games (see evalScenarios) have the top bit
// set, so the three never meet.
func teacherSeed(seed uint64, k int) uint64 { return seed<<32 | (1<<30 + uint64(k)) }

// TeacherTranscripts returns n supervised examples for --sft-warmup: moves
// of a teacher that plays uniformly at random among the moves that change
// the board, in games from training seeds. Each transcript is one move as
// Rollout records it: the system message if any, the prompt, then the teacher's one-word reply.
func TeacherTranscripts(seed uint64, n int, rules Rules, system string) []art.Trajectory {
	rng := rand.New(rand.NewPCG(seed, 0x7eac4e7))
	out := make([]art.Trajectory, 0, n)
	for k := 0; len(out) < n; k++ {
		g := NewGame(teacherSeed(seed, k))
		for g.Moves < rules.MaxMoves && len(out) < n && g.Board.MaxTile() < rules.Target {
			var legal []Direction
			for d := range directionNames {
				if _, _, changed := g.Board.Move(Direction(d)); changed {
					legal = append(legal, Direction(d))
				}
			}
			if len(legal) == 0 {
				break
			}
			d := legal[rng.IntN(len(legal))]
			var t art.Trajectory
			if system != "" {
				t.AddMessage(art.SystemMsg(system))
			}
			t.AddMessage(art.UserMsg(rules.prompt(g.Board)))
			t.AddMessage(art.AssistantMsg(d.String()))
			out = append(out, t)
			g.Apply(d)
		}
	}
	return out
}
