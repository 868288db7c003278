package store

import (
	"cmp"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"
)

// Run names one model directory found under a root.
type Run struct {
	Project, Name string
	Dir           *ModelDir
}

// ID names the run as PROJECT/NAME.
func (r Run) ID() string { return r.Project + "/" + r.Name }

// Find lists the model directories under root: root/<project>/models/<name>
// holding a model.json, a history.jsonl or checkpoints, sorted by project
// and name. A root with none of its own that holds a .art folder (a
// project's working directory) is searched there.
func Find(root string) ([]Run, error) {
	runs, err := find(root)
	if err != nil {
		return nil, err
	}
	if len(runs) == 0 {
		if st, err := os.Stat(filepath.Join(root, DefaultBasePath)); err == nil && st.IsDir() {
			return find(filepath.Join(root, DefaultBasePath))
		}
	}
	return runs, nil
}

func find(root string) ([]Run, error) {
	projects, err := os.ReadDir(root)
	if err != nil {
		return nil, fmt.Errorf("store: list runs: %w", err)
	}
	var runs []Run
	for _, p := range projects {
		if !p.IsDir() || ValidateName(p.Name()) != nil {
			continue
		}
		models, err := os.ReadDir(filepath.Join(root, p.Name(), "models"))
		if errors.Is(err, os.ErrNotExist) || errors.Is(err, os.ErrPermission) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("store: list runs: %w", err)
		}
		for _, m := range models {
			if !m.IsDir() || ValidateName(m.Name()) != nil {
				continue
			}
			d := &ModelDir{path: filepath.Join(root, p.Name(), "models", m.Name())}
			if d.looksLikeRun() {
				runs = append(runs, Run{Project: p.Name(), Name: m.Name(), Dir: d})
			}
		}
	}
	slices.SortFunc(runs, func(a, b Run) int {
		return cmp.Or(cmp.Compare(a.Project, b.Project), cmp.Compare(a.Name, b.Name))
	})
	return runs, nil
}

func (d *ModelDir) looksLikeRun() bool {
	for _, name := range []string{ModelFile, HistoryFile, CheckpointsDir} {
		if _, err := os.Stat(filepath.Join(d.path, name)); err == nil {
			return true
		}
	}
	return false
}

// RunData is what ReadRun reads of a run.
type RunData struct {
	Checkpoints []int            // checkpoint steps, ascending
	History     []map[string]any // history.jsonl rows, in file order
	// Updated is the newest modification time of history.jsonl and the
	// latest checkpoint (zero when neither exists).
	Updated time.Time
	// Warning says what could not be read: corrupted history lines (the
	// other rows are in History) or an unreadable file.
	Warning string
}

// ReadRun reads a run's checkpoint steps and history rows. A damaged file
// is reported in Warning, not as an error, so that listings of many runs
// show the rest.
func (r Run) ReadRun() RunData {
	var data RunData
	steps, err := r.Dir.ListCheckpoints()
	if err != nil {
		data.Warning = err.Error()
	} else if len(steps) > 0 {
		data.Checkpoints = steps
		if st, err := os.Stat(r.Dir.CheckpointDir(steps[len(steps)-1])); err == nil {
			data.Updated = st.ModTime()
		}
	}
	if st, err := os.Stat(filepath.Join(r.Dir.Path(), HistoryFile)); err == nil && st.ModTime().After(data.Updated) {
		data.Updated = st.ModTime()
	}
	rows, err := r.Dir.ReadHistory()
	var corrupt *CorruptLinesError
	switch {
	case errors.As(err, &corrupt):
		data.Warning = fmt.Sprintf("%d corrupted history line(s) skipped (first at line %d: %v)", len(corrupt.Lines), corrupt.Lines[0], corrupt.Err)
	case err != nil:
		data.Warning = err.Error()
	}
	data.History = rows
	return data
}
