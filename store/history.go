package store

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/artgo/art/internal/atomicfile"
)

// AppendHistory appends row to history.jsonl as one line of JSON.
//
// Float values that are NaN or infinite have no JSON encoding; they are left
// out of the line, as ART does. The line is written with a single write while
// an exclusive lock on the file is held, so it never interleaves with lines
// from other goroutines or processes. If a writer crashed mid-line earlier,
// its torn tail is cut off before the new line is written.
func (d *ModelDir) AppendHistory(row map[string]any) error {
	clean := make(map[string]any, len(row))
	for k, v := range row {
		if finite(v) {
			clean[k] = v
		}
	}
	line, err := json.Marshal(clean)
	if err != nil {
		return fmt.Errorf("store: encode history row: %w", err)
	}
	// json.Marshal escapes control characters in strings, so line holds no
	// raw newline and stays one line.
	line = append(line, '\n')

	if err := os.MkdirAll(d.path, 0o755); err != nil {
		return fmt.Errorf("store: %w", err)
	}
	path := filepath.Join(d.path, HistoryFile)
	_, statErr := os.Stat(path)
	created := errors.Is(statErr, os.ErrNotExist)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return fmt.Errorf("store: open history: %w", err)
	}
	defer f.Close()
	if created {
		// A new file's name lives in the directory: synced before the row
		// is written, so a crash cannot lose the whole history, and a
		// failure here leaves no row behind for a retry to write twice.
		if err := atomicfile.SyncDir(d.path); err != nil {
			return fmt.Errorf("store: %w", err)
		}
	}
	if err := lockFile(f); err != nil {
		return fmt.Errorf("store: lock %s: %w", path, err)
	}
	defer unlockFile(f)
	if err := cutTornTail(f); err != nil {
		return fmt.Errorf("store: repair %s: %w", path, err)
	}
	if _, err := f.Write(line); err != nil {
		return fmt.Errorf("store: append to %s: %w", path, err)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("store: sync %s: %w", path, err)
	}
	return nil
}

// cutTornTail truncates f after its last newline when its last byte is not a
// newline: the remains of a writer that died mid-write. The caller holds the
// file's lock, so no live writer is mid-line.
func cutTornTail(f *os.File) error {
	st, err := f.Stat()
	if err != nil {
		return err
	}
	size := st.Size()
	if size == 0 {
		return nil
	}
	var last [1]byte
	if _, err := f.ReadAt(last[:], size-1); err != nil {
		return err
	}
	if last[0] == '\n' {
		return nil
	}
	// Scan backwards for the previous newline.
	const chunk = 64 << 10
	buf := make([]byte, chunk)
	end := size
	for end > 0 {
		start := max(end-chunk, 0)
		n, err := f.ReadAt(buf[:end-start], start)
		if err != nil && !errors.Is(err, io.EOF) {
			return err
		}
		if i := bytes.LastIndexByte(buf[:n], '\n'); i >= 0 {
			return f.Truncate(start + int64(i) + 1)
		}
		end = start
	}
	return f.Truncate(0)
}

// CorruptLinesError reports history.jsonl lines that are not JSON objects.
// ReadHistory returns it together with the rows it could read.
type CorruptLinesError struct {
	Path  string
	Lines []int // 1-based line numbers
	Err   error // the decoding error of the first corrupted line
}

// Error says how many lines were skipped and why the first one was.
func (e *CorruptLinesError) Error() string {
	return fmt.Sprintf("store: %s: %d corrupted line(s) skipped (first at line %d: %v)",
		e.Path, len(e.Lines), e.Lines[0], e.Err)
}

// Unwrap returns the decoding error of the first corrupted line.
func (e *CorruptLinesError) Unwrap() error { return e.Err }

// ReadHistory returns the rows of history.jsonl in file order, or nil and no
// error if the file does not exist.
//
// A trailing line without its newline is the remains of an interrupted write
// and is skipped silently. Blank lines are skipped. Lines that are not JSON
// objects are skipped too, and reported by a *CorruptLinesError returned
// along with every row that could be read.
func (d *ModelDir) ReadHistory() ([]map[string]any, error) {
	path := filepath.Join(d.path, HistoryFile)
	data, err := readRegular(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("store: read history: %w", err)
	}
	if i := bytes.LastIndexByte(data, '\n'); i+1 < len(data) {
		data = data[:i+1] // drop a torn last line
	}
	var (
		rows    []map[string]any
		corrupt *CorruptLinesError
	)
	for n := 1; len(data) > 0; n++ {
		i := bytes.IndexByte(data, '\n')
		line := data[:i]
		data = data[i+1:]
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		row, err := decodeHistoryLine(line)
		if err != nil || row == nil {
			if err == nil {
				err = errors.New("not a JSON object")
			}
			if corrupt == nil {
				corrupt = &CorruptLinesError{Path: path, Err: err}
			}
			corrupt.Lines = append(corrupt.Lines, n)
			continue
		}
		rows = append(rows, row)
	}
	if corrupt != nil {
		return rows, corrupt
	}
	return rows, nil
}

// decodeHistoryLine decodes one line of history.jsonl. A line with NaN,
// Infinity or -Infinity (Python's json writes them, so ART's history may
// hold them; they are not JSON) decodes with those values left out, as
// AppendHistory leaves them out.
func decodeHistoryLine(line []byte) (map[string]any, error) {
	var row map[string]any
	err := json.Unmarshal(line, &row)
	if err == nil {
		return row, nil
	}
	fixed, ok := nonFiniteToNull(line)
	if !ok {
		return nil, err
	}
	row = nil
	if json.Unmarshal(fixed, &row) != nil {
		return nil, err
	}
	for k, v := range row {
		if v == nil {
			delete(row, k)
		}
	}
	return row, nil
}

// nonFiniteToNull returns line with each NaN, Infinity and -Infinity outside
// its strings replaced by null, and whether there were any.
func nonFiniteToNull(line []byte) ([]byte, bool) {
	out := make([]byte, 0, len(line))
	found, inString := false, false
	for i := 0; i < len(line); i++ {
		c := line[i]
		if inString {
			out = append(out, c)
			switch c {
			case '\\':
				if i+1 < len(line) {
					i++
					out = append(out, line[i])
				}
			case '"':
				inString = false
			}
			continue
		}
		if tok := nonFiniteAt(line[i:]); tok > 0 {
			out = append(out, "null"...)
			i += tok - 1
			found = true
			continue
		}
		inString = c == '"'
		out = append(out, c)
	}
	return out, found
}

// nonFiniteAt returns the length of the NaN, Infinity or -Infinity that b
// starts with, or 0.
func nonFiniteAt(b []byte) int {
	for _, tok := range []string{"NaN", "Infinity", "-Infinity"} {
		if bytes.HasPrefix(b, []byte(tok)) {
			return len(tok)
		}
	}
	return 0
}
