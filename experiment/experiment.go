// Package experiment holds what the examples, `art demo` and bench/learning
// share for benchmark runs: the examples' common command-line flags
// (Flags), the record of a run with its held-out evaluation before, during
// and after training (Run), the --report JSON format (Report) that
// bench/learning reads back, the mean and paired standard errors of
// held-out rewards, and training-only reward shaping (PenalizeInvalid).
// The examples' agents themselves use only the public SDK; this package
// only keeps score.
package experiment

import (
	"encoding/json"
	"fmt"
	"io"
	"math"

	"github.com/artgo/art"
	"github.com/artgo/art/internal/atomicfile"
)

// Report is the JSON summary written by --report.
type Report struct {
	Example string `json:"example"`
	Seed    uint64 `json:"seed"`
	// Before and After are the mean held-out rewards at the first and last
	// step of the run, with their standard errors over the games.
	Before       float64 `json:"before"`
	After        float64 `json:"after"`
	BeforeStderr float64 `json:"before_stderr"`
	AfterStderr  float64 `json:"after_stderr"`
	// DiffStderr is the standard error of After − Before paired by
	// scenario (the same held-out scenarios, seeded, run before and
	// after), which is smaller than the two errors combined when a
	// scenario's difficulty carries over; see PairedStderr.
	DiffStderr float64 `json:"diff_stderr"`
	// BeforeMetrics and AfterMetrics are the held-out means of the
	// trajectory metrics (invalid_move, max_tile, ...).
	BeforeMetrics   map[string]float64 `json:"before_metrics,omitempty"`
	AfterMetrics    map[string]float64 `json:"after_metrics,omitempty"`
	StartStep       int                `json:"start_step"`
	FinalStep       int                `json:"final_step"`
	Steps           int                `json:"steps"` // GRPO steps run
	SFTTrajectories int                `json:"sft_trajectories"`
	EvalScenarios   int                `json:"eval_scenarios"`
	// EvalRepeats is how many episodes each held-out scenario ran, each
	// with its own sampling seed (0 or 1: one); DiffStderr pairs their
	// mean per scenario.
	EvalRepeats  int     `json:"eval_repeats,omitempty"`
	SFTSeconds   float64 `json:"sft_seconds"`
	RLSeconds    float64 `json:"rl_seconds"`
	EvalSeconds  float64 `json:"eval_seconds"`
	TotalSeconds float64 `json:"total_seconds"`
	// TrainedSteps counts the steps that trained (not skipped);
	// OnPolicySteps those that compared the trainer's logprobs with the
	// sampler's (loss/rollout_logprob_abs_diff), and
	// MaxRolloutLogprobDiff is the largest of those means: 0 when sampler
	// and trainer agree bit for bit (true on-policy).
	TrainedSteps          int            `json:"trained_steps"`
	OnPolicySteps         int            `json:"on_policy_steps"`
	MaxRolloutLogprobDiff float64        `json:"max_rollout_logprob_diff"`
	Config                map[string]any `json:"config,omitempty"`
}

// CheckOnPolicy reports an error unless the run trained at least one step
// and every trained step compared the trainer's logprobs of the sampled
// tokens with the sampler's and found them equal bit for bit (true
// on-policy; the examples assert it in their smoke tests, where a run whose
// steps were all skipped would prove nothing).
func (r Report) CheckOnPolicy() error {
	if r.TrainedSteps == 0 {
		return fmt.Errorf("experiment: no step trained (all %d skipped: every group's rewards were equal), so nothing compared sampler and trainer logprobs", r.Steps)
	}
	if r.OnPolicySteps != r.TrainedSteps || r.MaxRolloutLogprobDiff != 0 {
		return fmt.Errorf("experiment: %d of %d trained steps compared sampler and trainer logprobs, largest mean |Δ| %g; want all, and exactly 0",
			r.OnPolicySteps, r.TrainedSteps, r.MaxRolloutLogprobDiff)
	}
	return nil
}

