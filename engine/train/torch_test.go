package train

import (
	"math"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"testing"

	"github.com/artgo/art/engine/internal/exactunit"
	"github.com/artgo/art/engine/kernels"
	"github.com/artgo/art/engine/lora"
	"github.com/artgo/art/engine/model"
	"github.com/artgo/art/engine/safetensors"
	"github.com/artgo/art/internal/testassets"
)

// Parity of the LoRA gradients of ART's CISPO loss with PyTorch autograd,
// llm.c style: the same random model and adapter, saved by the engine and
// read back by testdata/torch_lora_ref.py (float64, written independently),
// the same fixed batch, and every LoRA factor's gradient compared.
const (
	// torchGradTol bounds max|g_go - g_torch| / max|g_torch| for each LoRA
	// tensor (issue 5: "within 1e-4 relative"). The engine computes in fp32
	// (kernel summation order, fp32 attention backward, fp32 gradient
	// accumulation in the LoRA GEMMs) against a float64 reference.
	torchGradTol = 1e-4
	// torchLossTol bounds |loss_go - loss_torch| / max(1, |loss_torch|). The
	// loss is a weighted mean of A·logπ terms; the fp32 forward leaves each
	// logπ within ~1e-6 of float64 on these tiny models.
	torchLossTol = 1e-5
	// torchLogprobTol is model_test.go's logprob tolerance (fp32 forward vs
	// float64), applied to the trainable tokens' new logprobs.
	torchLogprobTol = 1e-4
)

type loraParityCase struct {
	name          string
	arch          string
	shape         string // model.Preset shape
	dtype         kernels.DType
	tied          bool
	bias          bool // llama attention_bias (q, k, v and o biases)
	lora          lora.Config
	eps, epsHigh  float64
	lens          []int     // one sequence per entry
	advs, weights []float64 // per sequence
}

var loraParityCases = []loraParityCase{
	{
		// ART's defaults: ε = 1, ε_high = 4 (the IS weight lies in [0, 5]).
		name: "qwen2-tiny-gqa-qkvbias-f32-tied", arch: "qwen2", shape: "tiny", dtype: kernels.F32, tied: true,
		lora: lora.Config{Rank: 4, Alpha: 8}, eps: 1, epsHigh: 4,
		// 270 tokens: five 64-key attention blocks (the last partial) and
		// more scored rows than one 256-row LM-head chunk.
		lens: []int{270, 23}, advs: []float64{1.3, -0.7}, weights: []float64{0.8, 1.35},
	},
	{
		// Narrow clip so both bounds of the IS weight are hit; RSLoRA scale.
		name: "llama-tiny-attnbias-llama3rope-bf16-untied-rslora", arch: "llama", shape: "tiny", dtype: kernels.BF16, bias: true,
		lora: lora.Config{Rank: 8, Alpha: 16, UseRSLoRA: true}, eps: 0.2, epsHigh: 0.28,
		lens: []int{36, 29}, advs: []float64{-1.1, 0.9}, weights: []float64{1.2, 0.75},
	},
	// The families of engine/model/family.go (tiny shapes slide an 11-key window).
	{
		name: "qwen3-tiny-qknorm-bf16-tied", arch: "qwen3", shape: "tiny", dtype: kernels.BF16, tied: true,
		lora: lora.Config{Rank: 4, Alpha: 8}, eps: 1, epsHigh: 4,
		lens: []int{40, 21}, advs: []float64{0.8, -1.2}, weights: []float64{1, 1},
	},
	{
		name: "mistral-tiny-window-f32-untied", arch: "mistral", shape: "tiny", dtype: kernels.F32,
		lora: lora.Config{Rank: 4, Alpha: 8}, eps: 1, epsHigh: 4,
		lens: []int{70, 19}, advs: []float64{1.1, -0.6}, weights: []float64{0.9, 1.1},
	},
	{
		name: "gemma3-tiny-local-global-f32-tied", arch: "gemma3", shape: "tiny", dtype: kernels.F32, tied: true,
		lora: lora.Config{Rank: 4, Alpha: 8}, eps: 0.2, epsHigh: 0.28,
		lens: []int{70, 25}, advs: []float64{-0.9, 1.3}, weights: []float64{1.1, 0.8},
	},
	{
		// Dense and mixture-of-experts layers in turn: the adapter reaches
		// the dense layers' MLP and every expert's, and the gradient flows
		// through the frozen router.
		name: "qwen3_moe-small-sparse-step-f32-untied", arch: "qwen3_moe", shape: "small", dtype: kernels.F32,
		lora: lora.Config{Rank: 4, Alpha: 8}, eps: 1, epsHigh: 4,
		lens: []int{45, 20}, advs: []float64{1.2, -0.8}, weights: []float64{1, 0.9},
	},
}

