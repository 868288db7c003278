package train

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/artgo/art/engine/lora"
	"github.com/artgo/art/engine/model"
	"github.com/artgo/art/internal/atomicfile"
)

// CheckpointInfo is what a checkpoint records beside the adapter and the
// optimizer state.
type CheckpointInfo struct {
	// BaseModel names the base (the PEFT config's base_model_name_or_path).
	BaseModel string
	// Quantization is how the frozen base was stored while the adapter
	// was trained (model.NoQuantization: the checkpoint's dtype). An
	// adapter trained on one base and then sampled or trained on another
	// (say q4 after q8) is slightly off-policy with respect to its own
	// history: the hosts warn (see ReadCheckpointInfo).
	Quantization model.Quantization
}

// InfoFile holds a checkpoint's CheckpointInfo fields that PEFT's config
// has no place for.
const InfoFile = "art_checkpoint.json"

// checkpointInfo is InfoFile's JSON.
type checkpointInfo struct {
	// BaseQuantization is CheckpointInfo.Quantization, "none" for none.
	BaseQuantization string `json:"base_quantization"`
}

// ReadCheckpointInfo returns how the checkpoint in dir was trained;
// recorded is false for a checkpoint written before the quantization was
// recorded (or by another tool), whose base storage is unknown.
func ReadCheckpointInfo(dir string) (q model.Quantization, recorded bool, err error) {
	b, err := os.ReadFile(filepath.Join(dir, InfoFile))
	if errors.Is(err, os.ErrNotExist) {
		return model.NoQuantization, false, nil
	}
	if err != nil {
		return "", false, fmt.Errorf("train: read checkpoint info: %w", err)
	}
	var ci checkpointInfo
	if err := json.Unmarshal(b, &ci); err != nil {
		return "", false, fmt.Errorf("train: %s: invalid JSON: %w", filepath.Join(dir, InfoFile), err)
	}
	if q, err = model.ParseQuantization(ci.BaseQuantization); err != nil {
		return "", false, fmt.Errorf("train: %s: %w", filepath.Join(dir, InfoFile), err)
	}
	return q, true, nil
}

// SaveCheckpoint writes a checkpoint folder: the adapter in PEFT format, the
// optimizer state and InfoFile. The folder appears complete or not at all:
// it is written under a temporary name and renamed into place. dir must
// not exist. An adapter or optimizer state holding a non-finite value
// (NaN or ±Inf) is refused: such a checkpoint could neither serve nor
// train.
func SaveCheckpoint(dir string, a *lora.Adapter, o *AdamW, info CheckpointInfo) error {
	if !allFinite32(a.Params()) {
		return fmt.Errorf("train: refusing to save checkpoint %s: the adapter has non-finite weights: %w", dir, ErrNonFinite)
	}
	if o != nil && (!allFinite32(o.M) || !allFinite32(o.V)) {
		return fmt.Errorf("train: refusing to save checkpoint %s: the optimizer state has non-finite values: %w", dir, ErrNonFinite)
	}
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
	if err := a.Save(tmp, info.BaseModel); err != nil {
		return err
	}
	q := string(info.Quantization)
	if q == "" {
		q = "none"
	}
	b, err := json.MarshalIndent(checkpointInfo{BaseQuantization: q}, "", "  ")
	if err != nil {
		return fmt.Errorf("train: save checkpoint: %w", err)
	}
	if err := atomicfile.WriteFile(filepath.Join(tmp, InfoFile), append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("train: save checkpoint: %w", err)
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
