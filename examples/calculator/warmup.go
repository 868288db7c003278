package main

import (
	"fmt"
	"io"
	"math/rand/v2"
	"strconv"
	"strings"

	"github.com/artgo/art"
	"github.com/artgo/art/experiment"
)

// ProductProblems returns n distinct problems "Compute A * B." with A and
// B two-digit numbers from 32 to 99, drawn from seed: the --problems
// products set. Every question, tool call and four-digit answer has the
// same length, so a small model taught from scratch only has to copy at
// fixed offsets; it still cannot multiply, so only the tool gives the
// answer.
func ProductProblems(seed uint64, n int) []Problem {
	n = min(n, 68*68)
	r := rand.New(rand.NewPCG(seed, 0xa717))
	seen := map[string]bool{}
	out := make([]Problem, 0, n)
	for len(out) < n {
		a, b := between(r, 32, 99), between(r, 32, 99)
		expr := fmt.Sprintf("%d * %d", a, b)
		q := "Compute " + expr + "."
		if seen[q] {
			continue
		}
		seen[q] = true
		out = append(out, Problem{ID: fmt.Sprintf("p%d-%d", seed, len(out)), Question: q, Answer: a * b, Solution: expr})
	}
	return out
}

// TeacherTranscripts returns n supervised examples for --sft-warmup, one
// per problem of problems taken in a seeded random order (repeating if n is
// larger): the teacher calls the calculator with the problem's solution and
// answers with the tool's result, as Rollout records an episode. With
// probability noise the teacher instead answers at once, without the tool,
// with a wrong number (one of the question's numbers), so the model it
// teaches uses the tool only some of the time and GRPO has something to
// improve.
func TeacherTranscripts(problems []Problem, n int, noise float64, seed uint64, system string, tool art.Tool) []art.Trajectory {
	r := rand.New(rand.NewPCG(seed, 0x7eac4e7))
	out := make([]art.Trajectory, 0, n)
	for len(out) < n {
		for _, i := range r.Perm(len(problems)) {
			if len(out) == n {
				break
			}
			p := problems[i]
			t := art.Trajectory{Tools: []art.Tool{tool}}
			if system != "" {
				t.AddMessage(art.SystemMsg(system))
			}
			t.AddMessage(art.UserMsg(p.Question))
			if r.Float64() < noise {
				t.AddMessage(art.AssistantMsg(wrongGuess(r, p)))
				out = append(out, t)
				continue
			}
			id := "call_" + strconv.Itoa(len(out))
			args := fmt.Sprintf(`{"expression": %s}`, strconv.Quote(p.Solution))
			t.AddMessage(art.Message{Role: art.RoleAssistant, ToolCalls: []art.ToolCall{{ID: id, Type: "function",
				Function: art.FunctionCall{Name: calculatorName, Arguments: args}}}})
			result, _ := CallTool(calculatorName, args)
			t.AddMessage(art.ToolMsg(id, result))
			t.AddMessage(art.AssistantMsg(result))
			out = append(out, t)
		}
	}
	return out
}

// wrongGuess returns a number of p's question that is not its answer (or
// the answer plus one if there is none).
func wrongGuess(r *rand.Rand, p Problem) string {
	var nums []string
	for _, m := range numberRE.FindAllString(p.Question, -1) {
		if m != strconv.FormatInt(p.Answer, 10) && !strings.HasPrefix(m, "-") {
			nums = append(nums, m)
		}
	}
	if len(nums) == 0 {
		return strconv.FormatInt(p.Answer+1, 10)
	}
	return nums[r.IntN(len(nums))]
}

// writeTeacher writes cfg.teacher teacher transcripts of the training
// problems as JSONL, one art.Trajectory per line, for `art pretrain`: the
// way to build a base model from scratch that can copy numbers, which
// --sft-warmup's LoRA alone does not teach a random model.
func writeTeacher(cfg config, stdout io.Writer) error {
	trainSet, _ := splitProblems(cfg)
	opt := RolloutOptions{System: cfg.system}
	trajs := TeacherTranscripts(trainSet, cfg.teacher, cfg.sftNoise, cfg.Seed, opt.system(), CalculatorTool(cfg.compactTool))
	if err := experiment.WriteTranscripts(cfg.writeTeacher, trajs); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "wrote %d teacher transcripts to %s\n", len(trajs), cfg.writeTeacher)
	return nil
}
