package model

import (
	"math"
	"math/rand/v2"
	"path/filepath"
	"testing"

	"github.com/artgo/art/engine/internal/exactunit"
	"github.com/artgo/art/engine/kernels"
	"github.com/artgo/art/internal/testassets"
)

// torchTol is the largest allowed |logprob difference| against the float64
// PyTorch reference: the engine computes in fp32, whose accumulated rounding
// over a few tiny layers stays well under it.
const torchTol = 1e-4

type parityCase struct {
	name  string
	arch  string
	shape string
	dtype kernels.DType
	tied  bool
	bias  bool // llama attention_bias (q, k, v and o biases)
}

var parityCases = []parityCase{
	{name: "qwen2-tiny-gqa-bias-f32-tied", arch: "qwen2", shape: "tiny", dtype: kernels.F32, tied: true},
	{name: "llama-tiny-rope-scaling-untied-obias", arch: "llama", shape: "tiny", dtype: kernels.F32, bias: true},
	{name: "qwen2-small-bf16-untied", arch: "qwen2", shape: "small", dtype: kernels.BF16},
	{name: "llama-small-f16-tied", arch: "llama", shape: "small", dtype: kernels.F16, tied: true},
	// The families of family.go; the tiny and small shapes slide an
	// 11-key window (shorter than the 48 tokens scored).
	{name: "qwen3-tiny-qknorm-f32-tied", arch: "qwen3", shape: "tiny", dtype: kernels.F32, tied: true},
	{name: "qwen3-small-bf16-untied", arch: "qwen3", shape: "small", dtype: kernels.BF16},
	{name: "mistral-tiny-window-f32-untied-bias", arch: "mistral", shape: "tiny", dtype: kernels.F32, bias: true},
	{name: "mistral-small-window-f16-tied", arch: "mistral", shape: "small", dtype: kernels.F16, tied: true},
	{name: "gemma3-tiny-local-global-f32-tied", arch: "gemma3", shape: "tiny", dtype: kernels.F32, tied: true},
	{name: "gemma3-small-bf16-untied", arch: "gemma3", shape: "small", dtype: kernels.BF16},
	{name: "qwen3_moe-tiny-experts-f32-tied", arch: "qwen3_moe", shape: "tiny", dtype: kernels.F32, tied: true},
	{name: "qwen3_moe-small-sparse-step-bf16-untied", arch: "qwen3_moe", shape: "small", dtype: kernels.BF16},
}

// writeRandomModel saves a random model of the case's shape into a temp dir.
func writeRandomModel(t testing.TB, c parityCase, vocab int, seed uint64) string {
	t.Helper()
	cfg, err := Preset(c.arch, c.shape, vocab)
	if err != nil {
		t.Fatal(err)
	}
	cfg.TieWordEmbeddings = c.tied
	if c.bias {
		cfg.AttentionBias = true
	}
	w := RandomWeights(cfg, InitOptions{Seed: seed, DType: c.dtype, Std: 0.08, NormJitter: 0.2})
	m, err := New(cfg, w)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), c.name)
	if err := m.Save(dir); err != nil {
		t.Fatal(err)
	}
	return dir
}

func randomTokens(n, vocab int, seed uint64) []int {
	rng := rand.New(rand.NewPCG(seed, 1))
	out := make([]int, n)
	for i := range out {
		out[i] = rng.IntN(vocab)
	}
	return out
}

// Ensure logprobs match an independent float64 PyTorch implementation.
func TestLogProbs_MatchTorch(t *testing.T) {
	exactunit.Use(t) // an fp32 reference
	py := testassets.Torch(t)
	for i, c := range parityCases {
		t.Run(c.name, func(t *testing.T) {
			const vocab = 300
			dir := writeRandomModel(t, c, vocab, uint64(i+1))
			m, err := Load(dir)
			if err != nil {
				t.Fatal(err)
			}
			tokens := randomTokens(48, vocab, uint64(i+7))
			got, err := m.LogProbs(tokens, nil)
			if err != nil {
				t.Fatal(err)
			}
			var resp struct{ Logprobs []float64 }
			runTorchRef(t, py, dir, map[string]any{"tokens": tokens}, &resp)
			if len(resp.Logprobs) != len(got) {
				t.Fatalf("got %d logprobs; torch gave %d", len(got), len(resp.Logprobs))
			}
			var maxDiff float64
			worst := 0
			for j := range got {
				if d := math.Abs(got[j] - resp.Logprobs[j]); d > maxDiff {
					maxDiff, worst = d, j
				}
			}
			t.Logf("max |diff| %.3g at token %d (logprob %.4f)", maxDiff, worst, resp.Logprobs[worst])
			if maxDiff > torchTol {
				t.Fatalf("logprob %d: got %.6f; torch %.6f (|diff| %.3g > %g)", worst, got[worst], resp.Logprobs[worst], maxDiff, torchTol)
			}
		})
	}
}

