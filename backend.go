package art

import (
	"context"
	"errors"
)

// ErrNotRegistered is returned by the methods of a TrainableModel that need
// a backend before Register has succeeded.
var ErrNotRegistered = errors.New("art: model is not registered with a backend; call Register first")

// Backend trains models and serves their checkpoints. Implementations live
// in other packages (backend/local runs the engine in process,
// backend/remote talks to `art serve`). Users call the methods of
// TrainableModel, which call these.
//
// Backend is what every backend must do. Further capabilities are optional
// interfaces that a backend implements if it can, found by type assertion:
// SFTTrainer (TrainableModel.TrainSFT), CheckpointDeleter
// (TrainableModel.DeleteCheckpoints) and CheckpointRestorer
// (Watch.Recovery). A model method whose backend lacks the capability
// fails with an error wrapping errors.ErrUnsupported.
//
// A Backend must be safe for concurrent use. Every method receives the
// model it acts on; a backend may keep per-model state keyed by
// m.Project and m.Name, but must not retain m itself or the groups passed to
// Train after the call returns.
type Backend interface {
	// Register prepares the backend to train and serve m: it loads or creates
	// the latest checkpoint (step 0 is the untrained adapter) and starts
	// serving it. Registering the same model again resumes it.
	Register(ctx context.Context, m *TrainableModel) error

	// Step returns the latest checkpoint step of m, 0 if there is none.
	Step(ctx context.Context, m *TrainableModel) (int, error)

	// Train runs one training step on groups with cfg and saves the result
	// as the next checkpoint, which is served right away.
	//
	// A step always advances: when there is nothing to train (every group's
	// rewards are equal, no turn has logprobs, ...), the checkpoint is
	// carried over to the new step and the result has Skipped set with the
	// reason. Train never skips silently and never trains on part of the
	// groups without saying so in the result's metrics. An error means no
	// new checkpoint was saved.
	Train(ctx context.Context, m *TrainableModel, groups []TrajectoryGroup, cfg TrainConfig) (TrainResult, error)

	// InferenceEndpoint returns where to send chat completions for m at
	// step, or at the latest step if step < 0. The checkpoint at step must
	// exist.
	InferenceEndpoint(ctx context.Context, m *TrainableModel, step int) (Endpoint, error)

	// Close releases the backend's resources (servers, engines). The
	// backend must not be used afterwards.
	Close() error
}

// SFTTrainer is a Backend that can run supervised fine-tuning
// (TrainableModel.TrainSFT).
type SFTTrainer interface {
	// TrainSFT runs supervised fine-tuning on trajectories with cfg (one
	// optimizer step per batch, learning every assistant turn) and saves the
	// result as the next checkpoint, served right away. An error means no
	// new checkpoint was saved and the adapter is unchanged.
	TrainSFT(ctx context.Context, m *TrainableModel, trajectories []Trajectory, cfg TrainSFTConfig) (TrainResult, error)
}

// CheckpointDeleter is a Backend that can delete checkpoints
// (TrainableModel.DeleteCheckpoints).
type CheckpointDeleter interface {
	// DeleteCheckpointsExcept deletes every checkpoint of m whose step is
	// not in keep. The latest checkpoint is never deleted, even if keep
	// omits it.
	DeleteCheckpointsExcept(ctx context.Context, m *TrainableModel, keep []int) error
}

// Endpoint is an OpenAI-compatible chat completions endpoint serving a model.
type Endpoint struct {
	BaseURL string // e.g. "http://127.0.0.1:8000/v1"
	APIKey  string
	Model   string // the model id to request, "name@step" for trained checkpoints
}

// TrainResult is the outcome of a training step.
type TrainResult struct {
	// Step is the checkpoint step the call produced.
	Step int
	// Metrics are the step's training metrics, keyed as ART keys them
	// ("loss/train", "loss/grad_norm", "data/step_num_groups_trainable", ...).
	Metrics map[string]float64
	// Skipped reports that nothing was trained at this step (the checkpoint
	// was carried over unchanged); SkipReason says why.
	Skipped    bool
	SkipReason string
	// Warnings are the collapse watch's findings about the step (see
	// Watch), one sentence each.
	Warnings []string
}