// refSeq is one row of the request to torch_lora_ref.py: per-token arrays
// aligned with tokens (position t-1 predicts token t), as ART packs them.
type refSeq struct {
	Tokens     []int      `json:"tokens"`
	Mask       []int      `json:"assistant_mask"`
	Logprobs   []*float64 `json:"logprobs"` // nil = NaN (unknown, on-policy)
	Advantages []float64  `json:"advantages"`
	Weights    []float64  `json:"weights"`
}

// logRatios are the log importance ratios logπ_new - logπ_old given to the
// trainable tokens in turn (NaN: no rollout logprob). They cover the
// clipped-above (e^2.5, e^0.4 under a narrow clip), clipped-below (e^-3,
// e^-0.7 under a narrow clip) and unclipped regions.
var logRatios = []float64{math.NaN(), 2.5, -0.7, 0.4, -3, 0.05, 0.15}

// Ensure the LoRA gradients of a CISPO loss match PyTorch autograd.
func TestLoRAGrads_MatchTorch(t *testing.T) {
	exactunit.Use(t) // an fp32 reference
	py := testassets.Torch(t)
	for ci, c := range loraParityCases {
		t.Run(c.name, func(t *testing.T) { checkLoRAParity(t, py, c, uint64(ci+1)) })
	}
}

// checkLoRAParity runs one case on the engine and in torch and compares.
func checkLoRAParity(t *testing.T, py string, c loraParityCase, seed uint64) {
	const vocab = 300
	cfg, err := model.Preset(c.arch, c.shape, vocab)
	if err != nil {
		t.Fatal(err)
	}
	cfg.TieWordEmbeddings = c.tied
	if c.bias {
		cfg.AttentionBias = true
	}
	m, err := model.New(cfg, model.RandomWeights(cfg, model.InitOptions{Seed: seed, DType: c.dtype, Std: 0.08, NormJitter: 0.2}))
	if err != nil {
		t.Fatal(err)
	}
	ad, err := lora.New(cfg, c.lora, seed)
	if err != nil {
		t.Fatal(err)
	}
	// B is zero after New; make it random so every factor gets a
	// gradient (A's gradient is zero while B is).
	rng := rand.New(rand.NewPCG(seed, 99))
	for i, v := range ad.Params() {
		if v == 0 {
			ad.Params()[i] = float32(0.1 * rng.NormFloat64())
		}
	}
	dir := t.TempDir()
	modelDir, adapterDir, gradDir := filepath.Join(dir, "model"), filepath.Join(dir, "adapter"), filepath.Join(dir, "grads")
	if err := m.Save(modelDir); err != nil {
		t.Fatal(err)
	}
	if err := ad.Save(adapterDir, "random"); err != nil {
		t.Fatal(err)
	}

	tc := DefaultConfig()
	tc.Epsilon, tc.EpsilonHigh = c.eps, c.epsHigh
	seqs, goLoss, goLogprobs := goCISPOGrads(t, m, ad, c, tc, rng)

	// Go's gradients, named as PEFT names the factors: save them as
	// an adapter whose parameters are the gradients.
	g := ad.Clone()
	copy(g.Params(), ad.Grads())
	if err := g.Save(gradDir, "grads"); err != nil {
		t.Fatal(err)
	}
	f, err := safetensors.Open(filepath.Join(gradDir, lora.WeightsFile))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()

	ref := runTorchLoRARef(t, py, map[string]any{
		"model_dir": modelDir, "adapter_dir": adapterDir,
		"epsilon": c.eps, "epsilon_high": c.epsHigh, "sequences": seqs,
	})

	if d := math.Abs(goLoss - ref.Loss); d > torchLossTol*math.Max(1, math.Abs(ref.Loss)) {
		t.Errorf("loss: got %.9g; torch %.9g (|diff| %.3g)", goLoss, ref.Loss, d)
	}
	if len(ref.Logprobs) != len(goLogprobs) {
		t.Fatalf("torch scored %d sequences; want %d", len(ref.Logprobs), len(goLogprobs))
	}
	var lpDiff float64
	for s := range goLogprobs {
		if len(goLogprobs[s]) != len(ref.Logprobs[s]) {
			t.Fatalf("sequence %d: %d trainable logprobs; torch has %d", s, len(goLogprobs[s]), len(ref.Logprobs[s]))
		}
		for i, v := range goLogprobs[s] {
			lpDiff = math.Max(lpDiff, math.Abs(v-ref.Logprobs[s][i]))
		}
	}
	if lpDiff > torchLogprobTol {
		t.Errorf("new logprobs: max |diff| %.3g > %g", lpDiff, torchLogprobTol)
	}

	names := f.Names()
	slices.Sort(names)
	if len(names) != len(ref.Grads) {
		t.Fatalf("engine has %d LoRA tensors; torch has %d", len(names), len(ref.Grads))
	}
	worst, worstName := 0.0, ""
	for _, name := range names {
		want, ok := ref.Grads[name]
		if !ok {
			t.Fatalf("torch has no gradient for %s", name)
		}
		got, err := f.ReadF32(name)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != len(want) {
			t.Errorf("%s: engine has %d values; torch %d", name, len(got), len(want))
			continue
		}
		rel, absDiff, maxRef, at := relMaxDiff(got, want)
		if maxRef == 0 {
			t.Errorf("%s: torch gradient is all zero; the batch does not exercise this factor", name)
			continue
		}
		if rel > worst {
			worst, worstName = rel, name
		}
		if rel > torchGradTol {
			t.Errorf("%s: max |Δ| %.3g at %d (go %.6g, torch %.6g) = %.3g × max|g_torch| %.3g; want ≤ %g",
				name, absDiff, at, got[at], want[at], rel, maxRef, torchGradTol)
		}
	}
	t.Logf("%d LoRA tensors; worst relative gradient error %.3g (%s); loss go %.9g torch %.9g; max |Δ logπ| %.3g",
		len(names), worst, worstName, goLoss, ref.Loss, lpDiff)
}

