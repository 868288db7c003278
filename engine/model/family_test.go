package model

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"github.com/artgo/art/engine/internal/exactunit"
	"github.com/artgo/art/internal/testassets"
)

// familyCases are the parity cases of the families added beside Llama and
// Qwen2 (their names start with the family).
func familyCases(t *testing.T) []parityCase {
	var out []parityCase
	for _, c := range parityCases {
		if c.arch != "qwen2" && c.arch != "llama" {
			out = append(out, c)
		}
	}
	if len(out) == 0 {
		t.Fatal("no family parity cases")
	}
	return out
}

// Ensure decoding token by token with the KV cache matches a full pass in
// every family: sliding windows and local rope apply to cached keys too.
func TestFamilies_CacheMatchesFullPass(t *testing.T) {
	for _, c := range familyCases(t) {
		t.Run(c.name, func(t *testing.T) {
			const vocab = 300
			m, err := Load(writeRandomModel(t, c, vocab, 3))
			if err != nil {
				t.Fatal(err)
			}
			tokens := randomTokens(30, vocab, 5) // longer than the 11-key window
			full := lastLogitsEach(t, m, tokens)
			cache := m.NewKVCache(len(tokens))
			var ws Workspace
			h, err := m.Forward(&ws, tokens[:4], []Segment{{Cache: cache, N: 4}})
			if err != nil {
				t.Fatal(err)
			}
			inc := rowsLogits(m, h, 4)
			for i := 4; i < len(tokens); i++ {
				h, err := m.Forward(&ws, tokens[i:i+1], []Segment{{Cache: cache, N: 1}})
				if err != nil {
					t.Fatal(err)
				}
				inc = append(inc, rowsLogits(m, h, 1)...)
			}
			compareRows(t, "incremental", inc, full, m.Config.VocabSize)
		})
	}
}

// torchGradTol bounds max|g_go - g_torch| / max|g_torch| per tensor: fp32
// forward and backward against float64 autograd on tiny models.
const torchGradTol = 2e-4

// Ensure full fine-tuning gradients of every weight (projections, the
// embedding and every norm of the family) match PyTorch autograd of
// Σ w_t·logprob_t, so every family trains.
func TestFamilies_BaseGradsMatchTorch(t *testing.T) {
	exactunit.Use(t) // an fp32 reference
	py := testassets.Torch(t)
	for i, c := range familyCases(t) {
		if c.dtype != 0 { // kernels.F32: full fine-tuning needs F32 weights
			continue
		}
		t.Run(c.name, func(t *testing.T) {
			const vocab = 300
			dir := writeRandomModel(t, c, vocab, uint64(i+21))
			m, err := Load(dir)
			if err != nil {
				t.Fatal(err)
			}
			tokens := randomTokens(40, vocab, uint64(i+3))
			rng := rand.New(rand.NewPCG(uint64(i), 7))
			gw := make([]float64, len(tokens)-1)
			for j := range gw {
				gw[j] = rng.NormFloat64()
			}
			goGrads := baseGrads(t, m, tokens, gw)
			var resp struct{ Grads map[string][]float64 }
			runTorchRef(t, py, dir, map[string]any{"tokens": tokens, "grad_weights": gw}, &resp)
			for name := range resp.Grads {
				if strings.HasSuffix(name, ".bias") { // biases are frozen in full fine-tuning
					delete(resp.Grads, name)
				}
			}
			if len(resp.Grads) != len(goGrads) {
				t.Errorf("torch has %d gradients; the engine %d", len(resp.Grads), len(goGrads))
			}
			worst, worstName := 0.0, ""
			for name, want := range resp.Grads {
				got, ok := goGrads[name]
				if !ok {
					t.Errorf("no engine gradient for %s", name)
					continue
				}
				var diff, ref float64
				for j := range want {
					diff = math.Max(diff, math.Abs(float64(got[j])-want[j]))
					ref = math.Max(ref, math.Abs(want[j]))
				}
				if ref == 0 {
					t.Errorf("%s: torch gradient is zero", name)
					continue
				}
				if diff/ref > worst {
					worst, worstName = diff/ref, name
				}
			}
			t.Logf("%d tensors; worst relative gradient error %.3g (%s)", len(resp.Grads), worst, worstName)
			if worst > torchGradTol {
				t.Errorf("worst relative gradient error %.3g (%s) > %g", worst, worstName, torchGradTol)
			}
		})
	}
}

