package model

import (
	"fmt"

	"github.com/artgo/art/engine/kernels"
)

// Quantization says how the frozen base matrices are stored in memory. The
// zero value keeps each matrix in its checkpoint dtype.
//
// A quantized base is what both the sampler and the trainer read: LoRA
// adapters, activations and gradients stay fp32, and every product sums
// the same fp32 products (the dequantized weights) in the same order, so
// training stays exactly on-policy. Only the base's values change, by about
// half a quantization step of each weight.
type Quantization string

const (
	// NoQuantization keeps the checkpoint's dtype (F32, BF16 or F16).
	NoQuantization Quantization = ""
	// Q8 stores blockwise 8-bit weights (GGML's Q8_0: blocks of 32 int8
	// along a row with one fp16 scale, 1.0625 bytes a weight).
	Q8 Quantization = "q8"
	// Q4 stores blockwise 4-bit weights (GGML's Q4_0: blocks of 32 4-bit
	// values along a row with one fp16 scale, 0.5625 bytes a weight),
	// rounded as llama.cpp's own Q4_0 conversion rounds them.
	Q4 Quantization = "q4"
)

// Quantizations lists the accepted values of ParseQuantization, for flag
// help.
const Quantizations = "q8 (8-bit blocks of 32, as GGML's Q8_0), q4 (4-bit blocks of 32, as GGML's Q4_0) or none"

// ParseQuantization reads a --quantize value: "q8", "q4", or "" / "none"
// for none.
func ParseQuantization(s string) (Quantization, error) {
	switch s {
	case "", "none":
		return NoQuantization, nil
	case string(Q8):
		return Q8, nil
	case string(Q4):
		return Q4, nil
	}
	return NoQuantization, fmt.Errorf("model: unknown quantization %q (want %s)", s, Quantizations)
}

// LoadOptions change how Load stores a model.
type LoadOptions struct {
	// Quantize stores every weight matrix (embedding, projections,
	// experts, LM head) quantized as it is read; a matrix whose rows are
	// not whole blocks of the type, and a mixture of experts' router,
	// stay in their checkpoint dtype.
	Quantize Quantization
}

func (q Quantization) dtype() (kernels.DType, bool) {
	switch q {
	case Q8:
		return kernels.Q8, true
	case Q4:
		return kernels.Q4, true
	}
	return 0, false
}

// quantize returns m stored as q, or m itself when q is none or m's rows
// do not divide into q's blocks.
func (q Quantization) quantize(m *kernels.Mat, name string) (*kernels.Mat, error) {
	dt, ok := q.dtype()
	if !ok || !kernels.CanQuantize(m.Cols, dt) {
		return m, nil
	}
	out, err := kernels.Quantize(m, dt)
	if err != nil {
		return nil, fmt.Errorf("tensor %s: %w", name, err)
	}
	return out, nil
}

// Quantize stores every weight matrix of w as q (see LoadOptions.Quantize),
// for models built in memory (RandomWeights); Load does the same matrix by
// matrix as it reads them. Call it before the first forward pass.
func (w *Weights) Quantize(q Quantization) error {
	tied := w.LMHead == w.Embed
	do := func(p **kernels.Mat, name string) error {
		if *p == nil {
			return nil
		}
		out, err := q.quantize(*p, name)
		if err != nil {
			return fmt.Errorf("model: quantize: %w", err)
		}
		*p = out
		return nil
	}
	if err := do(&w.Embed, "embedding"); err != nil {
		return err
	}
	if tied {
		w.LMHead = w.Embed
	} else if err := do(&w.LMHead, "lm_head"); err != nil {
		return err
	}
	for l := range w.Layers {
		for _, m := range w.Layers[l].mats() {
			if m.unquantized {
				continue
			}
			if err := do(m.p, fmt.Sprintf("layer %d %s", l, m.name)); err != nil {
				return err
			}
		}
	}
	return nil
}