// Summarize returns the mean reward of the trajectories of groups, its
// standard error, and the mean of each metric.
func Summarize(groups []art.TrajectoryGroup) (mean, stderr float64, metrics map[string]float64) {
	var rs []float64
	metrics = map[string]float64{}
	for _, g := range groups {
		for _, t := range g.Trajectories {
			rs = append(rs, t.Reward)
			for k, v := range t.Metrics {
				metrics[k] += v
			}
		}
	}
	if len(rs) == 0 {
		return 0, 0, metrics
	}
	n := float64(len(rs))
	for k := range metrics {
		metrics[k] /= n
	}
	mean, stderr = MeanStderr(rs)
	return mean, stderr, metrics
}

// MeanStderr returns the mean of v and its standard error (the sample
// standard deviation over √n; 0 with fewer than two values).
func MeanStderr(v []float64) (mean, stderr float64) {
	if len(v) == 0 {
		return 0, 0
	}
	n := float64(len(v))
	for _, x := range v {
		mean += x
	}
	mean /= n
	if len(v) > 1 {
		var ss float64
		for _, x := range v {
			ss += (x - mean) * (x - mean)
		}
		stderr = math.Sqrt(ss / (n - 1) / n)
	}
	return mean, stderr
}

// PairedStderr returns the standard error of the mean change in reward
// from before to after, pairing each scenario's mean reward (trajectories
// matched by their "scenario_id" metadata) and ignoring scenarios run only
// once. It returns 0 when fewer than two scenarios pair up.
func PairedStderr(before, after []art.TrajectoryGroup) float64 {
	perScenario := func(groups []art.TrajectoryGroup) map[string]*[2]float64 {
		m := map[string]*[2]float64{} // sum, count
		for _, g := range groups {
			for _, t := range g.Trajectories {
				id, ok := t.Metadata["scenario_id"]
				if !ok {
					continue
				}
				k := fmt.Sprint(id)
				if m[k] == nil {
					m[k] = new([2]float64)
				}
				m[k][0] += t.Reward
				m[k][1]++
			}
		}
		return m
	}
	b, a := perScenario(before), perScenario(after)
	var diffs []float64
	for k, sb := range b {
		if sa, ok := a[k]; ok {
			diffs = append(diffs, sa[0]/sa[1]-sb[0]/sb[1])
		}
	}
	_, se := MeanStderr(diffs)
	return se
}

// WriteReport writes rep as JSON to path atomically: a reader sees the old
// file or the whole new one.
func WriteReport(path string, rep Report) error {
	b, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return fmt.Errorf("experiment: encode report: %w", err)
	}
	if err := atomicfile.WriteFile(path, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("experiment: write report: %w", err)
	}
	return nil
}

// WriteTranscripts writes trajs to path as JSONL, one art.Trajectory a
// line (the teacher transcripts `art pretrain` reads), atomically.
func WriteTranscripts(path string, trajs []art.Trajectory) error {
	err := atomicfile.Write(path, 0o644, func(w io.Writer) error {
		enc := json.NewEncoder(w)
		for i := range trajs {
			if err := enc.Encode(&trajs[i]); err != nil {
				return fmt.Errorf("transcript %d: %w", i, err)
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("write transcripts: %w", err)
	}
	return nil
}

// PenalizeInvalid returns copies of groups in which every trajectory whose
// invalid_move metric is 1 has penalty subtracted from its reward, for
// training only (log the original groups, whose rewards keep their scale):
// it tells GRPO that breaking the format is worse than a poor result. A
// penalty of 0 returns groups as they are.
func PenalizeInvalid(groups []art.TrajectoryGroup, penalty float64) []art.TrajectoryGroup {
	if penalty == 0 {
		return groups
	}
	return Rescore(groups, func(t *art.Trajectory) {
		if t.Metrics["invalid_move"] == 1 {
			t.Reward -= penalty
		}
	})
}

// Rescore returns copies of groups whose trajectories f has changed (a
// training reward shaped from the metrics, say); groups is not changed.
func Rescore(groups []art.TrajectoryGroup, f func(t *art.Trajectory)) []art.TrajectoryGroup {
	out := make([]art.TrajectoryGroup, len(groups))
	for i, g := range groups {
		out[i] = g
		out[i].Trajectories = append([]art.Trajectory(nil), g.Trajectories...)
		for j := range out[i].Trajectories {
			f(&out[i].Trajectories[j])
		}
	}
	return out
}
