package train

import (
	"errors"
	"fmt"
	"strings"
)

// ErrNonFinite is wrapped by the error of a training step that stopped
// because a loss, a gradient norm or an update's result was not finite
// (NaN or ±Inf): see NonFiniteError.
var ErrNonFinite = errors.New("train: non-finite value")

// NonFiniteError reports a training step that stopped because a value went
// non-finite. The step changed nothing: the weights and the optimizer state
// are as they were before it. It wraps ErrNonFinite.
type NonFiniteError struct {
	// What went non-finite: "loss", "entropy" or "gradient norm" (checked
	// before an optimizer update), or "LoRA weights" or "base weights"
	// (the result of an update, checked before it is written; the
	// optimizer's moments count with the weights).
	What string
	// Value is the non-finite loss, entropy or gradient norm; for weights,
	// the gradient norm (before clipping) of the update that overflowed.
	Value float64
	// LearningRate is the update's learning rate.
	LearningRate float64
	// Updates is how many optimizer updates of the step had been applied,
	// and were undone, before this one.
	Updates int
	// Where names the sequence whose loss or entropy is not finite ("" if
	// none).
	Where string
}

func (e *NonFiniteError) Error() string {
	const unchanged = "the weights and optimizer state are as before the step"
	where := ""
	if e.Where != "" {
		where = " on " + e.Where
	}
	switch {
	case strings.HasSuffix(e.What, "weights"):
		return fmt.Sprintf("train: step produced non-finite %s (grad norm %.4g at learning rate %v); %s — lower the learning rate",
			e.What, e.Value, e.LearningRate, unchanged)
	case e.Updates > 0:
		return fmt.Sprintf("train: %s became %v%s after %d optimizer update(s) at learning rate %v; %s — lower the learning rate",
			e.What, e.Value, where, e.Updates, e.LearningRate, unchanged)
	default:
		return fmt.Sprintf("train: %s is %v%s before any update of the step (learning rate %v): the weights the step starts from or its data give it; %s",
			e.What, e.Value, where, e.LearningRate, unchanged)
	}
}

// Unwrap returns ErrNonFinite.
func (e *NonFiniteError) Unwrap() error { return ErrNonFinite }
