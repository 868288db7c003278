package gguf

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"

	"github.com/artgo/art/engine/kernels"
	"github.com/artgo/art/engine/model"
	"github.com/artgo/art/internal/atomicfile"
)

// Options control Export.
type Options struct {
	// DType stores the weight matrices (embeddings, projections, LM head):
	// F32 (the zero value), F16, BF16, Q8_0 or Q4_0. Norm weights, biases and
	// rope factors are always F32, as llama.cpp wants them. Q8_0 (Q4_0)
	// writes the blocks of a model quantized at load (model.Q8, model.Q4)
	// byte for byte, so llama.cpp runs the very values the engine does,
	// and quantizes other matrices as the engine would; a matrix whose
	// rows are not whole blocks of 32 is written F16.
	DType Type
	// Name is general.name; empty means the architecture's name.
	Name string
	// Pre overrides tokenizer.ggml.pre, llama.cpp's name for the
	// pre-tokenizer, which Export otherwise recognises from tokenizer.json
	// ("qwen2" for Qwen2/2.5/3, "llama-bpe" for Llama 3).
	Pre string
	// Progress, if set, is called after each tensor with the bytes of tensor
	// data written so far and the total.
	Progress func(done, total int64)
}

// ExportFile writes m as a GGUF file at path, atomically: a reader never
// sees a partial file, and on error the previous file (if any) is untouched.
// See Export.
func ExportFile(path string, m *model.Model, tokenizerDir string, opts Options) error {
	p, err := plan(m, tokenizerDir, opts)
	if err != nil {
		return err
	}
	return atomicfile.Write(path, 0o644, func(w io.Writer) error { return p.write(w) })
}

// Export writes m as a GGUF v3 file to w, with the tokenizer read from
// tokenizerDir (tokenizer.json, and tokenizer_config.json for special tokens
// and the chat template; a Hugging Face model folder holds both). The model
// must be a llama, mistral, qwen2, qwen3 or gemma3_text model in a shape
// llama.cpp runs (see arch.go). Shapes,
// dtype and tokenizer are checked before the first byte is written; only a
// weight too large for F16 is found while converting. Tensor data is
// converted and streamed row by row, so Export allocates little beyond the
// tokenizer's metadata.
func Export(w io.Writer, m *model.Model, tokenizerDir string, opts Options) error {
	p, err := plan(m, tokenizerDir, opts)
	if err != nil {
		return err
	}
	return p.write(w)
}

// exportPlan is a fully checked export, ready to stream.
type exportPlan struct {
	kvs      []KV
	tensors  []Tensor
	progress func(done, total int64)
}

func (p *exportPlan) write(w io.Writer) error {
	if p.progress != nil {
		var total, done int64
		for _, t := range p.tensors {
			total += int64(TensorInfo{Dims: t.Dims, Type: t.Type}.Bytes())
		}
		for i := range p.tensors {
			t := &p.tensors[i]
			size := int64(TensorInfo{Dims: t.Dims, Type: t.Type}.Bytes())
			inner := t.WriteData
			t.WriteData = func(w io.Writer) error {
				if err := inner(w); err != nil {
					return err
				}
				done += size
				p.progress(done, total)
				return nil
			}
		}
	}
	return Write(w, p.kvs, p.tensors)
}

