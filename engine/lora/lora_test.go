package lora

import (
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/artgo/art/engine/internal/exactunit"
	"github.com/artgo/art/engine/kernels"
	"github.com/artgo/art/engine/model"
)

func tinyModel(t testing.TB, arch string) *model.Model {
	t.Helper()
	cfg, err := model.Preset(arch, "tiny", 200)
	if err != nil {
		t.Fatal(err)
	}
	m, err := model.New(cfg, model.RandomWeights(cfg, model.InitOptions{Seed: 1, DType: kernels.F32, Std: 0.1, NormJitter: 0.1}))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func tokens(n, vocab int, seed uint64) []int {
	rng := rand.New(rand.NewPCG(seed, 9))
	out := make([]int, n)
	for i := range out {
		out[i] = rng.IntN(vocab)
	}
	return out
}

// randomizeB gives every B factor random values so the adapter changes the
// model and gradients reach A.
func randomizeB(a *Adapter, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 3))
	for _, p := range a.order {
		for i := range p.B {
			p.B[i] = float32(0.05 * rng.NormFloat64())
		}
	}
}

// Ensure a fresh adapter (B = 0) leaves the model unchanged, as in PEFT.
func TestNew_IsIdentity(t *testing.T) {
	m := tinyModel(t, "qwen2")
	a, err := New(m.Config, Config{}, 1)
	if err != nil {
		t.Fatal(err)
	}
	toks := tokens(16, 200, 1)
	base, _ := m.LogProbs(toks, nil)
	with, _ := m.LogProbs(toks, a)
	for i := range base {
		if base[i] != with[i] {
			t.Fatalf("token %d: %v with fresh adapter; want %v", i, with[i], base[i])
		}
	}
}

// Ensure save → load gives identical logprobs and PEFT's names and config.
func TestSaveLoad_RoundTrip(t *testing.T) {
	m := tinyModel(t, "llama")
	a, err := New(m.Config, Config{Rank: 4, Alpha: 8, TargetModules: []string{"q_proj", "v_proj", "down_proj"}, Layers: []int{1}}, 2)
	if err != nil {
		t.Fatal(err)
	}
	randomizeB(a, 5)
	checkSaveLoad(t, m, a, tokens(20, 200, 2))
	if name := tensorName(&pair{layer: 1, expert: -1, mod: model.ModDown}, "B"); name != "base_model.model.model.layers.1.mlp.down_proj.lora_B.weight" {
		t.Fatalf("PEFT name %q", name)
	}
}

// checkSaveLoad saves a, loads it back, and checks that both give toks the
// same logprobs, and that these differ from the base model's.
func checkSaveLoad(t *testing.T, m *model.Model, a *Adapter, toks []int) {
	t.Helper()
	dir := t.TempDir()
	if err := a.Save(dir, "base-model"); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{ConfigFile, WeightsFile} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Fatal(err)
		}
	}
	b, err := Load(dir, m.Config)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := m.LogProbs(toks, a)
	got, _ := m.LogProbs(toks, b)
	base, _ := m.LogProbs(toks, nil)
	changed := false
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("token %d: %v after reload; want %v", i, got[i], want[i])
		}
		changed = changed || want[i] != base[i]
	}
	if !changed {
		t.Fatal("the adapter does not change the model")
	}
}

// Ensure an adapter on a mixture of experts adapts every expert's MLP
// projections with its own pair, under PEFT's names for them, and that
// save → load keeps them.
func TestExperts_SaveLoad(t *testing.T) {
	m := tinyModel(t, "qwen3_moe")
	cfg := m.Config
	a, err := New(cfg, Config{Rank: 4, Alpha: 8}, 2)
	if err != nil {
		t.Fatal(err)
	}
	randomizeB(a, 6)
	var experts int
	for _, f := range a.Factors() {
		if f.Expert >= 0 {
			experts++
			if out, in := f.Module.ExpertDims(cfg); f.Out != out || f.In != in {
				t.Fatalf("layer %d expert %d %s is %dx%d; want %dx%d", f.Layer, f.Expert, f.Module, f.Out, f.In, out, in)
			}
		}
	}
	moeLayers := 0
	for l := range cfg.NumLayers {
		if cfg.IsMoE(l) {
			moeLayers++
		}
	}
	if want := moeLayers * cfg.NumExperts * 3; moeLayers == 0 || experts != want {
		t.Fatalf("%d expert pairs; want %d (%d mixture layers × %d experts × gate, up, down)", experts, want, moeLayers, cfg.NumExperts)
	}
	checkSaveLoad(t, m, a, tokens(24, 200, 8))
	p := a.lookupExpert(1, 3, model.ModUp)
	if name := tensorName(p, "A"); name != "base_model.model.model.layers.1.mlp.experts.3.up_proj.lora_A.weight" {
		t.Fatalf("PEFT name %q", name)
	}

	// Attention targets only: the experts stay frozen.
	c, err := New(cfg, Config{TargetModules: []string{"q_proj", "v_proj"}}, 1)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range c.Factors() {
		if f.Expert >= 0 {
			t.Fatalf("attention-only adapter adapts layer %d expert %d %s", f.Layer, f.Expert, f.Module)
		}
	}
}

