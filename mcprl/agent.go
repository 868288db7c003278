package mcprl

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/openai/openai-go/v3"

	"github.com/artgo/art"
)

// CompleteTaskTool is the name of the tool the agent calls when it is done.
const CompleteTaskTool = "complete_task"

// completeTask is the tool that ends a rollout with a summary, as in
// OpenPipe ART's MCP•RL.
var completeTask = art.FunctionTool(CompleteTaskTool, "Call this when the task is complete, with a summary of what was done and the answer.",
	json.RawMessage(`{"type":"object","properties":{"summary":{"type":"string","description":"What was done and the result"}},"required":["summary"]}`))

// DefaultSystemPrompt is the agent's system prompt unless Agent.SystemPrompt
// says otherwise.
const DefaultSystemPrompt = "You are an agent that completes tasks with the tools of an MCP server. " +
	"Call one tool at a time and use its results. When the task is done, call complete_task with a summary of what you did and the answer."

// Agent runs tasks on an MCP server with a chat model: a multi-turn
// rollout whose every sampled turn is recorded as a Choice (with its token
// ids and logprobs, so it trains). The zero MaxTurns, SystemPrompt and
// Params are defaults; Client and Model are required.
type Agent struct {
	// Client and Model say where the agent's turns are sampled (for a
	// trainable model: model.OpenAIClient() and model.InferenceName(-1)).
	Client openai.Client
	Model  string
	// SystemPrompt replaces DefaultSystemPrompt.
	SystemPrompt string
	// MaxTurns bounds the model's turns; 0 means 10.
	MaxTurns int
	// Params carries sampling settings (max tokens, temperature, seed)
	// sent with every turn; its Model, Messages and Tools are ignored.
	Params openai.ChatCompletionNewParams
}

// Run gives the agent task on srv with tools (from srv.Tools, possibly a
// subset) plus complete_task, and loops: the model's turn, then each tool
// call it made, answered with the tool's result as a tool message. A tool
// that reports an error, an unknown tool, arguments that are not JSON or
// a call that times out are answered with the error, for the model to
// read and correct. The loop ends when the model calls complete_task, when
// it answers without calling a tool, or after MaxTurns turns.
//
// The trajectory's metrics say how it went: turns, tool_calls,
// tool_errors, completed (1 when complete_task was called), and its
// metadata holds the task and the summary. The reward is the caller's to
// set (from the server's state, a check, or RULER). An error means the
// rollout could not go on (the model's endpoint failed, the connection to
// the server broke, ctx ended); the trajectory so far is returned with it.
func (a Agent) Run(ctx context.Context, srv *Server, tools []Tool, task string) (art.Trajectory, error) {
	var t art.Trajectory
	switch {
	case srv == nil:
		return t, errors.New("mcprl: agent: nil server (Start one first)")
	case a.Model == "":
		return t, errors.New("mcprl: agent: no Model (for a trainable model: model.InferenceName(-1))")
	case a.MaxTurns < 0:
		return t, fmt.Errorf("mcprl: agent: MaxTurns = %d: must be >= 0 (0 means 10)", a.MaxTurns)
	}
	t.Tools = AgentTools(tools)
	system := a.SystemPrompt
	if system == "" {
		system = DefaultSystemPrompt
	}
	t.AddMessage(art.SystemMsg(system), art.UserMsg(task))
	t.Metadata = map[string]any{"task": task}
	for _, m := range []string{"turns", "tool_calls", "tool_errors", "completed"} {
		t.SetMetric(m, 0)
	}
	known := map[string]bool{}
	for _, tool := range tools {
		known[tool.Name] = true
	}
	maxTurns := a.MaxTurns
	if maxTurns <= 0 {
		maxTurns = 10
	}
	for turn := 0; turn < maxTurns; turn++ {
		params := a.Params
		params.Model = a.Model
		params.Messages, params.Tools = nil, nil
		choice, err := t.Chat(ctx, a.Client, params)
		if err != nil {
			return t, fmt.Errorf("mcprl: turn %d of task %q: %w", turn+1, excerpt(task), err)
		}
		t.Metrics["turns"]++
		calls := choice.Message.ToolCalls
		if len(calls) == 0 {
			t.Logf("the model answered without calling a tool")
			return t, nil
		}
		for _, call := range calls {
			t.Metrics["tool_calls"]++
			if call.Function.Name == CompleteTaskTool {
				var args struct {
					Summary string `json:"summary"`
				}
				if err := json.Unmarshal([]byte(call.Function.Arguments), &args); err != nil {
					t.Metrics["tool_errors"]++
					t.AddMessage(art.ToolMsg(call.ID, "Error: the arguments are not valid JSON: "+err.Error()))
					continue
				}
				t.Metrics["completed"] = 1
				t.Metadata["summary"] = args.Summary
				t.AddMessage(art.ToolMsg(call.ID, "Task marked complete."))
				return t, nil
			}
			result, err := a.call(ctx, srv, known, call)
			if err != nil {
				return t, err
			}
			if result.IsError {
				t.Metrics["tool_errors"]++
				result.Text = "Error: " + result.Text
			}
			t.AddMessage(art.ToolMsg(call.ID, result.Text))
		}
	}
	t.Logf("stopped after %d turns without complete_task", maxTurns)
	return t, nil
}

// AgentTools are the function tools Agent.Run offers the model for tools:
// theirs, then complete_task. Transcripts written for supervised
// warm-up offer the same, so they match the rollouts.
func AgentTools(tools []Tool) []art.Tool {
	return append(FunctionTools(tools), completeTask)
}

// call runs one tool call. Mistakes the model can correct (an unknown
// tool, bad arguments, a tool error, a call that timed out) come back as
// an error Result; only a broken connection or a cancelled ctx is an error.
func (a Agent) call(ctx context.Context, srv *Server, known map[string]bool, call art.ToolCall) (Result, error) {
	name := call.Function.Name
	if !known[name] {
		return Result{IsError: true, Text: fmt.Sprintf("there is no tool %q; the tools are %s", name, toolNames(known))}, nil
	}
	res, err := srv.Call(ctx, name, json.RawMessage(call.Function.Arguments))
	if errors.Is(err, ErrBadArguments) || errors.Is(err, ErrCallTimeout) || errors.Is(err, ErrRejected) {
		// The model reads what went wrong, not our prefix and the
		// server's command line.
		text := err.Error()
		if _, rest, ok := strings.Cut(text, " on "+srv.name+": "); ok {
			text = rest
		}
		return Result{IsError: true, Text: text}, nil
	}
	return res, err
}

func toolNames(known map[string]bool) string {
	names := make([]string, 0, len(known)+1)
	for n := range known {
		names = append(names, n)
	}
	slices.Sort(names)
	names = append(names, CompleteTaskTool)
	return strings.Join(names, ", ")
}
