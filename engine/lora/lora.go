// Package lora implements LoRA adapters on a frozen model: low-rank updates
// W + (alpha/r)·B·A on the attention and MLP projections (each expert's, in
// a mixture of experts), initialised as PEFT does (A uniform, B zero, so a
// fresh adapter leaves the model unchanged), trained through model.Adapter,
// and saved and loaded in PEFT's format (adapter_config.json +
// adapter_model.safetensors) so vLLM, transformers and PEFT can use our
// checkpoints and we can warm-start from theirs.
package lora

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"

	"github.com/artgo/art/engine/kernels"
	"github.com/artgo/art/engine/model"
)

// Config describes an adapter: rank, scaling and where it applies.
type Config struct {
	Rank          int      // r, default 8
	Alpha         float64  // default 16; the update is scaled by Alpha/Rank (Alpha/√Rank with RSLoRA)
	Dropout       float64  // only 0 is supported for now
	TargetModules []string // projection names; default all seven (in a mixture-of-experts layer the MLP ones adapt every expert's)
	Layers        []int    // layers to adapt; nil means all
	UseRSLoRA     bool
}

// DefaultTargetModules are the projections ART adapts by default.
var DefaultTargetModules = []string{"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"}

// withDefaults fills zero fields with the defaults.
func (c Config) withDefaults() Config {
	if c.Rank == 0 {
		c.Rank = 8
	}
	if c.Alpha == 0 {
		c.Alpha = 16
	}
	if len(c.TargetModules) == 0 {
		c.TargetModules = slices.Clone(DefaultTargetModules)
	}
	return c
}

// Validate checks c against a model with numLayers layers.
func (c Config) Validate(numLayers int) error {
	if c.Rank <= 0 || c.Rank > 1024 {
		return fmt.Errorf("lora: rank must be in [1, 1024], got %d", c.Rank)
	}
	if c.Alpha <= 0 || math.IsNaN(c.Alpha) || math.IsInf(c.Alpha, 0) {
		return fmt.Errorf("lora: alpha must be > 0, got %v", c.Alpha)
	}
	if c.Dropout != 0 {
		return fmt.Errorf("lora: dropout %v is not supported (use 0)", c.Dropout)
	}
	for _, t := range c.TargetModules {
		if _, ok := model.ParseModule(t); !ok {
			return fmt.Errorf("lora: unknown target module %q (known: %s)", t, strings.Join(DefaultTargetModules, ", "))
		}
	}
	for _, l := range c.Layers {
		if l < 0 || l >= numLayers {
			return fmt.Errorf("lora: layer %d out of range [0, %d)", l, numLayers)
		}
	}
	return nil
}

// Scale returns the factor applied to B·A.
func (c Config) Scale() float32 {
	if c.UseRSLoRA {
		return float32(c.Alpha / math.Sqrt(float64(c.Rank)))
	}
	return float32(c.Alpha / float64(c.Rank))
}

// pair is one adapted projection: A (r, in) and B (out, r), with gradients.
type pair struct {
	layer   int
	expert  int // the expert of a mixture-of-experts layer, or -1
	mod     model.Module
	in, out int
	A, B    []float32
	dA, dB  []float32
}

// Adapter is a set of LoRA pairs over one model shape. All parameters live
// in one flat slice (Params) and so do their gradients (Grads), in a fixed
// order, so optimizers are plain loops and checkpoints are deterministic.
//
// AddDelta and AddExpertDelta are safe for concurrent use; BackwardDelta,
// BackwardExpertDelta and the gradient methods must be called from one
// goroutine at a time.
type Adapter struct {
	Config  Config
	scale   float32
	pairs   [][model.NumModules]*pair // per layer; nil where not adapted
	experts [][][3]*pair              // per layer, per expert: gate, up, down; nil where not adapted
	order   []*pair
	params  []float32
	grads   []float32
}

var _ model.Adapter = (*Adapter)(nil)

// New creates an adapter for cfg's shape, initialised as PEFT does: each A
// uniform in ±1/√in (kaiming-uniform with a=√5), each B zero. seed fixes A.
func New(mcfg model.Config, c Config, seed uint64) (*Adapter, error) {
	a, err := newZero(mcfg, c)
	if err != nil {
		return nil, err
	}
	rng := rand.New(rand.NewPCG(seed, 0x6c6f7261)) // "lora"
	for _, p := range a.order {
		bound := 1 / math.Sqrt(float64(p.in))
		for i := range p.A {
			p.A[i] = float32((2*rng.Float64() - 1) * bound)
		}
	}
	return a, nil
}

