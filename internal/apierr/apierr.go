// Package apierr keeps what an OpenAI-compatible endpoint said when it
// refused a request: openai-go's error prints only the HTTP status
// ("400 Bad Request"), which leaves a caller guessing what was wrong.
package apierr

import (
	"errors"
	"fmt"

	"github.com/openai/openai-go/v3"
)

// WithMessage returns err with the endpoint's error message appended, when
// err is an API error that has one ("OpenAI API error: 400 Bad Request:
// temperature must be a number >= 0, got -1"); other errors as they are.
// errors.As still finds the *openai.Error.
func WithMessage(err error) error {
	var e *openai.Error
	if !errors.As(err, &e) || e.Message == "" {
		return err
	}
	return fmt.Errorf("%w: %s", err, e.Message)
}
