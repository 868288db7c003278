package store

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/parquet-go/parquet-go"

	"github.com/artgo/art/internal/atomicfile"
)

// TrajectoryRow is one row of a trajectories parquet file: one trajectory
// with its group's fields repeated. The columns and their types are ART's
// (src/art/utils/trajectory_logging.py), so DuckDB or Polars queries written
// for ART read our files unchanged. Empty strings and nil slices are stored
// as nulls, as ART stores its empty values.
type TrajectoryRow struct {
	GroupIndex    int64        `parquet:"group_index"`
	GroupMetadata string       `parquet:"group_metadata,optional"` // JSON object
	GroupMetrics  string       `parquet:"group_metrics,optional"`  // JSON object
	GroupLogs     []string     `parquet:"group_logs,optional,list"`
	Reward        float64      `parquet:"reward"`
	Metrics       string       `parquet:"metrics,optional"`  // JSON object
	Metadata      string       `parquet:"metadata,optional"` // JSON object
	Tools         string       `parquet:"tools,optional"`    // JSON array of tools
	Logs          []string     `parquet:"logs,optional,list"`
	Messages      []MessageRow `parquet:"messages,optional,list"`
}

// MessageRow is one message of a trajectory's main history. A sampled turn
// (a choice) is stored as its message with Trainable set, and its sampled
// tokens in Logprobs.
type MessageRow struct {
	Role       string `parquet:"role,optional"`
	Content    string `parquet:"content,optional"`    // text, or the JSON array of content parts
	ToolCalls  string `parquet:"tool_calls,optional"` // JSON array of tool calls
	ToolCallID string `parquet:"tool_call_id,optional"`
	Trainable  bool   `parquet:"trainable"`
	// Logprobs are the sampled tokens of a trainable turn, in order (nil
	// for context messages and for choices without logprobs). The column
	// is ours, not ART's: files without it (ART's, or ours before it
	// existed) read with Logprobs nil, and ART's readers ignore it.
	Logprobs []TokenRow `parquet:"logprobs,optional,list"`
}

// TokenRow is one sampled token of a trainable turn.
type TokenRow struct {
	TokenID int64   `parquet:"token_id"` // -1 when the server did not say
	Token   string  `parquet:"token,optional"`
	Logprob float64 `parquet:"logprob"`
}

// TrajectoriesPath returns the path of the parquet file for split and step:
// trajectories/<split>/<step:04d>.parquet.
func (d *ModelDir) TrajectoriesPath(split string, step int) string {
	return filepath.Join(d.path, TrajectoriesDir, split, fmt.Sprintf("%04d.parquet", step))
}

// WriteTrajectories atomically writes rows, ZSTD-compressed, to the parquet
// file for split and step, replacing any file already there. To add to the
// file instead, use AppendTrajectories.
func (d *ModelDir) WriteTrajectories(split string, step int, rows []TrajectoryRow) error {
	path, unlock, err := d.lockTrajectories("write", split, step)
	if err != nil {
		return err
	}
	defer unlock()
	if err := writeTrajectoriesFile(path, rows, nil); err != nil {
		return fmt.Errorf("store: write trajectories: %w", err)
	}
	return nil
}

// logIDsKey is the parquet footer key listing the ids of the calls
// (AppendTrajectoriesOnce) whose rows a trajectories file holds, comma
// separated, the latest maxLogIDs of them. Readers that do not know it
// (DuckDB, Polars, ART) ignore it.
const (
	logIDsKey = "art.log_ids"
	maxLogIDs = 64
)

// encodeTrajectories encodes rows, ZSTD-compressed, with ids in the footer.
func encodeTrajectories(w io.Writer, rows []TrajectoryRow, ids []string) error {
	opts := []parquet.WriterOption{parquet.Compression(&parquet.Zstd)}
	if len(ids) > 0 {
		opts = append(opts, parquet.KeyValueMetadata(logIDsKey, strings.Join(ids[max(0, len(ids)-maxLogIDs):], ",")))
	}
	return parquet.Write(w, rows, opts...)
}

