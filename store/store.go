// Package store owns the on-disk layout of one model's run directory:
//
//	<base>/<project>/models/<name>/
//	  model.json                               the model's description, written at registration
//	  state.json                               user and resume state (Read, Merge, Overwrite)
//	  history.jsonl                            one JSON object per logged step
//	  trajectories/<split>/<step:04d>.parquet  the trajectory groups logged at a step
//	  checkpoints/<step:04d>/                  one LoRA adapter directory per training step
//
// The layout is the one OpenPipe ART uses, so its tools (DuckDB or Polars over
// the parquet files, history.jsonl readers) work on our runs too.
//
// Durability: every whole-file write (model.json, state.json, parquet) goes
// through a temporary file that is synced and renamed over the target, so a
// reader, or a process restarted after a crash, sees either the old or the new
// content, never a mix. history.jsonl is appended one whole line per write
// while holding an exclusive lock on the file (flock(2) where available), so
// lines from concurrent writers, in one process or several, never interleave.
// The read-modify-writes of MergeState and AppendTrajectories hold a lock too.
//
// A ModelDir is safe for concurrent use. Package store knows nothing about
// trajectories as Go values; package art converts them to the row types here.
package store

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"

	"github.com/artgo/art/internal/atomicfile"
)

// DefaultBasePath is the root directory used when a model gives none.
const DefaultBasePath = ".art"

// File and directory names inside a model directory.
const (
	ModelFile       = "model.json"
	StateFile       = "state.json"
	HistoryFile     = "history.jsonl"
	TrajectoriesDir = "trajectories"
	CheckpointsDir  = "checkpoints"

	// stateLockFile is locked around every state.json write so that MergeState's
	// read-modify-write is atomic. state.json itself cannot carry the lock
	// because each write replaces its inode.
	stateLockFile = ".state.lock"
	// trajectoriesLockFile is locked around every trajectories parquet write
	// so that AppendTrajectories' read-modify-write is atomic.
	trajectoriesLockFile = ".trajectories.lock"
	// logLockFile is held for the whole of a Log call (LockLog), around
	// the others.
	logLockFile = ".log.lock"
)

// maxNameLen bounds project, model and split names; real file systems allow
// 255 bytes per path element.
const maxNameLen = 128

// ModelDir is the directory of one model: <base>/<project>/models/<name>.
// Create it with New. Its methods create directories as they need them.
type ModelDir struct {
	path string
}

// New returns the ModelDir for the named model under base (DefaultBasePath
// when empty). It checks the names with ValidateName and does no I/O.
func New(base, project, name string) (*ModelDir, error) {
	if base == "" {
		base = DefaultBasePath
	}
	if err := ValidateName(project); err != nil {
		return nil, fmt.Errorf("store: project: %w", err)
	}
	if err := ValidateName(name); err != nil {
		return nil, fmt.Errorf("store: model name: %w", err)
	}
	return &ModelDir{path: filepath.Join(base, project, "models", name)}, nil
}

// Open returns the ModelDir of an existing model directory given by its
// path, as `art chart` and other tools that are pointed at a folder need.
func Open(path string) (*ModelDir, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("store: open model directory: %w", err)
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("store: open model directory: %s is not a directory", path)
	}
	return &ModelDir{path: path}, nil
}

// Path returns the directory's path.
func (d *ModelDir) Path() string { return d.path }

// ValidateName reports whether s can be used as a project, model or split
// name: 1 to 128 characters from [A-Za-z0-9._-], not starting with '.' or '-'.
// This keeps names safe as path elements on every OS and unambiguous inside
// the served model id "name@step" (so '@' and '/' are refused).
func ValidateName(s string) error {
	switch {
	case s == "":
		return errors.New("name is empty")
	case len(s) > maxNameLen:
		return fmt.Errorf("name %q is longer than %d characters", s, maxNameLen)
	case s[0] == '.' || s[0] == '-':
		return fmt.Errorf("name %q must not start with %q", s, s[0])
	}
	for _, r := range s {
		ok := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' ||
			r == '.' || r == '_' || r == '-'
		if !ok {
			return fmt.Errorf("name %q contains %q; use only letters, digits, '.', '_' and '-'", s, r)
		}
	}
	return nil
}

// WriteModel atomically writes v as indented JSON to model.json.
func (d *ModelDir) WriteModel(v any) error {
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("store: encode %s: %w", ModelFile, err)
	}
	return d.writeFile(ModelFile, append(data, '\n'))
}

// ReadModel decodes model.json into v. A missing file yields an error
// satisfying errors.Is(err, fs.ErrNotExist).
func (d *ModelDir) ReadModel(v any) error {
	path := filepath.Join(d.path, ModelFile)
	data, err := readRegular(path)
	if err != nil {
		return fmt.Errorf("store: read model: %w", err)
	}
	if err := json.Unmarshal(data, v); err != nil {
		return fmt.Errorf("store: decode %s: %w", path, err)
	}
	return nil
}

// writeFile atomically replaces the named file inside the model directory,
// creating the directory if needed.
func (d *ModelDir) writeFile(name string, data []byte) error {
	path := filepath.Join(d.path, name)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("store: %w", err)
	}
	if err := atomicfile.WriteFile(path, data, 0o644); err != nil {
		return fmt.Errorf("store: %w", err)
	}
	return nil
}

// ReadState returns the content of state.json, or a nil map and no error if
// the file does not exist yet.
func (d *ModelDir) ReadState() (map[string]any, error) {
	path := filepath.Join(d.path, StateFile)
	data, err := readRegular(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("store: read state: %w", err)
	}
	var state map[string]any
	if err := json.Unmarshal(data, &state); err != nil {
		return nil, fmt.Errorf("store: decode %s: %w (fix or delete the file; it holds only resume bookkeeping)", path, err)
	}
	return state, nil
}

// OverwriteState atomically replaces state.json with state.
func (d *ModelDir) OverwriteState(state map[string]any) error {
	unlock, err := d.lockState()
	if err != nil {
		return err
	}
	defer unlock()
	return d.writeState(state)
}

// MergeState deep-merges patch into state.json and returns the merged state:
// nested objects present on both sides are merged key by key, any other value
// in patch replaces the stored one. The read-modify-write holds an exclusive
// lock, so concurrent merges (from goroutines or processes) are not lost.
func (d *ModelDir) MergeState(patch map[string]any) (map[string]any, error) {
	unlock, err := d.lockState()
	if err != nil {
		return nil, err
	}
	defer unlock()
	state, err := d.ReadState()
	if err != nil {
		return nil, err
	}
	merged := deepMerge(state, patch)
	if err := d.writeState(merged); err != nil {
		return nil, err
	}
	return merged, nil
}

// UpdateState runs update on the content of state.json (an empty map when
// there is none) and writes the result back, holding the exclusive state
// lock throughout, so read-modify-write updates from goroutines or
// processes are not lost. If update fails, nothing is written.
func (d *ModelDir) UpdateState(update func(state map[string]any) error) (map[string]any, error) {
	unlock, err := d.lockState()
	if err != nil {
		return nil, err
	}
	defer unlock()
	state, err := d.ReadState()
	if err != nil {
		return nil, err
	}
	if state == nil {
		state = map[string]any{}
	}
	if err := update(state); err != nil {
		return nil, err
	}
	if err := d.writeState(state); err != nil {
		return nil, err
	}
	return state, nil
}

func (d *ModelDir) writeState(state map[string]any) error {
	if state == nil {
		state = map[string]any{}
	}
	data, err := json.MarshalIndent(state, "", "  ")
	if err != nil {
		return fmt.Errorf("store: encode %s: %w", StateFile, err)
	}
	return d.writeFile(StateFile, append(data, '\n'))
}

// lockState takes the exclusive state lock and returns its release function.
func (d *ModelDir) lockState() (unlock func(), err error) {
	return d.lock(stateLockFile)
}

// lock takes an exclusive lock on the lock file name in the model directory
// and returns its release function. Never hold two of these locks at once,
// except the log lock around the others (where flock(2) is unavailable,
// the others share one mutex).
func (d *ModelDir) lock(name string) (unlock func(), err error) {
	if err := os.MkdirAll(d.path, 0o755); err != nil {
		return nil, fmt.Errorf("store: %w", err)
	}
	f, err := os.OpenFile(filepath.Join(d.path, name), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("store: open lock %s: %w", name, err)
	}
	if err := lockFile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("store: lock %s: %w", f.Name(), err)
	}
	return func() {
		unlockFile(f)
		f.Close()
	}, nil
}

// readRegular reads the file at path, refusing anything but a regular file
// (a named pipe put in its place would block the read, and every request
// of the dashboard or a server that makes it, forever).
func readRegular(path string) ([]byte, error) {
	if err := checkRegular(path); err != nil {
		return nil, err
	}
	return os.ReadFile(path)
}

// checkRegular returns an error unless path is a regular file.
func checkRegular(path string) error {
	st, err := os.Stat(path)
	if err != nil {
		return err
	}
	if !st.Mode().IsRegular() {
		return fmt.Errorf("%s is not a regular file (%v)", path, st.Mode().Type())
	}
	return nil
}

// deepMerge returns a new map holding base overlaid with patch. Neither input
// is modified.
func deepMerge(base, patch map[string]any) map[string]any {
	out := make(map[string]any, len(base)+len(patch))
	for k, v := range base {
		out[k] = v
	}
	for k, v := range patch {
		pm, ok1 := v.(map[string]any)
		bm, ok2 := out[k].(map[string]any)
		if ok1 && ok2 {
			out[k] = deepMerge(bm, pm)
			continue
		}
		out[k] = v
	}
	return out
}

// finite reports whether v is a JSON-encodable value as far as floats go.
func finite(v any) bool {
	switch f := v.(type) {
	case float64:
		return !math.IsNaN(f) && !math.IsInf(f, 0)
	case float32:
		return !math.IsNaN(float64(f)) && !math.IsInf(float64(f), 0)
	}
	return true
}
