package train

import (
	"context"
	"errors"
	"fmt"
	"math"

	"github.com/artgo/art/engine/model"
)

// FullSFT trains every weight of a model (embedding and LM head, norms,
// projections) with AdamW (β 0.9/0.99, no weight decay, the gradient norm
// clipped to MaxGradNorm). It builds small base models from scratch, where
// a LoRA adapter on a random model cannot learn enough; with a pretrained
// model, train an adapter instead (Trainer.SFTStep). The model's matrices
// must be F32. FullSFT is not safe for concurrent use.
type FullSFT struct {
	Model       *model.Model
	MaxGradNorm float64 // clip the joint gradient norm to this (<= 0: no clipping)

	acts *model.Acts
	base *baseOptimizer
}

// NewFullSFT returns a trainer of every weight of m, clipping gradients to
// norm 1. It fails unless m's weights are F32.
func NewFullSFT(m *model.Model) (*FullSFT, error) {
	b, err := newBaseOptimizer(m)
	if err != nil {
		return nil, fmt.Errorf("train: full sft: %w", err)
	}
	return &FullSFT{Model: m, MaxGradNorm: 1, base: b}, nil
}

// baseOptimizer is the full-weight update that FullSFT and
// Trainer.TrainBase share, so both train the base weights the same way:
// gradients for every base weight and one AdamW (no weight decay) per
// gradient slice. Clipping stays with the caller, which may clip these
// gradients jointly with an adapter's.
type baseOptimizer struct {
	grads *model.BaseGrads
	opts  []*AdamW // one per gradient slice, in BaseGrads.Slices order
}

// newBaseOptimizer allocates the gradients and optimizers for m's base
// weights. It fails unless they are F32, so a caller learns that before
// any forward pass rather than at the update.
func newBaseOptimizer(m *model.Model) (*baseOptimizer, error) {
	if _, err := m.BaseParams(); err != nil {
		return nil, err
	}
	b := &baseOptimizer{grads: m.NewBaseGrads()}
	for _, g := range b.grads.Slices() {
		o := NewAdamW(len(g))
		o.WeightDecay = 0
		b.opts = append(b.opts, o)
	}
	return b, nil
}

// zeroGrad clears the gradients and returns their slices (for clipping),
// in BaseGrads.Slices order.
func (b *baseOptimizer) zeroGrad() [][]float32 {
	grads := b.grads.Slices()
	for _, g := range grads {
		clear(g)
	}
	return grads
}

// step applies one AdamW update with learning rate lr to m's base weights
// from the gradients as they stand (already clipped), then rebuilds the
// kernels' matrices. If the update would make a weight or a moment
// non-finite, it fails with a *NonFiniteError (Value is gradNorm) and
// changes nothing.
func (b *baseOptimizer) step(m *model.Model, lr, gradNorm float64) error {
	// RefreshBase replaced the matrices after the last step: fetch the
	// current slices each time.
	params, err := m.BaseParams()
	if err != nil {
		return err
	}
	if !b.finite(params, lr) {
		return &NonFiniteError{What: "base weights", Value: gradNorm, LearningRate: lr}
	}
	b.apply(m, params, lr)
	return nil
}

// finite reports whether the update with learning rate lr of params (m's
// BaseParams) leaves every weight and moment finite. It changes nothing.
func (b *baseOptimizer) finite(params [][]float32, lr float64) bool {
	for i, g := range b.grads.Slices() {
		if !b.opts[i].finite(params[i], g, lr, 0) {
			return false
		}
	}
	return true
}

// apply makes the update with learning rate lr of params (m's BaseParams,
// fetched since m's last RefreshBase) and rebuilds the kernels' matrices.
func (b *baseOptimizer) apply(m *model.Model, params [][]float32, lr float64) {
	for i, g := range b.grads.Slices() {
		b.opts[i].step(params[i], g, lr, 0)
	}
	// The kernels keep packed copies of the matrices: rebuild them.
	m.RefreshBase()
}

// ensureActs returns activations for sequences of up to maxT tokens,
// reusing the last ones when they are big enough.
func (f *FullSFT) ensureActs(maxT int) *model.Acts {
	if f.acts == nil || f.acts.Cap() < maxT {
		f.acts = f.Model.NewActs(maxT)
	}
	return f.acts
}