// plan checks m against what llama.cpp's architecture expects, reads the
// tokenizer and lays out the metadata and tensors.
func plan(m *model.Model, tokenizerDir string, opts Options) (*exportPlan, error) {
	if m == nil {
		return nil, errors.New("gguf: nil model")
	}
	if opts.DType != F32 && opts.DType != F16 && opts.DType != BF16 && opts.DType != Q8_0 && opts.DType != Q4_0 {
		return nil, fmt.Errorf("gguf: export dtype %v is not supported (want F32, F16, BF16, Q8_0 or Q4_0)", opts.DType)
	}
	cfg := m.Config
	if err := checkModel(m); err != nil {
		return nil, err
	}
	bos, eos := -1, -1
	if cfg.BOSTokenID != nil {
		bos = *cfg.BOSTokenID
	}
	if len(cfg.EOSTokenID) > 0 {
		eos = cfg.EOSTokenID[0]
	}
	vocab, err := readVocabulary(tokenizerDir, cfg.VocabSize, opts.Pre, bos, eos)
	if err != nil {
		return nil, err
	}

	layout, err := layoutOf(cfg)
	if err != nil {
		return nil, err
	}
	arch := layout.arch
	name := opts.Name
	if name == "" {
		name = arch
	}
	fileType := uint32(0) // ALL_F32
	switch opts.DType {
	case F16:
		fileType = 1 // MOSTLY_F16
	case BF16:
		fileType = 32 // MOSTLY_BF16
	case Q8_0:
		fileType = 7 // MOSTLY_Q8_0
	case Q4_0:
		fileType = 2 // MOSTLY_Q4_0
	}
	a := func(k string) string { return arch + "." + k }
	kvs := []KV{
		{"general.architecture", arch},
		{"general.name", name},
		{KeyAlignment, uint32(DefaultAlignment)},
		{"general.file_type", fileType},
		{a("vocab_size"), uint32(cfg.VocabSize)},
		{a("context_length"), uint32(contextLength(cfg))},
		{a("embedding_length"), uint32(cfg.HiddenSize)},
		{a("block_count"), uint32(cfg.NumLayers)},
		{a("feed_forward_length"), uint32(cfg.IntermediateSize)},
		{a("attention.head_count"), uint32(cfg.NumHeads)},
		{a("attention.head_count_kv"), uint32(cfg.NumKVHeads)},
		{a("attention.key_length"), uint32(cfg.HeadDim)},
		{a("attention.value_length"), uint32(cfg.HeadDim)},
		{a("attention.layer_norm_rms_epsilon"), float32(cfg.RMSNormEps)},
		{a("rope.dimension_count"), uint32(cfg.HeadDim)},
		{a("rope.freq_base"), float32(cfg.RopeTheta)},
	}
	if layout.kvs != nil {
		kvs = append(kvs, layout.kvs(cfg, a)...)
	}
	kvs = append(kvs, vocab.metadata()...)

	return &exportPlan{kvs: kvs, tensors: modelTensors(m, layout, opts.DType), progress: opts.Progress}, nil
}

// ropeScalingType returns config.json's rope scaling type, "" for none.
func ropeScalingType(cfg model.Config) string {
	rs := cfg.RopeScaling
	if rs == nil {
		return ""
	}
	t := rs.RopeType
	if t == "" {
		t = rs.Type
	}
	if t == "default" {
		return ""
	}
	return t
}