// goCISPOGrads builds the case's batch and accumulates the gradient of
// Σ_rows CISPO row loss into ad's gradients, the way Trainer.sequenceGrad
// does for token-level ratios: TrainForward, LMHeadBackward with a TokenLoss
// from tokenTerms, TrainBackward. Old logprobs are set from the engine's own
// new logprobs and logRatios, so the IS weight lands where the case wants.
// It returns the request rows, the loss and each row's trainable logprobs.
func goCISPOGrads(t *testing.T, m *model.Model, ad *lora.Adapter, c loraParityCase, tc Config, rng *rand.Rand) ([]refSeq, float64, [][]float64) {
	t.Helper()
	acts := m.NewActs(slices.Max(c.lens))
	ad.ZeroGrad()
	var seqs []refSeq
	var total float64
	var logprobs [][]float64
	k := 0 // trainable tokens so far, indexes logRatios
	for s, T := range c.lens {
		// A 5-token prompt, then sampled tokens with a 3-token tool result
		// (not trainable) in the middle.
		seq := refSeq{Tokens: make([]int, T), Mask: make([]int, T), Logprobs: make([]*float64, T),
			Advantages: make([]float64, T), Weights: make([]float64, T)}
		var rows, targets []int
		for i := range T {
			seq.Tokens[i] = rng.IntN(m.Config.VocabSize)
			seq.Weights[i] = c.weights[s]
			// Per-token advantages, as KL shaping makes them.
			seq.Advantages[i] = c.advs[s] + 0.25*math.Sin(float64(i))
			if i >= 5 && (i < T/2 || i >= T/2+3) {
				seq.Mask[i] = 1
				rows, targets = append(rows, i-1), append(targets, i)
			}
		}
		for i, tgt := range targets {
			targets[i] = seq.Tokens[tgt]
		}
		if _, err := m.TrainForward(acts, seq.Tokens, ad); err != nil {
			t.Fatal(err)
		}
		st, _ := m.LMHeadBackward(acts, rows, targets, nil)
		n := len(rows)
		old, adv := make([]float64, n), make([]float64, n)
		for i, r := range rows {
			adv[i] = seq.Advantages[r+1]
			old[i] = st.Logprobs[i] - logRatios[k%len(logRatios)]
			if !math.IsNaN(old[i]) {
				v := old[i]
				seq.Logprobs[r+1] = &v
			}
			k++
		}
		w := c.weights[s]
		var loss float64
		st, dh := m.LMHeadBackward(acts, rows, targets, func(i int, logprob, _ float64) (float64, float64) {
			l, d := tokenTerms(tc, []float64{logprob}, old[i:i+1], nil, adv[i:i+1], w)
			loss += l / float64(n)
			return d[0] / float64(n), 0
		})
		m.TrainBackward(acts, dh, ad)
		total += loss
		logprobs = append(logprobs, st.Logprobs)
		seqs = append(seqs, seq)
	}
	return seqs, total, logprobs
}

type torchLoRARef struct {
	Loss     float64
	Logprobs [][]float64
	Grads    map[string][]float64
}

func runTorchLoRARef(t *testing.T, py string, req any) torchLoRARef {
	t.Helper()
	var ref torchLoRARef
	testassets.RunTorch(t, py, req, &ref, "testdata/torch_lora_ref.py")
	return ref
}

// relMaxDiff returns max|got-want| / max|want|, the max abs difference, max
// |want| and the index of the largest difference (got and want have equal
// lengths).
func relMaxDiff(got []float32, want []float64) (rel, absDiff, maxRef float64, at int) {
	for i, w := range want {
		if d := math.Abs(float64(got[i]) - w); d > absDiff {
			absDiff, at = d, i
		}
		maxRef = math.Max(maxRef, math.Abs(w))
	}
	if maxRef == 0 {
		return 0, absDiff, 0, at
	}
	return absDiff / maxRef, absDiff, maxRef, at
}
