package parallel

import (
	"sync/atomic"
	"testing"
)

// Ensure every index is visited exactly once for sizes around the split points.
func TestFor_CoversOnce(t *testing.T) {
	for _, n := range []int{0, 1, 2, 3, 7, 64, 1001} {
		for _, minWork := range []int{0, 1, 4, 100} {
			seen := make([]int32, n)
			For(n, minWork, func(lo, hi int) {
				for i := lo; i < hi; i++ {
					atomic.AddInt32(&seen[i], 1)
				}
			})
			for i, c := range seen {
				if c != 1 {
					t.Fatalf("n=%d minWork=%d: index %d visited %d times; want 1", n, minWork, i, c)
				}
			}
		}
	}
}