// checkModel reports every way m differs from what the GGUF architecture
// holds, so llama.cpp never sees a file it would reject or misread.
func checkModel(m *model.Model) error {
	cfg := m.Config
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if err := cfg.Validate(); err != nil {
		return fmt.Errorf("gguf: invalid model config: %w", err)
	}
	layout, err := layoutOf(cfg)
	if err != nil {
		return err
	}
	checkLayout(layout, cfg, m.W.Layers, bad)
	if cfg.MaxPositions <= 0 {
		bad("max_position_embeddings must be > 0 (it is GGUF's context_length), got %d", cfg.MaxPositions)
	}
	for _, v := range []int{cfg.VocabSize, cfg.HiddenSize, cfg.IntermediateSize, cfg.NumLayers, cfg.NumHeads, cfg.NumKVHeads, cfg.MaxPositions} {
		if v > math.MaxUint32 {
			bad("dimension %d does not fit GGUF's uint32 hyperparameters", v)
		}
	}

	C, F, V := cfg.HiddenSize, cfg.IntermediateSize, cfg.VocabSize
	Q, KV := cfg.QDim(), cfg.KVDim()
	w := &m.W
	mat := func(name string, x *kernels.Mat, rows, cols int) {
		switch {
		case x == nil:
			bad("%s is missing", name)
		case x.Rows != rows || x.Cols != cols:
			bad("%s is %dx%d, want %dx%d", name, x.Rows, x.Cols, rows, cols)
		case x.DType != kernels.F32 && x.DType != kernels.BF16 && x.DType != kernels.F16 && x.DType != kernels.Q8 && x.DType != kernels.Q4:
			bad("%s has dtype %v", name, x.DType)
		// (bf16/f16/q8/q4 weights are read through Row, Q8Row or Q4Row: their stored
		// copy is released once packed, and the packing checked its length.)
		case x.DType == kernels.F32 && len(x.F32) != rows*cols:
			bad("%s holds the wrong number of values", name)
		}
	}
	vec := func(name string, x []float32, n int, optional bool) {
		if x == nil && optional {
			return
		}
		if len(x) != n {
			bad("%s has %d values, want %d", name, len(x), n)
		}
	}
	mat("embeddings", w.Embed, V, C)
	vec("final norm", w.FinalNorm, C, false)
	if !cfg.TieWordEmbeddings {
		mat("lm_head", w.LMHead, V, C)
	}
	if len(w.Layers) != cfg.NumLayers {
		bad("model has %d layers, config says %d", len(w.Layers), cfg.NumLayers)
	}
	for i := range w.Layers {
		l := &w.Layers[i]
		p := fmt.Sprintf("layer %d ", i)
		vec(p+"attention norm", l.AttnNorm, C, false)
		vec(p+"MLP norm", l.MLPNorm, C, false)
		mat(p+"q_proj", l.Q, Q, C)
		mat(p+"k_proj", l.K, KV, C)
		mat(p+"v_proj", l.V, KV, C)
		mat(p+"o_proj", l.O, C, Q)
		if cfg.IsMoE(i) {
			E, Fm := cfg.NumExperts, cfg.MoEIntermediateSize
			mat(p+"router", l.Router, E, C)
			if len(l.Experts) != E {
				bad("%shas %d experts, config says %d", p, len(l.Experts), E)
			}
			for e, x := range l.Experts {
				pe := fmt.Sprintf("%sexpert %d ", p, e)
				mat(pe+"gate_proj", x.Gate, Fm, C)
				mat(pe+"up_proj", x.Up, Fm, C)
				mat(pe+"down_proj", x.Down, C, Fm)
			}
		} else {
			mat(p+"gate_proj", l.Gate, F, C)
			mat(p+"up_proj", l.Up, F, C)
			mat(p+"down_proj", l.Down, C, F)
		}
		vec(p+"q bias", l.QBias, Q, true)
		vec(p+"k bias", l.KBias, KV, true)
		vec(p+"v bias", l.VBias, KV, true)
		vec(p+"o bias", l.OBias, C, true)
		vec(p+"gate bias", l.GateBias, F, true)
		vec(p+"up bias", l.UpBias, F, true)
		vec(p+"down bias", l.DownBias, C, true)
	}
	if len(errs) > 0 {
		const show = 8
		if len(errs) > show {
			errs = append(errs[:show], fmt.Errorf("and %d more", len(errs)-show))
		}
		return fmt.Errorf("gguf: model cannot be exported: %w", errors.Join(errs...))
	}
	return nil
}

