//go:build !race

package lora

import (
	"testing"

	"github.com/artgo/art/engine/model"
)

// Ensure AddDelta and BackwardDelta reuse their scratch: no allocations per
// call once warm (small calls, which the kernels run on the caller's
// goroutine; the race detector makes sync.Pool drop items, hence the tag).
func TestDeltaAllocs(t *testing.T) {
	m := tinyModel(t, "qwen2")
	a, err := New(m.Config, Config{Rank: 4}, 3)
	if err != nil {
		t.Fatal(err)
	}
	randomizeB(a, 4)
	const n = 3
	out, in := model.ModUp.Dims(m.Config)
	inp, dinp := make([]float32, n*in), make([]float32, n*in)
	o, dout := make([]float32, n*out), make([]float32, n*out)
	for i := range inp {
		inp[i] = float32(i%7) - 3
	}
	for i := range dout {
		dout[i] = float32(i%5) - 2
	}
	if allocs := testing.AllocsPerRun(20, func() { a.AddDelta(o, inp, n, 1, model.ModUp) }); allocs != 0 {
		t.Errorf("AddDelta: %v allocations per call", allocs)
	}
	if allocs := testing.AllocsPerRun(20, func() { a.BackwardDelta(dinp, dout, inp, n, 1, model.ModUp) }); allocs != 0 {
		t.Errorf("BackwardDelta: %v allocations per call", allocs)
	}
}