// newZero lays out an all-zero adapter. As PEFT does on a model whose
// experts are separate projections, the MLP targets (gate_proj, up_proj,
// down_proj) of a mixture-of-experts layer adapt every expert's, each with
// its own pair; the router stays frozen. Pairs are ordered by layer, then
// the layer's own projections, then expert by expert.
func newZero(mcfg model.Config, c Config) (*Adapter, error) {
	c = c.withDefaults()
	if err := c.Validate(mcfg.NumLayers); err != nil {
		return nil, err
	}
	var mods []model.Module
	for _, t := range c.TargetModules {
		m, _ := model.ParseModule(t)
		if !slices.Contains(mods, m) {
			mods = append(mods, m)
		}
	}
	slices.Sort(mods)
	var order []*pair
	for l := 0; l < mcfg.NumLayers; l++ {
		if c.Layers != nil && !slices.Contains(c.Layers, l) {
			continue
		}
		moe := mcfg.IsMoE(l)
		for _, m := range mods {
			if m.Parent() == "mlp" && moe {
				continue
			}
			out, in := m.Dims(mcfg)
			order = append(order, &pair{layer: l, expert: -1, mod: m, in: in, out: out})
		}
		if !moe {
			continue
		}
		for e := range mcfg.NumExperts {
			for _, m := range mods {
				if m.Parent() == "mlp" {
					out, in := m.ExpertDims(mcfg)
					order = append(order, &pair{layer: l, expert: e, mod: m, in: in, out: out})
				}
			}
		}
	}
	if len(order) == 0 {
		return nil, fmt.Errorf("lora: target modules %v adapt nothing in this model", c.TargetModules)
	}
	n := 0
	for _, p := range order {
		n += c.Rank * (p.in + p.out)
	}
	return bind(c, mcfg.NumLayers, order, make([]float32, n)), nil
}

// bind makes an adapter of the pairs in order over params (zeroed
// gradients), each pair's A then B in turn.
func bind(c Config, numLayers int, order []*pair, params []float32) *Adapter {
	a := &Adapter{Config: c, scale: c.Scale(), pairs: make([][model.NumModules]*pair, numLayers),
		experts: make([][][3]*pair, numLayers), order: order, params: params, grads: make([]float32, len(params))}
	off, r := 0, c.Rank
	for _, p := range order {
		p.A, p.dA = a.params[off:off+r*p.in], a.grads[off:off+r*p.in]
		off += r * p.in
		p.B, p.dB = a.params[off:off+p.out*r], a.grads[off:off+p.out*r]
		off += p.out * r
		if p.expert < 0 {
			a.pairs[p.layer][p.mod] = p
			continue
		}
		for len(a.experts[p.layer]) <= p.expert {
			a.experts[p.layer] = append(a.experts[p.layer], [3]*pair{})
		}
		a.experts[p.layer][p.expert][p.mod-model.ModGate] = p
	}
	return a
}

// Params returns all parameters as one slice (shared, not a copy).
func (a *Adapter) Params() []float32 { return a.params }

// Grads returns all gradients, laid out like Params (shared, not a copy).
func (a *Adapter) Grads() []float32 { return a.grads }

// ZeroGrad clears the gradients.
func (a *Adapter) ZeroGrad() { clear(a.grads) }

// Clone returns a deep copy (parameters; gradients zeroed).
func (a *Adapter) Clone() *Adapter {
	order := make([]*pair, len(a.order))
	for i, p := range a.order {
		order[i] = &pair{layer: p.layer, expert: p.expert, mod: p.mod, in: p.in, out: p.out}
	}
	return bind(a.Config, len(a.pairs), order, slices.Clone(a.params))
}

func (a *Adapter) lookup(l int, mod model.Module) *pair {
	if l < 0 || l >= len(a.pairs) {
		return nil
	}
	return a.pairs[l][mod]
}

