// Package exactunit lets a test run on exact fp32 weight products
// (kernels.UnitFP32) whatever unit the process chose: tests that compare
// with an fp32 or float64 reference (PyTorch, llama.cpp, finite
// differences) measure the engine's arithmetic, not bf16's rounding.
package exactunit

import (
	"testing"

	"github.com/artgo/art/engine/kernels"
)

// Use puts the weight products on exact fp32 for the rest of t and
// restores the unit when t ends.
func Use(t testing.TB) {
	t.Helper()
	prev, _ := kernels.ActiveUnit()
	if err := kernels.SetUnit(kernels.UnitFP32); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { kernels.SetUnit(prev) })
}
