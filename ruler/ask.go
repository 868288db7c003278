package ruler

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/artgo/art"
)

// AskOptions configure AskJSON. The zero value is ready to use.
type AskOptions struct {
	// MaxRetries is how many times a rejected answer is asked again; 0
	// means 2, < 0 none.
	MaxRetries int
	// Timeout bounds each call; 0 means 5 minutes.
	Timeout time.Duration
	// What names what is asked for, in errors ("24 scenarios").
	What string
	// Logger receives warnings (nil: slog.Default()).
	Logger *slog.Logger
}

// AskJSON asks j for JSON matching schema (CompleteJSON) and hands each
// answer to check, which returns nil to accept it, or what is wrong and a
// hint to send back. A rejected answer is asked again with both, up to
// opts.MaxRetries times; after that AskJSON fails naming the endpoint and
// the last answer. A call that gets no answer at all fails at once. It is
// how structured outputs other than scores (generated tasks and inputs)
// are asked of a judge-style endpoint.
func AskJSON(ctx context.Context, j Judge, msgs []art.Message, name string, schema json.RawMessage, opts AskOptions, check func(content string) (hint string, err error)) error {
	retries := opts.MaxRetries
	switch {
	case retries == 0:
		retries = 2
	case retries < 0:
		retries = 0
	}
	timeout := opts.Timeout
	if timeout <= 0 {
		timeout = 5 * time.Minute
	}
	logger := opts.Logger
	if logger == nil {
		logger = slog.Default()
	}
	what := opts.What
	if what == "" {
		what = name
	}
	asked := msgs
	var last error
	for attempt := 0; attempt <= retries; attempt++ {
		a, err := j.CompleteJSON(ctx, asked, name, schema, timeout)
		if err != nil {
			if errors.Is(err, ErrUnreachable) || ctx.Err() != nil {
				return fmt.Errorf("asking %s for %s at %s: %w", j.name(), what, j.BaseURL, err)
			}
			last = err
			continue
		}
		hint, err := check(a.Content)
		if err == nil {
			return nil
		}
		if a.FinishReason == "length" {
			err = fmt.Errorf("%w (the answer was cut by the token limit)", err)
		}
		last = fmt.Errorf("%w; %s answered %q", err, j.name(), excerpt(a.Content))
		logger.Warn("unusable structured answer", "endpoint", j.name(), "what", what, "attempt", attempt+1, "err", err)
		asked = append(msgs[:len(msgs):len(msgs)], art.AssistantMsg(a.Content), art.UserMsg(fmt.Sprintf("That answer is invalid: %v. %s", err, hint)))
	}
	return fmt.Errorf("asking %s for %s: no valid answer after %d attempts: %w", j.name(), what, retries+1, last)
}
