package train

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/artgo/art/engine/model"
)

// SFTConfig controls supervised fine-tuning (ART's defaults: gradient clip
// 1.0, no weight decay).
type SFTConfig struct {
	LearningRate float64
	MaxGradNorm  float64
	MaxSeqLen    int
}

// DefaultSFTConfig returns ART's SFT settings with learning rate lr.
func DefaultSFTConfig(lr float64) SFTConfig {
	return SFTConfig{LearningRate: lr, MaxGradNorm: 1, MaxSeqLen: 8192}
}

// SFTHistory marks every assistant message of h without sampled tokens as
// a turn to learn: Tokenize encodes its text and learns the turn's closing
// token too.
func (z *Tokenizer) SFTHistory(h History) (History, error) {
	out := History{Tools: h.Tools, Turns: make([]Turn, len(h.Turns))}
	for i, t := range h.Turns {
		out.Turns[i] = t
		if t.Sampled != nil {
			continue
		}
		var m struct {
			Role string `json:"role"`
		}
		if err := json.Unmarshal(t.Message, &m); err != nil {
			return History{}, fmt.Errorf("train: sft turn %d: %w", i, err)
		}
		if m.Role == "assistant" {
			out.Turns[i].Sampled = &Sampled{}
		}
	}
	return out, nil
}

// SFTStep takes one optimizer step on the mean negative log-likelihood of
// every assistant token in batch. It returns loss/train (mean NLL per
// token), loss/grad_norm and data counts.
//
// If the loss or the gradient norm is not finite, or the update would make
// a weight (adapter or, with TrainBase, base) or an optimizer moment
// non-finite, it fails with a *NonFiniteError and changes nothing. No
// error leaves the weights partly updated.
func (tr *Trainer) SFTStep(ctx context.Context, batch []History, c SFTConfig) (map[string]float64, error) {
	if !(c.LearningRate > 0) {
		return nil, fmt.Errorf("train: sft learning_rate = %v; want > 0", c.LearningRate)
	}
	start := time.Now()
	var seqs []Sequence
	total := 0
	for i, h := range batch {
		hs, err := tr.Tokenizer.SFTSequences(h)
		if err != nil {
			return nil, fmt.Errorf("train: sft example %d: %w", i, err)
		}
		for _, seq := range hs {
			if c.MaxSeqLen > 0 && len(seq.Tokens) > c.MaxSeqLen {
				tr.logger().Warn("train: sft example dropped", "example", i, "tokens", len(seq.Tokens), "max_seq_len", c.MaxSeqLen)
				continue
			}
			seqs = append(seqs, seq)
			total += seq.NumSampled()
		}
	}
	if total == 0 {
		return nil, fmt.Errorf("train: sft batch has no assistant tokens to learn")
	}
	maxT := 0
	for _, s := range seqs {
		maxT = max(maxT, len(s.Tokens))
	}
	tr.ensureActs(maxT)
	var grads [][]float32
	var adapter model.Adapter
	if tr.Adapter != nil {
		tr.Adapter.ZeroGrad()
		grads = append(grads, tr.Adapter.Grads())
		adapter = tr.Adapter
	} else if !tr.TrainBase {
		return nil, fmt.Errorf("train: sft needs an adapter or TrainBase")
	}
	tr.acts.Base = nil
	if tr.TrainBase {
		if tr.base == nil {
			b, err := newBaseOptimizer(tr.Model)
			if err != nil {
				return nil, fmt.Errorf("train: sft with TrainBase: %w", err)
			}
			tr.base = b
		}
		grads = append(grads, tr.base.zeroGrad()...)
		tr.acts.Base = tr.base.grads
		// On every return, so that a failed step does not leave a later
		// GRPO step filling the base gradients.
		defer func() { tr.acts.Base = nil }()
	}
	var nll float64
	tokens := 0
	for i := range seqs {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("train: sft interrupted: %w", err)
		}
		s := &seqs[i]
		if _, err := tr.Model.TrainForward(tr.acts, s.Tokens, adapter); err != nil {
			return nil, fmt.Errorf("train: sft: %w", err)
		}
		rows, targets, _ := sampledRows(s)
		_, dh := tr.Model.LMHeadBackward(tr.acts, rows, targets, func(_ int, lp, _ float64) (float64, float64) {
			nll -= lp
			return -1 / float64(total), 0
		})
		tr.Model.TrainBackward(tr.acts, dh, adapter)
		tokens += len(s.Tokens)
	}
	loss := nll / float64(total)
	if !finite64(loss) {
		return nil, &NonFiniteError{What: "loss", Value: loss, LearningRate: c.LearningRate}
	}
	norm := clipGradNorm(c.MaxGradNorm, grads...)
	if !finite64(norm) {
		return nil, &NonFiniteError{What: "gradient norm", Value: norm, LearningRate: c.LearningRate}
	}
	// Every check comes before the first write, so a refused update
	// changes nothing.
	if tr.Adapter != nil && !tr.Opt.finite(tr.Adapter.Params(), tr.Adapter.Grads(), c.LearningRate, 0) {
		return nil, &NonFiniteError{What: "LoRA weights", Value: norm, LearningRate: c.LearningRate}
	}
	var baseParams [][]float32
	if tr.TrainBase {
		var err error
		if baseParams, err = tr.Model.BaseParams(); err != nil {
			return nil, fmt.Errorf("train: sft: %w", err)
		}
		if !tr.base.finite(baseParams, c.LearningRate) {
			return nil, &NonFiniteError{What: "base weights", Value: norm, LearningRate: c.LearningRate}
		}
	}
	if tr.Adapter != nil {
		tr.Opt.step(tr.Adapter.Params(), tr.Adapter.Grads(), c.LearningRate, 0)
		tr.Adapter.ZeroGrad()
	}
	if tr.TrainBase {
		tr.base.apply(tr.Model, baseParams, c.LearningRate)
	}
	return map[string]float64{
		"loss/train":                   loss,
		"loss/grad_norm":               norm,
		"loss/learning_rate":           c.LearningRate,
		"data/step_num_trajectories":   float64(len(seqs)),
		"data/step_trainer_tokens":     float64(tokens),
		"data/step_num_gradient_steps": 1,
		"time/step_trainer_s":          time.Since(start).Seconds(),
	}, nil
}
