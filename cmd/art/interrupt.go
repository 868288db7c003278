package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// interruptible runs f, which must only read (loading a model folder), and
// returns when it has finished or ctx is done, whichever comes first: f
// cannot be stopped, but on an interrupt its result is of no use and the
// process ends once the command returns, so Ctrl-C need not wait for it.
func interruptible[T any](ctx context.Context, f func() (T, error)) (T, error) {
	type result struct {
		v   T
		err error
	}
	done := make(chan result, 1) // f's goroutine never blocks on it
	go func() {
		v, err := f()
		done <- result{v, err}
	}()
	select {
	case r := <-done:
		return r.v, r.err
	case <-ctx.Done():
		var zero T
		return zero, ctx.Err()
	}
}

// ctxWriter fails every write once ctx is done, which stops a writer that
// streams into it (gguf.Export, row by row) at its next write.
type ctxWriter struct {
	ctx context.Context
	w   io.Writer
}

func (c ctxWriter) Write(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.w.Write(p)
}

// checkOutFile refuses, before any work, an --out that could not be written
// as named: an existing folder, or a file in a folder that does not exist
// (found otherwise only when the file is written, after the work).
func checkOutFile(command, path string) error {
	if st, err := os.Stat(path); err == nil && st.IsDir() {
		return fmt.Errorf("%s: --out %s is a folder; name the file to write", command, path)
	}
	dir := filepath.Dir(path)
	st, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("%s: --out %s: folder %s does not exist", command, path, dir)
	case err != nil:
		return fmt.Errorf("%s: --out %s: %w", command, path, err)
	case !st.IsDir():
		return fmt.Errorf("%s: --out %s: %s is not a folder", command, path, dir)
	}
	return nil
}

// checkOutFolder refuses, before any work, an --out that cannot become a
// new folder: a file, a folder with something in it, or a path through a
// file.
func checkOutFolder(command, path string) error {
	st, err := os.Stat(path)
	switch {
	case err == nil && !st.IsDir():
		return fmt.Errorf("%s: --out %s is a file; name a new or empty folder", command, path)
	case err == nil:
		entries, err := os.ReadDir(path)
		if err != nil {
			return fmt.Errorf("%s: --out: %w", command, err)
		}
		if len(entries) > 0 {
			return fmt.Errorf("%s: --out %s is not empty; name a new or empty folder", command, path)
		}
		return nil
	}
	// The nearest existing folder above path must be one.
	for d := filepath.Dir(path); ; d = filepath.Dir(d) {
		st, serr := os.Stat(d)
		if serr == nil {
			if !st.IsDir() {
				return fmt.Errorf("%s: --out %s: %s is not a folder", command, path, d)
			}
			break
		}
		if d == filepath.Dir(d) {
			break
		}
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("%s: --out: %w", command, err)
	}
	return nil
}