// baseGrads returns the gradient of Σ gw_t·logprob(tokens[t+1]) w.r.t.
// every weight of m, by checkpoint name.
func baseGrads(t *testing.T, m *Model, tokens []int, gw []float64) map[string][]float32 {
	t.Helper()
	a := m.NewActs(len(tokens))
	a.Base = m.NewBaseGrads()
	if _, err := m.TrainForward(a, tokens, nil); err != nil {
		t.Fatal(err)
	}
	rows, targets := make([]int, len(gw)), make([]int, len(gw))
	for j := range gw {
		rows[j], targets[j] = j, tokens[j+1]
	}
	_, dh := m.LMHeadBackward(a, rows, targets, func(i int, _, _ float64) (float64, float64) { return gw[i], 0 })
	m.TrainBackward(a, dh, nil)
	g := a.Base
	out := map[string][]float32{"model.embed_tokens.weight": g.Embed, "model.norm.weight": g.FinalNorm}
	if g.LMHead != nil {
		out["lm_head.weight"] = g.LMHead
	}
	f := m.Config.family()
	for l := range m.W.Layers {
		p := fmt.Sprintf("model.layers.%d.", l)
		out[p+"input_layernorm.weight"] = g.AttnNorm[l]
		out[p+mlpNormName(f)] = g.MLPNorm[l]
		for mod := range NumModules {
			if g.Proj[l][mod] != nil {
				out[p+mod.Parent()+"."+mod.String()+".weight"] = g.Proj[l][mod]
			}
		}
		if g.Router[l] != nil {
			out[p+"mlp.gate.weight"] = g.Router[l]
		}
		for e, x := range g.Experts[l] {
			pe := fmt.Sprintf("%smlp.experts.%d.", p, e)
			out[pe+"gate_proj.weight"], out[pe+"up_proj.weight"], out[pe+"down_proj.weight"] = x.Gate, x.Up, x.Down
		}
		if f.QKNorm {
			out[p+"self_attn.q_norm.weight"], out[p+"self_attn.k_norm.weight"] = g.QNorm[l], g.KNorm[l]
		}
		if f.SandwichNorms {
			out[p+"post_attention_layernorm.weight"], out[p+"post_feedforward_layernorm.weight"] = g.AttnOutNorm[l], g.MLPOutNorm[l]
		}
	}
	return out
}

// Real config.json files: Qwen3-0.6B, Qwen3-30B-A3B, Mistral-7B-v0.1,
// gemma-3-270m.
const (
	realQwen3MoE = `{"architectures":["Qwen3MoeForCausalLM"],"attention_bias":false,"decoder_sparse_step":1,
		"head_dim":128,"hidden_act":"silu","hidden_size":2048,"intermediate_size":6144,"max_position_embeddings":40960,
		"max_window_layers":48,"mlp_only_layers":[],"model_type":"qwen3_moe","moe_intermediate_size":768,
		"norm_topk_prob":true,"num_attention_heads":32,"num_experts":128,"num_experts_per_tok":8,"num_hidden_layers":48,
		"num_key_value_heads":4,"output_router_logits":false,"rms_norm_eps":1e-06,"rope_scaling":null,
		"rope_theta":1000000.0,"router_aux_loss_coef":0.001,"sliding_window":null,"tie_word_embeddings":false,
		"use_sliding_window":false,"vocab_size":151936}`
	realQwen3 = `{"architectures":["Qwen3ForCausalLM"],"attention_bias":false,"head_dim":128,"hidden_act":"silu",
		"hidden_size":1024,"intermediate_size":3072,"max_position_embeddings":40960,"max_window_layers":28,
		"model_type":"qwen3","num_attention_heads":16,"num_hidden_layers":28,"num_key_value_heads":8,
		"rms_norm_eps":1e-06,"rope_scaling":null,"rope_theta":1000000,"sliding_window":null,
		"tie_word_embeddings":true,"use_sliding_window":false,"vocab_size":151936}`
	realMistral = `{"architectures":["MistralForCausalLM"],"hidden_act":"silu","hidden_size":4096,
		"intermediate_size":14336,"max_position_embeddings":32768,"model_type":"mistral","num_attention_heads":32,
		"num_hidden_layers":32,"num_key_value_heads":8,"rms_norm_eps":1e-05,"rope_theta":10000.0,
		"sliding_window":4096,"tie_word_embeddings":false,"vocab_size":32000}`
	realGemma3 = `{"architectures":["Gemma3ForCausalLM"],"attn_logit_softcapping":null,"final_logit_softcapping":null,
		"head_dim":256,"hidden_activation":"gelu_pytorch_tanh","hidden_size":640,"intermediate_size":2048,
		"max_position_embeddings":32768,"model_type":"gemma3_text","num_attention_heads":4,"num_hidden_layers":18,
		"num_key_value_heads":1,"query_pre_attn_scalar":256,"rms_norm_eps":1e-06,"rope_local_base_freq":10000.0,
		"rope_scaling":null,"rope_theta":1000000.0,"sliding_window":512,"vocab_size":262144}`
)

