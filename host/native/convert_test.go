package native

import (
	"math"
	"testing"

	"github.com/artgo/art"
)

// Ensure TrainConfig.MaxGradNorm reaches the engine: 0 is ART's 0.1, a
// negative value turns clipping off, anything else is kept.
func TestEngineConfig_MaxGradNorm(t *testing.T) {
	for _, c := range []struct{ in, want float64 }{{0, 0.1}, {-1, 0}, {2.5, 2.5}} {
		tc, err := engineConfig(art.TrainConfig{MaxGradNorm: c.in})
		if err != nil || tc.MaxGradNorm != c.want {
			t.Errorf("MaxGradNorm %v: engine got %v (%v), want %v", c.in, tc.MaxGradNorm, err, c.want)
		}
	}
	if err := (art.TrainConfig{MaxGradNorm: math.NaN()}).Validate(); err == nil {
		t.Error("MaxGradNorm NaN validated")
	}
}