// Step takes one optimizer step with learning rate lr. accumulate runs the
// forward and backward passes of a batch on acts (which hold up to maxT
// tokens); the weight gradients collect in acts.Base, zeroed beforehand.
// Step returns the gradient norm before clipping. If accumulate fails, no
// weight changes; nor does it when the gradient norm is not finite or the
// update would make a weight or an optimizer moment non-finite (a
// *NonFiniteError).
func (f *FullSFT) Step(lr float64, maxT int, accumulate func(acts *model.Acts) error) (gradNorm float64, err error) {
	if !(lr > 0) || math.IsInf(lr, 0) {
		return 0, fmt.Errorf("train: full sft learning rate = %v; want > 0", lr)
	}
	acts := f.ensureActs(maxT)
	grads := f.base.zeroGrad()
	acts.Base = f.base.grads
	err = accumulate(acts)
	acts.Base = nil
	if err != nil {
		return 0, err
	}
	norm := clipGradNorm(f.MaxGradNorm, grads...)
	if !finite64(norm) {
		return 0, &NonFiniteError{What: "gradient norm", Value: norm, LearningRate: lr}
	}
	if err := f.base.step(f.Model, lr, norm); err != nil {
		if errors.Is(err, ErrNonFinite) {
			return 0, err
		}
		return 0, fmt.Errorf("train: full sft: %w", err)
	}
	return norm, nil
}

// StepSequences takes one optimizer step on the mean negative
// log-likelihood of every sampled token of seqs (see Tokenizer.SFTSequences)
// and returns that mean, measured before the update, and the gradient norm.
func (f *FullSFT) StepSequences(ctx context.Context, seqs []Sequence, lr float64) (loss, gradNorm float64, err error) {
	total, maxT := countSampled(seqs)
	if total == 0 {
		return 0, 0, fmt.Errorf("train: full sft batch has no assistant tokens to learn")
	}
	var nll float64
	norm, err := f.Step(lr, maxT, func(acts *model.Acts) error {
		for i := range seqs {
			if err := ctx.Err(); err != nil {
				return fmt.Errorf("train: full sft interrupted: %w", err)
			}
			s := &seqs[i]
			if _, err := f.Model.TrainForward(acts, s.Tokens, nil); err != nil {
				return fmt.Errorf("train: full sft: %w", err)
			}
			rows, targets, _ := sampledRows(s)
			_, dh := f.Model.LMHeadBackward(acts, rows, targets, func(_ int, lp, _ float64) (float64, float64) {
				nll -= lp
				return -1 / float64(total), 0
			})
			f.Model.TrainBackward(acts, dh, nil)
		}
		if l := nll / float64(total); !finite64(l) {
			return &NonFiniteError{What: "loss", Value: l, LearningRate: lr}
		}
		return nil
	})
	if err != nil {
		return 0, 0, err
	}
	return nll / float64(total), norm, nil
}

// Loss returns the mean negative log-likelihood of every sampled token of
// seqs under the current weights, without changing them (a held-out loss).
func (f *FullSFT) Loss(ctx context.Context, seqs []Sequence) (float64, error) {
	total, maxT := countSampled(seqs)
	if total == 0 {
		return 0, fmt.Errorf("train: full sft loss: no assistant tokens")
	}
	acts := f.ensureActs(maxT)
	var nll float64
	for i := range seqs {
		if err := ctx.Err(); err != nil {
			return 0, fmt.Errorf("train: full sft loss interrupted: %w", err)
		}
		s := &seqs[i]
		if _, err := f.Model.TrainForward(acts, s.Tokens, nil); err != nil {
			return 0, fmt.Errorf("train: full sft loss: %w", err)
		}
		rows, targets, _ := sampledRows(s)
		st, _ := f.Model.LMHeadBackward(acts, rows, targets, nil)
		for _, lp := range st.Logprobs {
			nll -= lp
		}
	}
	return nll / float64(total), nil
}

// countSampled returns the number of sampled tokens of seqs and the length
// of the longest.
func countSampled(seqs []Sequence) (total, maxT int) {
	for i := range seqs {
		total += seqs[i].NumSampled()
		maxT = max(maxT, len(seqs[i].Tokens))
	}
	return total, maxT
}

// SFTSequences tokenises h for supervised learning: every assistant turn
// without sampled ids is learned, tool calls and closing token included
// (SFTHistory, then Tokenize). It returns no sequence when h has no
// assistant turn.
func (z *Tokenizer) SFTSequences(h History) ([]Sequence, error) {
	sh, err := z.SFTHistory(h)
	if err != nil {
		return nil, err
	}
	return z.Tokenize(sh)
}
