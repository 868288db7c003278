package safetensors

import (
	"errors"
	"fmt"
	"strings"
)

var (
	// ErrFormat is matched (with errors.Is) by every error about a malformed
	// file, index or tensor list.
	ErrFormat = errors.New("safetensors: invalid format")

	// ErrNotFound is matched by errors for a tensor name that is not there.
	ErrNotFound = errors.New("safetensors: tensor not found")

	// ErrDType is matched by errors for a read the tensor's dtype does not
	// support, such as ReadF32 on an I64 tensor.
	ErrDType = errors.New("safetensors: unsupported dtype for this read")
)

// Error reports a problem with a safetensors file or model folder. Its text
// is one line: "safetensors: PATH: tensor "NAME": what went wrong".
type Error struct {
	Path   string // file or folder as given to Open, OpenDir or WriteFile; "" for Write
	Tensor string // the tensor concerned, or "" if the problem is the whole file
	Err    error  // what went wrong
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("safetensors: ")
	if e.Path != "" {
		b.WriteString(e.Path)
		b.WriteString(": ")
	}
	if e.Tensor != "" {
		fmt.Fprintf(&b, "tensor %q: ", e.Tensor)
	}
	b.WriteString(strings.TrimPrefix(e.Err.Error(), "safetensors: "))
	return b.String()
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// kindError is a message that matches one of the sentinels.
type kindError struct {
	msg  string
	kind error
}

func (e *kindError) Error() string        { return e.msg }
func (e *kindError) Is(target error) bool { return target == e.kind }

// formatErr returns an *Error that matches ErrFormat.
func formatErr(path, tensor, format string, args ...any) error {
	return &Error{Path: path, Tensor: tensor, Err: &kindError{fmt.Sprintf(format, args...), ErrFormat}}
}

func notFound(path, tensor string) error {
	return &Error{Path: path, Tensor: tensor, Err: ErrNotFound}
}
