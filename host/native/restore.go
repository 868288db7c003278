package native

import (
	"context"
	"fmt"
	"os"

	"github.com/artgo/art/engine/train"
	"github.com/artgo/art/host"
)

// RestoreCheckpoint saves the checkpoint at step (adapter and optimizer
// state) again as the next step, serves it, and trains on from it (see
// host.Training). A step without a checkpoint wraps host.ErrUnknownModel.
func (h *Host) RestoreCheckpoint(ctx context.Context, step int) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, fmt.Errorf("native: restore step %d: %w", step, err)
	}
	unlock, err := h.lockTraining(ctx)
	if err != nil {
		return 0, fmt.Errorf("native: restore step %d: %w", step, err)
	}
	defer unlock()
	if err := ctx.Err(); err != nil { // ended while it waited
		return 0, fmt.Errorf("native: restore step %d: %w", step, err)
	}
	dir := h.dir.CheckpointDir(step)
	if _, err := os.Stat(dir); step < 0 || err != nil {
		return 0, fmt.Errorf("native: restore step %d: %w", step, h.unknown(h.opt.Name+"@"+fmt.Sprint(step)))
	}
	a, opt, err := train.LoadCheckpoint(dir, h.model.Config)
	if err != nil {
		return 0, fmt.Errorf("native: restore step %d: %w", step, err)
	}
	if err := h.checkQuantization(step); err != nil {
		return 0, err
	}
	next := h.Step() + 1
	if err := train.SaveCheckpoint(h.dir.CheckpointDir(next), a, opt, h.checkpointInfo()); err != nil {
		return 0, fmt.Errorf("native: restore step %d as step %d: %w", step, next, err)
	}
	h.trainer.Adapter, h.trainer.Opt = a, opt
	h.mu.Lock()
	h.loraConfig = a.Config
	h.adapters[next] = a.Clone()
	h.latest = next
	evicted := h.evictLocked()
	h.mu.Unlock()
	h.forget(evicted)
	h.log.Warn("native: restored an earlier checkpoint as the next step", "model", h.opt.Name, "from", step, "step", next)
	return next, nil
}

var _ host.Training = (*Host)(nil)
