package store

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// CheckpointDir returns the directory of the checkpoint for step:
// checkpoints/<step:04d>. It does not create it.
func (d *ModelDir) CheckpointDir(step int) string {
	return filepath.Join(d.path, CheckpointsDir, fmt.Sprintf("%04d", step))
}

// ListCheckpoints returns the steps that have a checkpoint directory, sorted
// ascending. Entries whose names are not decimal numbers (temporary or
// half-deleted directories, stray files) are ignored. A missing checkpoints
// directory yields no steps and no error.
func (d *ModelDir) ListCheckpoints() ([]int, error) {
	entries, err := os.ReadDir(filepath.Join(d.path, CheckpointsDir))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("store: list checkpoints: %w", err)
	}
	var steps []int
	for _, e := range entries {
		step, ok := parseStep(e.Name())
		if !ok || !e.IsDir() {
			continue
		}
		steps = append(steps, step)
	}
	slices.Sort(steps)
	return slices.Compact(steps), nil
}

// LatestStep returns the highest checkpoint step, or 0 if there is none.
func (d *ModelDir) LatestStep() (int, error) {
	steps, err := d.ListCheckpoints()
	if err != nil || len(steps) == 0 {
		return 0, err
	}
	return steps[len(steps)-1], nil
}

// DeleteCheckpoints removes every checkpoint whose step is not in keep.
// Each directory is first renamed to a hidden name, so a deletion interrupted
// halfway never leaves something that looks like a checkpoint. It tries every
// deletion and reports all failures together.
func (d *ModelDir) DeleteCheckpoints(keep []int) error {
	root := filepath.Join(d.path, CheckpointsDir)
	entries, err := os.ReadDir(root)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("store: delete checkpoints: %w", err)
	}
	var errs []error
	for _, e := range entries {
		step, ok := parseStep(e.Name())
		if !ok || !e.IsDir() || slices.Contains(keep, step) {
			continue
		}
		var suffix [4]byte
		rand.Read(suffix[:])
		trash := filepath.Join(root, ".deleting-"+e.Name()+"-"+hex.EncodeToString(suffix[:]))
		if err := os.Rename(filepath.Join(root, e.Name()), trash); err != nil {
			errs = append(errs, fmt.Errorf("store: delete checkpoint %d: %w", step, err))
			continue
		}
		if err := os.RemoveAll(trash); err != nil {
			errs = append(errs, fmt.Errorf("store: delete checkpoint %d: %w", step, err))
		}
	}
	return errors.Join(errs...)
}

// RemoveLeftovers deletes what an interrupted checkpoint write or deletion
// left in the checkpoints folder: hidden ".<step>.tmp-*" and ".deleting-*"
// entries. Only the process that trains the model may call it (it would
// delete another writer's checkpoint in progress). It returns the names
// removed.
func (d *ModelDir) RemoveLeftovers() ([]string, error) {
	root := filepath.Join(d.path, CheckpointsDir)
	entries, err := os.ReadDir(root)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("store: clean checkpoints: %w", err)
	}
	var removed []string
	var errs []error
	for _, e := range entries {
		name := e.Name()
		if !strings.HasPrefix(name, ".deleting-") && !(strings.HasPrefix(name, ".") && strings.Contains(name, ".tmp-")) {
			continue
		}
		if err := os.RemoveAll(filepath.Join(root, name)); err != nil {
			errs = append(errs, fmt.Errorf("store: clean checkpoints: %w", err))
			continue
		}
		removed = append(removed, name)
	}
	return removed, errors.Join(errs...)
}

// parseStep parses a checkpoint directory name: ASCII digits only.
func parseStep(name string) (int, bool) {
	if name == "" || len(name) > 9 {
		return 0, false
	}
	for i := 0; i < len(name); i++ {
		if name[i] < '0' || name[i] > '9' {
			return 0, false
		}
	}
	n, err := strconv.Atoi(name)
	return n, err == nil
}
