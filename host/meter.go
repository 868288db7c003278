package host

import (
	"context"
	"maps"
	"sync"
	"sync/atomic"
	"time"

	"github.com/artgo/art"
	"github.com/artgo/art/internal/promtext"
)

// Meter is a Model that counts its training for monitoring: steps running,
// finished steps (and how many were skipped), the last step's duration, and
// the last mean reward by split. The server and the in-process backend
// train through the same Meter, so /metrics counts both.
type Meter struct {
	Model
	training atomic.Int64

	mu      sync.Mutex // guards the fields below
	stats   TrainingStats
	rewards map[string]float64
}

// TrainingStats are a Meter's counts.
type TrainingStats struct {
	Running     int            // training steps running now
	Steps       map[bool]int64 // finished steps by skipped
	StepSeconds float64        // duration of the last finished step
	Tokens      float64        // tokens trained on, over every finished step
	// StepDurations is the histogram of finished steps' durations in
	// seconds (StepBuckets).
	StepDurations promtext.Histogram
	// RewardMean is the mean reward of the last groups trained on
	// ("train") or logged, by split.
	RewardMean map[string]float64
}

// StepBuckets are the upper bounds (seconds) of
// TrainingStats.StepDurations: a tiny model's step takes well under a
// second, a 0.5B model's on a CPU many minutes.
var StepBuckets = []float64{0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600}

// NewMeter wraps m.
func NewMeter(m Model) *Meter { return &Meter{Model: m} }

// Train trains m and counts the step.
func (m *Meter) Train(ctx context.Context, groups []art.TrajectoryGroup, cfg art.TrainConfig, progress func(done, total int)) (art.TrainResult, error) {
	res, err := m.count(func() (art.TrainResult, error) { return m.Model.Train(ctx, groups, cfg, progress) })
	if err == nil {
		m.ObserveRewards("train", groups)
	}
	return res, err
}

// TrainSFT fine-tunes m and counts the step.
func (m *Meter) TrainSFT(ctx context.Context, trajectories []art.Trajectory, cfg art.TrainSFTConfig, progress func(done, total int)) (art.TrainResult, error) {
	return m.count(func() (art.TrainResult, error) { return m.Model.TrainSFT(ctx, trajectories, cfg, progress) })
}

// count runs one training step, counted as running meanwhile and as
// finished (with its duration) when it succeeds.
func (m *Meter) count(step func() (art.TrainResult, error)) (art.TrainResult, error) {
	m.training.Add(1)
	defer m.training.Add(-1)
	start := time.Now()
	res, err := step()
	if err != nil {
		return res, err
	}
	m.finished(res, time.Since(start))
	return res, nil
}

func (m *Meter) finished(res art.TrainResult, d time.Duration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.stats.Steps == nil {
		m.stats.Steps = map[bool]int64{}
	}
	m.stats.Steps[res.Skipped]++
	m.stats.StepSeconds = d.Seconds()
	if m.stats.StepDurations.Counts == nil {
		m.stats.StepDurations = promtext.NewHistogram(StepBuckets...)
	}
	m.stats.StepDurations.Observe(d.Seconds())
	m.stats.Tokens += res.Metrics["data/step_trainer_tokens"]
}

// ObserveRewards records the mean reward of groups under split, if they
// hold any trajectory.
func (m *Meter) ObserveRewards(split string, groups []art.TrajectoryGroup) {
	var sum float64
	var n int
	for _, g := range groups {
		for _, t := range g.Trajectories {
			sum += t.Reward
			n++
		}
	}
	if n == 0 {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.rewards == nil {
		m.rewards = map[string]float64{}
	}
	m.rewards[split] = sum / float64(n)
}

// Stats returns a copy of the counts.
func (m *Meter) Stats() TrainingStats {
	m.mu.Lock()
	defer m.mu.Unlock()
	s := m.stats
	s.Steps = maps.Clone(s.Steps)
	s.StepDurations = s.StepDurations.Clone()
	s.RewardMean = maps.Clone(m.rewards)
	s.Running = int(m.training.Load())
	return s
}
