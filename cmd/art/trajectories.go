package main

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"sort"
	"strings"

	"github.com/spf13/cobra"

	"github.com/artgo/art/store"
)

// trajectoriesFileArg names the argument of art trajectories and art ruler.
const trajectoriesFileArg = "FILE.parquet, a trajectories file that training logged"

// newTrajectoriesCmd returns `art trajectories`, which prints the
// trajectories of a logged step, so they can be read without Python.
func newTrajectoriesCmd() *cobra.Command {
	var asJSON bool
	var limit int
	var minReward, maxReward float64
	cmd := &cobra.Command{
		Use:   "trajectories FILE.parquet",
		Short: "Print the trajectories logged at a step (reward, metrics and each message)",
		Long: `trajectories reads a trajectories parquet file that model.Log wrote
(<model dir>/trajectories/<split>/<step>.parquet, ART's columns) and prints each
trajectory: its group, reward, metrics and messages, sampled turns marked with
"*". --json prints one JSON object per trajectory instead, for jq.`,
		Example: `  art trajectories .art/demo/models/tictactoe/trajectories/val/0150.parquet
  art trajectories .art/p/models/agent/trajectories/train/0007.parquet --max-reward -1 --limit 3`,
		Args: oneArg(trajectoriesFileArg),
		RunE: func(cmd *cobra.Command, args []string) error {
			if limit < 0 {
				return fmt.Errorf("trajectories: --limit %d: want 0 (all) or more", limit)
			}
			if math.IsNaN(minReward) || math.IsNaN(maxReward) {
				return fmt.Errorf("trajectories: --min-reward and --max-reward must be numbers")
			}
			if minReward > maxReward {
				return fmt.Errorf("trajectories: --min-reward %g is above --max-reward %g", minReward, maxReward)
			}
			rows, err := store.ReadTrajectoriesFile(args[0])
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			printed := 0
			for _, r := range rows {
				if r.Reward < minReward || r.Reward > maxReward {
					continue
				}
				if limit > 0 && printed == limit {
					break
				}
				if asJSON {
					err = json.NewEncoder(out).Encode(jsonTrajectory(r))
				} else {
					err = printTrajectory(out, r)
				}
				if err != nil {
					return fmt.Errorf("trajectories: print: %w", err)
				}
				printed++
			}
			if !asJSON {
				fmt.Fprintf(cmd.ErrOrStderr(), "%d of %d trajectories\n", printed, len(rows))
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print one JSON object per trajectory (the parquet row)")
	cmd.Flags().IntVarP(&limit, "limit", "n", 0, "print at most this many trajectories (0: all)")
	cmd.Flags().Float64Var(&minReward, "min-reward", math.Inf(-1), "print only trajectories whose reward is at least this")
	cmd.Flags().Float64Var(&maxReward, "max-reward", math.Inf(1), "print only trajectories whose reward is at most this")
	return cmd
}

// jsonRow is a trajectory as --json prints it: the parquet columns'
// names, with the columns that hold JSON text embedded as JSON.
type jsonRow struct {
	GroupIndex    int64            `json:"group_index"`
	GroupMetadata json.RawMessage  `json:"group_metadata,omitempty"`
	GroupMetrics  json.RawMessage  `json:"group_metrics,omitempty"`
	GroupLogs     []string         `json:"group_logs,omitempty"`
	Reward        float64          `json:"reward"`
	Metrics       json.RawMessage  `json:"metrics,omitempty"`
	Metadata      json.RawMessage  `json:"metadata,omitempty"`
	Tools         json.RawMessage  `json:"tools,omitempty"`
	Logs          []string         `json:"logs,omitempty"`
	Messages      []jsonMessageRow `json:"messages"`
}

type jsonMessageRow struct {
	Role       string          `json:"role"`
	Content    string          `json:"content,omitempty"`
	ToolCalls  json.RawMessage `json:"tool_calls,omitempty"`
	ToolCallID string          `json:"tool_call_id,omitempty"`
	Trainable  bool            `json:"trainable"`
}

func jsonTrajectory(r store.TrajectoryRow) jsonRow {
	j := jsonRow{GroupIndex: r.GroupIndex, GroupMetadata: embed(r.GroupMetadata), GroupMetrics: embed(r.GroupMetrics),
		GroupLogs: r.GroupLogs, Reward: r.Reward, Metrics: embed(r.Metrics), Metadata: embed(r.Metadata),
		Tools: embed(r.Tools), Logs: r.Logs, Messages: make([]jsonMessageRow, len(r.Messages))}
	for i, m := range r.Messages {
		j.Messages[i] = jsonMessageRow{Role: m.Role, Content: m.Content, ToolCalls: embed(m.ToolCalls), ToolCallID: m.ToolCallID,
			Trainable: m.Trainable}
	}
	return j
}

// embed returns a column's JSON text as raw JSON, or as a JSON string if
// it is not valid JSON (a file written by something else), or nil if empty.
func embed(s string) json.RawMessage {
	if s == "" {
		return nil
	}
	if json.Valid([]byte(s)) {
		return json.RawMessage(s)
	}
	b, _ := json.Marshal(s) // a string always marshals
	return b
}

// printTrajectory writes one trajectory as readable text.
func printTrajectory(w io.Writer, r store.TrajectoryRow) error {
	var b strings.Builder
	fmt.Fprintf(&b, "=== group %d  reward %.4g", r.GroupIndex, r.Reward)
	if m := sortedMetrics(r.Metrics); m != "" {
		fmt.Fprintf(&b, "  %s", m)
	}
	b.WriteString("\n")
	for _, m := range r.Messages {
		mark := " "
		if m.Trainable {
			mark = "*"
		}
		// Continuation lines are indented under the first, so a
		// multi-line message (a board, a mail) stays readable.
		fmt.Fprintf(&b, "%s %-9s %s", mark, m.Role+":", strings.ReplaceAll(m.Content, "\n", "\n            "))
		if m.ToolCalls != "" {
			fmt.Fprintf(&b, " tool_calls=%s", m.ToolCalls)
		}
		if m.ToolCallID != "" {
			fmt.Fprintf(&b, " (for %s)", m.ToolCallID)
		}
		b.WriteString("\n")
	}
	for _, l := range r.Logs {
		fmt.Fprintf(&b, "  log: %s\n", l)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// sortedMetrics renders a metrics JSON object as "k=v" pairs in key
// order, or returns it unchanged if it is not a JSON object of numbers.
func sortedMetrics(js string) string {
	if js == "" {
		return ""
	}
	var m map[string]float64
	if err := json.Unmarshal([]byte(js), &m); err != nil {
		return js
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s=%.4g", k, m[k])
	}
	return strings.Join(parts, " ")
}