// writeTrajectoriesFile atomically writes rows, ZSTD-compressed, to path,
// with ids in the footer.
func writeTrajectoriesFile(path string, rows []TrajectoryRow, ids []string) error {
	return atomicfile.Write(path, 0o644, func(w io.Writer) error {
		return encodeTrajectories(w, rows, ids)
	})
}

// AppendTrajectories adds rows to the parquet file for split and step,
// creating it if there is none. The rows already in the file are kept, and
// the new rows follow them with their group indexes shifted to continue
// after the file's highest one, so that groups from separate calls stay
// separate groups. The whole file is rewritten atomically (a synced
// temporary file renamed over it) while a lock is held, so concurrent
// appends, in one process or several, lose nothing.
//
// An existing file that cannot be read, or rows that would make the file
// too large for ReadTrajectoriesFile, are an error, and the file is left as
// it was. Appending no rows to an existing file changes nothing.
func (d *ModelDir) AppendTrajectories(split string, step int, rows []TrajectoryRow) error {
	_, err := d.appendTrajectories(split, step, rows, "")
	return err
}

// AppendTrajectoriesOnce is AppendTrajectories for one call named by id (not
// empty, no comma): the file's footer records the ids of the calls whose
// rows it holds, written with the rows in the same atomic replacement, and
// a call whose id is already there appends nothing and returns false. So a
// call retried after a failure that followed the landing of its rows does
// not add them twice. The file remembers the latest 64 ids.
func (d *ModelDir) AppendTrajectoriesOnce(split string, step int, rows []TrajectoryRow, id string) (appended bool, err error) {
	if id == "" || strings.Contains(id, ",") {
		return false, fmt.Errorf("store: append trajectories: call id %q is empty or has a comma", id)
	}
	return d.appendTrajectories(split, step, rows, id)
}

func (d *ModelDir) appendTrajectories(split string, step int, rows []TrajectoryRow, id string) (bool, error) {
	path, unlock, err := d.lockTrajectories("append", split, step)
	if err != nil {
		return false, err
	}
	defer unlock()
	old, ids, err := readTrajectoriesFile(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		old = nil
	case err != nil:
		return false, fmt.Errorf("store: append trajectories: the existing file %s cannot be read, so it is left as it is: %w", path, err)
	case id != "" && slices.Contains(ids, id):
		return false, nil
	case len(rows) == 0:
		return false, nil
	}
	if id != "" {
		ids = append(ids, id)
	}
	if len(old) == 0 { // no rows to keep: a plain write
		if err := writeTrajectoriesFile(path, rows, ids); err != nil {
			return false, fmt.Errorf("store: append trajectories: %w", err)
		}
		return true, nil
	}
	all, err := appendTrajectoryRows(old, rows)
	if err != nil {
		return false, fmt.Errorf("store: append trajectories to %s: %w", path, err)
	}
	var buf bytes.Buffer
	if err := encodeTrajectories(&buf, all, ids); err != nil {
		return false, fmt.Errorf("store: append trajectories to %s: %w", path, err)
	}
	// The rows already logged must stay readable: refuse a file past the
	// reader's limits rather than write it.
	if buf.Len() > maxTrajectoriesFile {
		return false, fmt.Errorf("store: append trajectories to %s: the file would be larger than %d bytes", path, maxTrajectoriesFile)
	}
	if _, _, err := decodeTrajectories(buf.Bytes()); err != nil {
		return false, fmt.Errorf("store: append trajectories to %s: the file with %d more rows would not read back (%w); it is left as it is", path, len(rows), err)
	}
	if err := atomicfile.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		return false, fmt.Errorf("store: append trajectories: %w", err)
	}
	return true, nil
}