// runTorchRef runs testdata/torch_ref.py on the model in dir with the
// request req and decodes its answer into resp.
func runTorchRef(t *testing.T, py, dir string, req, resp any) {
	t.Helper()
	testassets.RunTorch(t, py, req, resp, "testdata/torch_ref.py", dir)
}

// Ensure decoding token by token with the KV cache, and batching two
// sequences in one forward pass, give the same logits as one full pass.
func TestForward_CacheAndBatchMatchFullPass(t *testing.T) {
	c := parityCases[0]
	const vocab = 300
	m, err := Load(writeRandomModel(t, c, vocab, 3))
	if err != nil {
		t.Fatal(err)
	}
	V := m.Config.VocabSize
	tokens := randomTokens(20, vocab, 5)
	full := lastLogitsEach(t, m, tokens)

	// Incremental: prefill 7 then one token at a time.
	cache := m.NewKVCache(len(tokens))
	var ws Workspace
	var inc [][]float32
	h, err := m.Forward(&ws, tokens[:7], []Segment{{Cache: cache, N: 7}})
	if err != nil {
		t.Fatal(err)
	}
	inc = append(inc, rowsLogits(m, h, 7)...)
	for i := 7; i < len(tokens); i++ {
		h, err := m.Forward(&ws, tokens[i:i+1], []Segment{{Cache: cache, N: 1}})
		if err != nil {
			t.Fatal(err)
		}
		inc = append(inc, rowsLogits(m, h, 1)...)
	}
	compareRows(t, "incremental", inc, full, V)

	// Batched: two different sequences in one call, then one step each.
	other := randomTokens(9, vocab, 11)
	fullOther := lastLogitsEach(t, m, other)
	ca, cb := m.NewKVCache(32), m.NewKVCache(32)
	batch := append(append([]int{}, tokens[:12]...), other[:8]...)
	h, err = m.Forward(&ws, batch, []Segment{{Cache: ca, N: 12}, {Cache: cb, N: 8}})
	if err != nil {
		t.Fatal(err)
	}
	rows := rowsLogits(m, h, 20)
	compareRows(t, "batched seq A", rows[:12], full[:12], V)
	compareRows(t, "batched seq B", rows[12:], fullOther[:8], V)
	h, err = m.Forward(&ws, []int{tokens[12], other[8]}, []Segment{{Cache: ca, N: 1}, {Cache: cb, N: 1}})
	if err != nil {
		t.Fatal(err)
	}
	rows = rowsLogits(m, h, 2)
	compareRows(t, "batched decode A", rows[:1], full[12:13], V)
	compareRows(t, "batched decode B", rows[1:], fullOther[8:9], V)
}

func lastLogitsEach(t *testing.T, m *Model, tokens []int) [][]float32 {
	t.Helper()
	var ws Workspace
	h, err := m.Forward(&ws, tokens, []Segment{{Cache: m.NewKVCache(len(tokens)), N: len(tokens)}})
	if err != nil {
		t.Fatal(err)
	}
	return rowsLogits(m, h, len(tokens))
}

func rowsLogits(m *Model, hidden []float32, n int) [][]float32 {
	V := m.Config.VocabSize
	out := make([]float32, n*V)
	m.Logits(out, hidden, n)
	rows := make([][]float32, n)
	for i := range rows {
		rows[i] = out[i*V : (i+1)*V]
	}
	return rows
}

// cacheTol bounds differences caused only by a different fp32 summation order.
const cacheTol = 1e-4

func compareRows(t *testing.T, what string, got, want [][]float32, V int) {
	t.Helper()
	for i := range got {
		for j := 0; j < V; j++ {
			if d := math.Abs(float64(got[i][j] - want[i][j])); d > cacheTol {
				t.Fatalf("%s: row %d logit %d: got %v; want %v", what, i, j, got[i][j], want[i][j])
			}
		}
	}
}

// Ensure bad inputs are errors, not panics.
func TestForward_BadInput(t *testing.T) {
	m, err := Load(writeRandomModel(t, parityCases[0], 300, 1))
	if err != nil {
		t.Fatal(err)
	}
	var ws Workspace
	cache := m.NewKVCache(4)
	cases := []struct {
		name   string
		tokens []int
		segs   []Segment
	}{
		{"token out of vocab", []int{1, m.Config.VocabSize}, []Segment{{Cache: cache, N: 2}}},
		{"negative token", []int{-1}, []Segment{{Cache: cache, N: 1}}},
		{"context overflow", []int{1, 2, 3, 4, 5}, []Segment{{Cache: cache, N: 5}}},
		{"segments do not cover batch", []int{1, 2}, []Segment{{Cache: cache, N: 1}}},
		{"nil cache", []int{1}, []Segment{{N: 1}}},
	}
	for _, c := range cases {
		if _, err := m.Forward(&ws, c.tokens, c.segs); err == nil {
			t.Errorf("%s: got nil error", c.name)
		}
	}
	if cache.Len != 0 {
		t.Fatalf("cache.Len = %d after failed calls; want 0", cache.Len)
	}
}
