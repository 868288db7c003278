// Package lora implements LoRA adapters on a frozen model: low-rank updates
// W + (alpha/r)·B·A on the attention and MLP projections, initialised as
// PEFT does (A uniform, B zero, so a fresh adapter leaves the model
// unchanged), trained through model.Adapter, and saved and loaded in PEFT's
// format (adapter_config.json + adapter_model.safetensors) so vLLM,
// transformers and PEFT can use our checkpoints and we can warm-start from
// theirs.
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
	TargetModules []string // projection names; default all seven
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
	mod     model.Module
	in, out int
	A, B    []float32
	dA, dB  []float32
}

// Adapter is a set of LoRA pairs over one model shape. All parameters live
// in one flat slice (Params) and so do their gradients (Grads), in a fixed
// order, so optimizers are plain loops and checkpoints are deterministic.
//
// AddDelta is safe for concurrent use; BackwardDelta and the gradient
// methods must be called from one goroutine at a time.
type Adapter struct {
	Config Config
	scale  float32
	pairs  [][model.NumModules]*pair // per layer; nil where not adapted
	order  []*pair
	params []float32
	grads  []float32
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

// newZero lays out an all-zero adapter.
func newZero(mcfg model.Config, c Config) (*Adapter, error) {
	c = c.withDefaults()
	if err := c.Validate(mcfg.NumLayers); err != nil {
		return nil, err
	}
	a := &Adapter{Config: c, scale: c.Scale(), pairs: make([][model.NumModules]*pair, mcfg.NumLayers)}
	var mods []model.Module
	for _, t := range c.TargetModules {
		m, _ := model.ParseModule(t)
		if !slices.Contains(mods, m) {
			mods = append(mods, m)
		}
	}
	slices.Sort(mods)
	n := 0
	for l := 0; l < mcfg.NumLayers; l++ {
		if c.Layers != nil && !slices.Contains(c.Layers, l) {
			continue
		}
		for _, m := range mods {
			if m.Parent() == "mlp" && mcfg.IsMoE(l) {
				// A mixture-of-experts layer has no dense gate, up and
				// down: its experts and router stay frozen.
				continue
			}
			out, in := m.Dims(mcfg)
			p := &pair{layer: l, mod: m, in: in, out: out}
			a.pairs[l][m] = p
			a.order = append(a.order, p)
			n += c.Rank * (in + out)
		}
	}
	if len(a.order) == 0 {
		return nil, fmt.Errorf("lora: target modules %v adapt nothing in this model (its mixture-of-experts layers adapt q_proj, k_proj, v_proj and o_proj only)", c.TargetModules)
	}
	a.params = make([]float32, n)
	a.grads = make([]float32, n)
	off := 0
	r := c.Rank
	for _, p := range a.order {
		p.A, p.dA = a.params[off:off+r*p.in], a.grads[off:off+r*p.in]
		off += r * p.in
		p.B, p.dB = a.params[off:off+p.out*r], a.grads[off:off+p.out*r]
		off += p.out * r
	}
	return a, nil
}

// Params returns all parameters as one slice (shared, not a copy).
func (a *Adapter) Params() []float32 { return a.params }

// Grads returns all gradients, laid out like Params (shared, not a copy).
func (a *Adapter) Grads() []float32 { return a.grads }

// ZeroGrad clears the gradients.
func (a *Adapter) ZeroGrad() { clear(a.grads) }

// Clone returns a deep copy (parameters; gradients zeroed).
func (a *Adapter) Clone() *Adapter {
	b := &Adapter{Config: a.Config, scale: a.scale, pairs: make([][model.NumModules]*pair, len(a.pairs))}
	b.params = slices.Clone(a.params)
	b.grads = make([]float32, len(a.grads))
	off := 0
	for _, p := range a.order {
		q := &pair{layer: p.layer, mod: p.mod, in: p.in, out: p.out}
		r := a.Config.Rank
		q.A, q.dA = b.params[off:off+r*p.in], b.grads[off:off+r*p.in]
		off += r * p.in
		q.B, q.dB = b.params[off:off+p.out*r], b.grads[off:off+p.out*r]
		off += p.out * r
		b.pairs[p.layer][p.mod] = q
		b.order = append(b.order, q)
	}
	return b
}

func (a *Adapter) lookup(l int, mod model.Module) *pair {
	if l < 0 || l >= len(a.pairs) {
		return nil
	}
	return a.pairs[l][mod]
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
	p := a.lookup(l, mod)
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
	p := a.lookup(l, mod)
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
	Module  model.Module
	In, Out int
	A       []float32 // (Rank, In), row-major
	B       []float32 // (Out, Rank), row-major
}

// Factors returns the adapted projections, by layer then module. The
// slices are the adapter's own: callers must not modify them.
func (a *Adapter) Factors() []Factor {
	fs := make([]Factor, len(a.order))
	for i, p := range a.order {
		fs[i] = Factor{Layer: p.layer, Module: p.mod, In: p.in, Out: p.out, A: p.A, B: p.B}
	}
	return fs
}
