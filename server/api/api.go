// Package api defines the JSON messages of the training API that `art
// serve` speaks under /v1/art/, shared by package server and its client,
// backend/remote. It is modelled on OpenPipe ART's 2025 HTTP protocol:
//
//	POST /v1/art/register            RegisterRequest → ModelInfo
//	GET  /v1/art/model               → ModelInfo
//	GET  /v1/art/step                → StepResponse
//	GET  /v1/art/checkpoints         → CheckpointsResponse
//	POST /v1/art/checkpoints/delete  DeleteCheckpointsRequest → CheckpointsResponse
//	POST /v1/art/checkpoints/restore RestoreCheckpointRequest → StepResponse
//	POST /v1/art/train               TrainRequest → NDJSON stream of TrainEvent
//	POST /v1/art/train_sft           TrainSFTRequest → NDJSON stream of TrainEvent
//	POST /v1/art/log                 LogRequest → LogResponse
//
// Requests that name a model ("model" in a body, ?model= in a query) are
// checked against the served model; an empty name means the served one.
// Errors use OpenAI's envelope (package openai), except inside a train
// stream, where they are a TrainEvent of type "error".
package api

import (
	"encoding/json"
	"fmt"

	"github.com/artgo/art"
)

// RegisterRequest asks the server whether it hosts a model. BaseModel,
// Project and LoRA are checked when set: the project must be equal, the
// base model the same path or a folder with the same name, and the LoRA
// configuration (defaults filled in) the adapter's own.
type RegisterRequest struct {
	Name      string          `json:"name"`
	Project   string          `json:"project,omitempty"`
	BaseModel string          `json:"base_model,omitempty"`
	LoRA      *art.LoRAConfig `json:"lora_config,omitempty"`
}

// ModelInfo describes the served model.
type ModelInfo struct {
	Name      string `json:"name"`
	Project   string `json:"project"`
	BaseModel string `json:"base_model"`
	// Step is the latest checkpoint step, served as Name@Step and as Name.
	Step int `json:"step"`
	// Models lists the served ids, "name@step" for every checkpoint.
	Models []string `json:"models"`
	// MaxModelLen is the context length in tokens.
	MaxModelLen int `json:"max_model_len"`
	// LoRA is the adapter's configuration, defaults filled in.
	LoRA *art.LoRAConfig `json:"lora_config,omitempty"`
}

// StepResponse carries the latest checkpoint step.
type StepResponse struct {
	Step int `json:"step"`
}

// CheckpointsResponse lists the checkpoints on disk, oldest first.
type CheckpointsResponse struct {
	Steps  []int    `json:"steps"`
	Models []string `json:"models"`
}

// DeleteCheckpointsRequest deletes every checkpoint whose step is not in
// Keep; the latest is always kept.
type DeleteCheckpointsRequest struct {
	Model string `json:"model,omitempty"`
	Keep  []int  `json:"keep"`
}

// RestoreCheckpointRequest saves the checkpoint at Step again as the next
// step, served at once, from which training goes on (the collapse watch's
// rollback); the answer is the new step.
type RestoreCheckpointRequest struct {
	Model string `json:"model,omitempty"`
	Step  *int   `json:"step"`
}

// TrainRequest runs one training step.
type TrainRequest struct {
	Model  string                `json:"model,omitempty"`
	Groups []art.TrajectoryGroup `json:"groups"`
	Config art.TrainConfig       `json:"config"`
}

// TrainSFTRequest runs supervised fine-tuning on trajectories as one
// step (art.Backend.TrainSFT).
type TrainSFTRequest struct {
	Model        string             `json:"model,omitempty"`
	Trajectories []art.Trajectory   `json:"trajectories"`
	Config       art.TrainSFTConfig `json:"config"`
}

// LogRequest logs groups (and metrics) on the server's store, as
// art.Model.Log does.
type LogRequest struct {
	Model   string                `json:"model,omitempty"`
	Groups  []art.TrajectoryGroup `json:"groups"`
	Split   string                `json:"split,omitempty"` // "" means "val"
	Step    *int                  `json:"step,omitempty"`  // nil means the latest step
	Metrics map[string]float64    `json:"metrics,omitempty"`
	// CallID names the call (art.LogOptions.CallID): the same ID again
	// logs nothing and answers the step the first logged at, so a client
	// may resend a request whose answer it lost.
	CallID string `json:"call_id,omitempty"`
}

// LogResponse says at which step the groups were logged.
type LogResponse struct {
	Step int `json:"step"`
}

// Train event types.
const (
	EventProgress = "progress"
	EventResult   = "result"
	EventError    = "error"
)

// TrainEvent is one line of the NDJSON stream POST /v1/art/train answers
// with: any number of progress lines, then exactly one result or error line.
//
//	{"type":"progress","done":3,"total":64}
//	{"type":"result","step":4,"metrics":{...},"skipped":false,"skip_reason":""}
//	{"type":"error","message":"..."}
//
// While the step runs the server also writes an empty line every few
// seconds (server.Config.TrainKeepAlive, 10 s by default), a keep-alive
// that tells a long step from a server that stopped answering; clients
// skip empty lines. A stream that ends without a result or error line was
// cut off; whether the step was saved is then unknown (ask for the step).
type TrainEvent struct {
	Type string
	// Progress: sequences trained so far, of Total.
	Done, Total int
	// Result.
	Result art.TrainResult
	// Error.
	Message string
}

type progressJSON struct {
	Type  string `json:"type"`
	Done  int    `json:"done"`
	Total int    `json:"total"`
}

type resultJSON struct {
	Type       string             `json:"type"`
	Step       int                `json:"step"`
	Metrics    map[string]float64 `json:"metrics"`
	Skipped    bool               `json:"skipped"`
	SkipReason string             `json:"skip_reason"`
}

type errorJSON struct {
	Type    string `json:"type"`
	Message string `json:"message"`
}

// MarshalJSON encodes the fields of e's type only.
func (e TrainEvent) MarshalJSON() ([]byte, error) {
	switch e.Type {
	case EventProgress:
		return json.Marshal(progressJSON{e.Type, e.Done, e.Total})
	case EventResult:
		m := e.Result.Metrics
		if m == nil {
			m = map[string]float64{}
		}
		return json.Marshal(resultJSON{e.Type, e.Result.Step, m, e.Result.Skipped, e.Result.SkipReason})
	case EventError:
		return json.Marshal(errorJSON{e.Type, e.Message})
	}
	return nil, fmt.Errorf("api: unknown train event type %q", e.Type)
}

// UnmarshalJSON decodes any of the three event types.
func (e *TrainEvent) UnmarshalJSON(data []byte) error {
	var w struct {
		Type       string             `json:"type"`
		Done       int                `json:"done"`
		Total      int                `json:"total"`
		Step       int                `json:"step"`
		Metrics    map[string]float64 `json:"metrics"`
		Skipped    bool               `json:"skipped"`
		SkipReason string             `json:"skip_reason"`
		Message    string             `json:"message"`
	}
	if err := json.Unmarshal(data, &w); err != nil {
		return fmt.Errorf("api: train event: %w", err)
	}
	*e = TrainEvent{Type: w.Type}
	switch w.Type {
	case EventProgress:
		e.Done, e.Total = w.Done, w.Total
	case EventResult:
		e.Result = art.TrainResult{Step: w.Step, Metrics: w.Metrics, Skipped: w.Skipped, SkipReason: w.SkipReason}
	case EventError:
		e.Message = w.Message
	default:
		return fmt.Errorf("api: unknown train event type %q", w.Type)
	}
	return nil
}