// Ensure `art init-model`'s real shapes (model.Preset, sized for the real
// tokenizers) are the real models: the same config as their config.json
// where the engine reads it, and their published parameter counts.
func TestPreset_RealShapes(t *testing.T) {
	cases := []struct {
		arch, shape, config string
		tokenizerVocab      int
		params              int64
	}{
		{"qwen3", "qwen3-0.6b", realQwen3, 151669, 596049920},             // 0.44B without the embeddings
		{"qwen3_moe", "qwen3-30b-a3b", realQwen3MoE, 151669, 30532122624}, // "30.5B in total"
		{"mistral", "mistral-7b", realMistral, 32000, 7241732096},         // Mistral 7B v0.1
		{"gemma3", "gemma-3-270m", realGemma3, 262144, 268098176},         // gemma-3-270m
	}
	for _, c := range cases {
		got, err := Preset(c.arch, c.shape, c.tokenizerVocab)
		if err != nil {
			t.Fatal(err)
		}
		want, err := ParseConfig([]byte(c.config))
		if err != nil {
			t.Fatal(err)
		}
		if n := got.NumParams(); int64(n) != c.params || int64(want.NumParams()) != c.params {
			t.Errorf("%s: %d parameters (config.json %d); want %d", c.shape, n, want.NumParams(), c.params)
		}
		// What the preset leaves out is metadata the engine does not read.
		got.TorchDType, want.TorchDType = "", ""
		want.UseSlidingWindow, want.HiddenActivation = nil, ""
		if len(want.MLPOnlyLayers) == 0 {
			want.MLPOnlyLayers = nil
		}
		if !reflect.DeepEqual(got, want) {
			g, _ := json.Marshal(got)
			w, _ := json.Marshal(want)
			t.Errorf("%s preset differs from its config.json:\n got  %s\n want %s", c.shape, g, w)
		}
	}
}

// Ensure real config.json files of each family parse with the family's
// layer layout, and the features the engine lacks are refused clearly.
func TestFamilies_ParseConfig(t *testing.T) {
	qwen3, mistral, gemma := realQwen3, realMistral, realGemma3
	c, err := ParseConfig([]byte(qwen3))
	if err != nil || c.Window(0) != 0 || c.AttentionBias {
		t.Fatalf("qwen3: %v, window %d, bias %v", err, c.Window(0), c.AttentionBias)
	}
	if c, err = ParseConfig([]byte(mistral)); err != nil || c.Window(31) != 4096 {
		t.Fatalf("mistral: %v, window %d", err, c.Window(31))
	}
	c, err = ParseConfig([]byte(gemma))
	if err != nil {
		t.Fatal(err)
	}
	if !c.TieWordEmbeddings || c.HiddenAct != geluTanh || c.Window(4) != 512 || c.Window(5) != 0 || c.Window(17) != 0 {
		t.Fatalf("gemma3: tied %v act %q windows %d %d %d", c.TieWordEmbeddings, c.HiddenAct, c.Window(4), c.Window(5), c.Window(17))
	}
	if c.NumParams() != 268098176 { // gemma-3-270m's published count
		t.Errorf("gemma-3-270m: %d parameters", c.NumParams())
	}
	c, err = ParseConfig([]byte(realQwen3MoE))
	if err != nil || !c.IsMoE(0) || !c.IsMoE(47) || !c.NormTopKProb {
		t.Fatalf("qwen3_moe: %v, MoE layers 0 %v 47 %v, norm_topk_prob %v", err, c.IsMoE(0), c.IsMoE(47), c.NormTopKProb)
	}
	sparse := strings.Replace(strings.Replace(realQwen3MoE, `"decoder_sparse_step":1`, `"decoder_sparse_step":2`, 1), `"mlp_only_layers":[]`, `"mlp_only_layers":[3]`, 1)
	if c, err = ParseConfig([]byte(sparse)); err != nil || c.IsMoE(0) || !c.IsMoE(1) || c.IsMoE(3) || !c.IsMoE(5) {
		t.Fatalf("qwen3_moe with decoder_sparse_step 2, mlp_only_layers [3]: %v, MoE layers 0–5 %v %v %v %v", err, c.IsMoE(0), c.IsMoE(1), c.IsMoE(3), c.IsMoE(5))
	}
	bad := []struct{ json, want string }{
		{strings.Replace(realQwen3MoE, `"num_experts_per_tok":8`, `"num_experts_per_tok":129`, 1), "num_experts_per_tok"},
		{strings.Replace(realQwen3MoE, `"moe_intermediate_size":768`, `"moe_intermediate_size":0`, 1), "moe_intermediate_size"},
		{strings.Replace(realQwen3MoE, `"mlp_only_layers":[]`, `"mlp_only_layers":[48]`, 1), "mlp_only_layers"},
		{strings.Replace(qwen3, `"model_type"`, `"num_experts":8,"model_type"`, 1), "no experts"},
		{strings.Replace(gemma, `"final_logit_softcapping":null`, `"final_logit_softcapping":30.0`, 1), "softcapping"},
		{strings.Replace(gemma, `"gemma3_text"`, `"gemma3"`, 1), "gemma3_text"},
		{strings.Replace(qwen3, `"use_sliding_window":false`, `"use_sliding_window":true`, 1), "use_sliding_window"},
		{strings.Replace(gemma, `"model_type"`, `"layer_types":["sliding_attention"],"model_type"`, 1), "layer_types"},
		{strings.Replace(mistral, `"sliding_window":4096`, `"sliding_window":0`, 1), "sliding_window"},
	}
	for _, b := range bad {
		if _, err := ParseConfig([]byte(b.json)); err == nil || !strings.Contains(err.Error(), b.want) {
			t.Errorf("got %v; want an error naming %q", err, b.want)
		}
	}
}

