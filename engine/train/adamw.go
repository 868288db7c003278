package train

import (
	"fmt"
	"math"
	"path/filepath"
	"strconv"

	"github.com/artgo/art/engine/safetensors"
)

// AdamW is decoupled-weight-decay Adam over one flat parameter slice, as
// torch.optim.AdamW computes it.
type AdamW struct {
	Beta1, Beta2, Eps, WeightDecay float64
	M, V                           []float32 // first and second moments
	T                              int       // steps taken
}

// NewAdamW returns an optimizer for n parameters with ART's defaults
// (β 0.9/0.99, weight decay 0.1, ε 1e-8).
func NewAdamW(n int) *AdamW {
	return &AdamW{Beta1: 0.9, Beta2: 0.99, Eps: 1e-8, WeightDecay: 0.1, M: make([]float32, n), V: make([]float32, n)}
}

// Step applies one update with learning rate lr and the optimizer's weight
// decay.
func (o *AdamW) Step(params, grads []float32, lr float64) { o.step(params, grads, lr, o.WeightDecay) }

func (o *AdamW) step(params, grads []float32, lr, weightDecay float64) {
	o.T++
	u := o.update(o.T, lr, weightDecay)
	for i, g := range grads {
		params[i], o.M[i], o.V[i] = u.apply(params[i], g, o.M[i], o.V[i])
	}
}

// finite reports whether the next update (as step would make it) leaves
// every parameter and moment finite. It changes nothing.
func (o *AdamW) finite(params, grads []float32, lr, weightDecay float64) bool {
	u := o.update(o.T+1, lr, weightDecay)
	for i, g := range grads {
		p, m, v := u.apply(params[i], g, o.M[i], o.V[i])
		if !finite32(p) || !finite32(m) || !finite32(v) {
			return false
		}
	}
	return true
}

// adamUpdate holds the constants of the update at one step count.
type adamUpdate struct {
	b1, c1, b2, c2, decay  float32
	stepSize, sqrtBC2, eps float64
}

// update returns the constants of update number t.
func (o *AdamW) update(t int, lr, weightDecay float64) adamUpdate {
	b1, b2 := o.Beta1, o.Beta2
	bc1 := 1 - math.Pow(b1, float64(t))
	bc2 := 1 - math.Pow(b2, float64(t))
	return adamUpdate{
		b1: float32(b1), c1: float32(1 - b1), b2: float32(b2), c2: float32(1 - b2),
		decay: float32(1 - lr*weightDecay), stepSize: lr / bc1, sqrtBC2: math.Sqrt(bc2), eps: o.Eps,
	}
}

// apply returns parameter p and its moments m, v after the update with
// gradient g.
func (u adamUpdate) apply(p, g, m, v float32) (float32, float32, float32) {
	m = u.b1*m + u.c1*g
	v = u.b2*v + u.c2*g*g
	denom := math.Sqrt(float64(v))/u.sqrtBC2 + u.eps
	return p*u.decay - float32(u.stepSize*float64(m)/denom), m, v
}

// finite32 reports whether x is neither NaN nor ±Inf.
func finite32(x float32) bool { return math.Float32bits(x)&0x7f800000 != 0x7f800000 }

// finite64 reports whether x is neither NaN nor ±Inf.
func finite64(x float64) bool { return !math.IsNaN(x) && !math.IsInf(x, 0) }

// allFinite32 reports whether every value of xs is finite.
func allFinite32(xs []float32) bool {
	for _, x := range xs {
		if !finite32(x) {
			return false
		}
	}
	return true
}

// clipGradNorm scales the gradients so their joint L2 norm is at most
// maxNorm (no-op when maxNorm <= 0) and returns the norm before clipping.
func clipGradNorm(maxNorm float64, grads ...[]float32) float64 {
	var ss float64
	for _, gs := range grads {
		for _, g := range gs {
			ss += float64(g) * float64(g)
		}
	}
	norm := math.Sqrt(ss)
	if maxNorm > 0 && norm > maxNorm {
		s := float32(maxNorm / (norm + 1e-6))
		for _, gs := range grads {
			for i := range gs {
				gs[i] *= s
			}
		}
	}
	return norm
}

// OptimizerFile is the optimizer state's file inside a checkpoint folder.
const OptimizerFile = "optimizer.safetensors"

// Save writes the optimizer state into dir/optimizer.safetensors.
func (o *AdamW) Save(dir string) error {
	meta := map[string]string{
		"step": strconv.Itoa(o.T), "beta1": fmt.Sprint(o.Beta1), "beta2": fmt.Sprint(o.Beta2),
		"eps": fmt.Sprint(o.Eps), "weight_decay": fmt.Sprint(o.WeightDecay),
	}
	ts := []safetensors.Tensor{
		safetensors.FromF32("exp_avg", safetensors.F32, []int{len(o.M)}, o.M),
		safetensors.FromF32("exp_avg_sq", safetensors.F32, []int{len(o.V)}, o.V),
	}
	if err := safetensors.WriteFile(filepath.Join(dir, OptimizerFile), ts, meta); err != nil {
		return fmt.Errorf("train: save optimizer: %w", err)
	}
	return nil
}

// LoadAdamW reads an optimizer state for n parameters from dir.
func LoadAdamW(dir string, n int) (*AdamW, error) {
	f, err := safetensors.Open(filepath.Join(dir, OptimizerFile))
	if err != nil {
		return nil, fmt.Errorf("train: load optimizer: %w", err)
	}
	defer f.Close()
	o := NewAdamW(n)
	meta := f.Metadata()
	if o.T, err = strconv.Atoi(meta["step"]); err != nil {
		return nil, fmt.Errorf("train: %s: bad step %q", f.Path(), meta["step"])
	}
	for key, dst := range map[string]*float64{"beta1": &o.Beta1, "beta2": &o.Beta2, "eps": &o.Eps, "weight_decay": &o.WeightDecay} {
		v, err := strconv.ParseFloat(meta[key], 64)
		if err != nil {
			return nil, fmt.Errorf("train: %s: bad %s %q", f.Path(), key, meta[key])
		}
		*dst = v
	}
	for name, dst := range map[string][]float32{"exp_avg": o.M, "exp_avg_sq": o.V} {
		info, ok := f.Info(name)
		if !ok || info.NumElements() != n {
			return nil, fmt.Errorf("train: %s: %s missing or not %d values (was the adapter shape changed?)", f.Path(), name, n)
		}
		if err := f.ReadF32Into(name, dst); err != nil {
			return nil, fmt.Errorf("train: load optimizer: %w", err)
		}
	}
	return o, nil
}
