package parallel

import (
	"sync"
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

// Run must finish all of a work-stealing loop's pieces, whether helpers
// join or not, from concurrent callers and from inside another Run.
func TestRun_CompletesNestedAndConcurrent(t *testing.T) {
	const pieces = 1000
	loop := func(n int, inner bool) int64 {
		var next, done atomic.Int64
		Run(n, func() {
			for {
				i := next.Add(1) - 1
				if i >= pieces {
					return
				}
				if inner && i%100 == 0 {
					if got := loopOnce(3); got != pieces {
						t.Errorf("nested Run did %d pieces; want %d", got, pieces)
					}
				}
				done.Add(1)
			}
		})
		return done.Load()
	}
	var callers sync.WaitGroup
	for c := range 4 {
		callers.Add(1)
		go func() {
			defer callers.Done()
			for round := range 200 {
				n := 1 + (c+round)%5
				if got := loop(n, round%10 == 0); got != pieces {
					t.Errorf("Run(%d) did %d pieces; want %d", n, got, pieces)
					return
				}
			}
		}()
	}
	callers.Wait()
}

// loopOnce is a plain work-stealing loop of 1000 pieces on n goroutines.
func loopOnce(n int) int64 {
	var next, done atomic.Int64
	Run(n, func() {
		for next.Add(1) <= 1000 {
			done.Add(1)
		}
	})
	return done.Load()
}
