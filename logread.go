package art

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/artgo/art/store"
)

// ReadTrajectoryGroups reads a trajectories parquet file written by Log
// (trajectories/<split>/<step>.parquet) back into groups, as they were
// grouped. What Log does not store stays missing, as in ART: exceptions and
// additional histories. A sampled turn comes back as a Choice with the
// token ids, texts and logprobs Log stored (without bytes or top logprobs),
// or without logprobs when the file has none (ART's files, or ours written
// before the column existed).
func ReadTrajectoryGroups(path string) ([]TrajectoryGroup, error) {
	rows, err := store.ReadTrajectoriesFile(path)
	if err != nil {
		return nil, err
	}
	var groups []TrajectoryGroup
	index := map[int64]int{}
	for i, r := range rows {
		gi, ok := index[r.GroupIndex]
		if !ok {
			gi = len(groups)
			index[r.GroupIndex] = gi
			var g TrajectoryGroup
			if err := unmarshalOptional(r.GroupMetadata, &g.Metadata); err != nil {
				return nil, fmt.Errorf("art: %s: row %d: group metadata: %w", path, i, err)
			}
			if err := unmarshalOptional(r.GroupMetrics, &g.Metrics); err != nil {
				return nil, fmt.Errorf("art: %s: row %d: group metrics: %w", path, i, err)
			}
			g.Logs = r.GroupLogs
			groups = append(groups, g)
		}
		t := Trajectory{Reward: r.Reward, Logs: r.Logs}
		for _, f := range []struct {
			name string
			text string
			dst  any
		}{{"metrics", r.Metrics, &t.Metrics}, {"metadata", r.Metadata, &t.Metadata}, {"tools", r.Tools, &t.Tools}} {
			if err := unmarshalOptional(f.text, f.dst); err != nil {
				return nil, fmt.Errorf("art: %s: row %d: %s: %w", path, i, f.name, err)
			}
		}
		for k, mr := range r.Messages {
			m := Message{Role: mr.Role, Content: Text(mr.Content), ToolCallID: mr.ToolCallID}
			if strings.HasPrefix(mr.Content, "[") {
				var parts Content
				if json.Unmarshal([]byte(mr.Content), &parts) == nil {
					m.Content = parts
				}
			}
			if err := unmarshalOptional(mr.ToolCalls, &m.ToolCalls); err != nil {
				return nil, fmt.Errorf("art: %s: row %d message %d: tool calls: %w", path, i, k, err)
			}
			if mr.Trainable {
				c := Choice{Message: m}
				for _, tr := range mr.Logprobs {
					c.Logprobs = append(c.Logprobs, TokenLogprob{TokenID: int(tr.TokenID), Token: tr.Token, Logprob: tr.Logprob})
				}
				t.AddChoice(c)
			} else {
				t.AddMessage(m)
			}
		}
		groups[gi].Trajectories = append(groups[gi].Trajectories, t)
	}
	return groups, nil
}

func unmarshalOptional(text string, dst any) error {
	if text == "" {
		return nil
	}
	return json.Unmarshal([]byte(text), dst)
}
