package train

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/artgo/art/engine/kernels"
	"github.com/artgo/art/engine/model"
)

// The bf16 unit rounds the weight products' factors to bf16: the
// logprobs it gives differ from exact fp32's by a bounded amount. It
// measures the difference on every token of a sequence through the
// trainer's forward pass (what the sampler computes too), for fp32 and
// bf16 weights, and holds it to a bound well above what was measured and
// well below what would change learning (README: "precision of the
// weight products").
func TestUnitBF16_LogprobErrorBounded(t *testing.T) {
	if !slices.Contains(kernels.Units(), kernels.UnitBF16) {
		t.Skip("this CPU has no AVX512_BF16: the bf16 unit cannot run here")
	}
	for _, dt := range []kernels.DType{kernels.F32, kernels.BF16} {
		checkUnitLogprobError(t, kernels.UnitBF16, dt, 0.05, 0.3)
	}
}

// The int8 unit rounds the activations of Q8 and Q4 weights' products to
// 8 bits a block: TestUnitBF16_LogprobErrorBounded for it, against the
// exact products of the same quantized weights.
func TestUnitInt8_LogprobErrorBounded(t *testing.T) {
	if !slices.Contains(kernels.Units(), kernels.UnitInt8) {
		t.Skip("this CPU has no AVX512_VNNI: the int8 unit cannot run here")
	}
	for _, dt := range []kernels.DType{kernels.Q8, kernels.Q4} {
		checkUnitLogprobError(t, kernels.UnitInt8, dt, 0.05, 0.3)
	}
}

// checkUnitLogprobError measures |logprob on u − logprob on exact fp32|
// over 300 tokens of a tiny qwen2 with dt weights, and fails above the
// bounds (mean, max) or at exactly zero (u did not run).
func checkUnitLogprobError(t *testing.T, u kernels.Unit, dt kernels.DType, meanBound, maxBound float64) {
	t.Helper()
	z := byteTokenizer(t)
	cfg, err := model.Preset("qwen2", "tiny", z.Tok.VocabSize())
	if err != nil {
		t.Fatal(err)
	}
	m, err := model.New(cfg, model.RandomWeights(cfg, model.InitOptions{Seed: 5, DType: dt, Std: 0.2}))
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	seq := make([]int, 300)
	for i := range seq {
		seq[i] = rng.IntN(z.Tok.VocabSize())
	}
	logprobs := func(u kernels.Unit) []float64 {
		var out []float64
		withUnit(t, u, func() {
			acts := m.NewActs(len(seq))
			if _, err := m.TrainForward(acts, seq, nil); err != nil {
				t.Fatal(err)
			}
			rows := make([]int, len(seq)-1)
			for i := range rows {
				rows[i] = i
			}
			st, _ := m.LMHeadBackward(acts, rows, seq[1:], nil)
			out = st.Logprobs
		})
		return out
	}
	exact, rounded := logprobs(kernels.UnitFP32), logprobs(u)
	var maxDiff, sum, meanLP float64
	for i := range exact {
		d := math.Abs(rounded[i] - exact[i])
		maxDiff = max(maxDiff, d)
		sum += d
		meanLP += exact[i]
	}
	mean := sum / float64(len(exact))
	t.Logf("%v weights: |logprob(%v unit) − logprob(fp32)| over %d tokens: mean %.2g, max %.2g (mean logprob %.2f)",
		dt, u, len(exact), mean, maxDiff, meanLP/float64(len(exact)))
	if mean == 0 {
		t.Fatalf("%v weights: the %v unit gave fp32's logprobs exactly: it did not run", dt, u)
	}
	if mean > meanBound || maxDiff > maxBound {
		t.Fatalf("%v weights: logprob error of the %v unit mean %.3g, max %.3g: beyond the documented bound (mean %v, max %v)", dt, u, mean, maxDiff, meanBound, maxBound)
	}
}
