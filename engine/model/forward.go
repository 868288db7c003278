package model

import (
	"fmt"
	"math"

	"github.com/artgo/art/engine/kernels"
)

// Segment is a run of consecutive tokens of a batch that extend one
// sequence: the tokens take positions Cache.Len, Cache.Len+1, ... and their
// keys and values are appended to Cache.
type Segment struct {
	Cache   *KVCache
	N       int
	Adapter Adapter // optional: a LoRA adapter for this sequence only
}

// Workspace holds the activation buffers of one forward pass; it grows to the
// largest batch seen and is reused. A Workspace is not safe for concurrent
// use.
type Workspace struct {
	T          int
	x, xn, mid []float32 // (T, C)
	tmp        []float32 // (T, C) Family.SandwichNorms: a block's output before its norm
	q, att     []float32 // (T, Q)
	k, v       []float32 // (T, KV)
	gate, up   []float32 // (T, F)
	pos        []int     // (T)
	offs       []int     // first row of each segment
	hidden     []float32 // (T, C) final-normed output
	rope       ropeTable // the angles of pos
	ropeLocal  ropeTable // the same for Family.LocalRope's sliding layers
	moe        *moeActs  // mixture-of-experts layers' activations, or nil
}

func (ws *Workspace) ensure(cfg Config, T int) {
	if T <= ws.T {
		return
	}
	C, Q, KV, F := cfg.HiddenSize, cfg.QDim(), cfg.KVDim(), cfg.IntermediateSize
	ws.T = T
	ws.x = make([]float32, T*C)
	ws.xn = make([]float32, T*C)
	ws.mid = make([]float32, T*C)
	ws.tmp = make([]float32, T*C)
	ws.hidden = make([]float32, T*C)
	ws.q = make([]float32, T*Q)
	ws.att = make([]float32, T*Q)
	ws.k = make([]float32, T*KV)
	ws.v = make([]float32, T*KV)
	ws.gate = make([]float32, T*F)
	ws.up = make([]float32, T*F)
	ws.pos = make([]int, T)
	if cfg.NumExperts > 0 {
		ws.moe = newMoEActs(cfg, T, true)
	}
}

// layer lays a layer's activations onto the workspace: nothing is kept for a backward pass, so the residual stream
// x is both the input and the output, one buffer holds both norms' output,
// and SwiGLU writes over gate.
func (ws *Workspace) layer(cfg Config) layerActs {
	s := layerActs{
		in: ws.x, xn1: ws.xn, q: ws.q, k: ws.k, v: ws.v, att: ws.att,
		mid: ws.mid, xn2: ws.xn, gate: ws.gate, up: ws.up, h: ws.gate, moe: ws.moe,
	}
	if cfg.family().SandwichNorms {
		s.ao, s.mo = ws.tmp, ws.tmp
	}
	return s
}

// Forward runs the transformer over tokens, which is the concatenation of
// segs, appending every segment's keys and values to its cache. It returns
// the final-normed hidden states (T, C), valid until the next call with ws.
func (m *Model) Forward(ws *Workspace, tokens []int, segs []Segment) ([]float32, error) {
	cfg := m.Config
	T := len(tokens)
	if err := m.checkBatch(tokens, segs); err != nil {
		return nil, err
	}
	ws.ensure(cfg, T)
	C := cfg.HiddenSize
	pos := ws.pos[:T]
	offs := ws.offs[:0]
	t0 := 0
	for _, s := range segs {
		offs = append(offs, t0)
		for i := 0; i < s.N; i++ {
			pos[t0+i] = s.Cache.Len + i
		}
		t0 += s.N
	}
	ws.offs = offs
	m.setRopes(&ws.rope, &ws.ropeLocal, pos)

	x := ws.x[:T*C]
	embeddingForward(x, tokens, m.W.Embed)
	m.scaleEmbedding(x)
	acts := ws.layer(cfg)
	p := &batchPass{cfg: cfg, T: T, segs: segs, offs: offs}
	for l := range m.W.Layers {
		m.layerForward(&acts, T, l, m.layerRope(l, &ws.rope, &ws.ropeLocal), p, x)
	}
	for _, s := range segs {
		s.Cache.Len += s.N
	}
	hidden := ws.hidden[:T*C]
	rmsNormForward(hidden, nil, x, m.W.FinalNorm, T, C, cfg.RMSNormEps)
	return hidden, nil
}

// batchPass runs the layers over a batch of segments, each with its own
// adapter and KV cache.
type batchPass struct {
	cfg  Config
	T    int
	segs []Segment
	offs []int // first row of each segment
}

// addDelta applies each segment's adapter to its rows.
func (p *batchPass) addDelta(out, inp []float32, l int, mod Module) {
	N, K := len(out)/p.T, len(inp)/p.T
	for i, s := range p.segs {
		if s.Adapter != nil {
			t0 := p.offs[i]
			s.Adapter.AddDelta(out[t0*N:(t0+s.N)*N], inp[t0*K:(t0+s.N)*K], s.N, l, mod)
		}
	}
}

