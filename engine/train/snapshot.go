package train

import (
	"slices"

	"github.com/artgo/art/engine/lora"
)

// Snapshot is a trainer's adapter parameters and optimizer state at one
// moment. A host takes one before a step and restores it when the step or
// the checkpoint after it fails, so that no half-applied update survives.
// The base weights and their optimizer (TrainBase) are not part of it.
type Snapshot struct {
	adapter *lora.Adapter
	params  []float32
	opt     *AdamW
	saved   *AdamW // a deep copy of *opt
}

// Snapshot copies the adapter's parameters and the optimizer's state.
func (tr *Trainer) Snapshot() Snapshot {
	s := Snapshot{adapter: tr.Adapter, opt: tr.Opt}
	if tr.Adapter != nil {
		s.params = slices.Clone(tr.Adapter.Params())
	}
	if tr.Opt != nil {
		s.saved = tr.Opt.clone()
	}
	return s
}

// Restore puts back the adapter and optimizer s was taken from, with the
// values they had then, and clears the adapter's gradients (a snapshot
// is taken between steps, when they hold nothing). The snapshot stays
// valid: it can be restored again.
func (tr *Trainer) Restore(s Snapshot) {
	tr.Adapter, tr.Opt = s.adapter, s.opt
	if s.adapter != nil {
		copy(s.adapter.Params(), s.params)
		s.adapter.ZeroGrad()
	}
	if s.opt != nil {
		*s.opt = *s.saved.clone()
	}
}

// clone returns a deep copy of o.
func (o *AdamW) clone() *AdamW {
	c := *o
	c.M, c.V = slices.Clone(o.M), slices.Clone(o.V)
	return &c
}