// modelTensors lays out every tensor of m with GGUF names and dims, each
// with a writer that converts it on the fly.
func modelTensors(m *model.Model, layout archLayout, dt Type) []Tensor {
	cfg := m.Config
	w := &m.W
	var ts []Tensor
	typeFor := func(cols int) Type {
		if (dt == Q8_0 || dt == Q4_0) && cols%q8Block != 0 {
			return F16
		}
		return dt
	}
	matrixAs := func(name string, x *kernels.Mat, rowOrder []int, dt Type) {
		ts = append(ts, Tensor{Name: name, Dims: []uint64{uint64(x.Cols), uint64(x.Rows)}, Type: dt,
			WriteData: func(out io.Writer) error { return writeMatrix(out, name, x, rowOrder, dt) }})
	}
	matrix := func(name string, x *kernels.Mat, rowOrder []int) { matrixAs(name, x, rowOrder, typeFor(x.Cols)) }
	// experts stacks one matrix of every expert into a 3-D tensor,
	// expert-major, as llama.cpp's *_exps tensors hold them.
	experts := func(name string, xs []*kernels.Mat) {
		dt := typeFor(xs[0].Cols)
		ts = append(ts, Tensor{Name: name, Dims: []uint64{uint64(xs[0].Cols), uint64(xs[0].Rows), uint64(len(xs))}, Type: dt,
			WriteData: func(out io.Writer) error {
				for e, x := range xs {
					if err := writeMatrix(out, fmt.Sprintf("%s expert %d", name, e), x, nil, dt); err != nil {
						return err
					}
				}
				return nil
			}})
	}
	vector := func(name string, x []float32, order []int) {
		if x == nil {
			return
		}
		ts = append(ts, Tensor{Name: name, Dims: []uint64{uint64(len(x))}, Type: F32,
			WriteData: func(out io.Writer) error { return writeVector(out, x, order) }})
	}

	// Llama's interleaved rope needs each head's rows reordered (see the
	// package doc); the NeoX ropes take the Hugging Face order as is.
	var qOrder, kOrder []int
	if layout.interleave {
		qOrder = interleaveHeads(cfg.NumHeads, cfg.HeadDim)
		kOrder = interleaveHeads(cfg.NumKVHeads, cfg.HeadDim)
	}

	matrix("token_embd.weight", w.Embed, nil)
	if layout.interleave && ropeScalingType(cfg) == "llama3" {
		vector("rope_freqs.weight", llama3RopeFactors(cfg), nil)
	}
	for i := range w.Layers {
		l := &w.Layers[i]
		p := fmt.Sprintf("blk.%d.", i)
		vector(p+"attn_norm.weight", l.AttnNorm, nil)
		matrix(p+"attn_q.weight", l.Q, qOrder)
		vector(p+"attn_q.bias", l.QBias, qOrder)
		matrix(p+"attn_k.weight", l.K, kOrder)
		vector(p+"attn_k.bias", l.KBias, kOrder)
		matrix(p+"attn_v.weight", l.V, nil)
		vector(p+"attn_v.bias", l.VBias, nil)
		matrix(p+"attn_output.weight", l.O, nil)
		vector(p+"attn_output.bias", l.OBias, nil)
		familyTensors(vector, p, l)
		vector(p+"ffn_norm.weight", l.MLPNorm, nil)
		if l.Router != nil {
			// The router stays unquantized (as the engine keeps it):
			// F32 holds any checkpoint dtype exactly.
			matrixAs(p+"ffn_gate_inp.weight", l.Router, nil, F32)
			var gate, up, down []*kernels.Mat
			for _, x := range l.Experts {
				gate, up, down = append(gate, x.Gate), append(up, x.Up), append(down, x.Down)
			}
			experts(p+"ffn_gate_exps.weight", gate)
			experts(p+"ffn_up_exps.weight", up)
			experts(p+"ffn_down_exps.weight", down)
			continue
		}
		matrix(p+"ffn_gate.weight", l.Gate, nil)
		vector(p+"ffn_gate.bias", l.GateBias, nil)
		matrix(p+"ffn_up.weight", l.Up, nil)
		vector(p+"ffn_up.bias", l.UpBias, nil)
		matrix(p+"ffn_down.weight", l.Down, nil)
		vector(p+"ffn_down.bias", l.DownBias, nil)
	}
	vector("output_norm.weight", w.FinalNorm, nil)
	// Tied embeddings: llama.cpp reuses token_embd when output is absent.
	if !cfg.TieWordEmbeddings && w.LMHead != nil && w.LMHead != w.Embed {
		matrix("output.weight", w.LMHead, nil)
	}
	return ts
}

// interleaveHeads returns, for each output row of a projection with nh heads
// of hd rows, the Hugging Face row it takes: within a head, row 2i comes from
// row i and row 2i+1 from row i+hd/2. This turns rotate_half pairs (i,
// i+hd/2) into the adjacent pairs (2i, 2i+1) that llama.cpp's "llama" rope
// rotates, with the same frequency index i.
func interleaveHeads(nh, hd int) []int {
	order := make([]int, nh*hd)
	half := hd / 2
	for h := 0; h < nh; h++ {
		for i := 0; i < half; i++ {
			order[h*hd+2*i] = h*hd + i
			order[h*hd+2*i+1] = h*hd + half + i
		}
	}
	return order
}

// llama3RopeFactors returns the HD/2 divisors llama.cpp applies to its
// unscaled rotary frequencies (rope_freqs.weight) to reproduce Llama 3's
// rope scaling: 1 for high frequencies, factor for low ones, and a smooth
// blend between (the same frequencies transformers computes).
func llama3RopeFactors(cfg model.Config) []float32 {
	rs := cfg.RopeScaling
	half := cfg.HeadDim / 2
	old := float64(rs.OriginalMaxPositionEmbeddings)
	lowWavelen := old / rs.LowFreqFactor
	highWavelen := old / rs.HighFreqFactor
	out := make([]float32, half)
	for i := range out {
		inv := 1 / math.Pow(cfg.RopeTheta, float64(2*i)/float64(cfg.HeadDim))
		wavelen := 2 * math.Pi / inv
		switch {
		case wavelen < highWavelen:
			out[i] = 1
		case wavelen > lowWavelen:
			out[i] = float32(rs.Factor)
		default:
			smooth := (old/wavelen - rs.LowFreqFactor) / (rs.HighFreqFactor - rs.LowFreqFactor)
			out[i] = float32(1 / ((1-smooth)/rs.Factor + smooth))
		}
	}
	return out
}

