package train

import (
	"math"
	"strings"
	"testing"
)

func near(a, b, tol float64) bool { return math.Abs(a-b) <= tol }

func TestGroupAdvantages(t *testing.T) {
	// rewards 0, 1, 1, 2: mean 1, population std sqrt(0.5)
	std := math.Sqrt(0.5)
	cases := []struct {
		rewards []float64
		scale   bool
		want    []float64
	}{
		{[]float64{0, 1, 1, 2}, true, []float64{-1 / (std + 1e-6), 0, 0, 1 / (std + 1e-6)}},
		{[]float64{0, 1, 1, 2}, false, []float64{-1, 0, 0, 1}},
		{[]float64{3, 3, 3}, true, []float64{0, 0, 0}},
		{[]float64{5}, true, []float64{0}},
	}
	for _, c := range cases {
		got := groupAdvantages(c.rewards, c.scale)
		for i := range got {
			if !near(got[i], c.want[i], 1e-9) {
				t.Errorf("rewards %v scale %v: A[%d] = %v; want %v", c.rewards, c.scale, i, got[i], c.want[i])
			}
		}
	}
}

func TestBalance(t *testing.T) {
	cases := []struct{ a, b, want float64 }{
		{-2, 0.5, -1}, {2, 0.5, 2}, {2, -0.25, 1.5}, {-2, -0.25, -2}, {1, 0, 1},
	}
	for _, c := range cases {
		if got := balance(c.a, c.b); got != c.want {
			t.Errorf("balance(%v, %v) = %v; want %v", c.a, c.b, got, c.want)
		}
	}
}

// Ensure CISPO and PPO give the hand-computed loss and gradients.
func TestTokenTerms(t *testing.T) {
	cispo := DefaultConfig()
	ppo := DefaultConfig()
	ppo.Loss, ppo.Epsilon, ppo.EpsilonHigh = "ppo", 0.2, 0.2
	lp := []float64{-1, -2}
	old := []float64{-1.5, math.NaN()} // ratio e^0.5 ≈ 1.6487, then on-policy 1
	adv := []float64{2, -1}
	w := 0.5
	r0 := math.Exp(0.5)

	// CISPO: L_t = -clip(r,0,5)·A·lp · w/n
	loss, d := tokenTerms(cispo, lp, old, nil, adv, w)
	wantLoss := (-r0*2*(-1) - 1*(-1)*(-2)) * w / 2
	if !near(loss, wantLoss, 1e-12) {
		t.Errorf("cispo loss %v; want %v", loss, wantLoss)
	}
	if !near(d[0], -r0*2*w/2, 1e-12) || !near(d[1], 1*w/2, 1e-12) {
		t.Errorf("cispo grads %v; want [%v %v]", d, -r0*2*w/2, w/2)
	}

	// PPO: token 0 has A>0 and r > 1.2, so the clipped branch wins: no grad.
	loss, d = tokenTerms(ppo, lp, old, nil, adv, w)
	wantLoss = (-1.2*2 + -(1 * -1)) * w / 2
	if !near(loss, wantLoss, 1e-12) {
		t.Errorf("ppo loss %v; want %v", loss, wantLoss)
	}
	if d[0] != 0 || !near(d[1], -(-1)*1*w/2, 1e-12) {
		t.Errorf("ppo grads %v; want [0 %v]", d, w/2)
	}

	// PPO gradient equals the finite difference of its loss in the unclipped regime.
	lp2, old2, adv2 := []float64{-1.1, -0.7}, []float64{-1.0, -0.75}, []float64{0.8, -0.3}
	_, d2 := tokenTerms(ppo, lp2, old2, nil, adv2, 1)
	for i := range lp2 {
		const eps = 1e-6
		p := append([]float64(nil), lp2...)
		p[i] += eps
		lpPlus, _ := tokenTerms(ppo, p, old2, nil, adv2, 1)
		p[i] -= 2 * eps
		lpMinus, _ := tokenTerms(ppo, p, old2, nil, adv2, 1)
		if num := (lpPlus - lpMinus) / (2 * eps); !near(num, d2[i], 1e-6) {
			t.Errorf("ppo token %d: grad %v; finite difference %v", i, d2[i], num)
		}
	}
}

// Ensure sequence-level (GSPO) ratios use the sequence's mean log ratio.
func TestTokenTerms_Sequence(t *testing.T) {
	c := DefaultConfig()
	c.ImportanceSamplingLevel = "sequence"
	lp, old, adv := []float64{-1, -2}, []float64{-1.2, -1.6}, []float64{1, 1}
	_, d := tokenTerms(c, lp, old, nil, adv, 1)
	s := math.Exp(((-1 + 1.2) + (-2 + 1.6)) / 2)
	for i := range d {
		if !near(d[i], -s/2, 1e-12) {
			t.Errorf("grad %d = %v; want %v", i, d[i], -s/2)
		}
	}
}

func TestConfigValidate(t *testing.T) {
	cases := []struct {
		edit func(*Config)
		want string
	}{
		{func(c *Config) { c.LearningRate = 0 }, "learning_rate"},
		{func(c *Config) { c.Loss = "dpo" }, "loss"},
		{func(c *Config) { c.AdvantageBalance = 2 }, "advantage_balance"},
		{func(c *Config) { c.ImportanceSamplingLevel = "tok" }, "importance_sampling_level"},
		{func(c *Config) { c.GradAccumulationSequences = 0 }, "grad_accumulation_sequences"},
		{func(c *Config) { c.LearningRate = math.NaN() }, "learning_rate"},
		{func(c *Config) { c.EntropyCoef = math.Inf(1) }, "entropy_coef"},
	}
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatalf("default config: %v", err)
	}
	for _, c := range cases {
		cfg := DefaultConfig()
		c.edit(&cfg)
		err := cfg.Validate()
		if err == nil || !contains(err.Error(), c.want) {
			t.Errorf("got %v; want an error naming %s", err, c.want)
		}
	}
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }
