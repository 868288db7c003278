package kernels

import (
	"fmt"
	"sync"
	"testing"
	"time"
)

// Ensure runOwned does every unit exactly once, whatever the number of
// goroutines and units, also when one unit is slow (its goroutine's range
// is then finished by the others, from the back).
func TestRunOwned_EveryUnitOnce(t *testing.T) {
	for _, threads := range []int{1, 2, 3, 4} {
		for _, total := range []int{1, 2, 7, 64, 1000} {
			for _, slow := range []int{-1, 0, total / 2} {
				t.Run(fmt.Sprint(threads, "x", total, "slow", slow), func(t *testing.T) {
					var mu sync.Mutex
					done := make([]int, total)
					runOwned(threads, total, func(u0, u1 int) {
						for u := u0; u < u1; u++ {
							if u == slow {
								time.Sleep(5 * time.Millisecond)
							}
							mu.Lock()
							done[u]++
							mu.Unlock()
						}
					})
					for u, n := range done {
						if n != 1 {
							t.Fatalf("unit %d done %d times", u, n)
						}
					}
				})
			}
		}
	}
}
