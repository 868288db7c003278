package gguf

import (
	"errors"
	"fmt"
	"io"

	"github.com/artgo/art/engine/kernels"
	"github.com/artgo/art/engine/lora"
	"github.com/artgo/art/engine/model"
	"github.com/artgo/art/internal/atomicfile"
)

// loraTensorNames are llama.cpp's base tensor names of the projections a
// LoRA adapter may target; the adapter's factors are "<name>.weight.lora_a"
// and ".lora_b".
var loraTensorNames = [model.NumModules]string{
	model.ModQ: "attn_q", model.ModK: "attn_k", model.ModV: "attn_v", model.ModO: "attn_output",
	model.ModGate: "ffn_gate", model.ModUp: "ffn_up", model.ModDown: "ffn_down",
}

// ExportLoRAFile writes a as a GGUF LoRA adapter at path, atomically. See
// ExportLoRA.
func ExportLoRAFile(path string, a *lora.Adapter, cfg model.Config) error {
	kvs, tensors, err := planLoRA(a, cfg)
	if err != nil {
		return err
	}
	return atomicfile.Write(path, 0o644, func(w io.Writer) error { return Write(w, kvs, tensors) })
}

// ExportLoRA writes a, an adapter over a model shaped like cfg, in llama.cpp's
// LoRA adapter format (what its convert_lora_to_gguf.py writes and
// llama_adapter_lora_init reads): general.type "adapter", adapter.type
// "lora", adapter.lora.alpha, and per adapted projection the F32 tensors
// "blk.L.<proj>.weight.lora_a" (ne = [in, rank]) and ".lora_b" (ne = [rank,
// out]); a mixture-of-experts layer's expert factors stacked per projection
// as "blk.L.<proj>_exps.weight.lora_a" (ne = [in, rank, experts]) and
// ".lora_b" (ne = [rank, out, experts]). llama.cpp scales B·A by
// alpha/rank; an RSLoRA adapter's scale alpha/√rank is written as the
// alpha that gives the same factor. For the
// "llama" architecture the rows of B for q and k are reordered as Export
// reorders the base q and k rows, so the adapter fits the exported base model.
func ExportLoRA(w io.Writer, a *lora.Adapter, cfg model.Config) error {
	kvs, tensors, err := planLoRA(a, cfg)
	if err != nil {
		return err
	}
	return Write(w, kvs, tensors)
}

func planLoRA(a *lora.Adapter, cfg model.Config) ([]KV, []Tensor, error) {
	if a == nil {
		return nil, nil, errors.New("gguf: nil adapter")
	}
	layout, ok := archLayouts[cfg.ModelType]
	if !ok {
		return nil, nil, fmt.Errorf("gguf: LoRA export supports %s models, not %q", exportableTypes, cfg.ModelType)
	}
	r := a.Config.Rank
	kvs := []KV{
		{"general.architecture", layout.arch},
		{"general.type", "adapter"},
		{KeyAlignment, uint32(DefaultAlignment)},
		{"adapter.type", "lora"},
		{"adapter.lora.alpha", a.Config.Scale() * float32(r)},
	}
	var qOrder, kOrder []int
	if layout.interleave {
		qOrder = interleaveHeads(cfg.NumHeads, cfg.HeadDim)
		kOrder = interleaveHeads(cfg.NumKVHeads, cfg.HeadDim)
	}
	var tensors []Tensor
	// An expert layer's factors of one projection become one 3-D tensor
	// pair, expert-major like the base's *_exps tensors: lora_a (ne = [in,
	// rank, experts]) and lora_b ([rank, out, experts]), which llama.cpp
	// applies per routed expert.
	expertFactors := map[[2]int][]lora.Factor{} // (layer, module) → its experts' factors, in expert order
	for _, f := range a.Factors() {
		if f.Layer >= cfg.NumLayers {
			return nil, nil, fmt.Errorf("gguf: adapter layer %d is beyond the model's %d layers", f.Layer, cfg.NumLayers)
		}
		if f.Expert >= 0 {
			key := [2]int{f.Layer, int(f.Module)}
			if out, in := f.Module.ExpertDims(cfg); !cfg.IsMoE(f.Layer) || out != f.Out || in != f.In {
				return nil, nil, fmt.Errorf("gguf: adapter layer %d expert %d %s (%dx%d) does not fit the model", f.Layer, f.Expert, f.Module, f.Out, f.In)
			}
			if f.Expert != len(expertFactors[key]) {
				return nil, nil, fmt.Errorf("gguf: adapter layer %d %s: expert %d out of order", f.Layer, f.Module, f.Expert)
			}
			expertFactors[key] = append(expertFactors[key], f)
			if f.Expert == cfg.NumExperts-1 {
				tensors = append(tensors, expertLoRA(expertFactors[key], r)...)
			}
			continue
		}
		if out, in := f.Module.Dims(cfg); out != f.Out || in != f.In {
			return nil, nil, fmt.Errorf("gguf: adapter layer %d %s is %dx%d; the model's is %dx%d", f.Layer, f.Module, f.Out, f.In, out, in)
		}
		var order []int
		switch f.Module {
		case model.ModQ:
			order = qOrder
		case model.ModK:
			order = kOrder
		}
		name := fmt.Sprintf("blk.%d.%s.weight", f.Layer, loraTensorNames[f.Module])
		A, B := kernels.NewMatF32(r, f.In, f.A), kernels.NewMatF32(f.Out, r, f.B)
		tensors = append(tensors,
			Tensor{Name: name + ".lora_a", Dims: []uint64{uint64(f.In), uint64(r)}, Type: F32,
				WriteData: func(w io.Writer) error { return writeMatrix(w, name+".lora_a", A, nil, F32) }},
			Tensor{Name: name + ".lora_b", Dims: []uint64{uint64(r), uint64(f.Out)}, Type: F32,
				WriteData: func(w io.Writer) error { return writeMatrix(w, name+".lora_b", B, order, F32) }})
	}
	for key, fs := range expertFactors {
		if len(fs) != cfg.NumExperts {
			return nil, nil, fmt.Errorf("gguf: adapter layer %d %s adapts %d of the model's %d experts; llama.cpp needs all", key[0], model.Module(key[1]), len(fs), cfg.NumExperts)
		}
	}
	if len(tensors) == 0 {
		return nil, nil, errors.New("gguf: the adapter adapts no projection")
	}
	return kvs, tensors, nil
}

// expertLoRA is the tensor pair of one projection's factors over all the
// experts of a layer (fs in expert order).
func expertLoRA(fs []lora.Factor, r int) []Tensor {
	f := fs[0]
	name := fmt.Sprintf("blk.%d.%s_exps.weight", f.Layer, loraTensorNames[f.Module])
	stacked := func(suffix string, factor func(lora.Factor) *kernels.Mat) Tensor {
		x := factor(f)
		return Tensor{Name: name + suffix, Dims: []uint64{uint64(x.Cols), uint64(x.Rows), uint64(len(fs))}, Type: F32,
			WriteData: func(w io.Writer) error {
				for _, f := range fs {
					if err := writeMatrix(w, fmt.Sprintf("%s%s expert %d", name, suffix, f.Expert), factor(f), nil, F32); err != nil {
						return err
					}
				}
				return nil
			}}
	}
	return []Tensor{
		stacked(".lora_a", func(f lora.Factor) *kernels.Mat { return kernels.NewMatF32(r, f.In, f.A) }),
		stacked(".lora_b", func(f lora.Factor) *kernels.Mat { return kernels.NewMatF32(f.Out, r, f.B) }),
	}
}
