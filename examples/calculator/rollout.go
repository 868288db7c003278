package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/big"
	"regexp"
	"strings"
	"time"

	"github.com/openai/openai-go/v3"

	"github.com/artgo/art"
)

// SystemPrompt tells the model the task and the answer format.
const SystemPrompt = "Solve the math word problem. Use the calculator tool for every computation: call it with an " +
	"arithmetic expression (numbers, + - * / and parentheses). When you know the result, reply with the final " +
	"answer as a number only."

// calculatorParams is the JSON Schema of the calculator's arguments.
var calculatorParams = map[string]any{
	"type": "object",
	"properties": map[string]any{
		"expression": map[string]any{"type": "string", "description": "an arithmetic expression, such as (12 + 30) * 4 / 7"},
	},
	"required": []string{"expression"},
}

const (
	calculatorName = "calculator"
	calculatorDesc = "Evaluate an arithmetic expression exactly and return its value."
)

// compactCalculatorParams is the schema of the compact tool: the same
// arguments without descriptions, for a small model with a short context.
var compactCalculatorParams = map[string]any{
	"type":       "object",
	"properties": map[string]any{"expression": map[string]any{"type": "string"}},
}

// calculatorSpec returns the tool's description and schema, compact or not.
func calculatorSpec(compact bool) (string, map[string]any) {
	if compact {
		return "", compactCalculatorParams
	}
	return calculatorDesc, calculatorParams
}

// CalculatorTool is the tool as the trajectory records it and the chat
// request carries it; compact drops the descriptions (--compact-tool).
func CalculatorTool(compact bool) art.Tool {
	desc, params := calculatorSpec(compact)
	b, err := json.Marshal(params)
	if err != nil {
		panic(err) // a constant map always encodes
	}
	return art.FunctionTool(calculatorName, desc, b)
}

// CallTool runs one tool call of the model and returns the tool message's
// text. A call of another tool or with arguments that are not
// {"expression": string} returns an error text for the model (and ok false),
// as does an expression Eval rejects; the episode goes on either way.
func CallTool(name, arguments string) (result string, ok bool) {
	if name != calculatorName {
		return fmt.Sprintf("error: unknown tool %q; the only tool is %q", name, calculatorName), false
	}
	var args struct {
		Expression *string `json:"expression"`
	}
	if err := json.Unmarshal([]byte(arguments), &args); err != nil || args.Expression == nil {
		return `error: arguments must be a JSON object {"expression": "..."}`, false
	}
	v, err := Eval(*args.Expression)
	if err != nil {
		return "error: " + err.Error(), false
	}
	return FormatRat(v), true
}

var numberRE = regexp.MustCompile(`-?\d[\d,]*(?:\.\d+)?|-?\.\d+`)

// FinalNumber returns the last number in the model's final reply ("1,250",
// "-3", "4.5"), and false if the reply holds none.
func FinalNumber(reply string) (*big.Rat, bool) {
	ms := numberRE.FindAllString(reply, -1)
	if len(ms) == 0 {
		return nil, false
	}
	v, ok := new(big.Rat).SetString(strings.ReplaceAll(ms[len(ms)-1], ",", ""))
	return v, ok
}

// Grade scores a final reply against the exact answer:
//
//	1    the last number in the reply equals the answer exactly
//	0.1  the reply holds a number, but the wrong one (a well-formed attempt)
//	0    no number in the reply, or no final reply at all (out of turns)
//
// The small credit for a wrong number rewards the answer format early in
// training; it is far below a correct answer, so it never pays to guess.
func Grade(reply string, answer int64) (reward float64, correct, attempted bool) {
	v, ok := FinalNumber(reply)
	if !ok {
		return 0, false, false
	}
	if v.Cmp(new(big.Rat).SetInt64(answer)) == 0 {
		return 1, true, true
	}
	return 0.1, false, true
}

// RolloutOptions configure Rollout.
type RolloutOptions struct {
	MaxTurns    int           // model calls per episode; the last one must answer
	MaxTokens   int           // completion tokens per model call
	CallTimeout time.Duration // bound on each chat completion, retries included
	// System is the system message; "" means SystemPrompt.
	System string
	// CompactTool sends the tool without descriptions.
	CompactTool bool
	// SampleSeed, if set, makes sampling reproducible: the k-th call's
	// request carries the seed *SampleSeed+k (for held-out evaluations).
	SampleSeed *uint64
}

func (o RolloutOptions) system() string {
	if o.System == "" {
		return SystemPrompt
	}
	return o.System
}

// Rollout solves one problem through an OpenAI-compatible chat endpoint
// with the calculator tool: the model is called with the conversation so
// far; each tool call it makes is answered (CallTool) and the model is
// called again, until it replies without tool calls (its final answer,
// graded by Grade) or MaxTurns calls have been made (reward 0). The whole
// episode is the trajectory's main history, every model turn a Choice.
// Metrics: correct, attempted, turns, tool_calls, bad_tool_calls,
// ran_out_of_turns.
func Rollout(ctx context.Context, client openai.Client, modelName string, p Problem, opt RolloutOptions) (art.Trajectory, error) {
	if opt.MaxTurns < 1 {
		return art.Trajectory{}, errors.New("calculator: MaxTurns must be >= 1")
	}
	traj := art.Trajectory{Tools: []art.Tool{CalculatorTool(opt.CompactTool)}, Metadata: map[string]any{"scenario_id": p.ID}}
	traj.AddMessage(art.SystemMsg(opt.system()), art.UserMsg(p.Question))
	var turns, calls, bad int
	final, answered := "", false
	for turns < opt.MaxTurns && !answered {
		turns++
		params := openai.ChatCompletionNewParams{Model: modelName, MaxTokens: openai.Int(int64(opt.MaxTokens)), Temperature: openai.Float(1)}
		if opt.SampleSeed != nil {
			params.Seed = openai.Int(int64((*opt.SampleSeed + uint64(turns)) & math.MaxInt64))
		}
		cctx, cancel := context.WithTimeout(ctx, opt.CallTimeout)
		choice, err := traj.Chat(cctx, client, params)
		cancel()
		if err != nil {
			return art.Trajectory{}, fmt.Errorf("calculator: problem %s turn %d: %w", p.ID, turns, err)
		}
		if len(choice.Message.ToolCalls) == 0 {
			final, answered = choice.Message.Content.String(), true
			break
		}
		for _, tc := range choice.Message.ToolCalls {
			calls++
			result, ok := CallTool(tc.Function.Name, tc.Function.Arguments)
			if !ok {
				bad++
			}
			traj.AddMessage(art.ToolMsg(tc.ID, result))
		}
	}
	reward, correct, attempted := 0.0, false, false
	if answered {
		reward, correct, attempted = Grade(final, p.Answer)
	}
	traj.Reward = reward
	traj.SetMetric("correct", b2f(correct))
	traj.SetMetric("attempted", b2f(attempted))
	traj.SetMetric("turns", float64(turns))
	traj.SetMetric("tool_calls", float64(calls))
	traj.SetMetric("bad_tool_calls", float64(bad))
	traj.SetMetric("ran_out_of_turns", b2f(!answered))
	traj.Logf("answer %d, final reply %.80q", p.Answer, final)
	traj.Finish()
	return traj, nil
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