// writeMatrix writes x's rows (in rowOrder if set) as dt, one row at a time.
func writeMatrix(w io.Writer, name string, x *kernels.Mat, rowOrder []int, dt Type) error {
	cols := x.Cols
	row := make([]float32, cols)
	buf := make([]byte, TensorInfo{Dims: []uint64{uint64(cols)}, Type: dt}.Bytes())
	var quants []int8
	var nibbles []byte
	var scales []uint16
	switch dt {
	case Q8_0:
		quants, scales = make([]int8, cols), make([]uint16, cols/q8Block)
	case Q4_0:
		nibbles, scales = make([]byte, cols/2), make([]uint16, cols/q8Block)
	}
	for r := 0; r < x.Rows; r++ {
		src := r
		if rowOrder != nil {
			src = rowOrder[r]
		}
		switch {
		case dt == Q8_0:
			if x.DType == kernels.Q8 { // the engine's own blocks
				x.Q8Row(quants, scales, src)
			} else {
				x.Row(row, src)
				if err := kernels.QuantizeRowQ8(quants, scales, row); err != nil {
					return fmt.Errorf("%s row %d: %w", name, src, err)
				}
			}
			putQ8Blocks(buf, quants, scales)
		case dt == Q4_0:
			if x.DType == kernels.Q4 { // the engine's own blocks
				x.Q4Row(nibbles, scales, src)
			} else {
				x.Row(row, src)
				if err := kernels.QuantizeRowQ4(nibbles, scales, row); err != nil {
					return fmt.Errorf("%s row %d: %w", name, src, err)
				}
			}
			putQ4Blocks(buf, nibbles, scales)
		case dt == F16: // exact for F16 weights: f16 → f32 → f16 keeps the bits
			x.Row(row, src)
			for c, f := range row {
				h := kernels.F32ToF16(f)
				if h&0x7c00 == 0x7c00 && h&0x3ff == 0 && !math.IsInf(float64(f), 0) {
					return fmt.Errorf("%s[%d][%d] = %g overflows F16 (max 65504); export as F32", name, src, c, f)
				}
				binary.LittleEndian.PutUint16(buf[2*c:], h)
			}
		case dt == BF16: // exact for BF16 weights; others round to nearest even
			x.Row(row, src)
			for c, f := range row {
				binary.LittleEndian.PutUint16(buf[2*c:], kernels.F32ToBF16(f))
			}
		default:
			x.Row(row, src)
			for c, f := range row {
				binary.LittleEndian.PutUint32(buf[4*c:], math.Float32bits(f))
			}
		}
		if _, err := w.Write(buf); err != nil {
			return err
		}
	}
	return nil
}

// putQ8Blocks lays out a row's quantized weights and fp16 scales as GGML's
// block_q8_0: for each block of 32, the scale (little-endian), then the 32
// int8 values.
func putQ8Blocks(buf []byte, quants []int8, scales []uint16) {
	for b, d := range scales {
		blk := buf[b*q8BlockBytes : (b+1)*q8BlockBytes]
		binary.LittleEndian.PutUint16(blk, d)
		for i, q := range quants[b*q8Block : (b+1)*q8Block] {
			blk[2+i] = byte(q)
		}
	}
}

// putQ4Blocks lays out a row's nibbles (GGML's order already) and fp16
// scales as GGML's block_q4_0: for each block of 32, the scale
// (little-endian), then the 16 bytes.
func putQ4Blocks(buf []byte, nibbles []byte, scales []uint16) {
	for b, d := range scales {
		blk := buf[b*q4BlockBytes : (b+1)*q4BlockBytes]
		binary.LittleEndian.PutUint16(blk, d)
		copy(blk[2:], nibbles[b*q8Block/2:(b+1)*q8Block/2])
	}
}

// writeVector writes x (permuted by order if set) as F32.
func writeVector(w io.Writer, x []float32, order []int) error {
	buf := make([]byte, 4*len(x))
	for i := range x {
		src := i
		if order != nil {
			src = order[i]
		}
		binary.LittleEndian.PutUint32(buf[4*i:], math.Float32bits(x[src]))
	}
	_, err := w.Write(buf)
	return err
}
