package store

import (
	"errors"
	"fmt"
	"io"
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
// file for split and step, replacing any file already there.
func (d *ModelDir) WriteTrajectories(split string, step int, rows []TrajectoryRow) error {
	if err := ValidateName(split); err != nil {
		return fmt.Errorf("store: split: %w", err)
	}
	if step < 0 {
		return fmt.Errorf("store: write trajectories: negative step %d", step)
	}
	path := d.TrajectoriesPath(split, step)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("store: %w", err)
	}
	err := atomicfile.Write(path, 0o644, func(w io.Writer) error {
		return parquet.Write(w, rows, parquet.Compression(&parquet.Zstd))
	})
	if err != nil {
		return fmt.Errorf("store: write trajectories: %w", err)
	}
	return nil
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
	rows, err := readTrajectoriesFile(path)
	if err != nil {
		return nil, fmt.Errorf("store: read trajectories %s: %w", path, err)
	}
	return rows, nil
}

func readTrajectoriesFile(path string) ([]TrajectoryRow, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxTrajectoriesFile+1))
	if err != nil {
		return nil, err
	}
	if len(data) > maxTrajectoriesFile {
		return nil, fmt.Errorf("larger than %d bytes", maxTrajectoriesFile)
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
