package model

import (
	"math"
	"testing"
)

// Ensure expf stays within a few float32 ulps of math.Exp across its range.
func TestExpf(t *testing.T) {
	var worst float64
	for x := -87.0; x <= 88.5; x += 0.0137 {
		got := float64(expf(float32(x)))
		want := math.Exp(float64(float32(x)))
		if rel := math.Abs(got-want) / want; rel > worst {
			worst = rel
		}
	}
	if worst > 5e-7 {
		t.Fatalf("max relative error %.3g; want ≤ 5e-7", worst)
	}
	if expf(-100) != 0 || !math.IsInf(float64(expf(100)), 1) || expf(0) != 1 {
		t.Fatal("edge cases")
	}
}
