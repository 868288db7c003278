package safetensors

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
)

// build returns a file made exactly as the format says: the 8-byte
// little-endian length of header, header, then data. No padding is added.
func build(header string, data []byte) []byte {
	b := binary.LittleEndian.AppendUint64(nil, uint64(len(header)))
	b = append(b, header...)
	return append(b, data...)
}

// openBytes opens b as a file named name.
func openBytes(b []byte, name string) (*File, error) {
	return NewFile(bytes.NewReader(b), int64(len(b)), name)
}

func mustOpenBytes(tb testing.TB, b []byte) *File {
	tb.Helper()
	f, err := openBytes(b, "test.safetensors")
	if err != nil {
		tb.Fatalf("open: %v", err)
	}
	return f
}

func mustWrite(tb testing.TB, tensors []Tensor, meta map[string]string) []byte {
	tb.Helper()
	var buf bytes.Buffer
	if err := Write(&buf, tensors, meta); err != nil {
		tb.Fatalf("Write: %v", err)
	}
	return buf.Bytes()
}

// randBytes returns n bytes from a fixed seed.
func randBytes(seed uint64, n int) []byte {
	r := rand.New(rand.NewPCG(seed, 1))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// allDTypes lists every valid dtype.
func allDTypes() []DType {
	var ds []DType
	for d := Bool; d < numDTypes; d++ {
		ds = append(ds, d)
	}
	return ds
}

// checkErr checks that err is a one-line *Error about file path (and
// tensor, if not empty) whose text contains want and that matches kind.
func checkErr(tb testing.TB, err error, kind error, path, tensor, want string) {
	tb.Helper()
	if err == nil {
		tb.Fatalf("got no error; want one containing %q", want)
	}
	msg := err.Error()
	var e *Error
	if !errors.As(err, &e) {
		tb.Fatalf("got %T %q; want *Error", err, msg)
	}
	if kind != nil && !errors.Is(err, kind) {
		tb.Errorf("error %q does not match %v", msg, kind)
	}
	if e.Path != path {
		tb.Errorf("error %q: Path %q; want %q", msg, e.Path, path)
	}
	if e.Tensor != tensor {
		tb.Errorf("error %q: Tensor %q; want %q", msg, e.Tensor, tensor)
	}
	prefix := "safetensors: "
	if path != "" {
		prefix += path + ": "
	}
	if !strings.HasPrefix(msg, prefix) {
		tb.Errorf("error %q does not start with %q", msg, prefix)
	}
	if tensor != "" && !strings.Contains(msg, fmt.Sprintf("tensor %q", tensor)) {
		tb.Errorf("error %q does not name tensor %q", msg, tensor)
	}
	if strings.ContainsAny(msg, "\n\r") {
		tb.Errorf("error %q is not one line", msg)
	}
	if !strings.Contains(msg, want) {
		tb.Errorf("error %q does not contain %q", msg, want)
	}
}