func (a *Adapter) lookupExpert(l, e int, mod model.Module) *pair {
	if l < 0 || l >= len(a.experts) || e < 0 || e >= len(a.experts[l]) || mod < model.ModGate || mod > model.ModDown {
		return nil
	}
	return a.experts[l][e][mod-model.ModGate]
}

// scratch holds the (n, r) intermediate of AddDelta and BackwardDelta.
// Pooled rather than kept in the Adapter, because AddDelta may run
// concurrently; in steady state the calls allocate nothing.
var scratch sync.Pool

func getScratch(n int) *[]float32 {
	if b, ok := scratch.Get().(*[]float32); ok && cap(*b) >= n {
		*b = (*b)[:n]
		return b
	}
	b := make([]float32, n)
	return &b
}

// AddDelta adds scale·(inp·Aᵀ)·Bᵀ to out (n, out).
func (a *Adapter) AddDelta(out, inp []float32, n, l int, mod model.Module) {
	a.addDelta(a.lookup(l, mod), out, inp, n)
}

// AddExpertDelta is AddDelta for expert e's projection mod.
func (a *Adapter) AddExpertDelta(out, inp []float32, n, l, e int, mod model.Module) {
	a.addDelta(a.lookupExpert(l, e, mod), out, inp, n)
}

func (a *Adapter) addDelta(p *pair, out, inp []float32, n int) {
	if p == nil {
		return
	}
	r := a.Config.Rank
	buf := getScratch(n * r)
	defer scratch.Put(buf)
	u := *buf
	kernels.Gemm(false, true, n, r, p.in, inp, p.in, p.A, p.in, 0, u, r)
	kernels.Scale(a.scale, u)
	kernels.Gemm(false, true, n, p.out, r, u, r, p.B, r, 1, out, p.out)
}

// BackwardDelta accumulates dA and dB for one AddDelta call and adds its
// input gradient to dinp (n, in).
func (a *Adapter) BackwardDelta(dinp, dout, inp []float32, n, l int, mod model.Module) {
	a.backwardDelta(a.lookup(l, mod), dinp, dout, inp, n)
}

// BackwardExpertDelta is BackwardDelta for expert e's projection mod.
func (a *Adapter) BackwardExpertDelta(dinp, dout, inp []float32, n, l, e int, mod model.Module) {
	a.backwardDelta(a.lookupExpert(l, e, mod), dinp, dout, inp, n)
}

func (a *Adapter) backwardDelta(p *pair, dinp, dout, inp []float32, n int) {
	if p == nil {
		return
	}
	r := a.Config.Rank
	buf := getScratch(n * r)
	defer scratch.Put(buf)
	su := *buf // scale·inp·Aᵀ
	kernels.Gemm(false, true, n, r, p.in, inp, p.in, p.A, p.in, 0, su, r)
	kernels.Scale(a.scale, su)
	kernels.Gemm(true, false, p.out, r, n, dout, p.out, su, r, 1, p.dB, r) // dB += doutᵀ·su
	du := su                                                               // reuse: du = scale·dout·B
	kernels.Gemm(false, false, n, r, p.out, dout, p.out, p.B, r, 0, du, r)
	kernels.Scale(a.scale, du)
	kernels.Gemm(true, false, r, p.in, n, du, r, inp, p.in, 1, p.dA, p.in)  // dA += duᵀ·inp
	kernels.Gemm(false, false, n, p.in, r, du, r, p.A, p.in, 1, dinp, p.in) // dinp += du·A
}

// Factor is one adapted projection's factors as PEFT stores them: the update
// is Scale·B·A.
type Factor struct {
	Layer   int
	Expert  int // the expert of a mixture-of-experts layer, or -1
	Module  model.Module
	In, Out int
	A       []float32 // (Rank, In), row-major
	B       []float32 // (Out, Rank), row-major
}

// Factors returns the adapted projections in the adapter's order: by layer,
// the layer's own projections by module, then its experts'. The slices
// are the adapter's own: callers must not modify them.
func (a *Adapter) Factors() []Factor {
	fs := make([]Factor, len(a.order))
	for i, p := range a.order {
		fs[i] = Factor{Layer: p.layer, Expert: p.expert, Module: p.mod, In: p.in, Out: p.out, A: p.A, B: p.B}
	}
	return fs
}
