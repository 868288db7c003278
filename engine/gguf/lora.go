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
// out]). llama.cpp scales B·A by alpha/rank; an RSLoRA adapter's scale
// alpha/√rank is written as the alpha that gives the same factor. For the
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
	for _, f := range a.Factors() {
		if f.Layer >= cfg.NumLayers {
			return nil, nil, fmt.Errorf("gguf: adapter layer %d is beyond the model's %d layers", f.Layer, cfg.NumLayers)
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
	if len(tensors) == 0 {
		return nil, nil, errors.New("gguf: the adapter adapts no projection")
	}
	return kvs, tensors, nil
}