// Ensure GeGLU's backward matches central differences.
func TestGeGLUBackward(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	m := &Model{Config: Config{HiddenAct: geluTanh}}
	n := 16
	g, u, c := randVec(rng, n, 2), randVec(rng, n, 1), randVec(rng, n, 1)
	h := make([]float32, n)
	loss := func() float64 { m.gluForward(h, g, u, 1, n); return dot64(c, h) }
	dg, du := make([]float32, n), make([]float32, n)
	m.gluBackward(dg, du, c, g, u, 1, n)
	checkGrad(t, "dgate", g, dg, loss)
	checkGrad(t, "dup", u, du, loss)
}

// Ensure the training attention with a sliding window equals the
// inference attention with it and has the right gradient.
func TestTrainAttention_Window(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 14))
	NH, KVH, HD := 4, 2, 8
	Q, KV := NH*HD, KVH*HD
	var w attnWork
	for _, c := range []struct{ T, window int }{{5, 2}, {attnBlock + 9, 17}, {2*attnBlock + 3, attnBlock}} {
		q, k, v := randVec(rng, c.T*Q, 1), randVec(rng, c.T*KV, 1), randVec(rng, c.T*KV, 1)
		want, got := make([]float32, c.T*Q), make([]float32, c.T*Q)
		attentionWindowRef(want, q, k, v, c.T, NH, KVH, HD, c.window)
		trainAttentionForward(&w, got, q, k, v, c.T, NH, KVH, HD, c.window, -1)
		if d := maxRelDiff(got, want); d > 1e-5 {
			t.Errorf("T=%d window %d: forward max relative difference %.3g", c.T, c.window, d)
		}
		full := make([]float32, c.T*Q)
		attentionWindowRef(full, q, k, v, c.T, NH, KVH, HD, 0)
		if maxRelDiff(full, want) < 1e-3 {
			t.Errorf("T=%d window %d: the window changes nothing", c.T, c.window)
		}
	}
	T, window := 7, 3
	q, k, v := randVec(rng, T*Q, 1), randVec(rng, T*KV, 1), randVec(rng, T*KV, 1)
	cv := randVec(rng, T*Q, 1)
	out := make([]float32, T*Q)
	loss := func() float64 {
		trainAttentionForward(&w, out, q, k, v, T, NH, KVH, HD, window, -1)
		return dot64(cv, out)
	}
	dq, dk, dv := make([]float32, T*Q), make([]float32, T*KV), make([]float32, T*KV)
	trainAttentionBackward(&w, dq, dk, dv, cv, q, k, v, T, NH, KVH, HD, window, -1)
	checkGrad(t, "dq", q, dq, loss)
	checkGrad(t, "dk", k, dk, loss)
	checkGrad(t, "dv", v, dv, loss)
}