// addExpertDelta applies each segment's adapter to its rows among an
// expert's: rows ascend, so each segment's are one run of them.
func (p *batchPass) addExpertDelta(out, inp []float32, rows []int32, l, e int, mod Module) {
	N, K := len(out)/len(rows), len(inp)/len(rows)
	i0 := 0
	for i, s := range p.segs {
		end := int32(p.offs[i] + s.N)
		i1 := i0
		for i1 < len(rows) && rows[i1] < end {
			i1++
		}
		if s.Adapter != nil && i1 > i0 {
			s.Adapter.AddExpertDelta(out[i0*N:i1*N], inp[i0*K:i1*K], i1-i0, l, e, mod)
		}
		i0 = i1
	}
}

// attend appends each segment's keys and values to its cache, then
// attends over the cache (a sliding layer's window of it), and lets a
// sliding layer's cache shrink back to its bound.
func (p *batchPass) attend(att, q, k, v []float32, l int) {
	KV := p.cfg.KVDim()
	for i, s := range p.segs {
		t0 := p.offs[i]
		s.Cache.put(l, k[t0*KV:(t0+s.N)*KV], v[t0*KV:(t0+s.N)*KV], s.N)
	}
	attentionSegments(att, q, p.segs, p.offs, l, p.cfg.NumHeads, p.cfg.NumKVHeads, p.cfg.HeadDim, p.cfg.Window(l))
	for _, s := range p.segs {
		s.Cache.release(l, s.Cache.Len+s.N)
	}
}

func (m *Model) checkBatch(tokens []int, segs []Segment) error {
	V := m.Config.VocabSize
	for i, id := range tokens {
		if id < 0 || id >= V {
			return fmt.Errorf("model: token %d at index %d is outside the vocabulary [0, %d)", id, i, V)
		}
	}
	n := 0
	for i, s := range segs {
		if s.Cache == nil || s.N <= 0 {
			return fmt.Errorf("model: segment %d has no cache or no tokens", i)
		}
		if s.Cache.Len+s.N > s.Cache.Cap {
			return fmt.Errorf("model: segment %d needs %d positions but its cache holds %d (context length exceeded)", i, s.Cache.Len+s.N, s.Cache.Cap)
		}
		if len(s.Cache.K) != m.Config.NumLayers*m.Config.NumKVHeads || s.Cache.kv != m.Config.HeadDim {
			return fmt.Errorf("model: segment %d cache was made for another model", i)
		}
		n += s.N
	}
	if n != len(tokens) {
		return fmt.Errorf("model: segments cover %d tokens, batch has %d", n, len(tokens))
	}
	return nil
}

// embeddingForward copies the embedding rows of tokens into out (T, C).
func embeddingForward(out []float32, tokens []int, wte *kernels.Mat) {
	C := wte.Cols
	for t, id := range tokens {
		wte.Row(out[t*C:(t+1)*C], id)
	}
}

// Logits computes the vocabulary logits (n, V) of n hidden rows (n, C).
func (m *Model) Logits(out, hidden []float32, n int) {
	kernels.Linear(out, hidden, m.W.LMHead, nil, n)
}

// logSoftmaxAt returns log softmax(logits)[target] computed in float64.
func logSoftmaxAt(logits []float32, target int) float64 {
	maxv := math.Inf(-1)
	for _, v := range logits {
		maxv = math.Max(maxv, float64(v))
	}
	var sum float64
	for _, v := range logits {
		sum += math.Exp(float64(v) - maxv)
	}
	return float64(logits[target]) - maxv - math.Log(sum)
}

// LogProbs scores a token sequence under the model plus adapter (which may
// be nil): it returns, for t in [0, T-1), the log probability of tokens[t+1]
// after tokens[0..t]. The vocabulary logits are computed in chunks so a long
// sequence never holds (T, V) floats at once.
func (m *Model) LogProbs(tokens []int, adapter Adapter) ([]float64, error) {
	T := len(tokens)
	if T < 2 {
		return nil, fmt.Errorf("model: need at least 2 tokens to score, got %d", T)
	}
	cache := m.NewKVCache(T)
	var ws Workspace
	hidden, err := m.Forward(&ws, tokens, []Segment{{Cache: cache, N: T, Adapter: adapter}})
	if err != nil {
		return nil, err
	}
	C, V := m.Config.HiddenSize, m.Config.VocabSize
	const chunk = 32
	logits := make([]float32, chunk*V)
	out := make([]float64, T-1)
	for t0 := 0; t0 < T-1; t0 += chunk {
		n := min(chunk, T-1-t0)
		m.Logits(logits[:n*V], hidden[t0*C:(t0+n)*C], n)
		for i := 0; i < n; i++ {
			out[t0+i] = logSoftmaxAt(logits[i*V:(i+1)*V], tokens[t0+i+1])
		}
	}
	return out, nil
}
