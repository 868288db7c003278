// Package host defines what a server needs from whatever hosts a trainable
// model: inference that returns the exact sampled token ids and logprobs of
// every answer, and training that turns trajectory groups into the next
// checkpoint, served as "name@step" at once. The HTTP server and the
// in-process backend depend only on these interfaces; host/native is the
// implementation on this project's CPU engine, and another engine (an
// external inference server, a remote trainer) is another implementation.
//
// The request and answer types here are the server's, not the engine's: an
// implementation converts to and from its engine.
package host

import (
	"context"
	"errors"
	"strconv"

	"github.com/artgo/art"
)

// Model is one trainable model: inference and training over the same
// checkpoints. Implementations are safe for concurrent use.
type Model interface {
	Inference
	Training
	// Close releases the model's resources; requests in flight fail.
	Close() error
}

// Inference answers chat requests for the model's checkpoints.
type Inference interface {
	// Info describes the model.
	Info() Info
	// Chat generates req.N answers for the checkpoint req.Model names. If
	// stream is non-nil it receives every token as it is sampled, from one
	// goroutine at a time; an error from stream aborts the request. Bad
	// requests are *RequestError, unknown models wrap ErrUnknownModel.
	Chat(ctx context.Context, req ChatRequest, stream func(StreamEvent) error) (ChatResponse, error)
	// Resolve maps a model id to a checkpoint step: "name@N" is step N, a
	// bare "name" the latest step; anything else, or a step without a
	// checkpoint, wraps ErrUnknownModel and lists what is served.
	Resolve(id string) (int, error)
	// Load returns the sequences being generated now and the most that
	// are generated at once (the rest wait).
	Load() (running, capacity int)
}

// Training trains the model and keeps its checkpoints.
type Training interface {
	// Step returns the latest checkpoint step (0: the untrained adapter).
	Step() int
	// Checkpoints lists the steps that have a checkpoint, oldest first.
	Checkpoints() ([]int, error)
	// CheckpointPath returns the folder of a step's checkpoint.
	CheckpointPath(step int) string
	// Train runs one training step on groups and saves the result as the
	// next checkpoint, served at once. A step with nothing to train still
	// advances (the checkpoint is carried over) and the result says so. On
	// error (cancellation included) no checkpoint is written and the model
	// is as it was. progress, if non-nil, sees each trained sequence.
	Train(ctx context.Context, groups []art.TrajectoryGroup, cfg art.TrainConfig, progress func(done, total int)) (art.TrainResult, error)
	// TrainSFT fine-tunes on trajectories by supervised learning and saves
	// the next checkpoint, with Train's guarantees. progress sees each
	// batch.
	TrainSFT(ctx context.Context, trajectories []art.Trajectory, cfg art.TrainSFTConfig, progress func(done, total int)) (art.TrainResult, error)
	// DeleteCheckpoints removes every checkpoint whose step is not in
	// keep; the latest is always kept.
	DeleteCheckpoints(keep []int) error
	// RestoreCheckpoint saves the checkpoint at step (adapter and
	// optimizer state) again as the next step, served at once, from which
	// training goes on; it returns the new step. A step without a
	// checkpoint wraps ErrUnknownModel.
	RestoreCheckpoint(ctx context.Context, step int) (int, error)
}

// Info describes a hosted model.
type Info struct {
	Name      string // served as Name@step, and as Name for the latest step
	Project   string
	BaseModel string // the base model's folder
	Path      string // the store root holding the project ("" means ".art")
	// MaxModelLen is the context length in tokens (prompt + completion).
	MaxModelLen int
	// LoRA is the adapter's configuration.
	LoRA art.LoRAConfig
	// ToolFormat is how the model writes tool calls in its output.
	ToolFormat ToolFormat
}

// ModelID returns the id that serves step: "name@step".
func (i Info) ModelID(step int) string { return i.Name + "@" + strconv.Itoa(step) }

// ModelIDs returns the ids of every checkpoint of m, oldest first.
func ModelIDs(m Model) ([]string, error) {
	steps, err := m.Checkpoints()
	if err != nil {
		return nil, err
	}
	info := m.Info()
	ids := make([]string, len(steps))
	for i, st := range steps {
		ids[i] = info.ModelID(st)
	}
	return ids, nil
}

// ErrUnknownModel is wrapped by errors for a model id that is not served.
var ErrUnknownModel = errors.New("unknown model")

// RequestError is a problem with the request itself (the server answers
// 400 with Param naming the field).
type RequestError struct {
	Param string
	// Code is the machine-readable reason the server answers with ("":
	// "invalid_value").
	Code string
	Msg  string
}

// CodeContextLength is OpenAI's error code for a request that does not fit
// the model's context; frameworks match it to trim a conversation.
const CodeContextLength = "context_length_exceeded"

func (e *RequestError) Error() string { return e.Msg }