// Ensure the LoRA gradients of a loss on token logprobs and entropies (an
// entropy bonus; one row without) match finite differences through the
// whole model.
func TestGradients_FiniteDifferences(t *testing.T) {
	exactunit.Use(t) // an fp32 reference
	for _, arch := range []string{"qwen2", "llama", "qwen3_moe"} {
		t.Run(arch, func(t *testing.T) {
			m := tinyModel(t, arch)
			a, err := New(m.Config, Config{Rank: 4}, 3)
			if err != nil {
				t.Fatal(err)
			}
			randomizeB(a, 4)
			toks := tokens(12, 200, 3)
			rows := []int{3, 4, 7, 10}
			targets := make([]int, len(rows))
			coef := []float64{0.7, -1.3, 0.4, 1.1}
			coefH := []float64{0.5, 0, -0.8, 1.2}
			for i, r := range rows {
				targets[i] = toks[r+1]
			}
			acts := m.NewActs(len(toks))
			loss := func() float64 {
				if _, err := m.TrainForward(acts, toks, a); err != nil {
					t.Fatal(err)
				}
				st, _ := m.LMHeadBackward(acts, rows, targets, nil)
				var l float64
				for i, lp := range st.Logprobs {
					l += coef[i]*lp + coefH[i]*st.Entropy[i]
				}
				return l
			}
			loss()
			a.ZeroGrad()
			_, dh := m.LMHeadBackward(acts, rows, targets, func(i int, lp, ent float64) (float64, float64) { return coef[i], coefH[i] })
			m.TrainBackward(acts, dh, a)
			grads := append([]float32(nil), a.Grads()...)
			params := a.Params()
			rng := rand.New(rand.NewPCG(7, 7))
			const eps = 1e-2
			var worst, scale float64
			for k := 0; k < 60; k++ {
				i := rng.IntN(len(params))
				old := params[i]
				params[i] = old + eps
				lp := loss()
				params[i] = old - eps
				lm := loss()
				params[i] = old
				num := (lp - lm) / (2 * eps)
				worst = math.Max(worst, math.Abs(num-float64(grads[i])))
				scale = math.Max(scale, math.Abs(num))
			}
			t.Logf("max |analytic-numeric| %.3g, largest gradient %.3g", worst, scale)
			if scale == 0 || worst > 2e-3*scale {
				t.Fatalf("LoRA gradients disagree with finite differences: max err %.3g vs scale %.3g", worst, scale)
			}
		})
	}
}

// Ensure merging an adapter into F32 weights reproduces model+adapter,
// experts' projections included.
func TestMergeInto(t *testing.T) {
	exactunit.Use(t) // an fp32 reference
	for _, arch := range []string{"qwen2", "qwen3_moe"} {
		t.Run(arch, func(t *testing.T) {
			m := tinyModel(t, arch)
			a, err := New(m.Config, Config{Rank: 4}, 9)
			if err != nil {
				t.Fatal(err)
			}
			randomizeB(a, 2)
			toks := tokens(16, 200, 4)
			want, _ := m.LogProbs(toks, a)
			if err := a.MergeInto(&m.W); err != nil {
				t.Fatal(err)
			}
			got, _ := m.LogProbs(toks, nil)
			for i := range want {
				if math.Abs(got[i]-want[i]) > 1e-4 {
					t.Fatalf("token %d: merged %v; with adapter %v", i, got[i], want[i])
				}
			}
		})
	}
}

// Ensure full fine-tuning gradients of the embedding (tied LM head) and the
// RMSNorm weights match finite differences.
func TestBaseGradients_FiniteDifferences(t *testing.T) {
	exactunit.Use(t) // an fp32 reference
	m := tinyModel(t, "qwen2")
	toks := tokens(10, 200, 5)
	rows := []int{2, 5, 8}
	targets := []int{toks[3], toks[6], toks[9]}
	coef := []float64{1.1, -0.6, 0.9}
	acts := m.NewActs(len(toks))
	loss := func() float64 {
		acts.Base = nil
		if _, err := m.TrainForward(acts, toks, nil); err != nil {
			t.Fatal(err)
		}
		st, _ := m.LMHeadBackward(acts, rows, targets, nil)
		var l float64
		for i, lp := range st.Logprobs {
			l += coef[i] * lp
		}
		return l
	}
	loss()
	g := m.NewBaseGrads()
	acts.Base = g
	if _, err := m.TrainForward(acts, toks, nil); err != nil {
		t.Fatal(err)
	}
	_, dh := m.LMHeadBackward(acts, rows, targets, func(i int, _, _ float64) (float64, float64) { return coef[i], 0 })
	m.TrainBackward(acts, dh, nil)
	grads := g.Slices()
	rng := rand.New(rand.NewPCG(3, 3))
	const eps = 1e-2
	for s := range grads {
		var worst, scale float64
		for k := 0; k < 12; k++ {
			i := rng.IntN(len(grads[s]))
			if s == 0 && k < 6 { // make sure rows of used tokens are probed
				i = toks[k]*m.Config.HiddenSize + rng.IntN(m.Config.HiddenSize)
			}
			perturb := func(d float32) {
				ps, err := m.BaseParams()
				if err != nil {
					t.Fatal(err)
				}
				ps[s][i] += d
				m.RefreshBase()
			}
			perturb(eps)
			lp := loss()
			perturb(-2 * eps)
			lm := loss()
			perturb(eps)
			num := (lp - lm) / (2 * eps)
			worst = math.Max(worst, math.Abs(num-float64(grads[s][i])))
			scale = math.Max(scale, math.Abs(num))
		}
		if worst > 2e-3*math.Max(scale, 1e-2) {
			t.Errorf("base parameter group %d: max |analytic-numeric| %.3g (largest gradient %.3g)", s, worst, scale)
		}
	}
}