// appendTrajectoryRows returns old followed by a copy of rows whose group
// indexes are shifted by the highest of old plus one (and by the lowest of
// rows when it is negative), so that they continue after old's and keep
// their order and gaps.
func appendTrajectoryRows(old, rows []TrajectoryRow) ([]TrajectoryRow, error) {
	all := make([]TrajectoryRow, 0, len(old)+len(rows))
	all = append(all, old...)
	if len(old) == 0 || len(rows) == 0 {
		return append(all, rows...), nil
	}
	maxOld := old[0].GroupIndex
	for _, r := range old {
		maxOld = max(maxOld, r.GroupIndex)
	}
	base, maxNew := int64(0), rows[0].GroupIndex
	for _, r := range rows {
		base, maxNew = min(base, r.GroupIndex), max(maxNew, r.GroupIndex)
	}
	// A row's index becomes maxOld+1 + (index-base); the differences are
	// exact in uint64 arithmetic, and the largest must still fit an int64.
	span := uint64(maxNew) - uint64(base)
	room := uint64(math.MaxInt64) - uint64(maxOld)
	if span >= room {
		return nil, fmt.Errorf("group index %d leaves no room for %d more groups", maxOld, span+1)
	}
	for _, r := range rows {
		r.GroupIndex = int64(uint64(maxOld) + 1 + (uint64(r.GroupIndex) - uint64(base)))
		all = append(all, r)
	}
	return all, nil
}

// lockTrajectories checks split and step, creates the directory of their
// parquet file, and takes the trajectories lock. It returns the file's path
// and the lock's release function.
func (d *ModelDir) lockTrajectories(op, split string, step int) (path string, unlock func(), err error) {
	if err := ValidateName(split); err != nil {
		return "", nil, fmt.Errorf("store: split: %w", err)
	}
	if step < 0 {
		return "", nil, fmt.Errorf("store: %s trajectories: negative step %d", op, step)
	}
	path = d.TrajectoriesPath(split, step)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return "", nil, fmt.Errorf("store: %w", err)
	}
	if unlock, err = d.lock(trajectoriesLockFile); err != nil {
		return "", nil, err
	}
	return path, unlock, nil
}

// ReadTrajectories reads back the parquet file for split and step.
func (d *ModelDir) ReadTrajectories(split string, step int) ([]TrajectoryRow, error) {
	if err := ValidateName(split); err != nil {
		return nil, fmt.Errorf("store: split: %w", err)
	}
	return ReadTrajectoriesFile(d.TrajectoriesPath(split, step))
}

// ReadTrajectoriesFile reads the rows of a trajectories parquet file, whether
// written by WriteTrajectories or by ART.
// A damaged or hostile file gives an error, with memory and time bounded by
// its size (see decodeTrajectories).
func ReadTrajectoriesFile(path string) ([]TrajectoryRow, error) {
	rows, _, err := readTrajectoriesFile(path)
	if err != nil {
		return nil, fmt.Errorf("store: read trajectories %s: %w", path, err)
	}
	return rows, nil
}

// readTrajectoriesFile reads the rows of the file at path and the call ids
// in its footer (logIDsKey).
func readTrajectoriesFile(path string) (rows []TrajectoryRow, ids []string, err error) {
	if err := checkRegular(path); err != nil {
		return nil, nil, err
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxTrajectoriesFile+1))
	if err != nil {
		return nil, nil, err
	}
	if len(data) > maxTrajectoriesFile {
		return nil, nil, fmt.Errorf("larger than %d bytes", maxTrajectoriesFile)
	}
	return decodeTrajectories(data)
}

// ListTrajectories returns, for each split with trajectories, the steps that
// have a parquet file, sorted ascending. Names that are not a valid split or
// not <digits>.parquet (temporary files of a write in progress) are ignored.
// A model without trajectories yields an empty map and no error.
func (d *ModelDir) ListTrajectories() (map[string][]int, error) {
	root := filepath.Join(d.path, TrajectoriesDir)
	splits, err := os.ReadDir(root)
	if errors.Is(err, os.ErrNotExist) {
		return map[string][]int{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("store: list trajectories: %w", err)
	}
	out := map[string][]int{}
	for _, s := range splits {
		if !s.IsDir() || ValidateName(s.Name()) != nil {
			continue
		}
		files, err := os.ReadDir(filepath.Join(root, s.Name()))
		if err != nil {
			return nil, fmt.Errorf("store: list trajectories: %w", err)
		}
		var steps []int
		for _, f := range files {
			name, ok := strings.CutSuffix(f.Name(), ".parquet")
			if step, isStep := parseStep(name); ok && isStep && f.Type().IsRegular() {
				steps = append(steps, step)
			}
		}
		if len(steps) > 0 {
			slices.Sort(steps)
			out[s.Name()] = steps
		}
	}
	return out, nil
}
