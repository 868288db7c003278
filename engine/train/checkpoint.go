package train

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/artgo/art/engine/lora"
	"github.com/artgo/art/engine/model"
	"github.com/artgo/art/internal/atomicfile"
)

// SaveCheckpoint writes a checkpoint folder: the adapter in PEFT format plus
// the optimizer state. The folder appears complete or not at all: it is
// written under a temporary name and renamed into place. dir must not exist.
func SaveCheckpoint(dir string, a *lora.Adapter, o *AdamW, baseModel string) error {
	if _, err := os.Stat(dir); err == nil {
		return fmt.Errorf("train: checkpoint %s already exists", dir)
	}
	parent := filepath.Dir(dir)
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return fmt.Errorf("train: save checkpoint: %w", err)
	}
	tmp, err := os.MkdirTemp(parent, "."+filepath.Base(dir)+".tmp-*")
	if err != nil {
		return fmt.Errorf("train: save checkpoint: %w", err)
	}
	ok := false
	defer func() {
		if !ok {
			os.RemoveAll(tmp)
		}
	}()
	if err := a.Save(tmp, baseModel); err != nil {
		return err
	}
	if o != nil {
		if err := o.Save(tmp); err != nil {
			return err
		}
	}
	if err := os.Chmod(tmp, 0o755); err != nil {
		return fmt.Errorf("train: save checkpoint: %w", err)
	}
	if err := os.Rename(tmp, dir); err != nil {
		return fmt.Errorf("train: save checkpoint: %w", err)
	}
	ok = true
	return atomicfile.SyncDir(parent)
}

// LoadCheckpoint reads a checkpoint folder. A folder without optimizer
// state (e.g. a PEFT adapter from elsewhere) gives a fresh optimizer.
func LoadCheckpoint(dir string, mcfg model.Config) (*lora.Adapter, *AdamW, error) {
	a, err := lora.Load(dir, mcfg)
	if err != nil {
		return nil, nil, err
	}
	if _, err := os.Stat(filepath.Join(dir, OptimizerFile)); errors.Is(err, os.ErrNotExist) {
		return a, NewAdamW(len(a.Params())), nil
	}
	o, err := LoadAdamW(dir, len(a.Params()))
	if err != nil {
		return nil, nil, err
	}
	return a, o, nil
}
