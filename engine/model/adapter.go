package model

import "fmt"

// Module names one projection inside a transformer layer.
type Module uint8

// The projections a LoRA adapter may target, in PEFT's names.
const (
	ModQ Module = iota
	ModK
	ModV
	ModO
	ModGate
	ModUp
	ModDown
	NumModules
)

var moduleNames = [NumModules]string{"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"}

// String returns the module's Hugging Face name, e.g. "q_proj".
func (m Module) String() string {
	if m < NumModules {
		return moduleNames[m]
	}
	return fmt.Sprintf("Module(%d)", uint8(m))
}

// ParseModule maps a Hugging Face projection name to a Module.
func ParseModule(name string) (Module, bool) {
	for i, n := range moduleNames {
		if n == name {
			return Module(i), true
		}
	}
	return 0, false
}

// Parent returns "self_attn" or "mlp", the block holding the module.
func (m Module) Parent() string {
	if m <= ModO {
		return "self_attn"
	}
	return "mlp"
}

// Dims returns the module's (out, in) feature sizes under cfg.
func (m Module) Dims(cfg Config) (out, in int) {
	C, F, Q, KV := cfg.HiddenSize, cfg.IntermediateSize, cfg.QDim(), cfg.KVDim()
	switch m {
	case ModQ:
		return Q, C
	case ModK, ModV:
		return KV, C
	case ModO:
		return C, Q
	case ModGate, ModUp:
		return F, C
	case ModDown:
		return C, F
	}
	panic("model: unknown module " + m.String())
}

// ExpertDims returns the (out, in) feature sizes of an expert's projection
// mod (ModGate, ModUp or ModDown) in a mixture-of-experts layer under cfg.
func (m Module) ExpertDims(cfg Config) (out, in int) {
	C, Fm := cfg.HiddenSize, cfg.MoEIntermediateSize
	switch m {
	case ModGate, ModUp:
		return Fm, C
	case ModDown:
		return C, Fm
	}
	panic("model: an expert has no " + m.String())
}

// Adapter adds a trainable update to the frozen projections, such as a LoRA
// adapter. Implementations must be safe for concurrent AddDelta and
// AddExpertDelta calls; the training methods are called from one goroutine
// at a time.
type Adapter interface {
	// AddDelta adds the adapter's output for module mod of layer l to out
	// (n, out features) given the projection's input inp (n, in features).
	AddDelta(out, inp []float32, n, l int, mod Module)
	// BackwardDelta accumulates the adapter's parameter gradients for that
	// call and adds its contribution to the input gradient: dinp (n, in) +=
	// ∂/∂inp of the delta, given dout (n, out).
	BackwardDelta(dinp, dout, inp []float32, n, l int, mod Module)
	// AddExpertDelta and BackwardExpertDelta are the same for projection
	// mod (ModGate, ModUp or ModDown) of expert e of a mixture-of-experts
	// layer l, over the n rows routed to that expert.
	AddExpertDelta(out, inp []float32, n, l, e int, mod Module)
	BackwardExpertDelta(dinp, dout, inp []float32, n, l, e int, mod Module)
}