// Ensure that in a batch of sequences with different adapters (and one
// with none) through a mixture of experts, each expert's rows get their
// own sequence's adapter: every row's hidden state equals that of its
// sequence alone, bit for bit, in prefill and in a decoding step.
func TestExperts_BatchOfAdapters(t *testing.T) {
	m := tinyModel(t, "qwen3_moe")
	cfg := m.Config
	var ads []model.Adapter
	for i := range 2 {
		a, err := New(cfg, Config{Rank: 4, Alpha: 8}, uint64(10+i))
		if err != nil {
			t.Fatal(err)
		}
		randomizeB(a, uint64(20+i))
		ads = append(ads, a)
	}
	ads = []model.Adapter{ads[0], nil, ads[1], ads[0]}
	lens := []int{7, 5, 9, 3}
	seqs := make([][]int, len(lens))
	for i, n := range lens {
		seqs[i] = tokens(n+1, 200, uint64(30+i))
	}
	C := cfg.HiddenSize
	alone := func(i int) (prefill, step []float32) {
		var ws model.Workspace
		c := m.NewKVCache(32)
		h, err := m.Forward(&ws, seqs[i][:lens[i]], []model.Segment{{Cache: c, N: lens[i], Adapter: ads[i]}})
		if err != nil {
			t.Fatal(err)
		}
		prefill = append(prefill, h...)
		h, err = m.Forward(&ws, seqs[i][lens[i]:], []model.Segment{{Cache: c, N: 1, Adapter: ads[i]}})
		if err != nil {
			t.Fatal(err)
		}
		return prefill, append(step, h...)
	}
	var batch, next []int
	var segs, steps []model.Segment
	for i, n := range lens {
		c := m.NewKVCache(32)
		batch, next = append(batch, seqs[i][:n]...), append(next, seqs[i][n])
		segs, steps = append(segs, model.Segment{Cache: c, N: n, Adapter: ads[i]}), append(steps, model.Segment{Cache: c, N: 1, Adapter: ads[i]})
	}
	var ws model.Workspace
	h, err := m.Forward(&ws, batch, segs)
	if err != nil {
		t.Fatal(err)
	}
	prefill := append([]float32(nil), h...)
	step, err := m.Forward(&ws, next, steps)
	if err != nil {
		t.Fatal(err)
	}
	row := 0
	for i, n := range lens {
		wantPrefill, wantStep := alone(i)
		for r := range n {
			for c := range C {
				if got, want := prefill[(row+r)*C+c], wantPrefill[r*C+c]; got != want {
					t.Fatalf("sequence %d row %d: batched prefill %v; alone %v", i, r, got, want)
				}
			}
		}
		for c := range C {
			if got, want := step[i*C+c], wantStep[c]; got != want {
				t.Fatalf("sequence %d: batched decoding step %v; alone %v", i, got, want)
			}
		}
		row += n
	}
	// The adapters matter: sequence 0 with the other adapter differs.
	ads[0] = ads[2]
	if other, _ := alone(0); slices.Equal(other, prefill[:lens[0]*C]) {
		t.Fatal("a different adapter gives the same hidden states: the test could not tell adapters apart")
	}
}

// Ensure loading an adapter of a mixture saved without its experts'
// factors (as versions that left the experts frozen saved them) fails with
// a message that says so, and loads once its config lists what it holds.
func TestExperts_LoadWithoutExperts(t *testing.T) {
	m := tinyModel(t, "qwen3_moe")
	cfg := m.Config
	attn, err := New(cfg, Config{Rank: 4, Alpha: 8, TargetModules: []string{"q_proj", "k_proj", "v_proj", "o_proj"}}, 2)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := attn.Save(dir, "base-model"); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, ConfigFile)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	all := strings.Replace(string(b), `"o_proj",`, `"o_proj", "up_proj",`, 1)
	if all == string(b) {
		t.Fatalf("no o_proj entry to extend in %s", b)
	}
	if err := os.WriteFile(path, []byte(all), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(dir, cfg); err == nil || !strings.Contains(err.Error(), "no factors for the experts") {
		t.Fatalf("Load = %v; want the missing experts named", err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(dir, cfg); err != nil {
		t.Fatal(err)
	}
}
