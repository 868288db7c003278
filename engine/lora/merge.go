package lora

import (
	"fmt"

	"github.com/artgo/art/engine/kernels"
	"github.com/artgo/art/engine/model"
)

// MergeInto adds the adapter's update scale·B·A into the base weights of w,
// which must be F32 (merging into bf16/f16 would round the update away).
// After merging, the model alone computes what model plus adapter did. The
// merged projections are new matrices (a kernels.Mat is immutable once
// used: kernels may cache packed copies of it).
func (a *Adapter) MergeInto(w *model.Weights) error {
	for _, p := range a.order {
		if p.layer >= len(w.Layers) {
			return fmt.Errorf("lora: merge: layer %d not in the model", p.layer)
		}
		where := fmt.Sprintf("layer %d %s", p.layer, p.mod)
		var slot **kernels.Mat
		if p.expert < 0 {
			slot = w.Layers[p.layer].Proj(p.mod)
		} else {
			where = fmt.Sprintf("layer %d expert %d %s", p.layer, p.expert, p.mod)
			if p.expert >= len(w.Layers[p.layer].Experts) {
				return fmt.Errorf("lora: merge: %s not in the model", where)
			}
			slot = w.Layers[p.layer].Experts[p.expert].Proj(p.mod)
		}
		mat := *slot
		if mat == nil {
			return fmt.Errorf("lora: merge: %s not in the model", where)
		}
		if mat.DType != kernels.F32 {
			return fmt.Errorf("lora: merge: %s is %v; merging needs F32 weights", where, mat.DType)
		}
		if mat.Rows != p.out || mat.Cols != p.in {
			return fmt.Errorf("lora: merge: %s is %dx%d, adapter expects %dx%d", where, mat.Rows, mat.Cols, p.out, p.in)
		}
		r := a.Config.Rank
		sb := make([]float32, p.out*r)
		for i, v := range p.B {
			sb[i] = v * a.scale
		}
		// W[out×in] += (scale·B)[out×r] · A[r×in]
		merged := append([]float32(nil), mat.F32...)
		kernels.Gemm(false, false, p.out, p.in, r, sb, r, p.A, p.in, 1, merged, p.in)
		*slot = kernels.NewMatF32(p.out, p.in, merged)
	}
	return nil
}
