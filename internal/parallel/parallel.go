// Package parallel splits loops over the available cores.
package parallel

import (
	"runtime"
	"sync"
)

// For runs fn over [0, n) split into at most GOMAXPROCS contiguous ranges,
// each on its own goroutine, and waits for all of them. Loops cheaper than
// minWork iterations per extra goroutine run inline.
func For(n, minWork int, fn func(lo, hi int)) {
	if n <= 0 {
		return
	}
	workers := runtime.GOMAXPROCS(0)
	if minWork < 1 {
		minWork = 1
	}
	if w := n / minWork; w < workers {
		workers = w
	}
	if workers <= 1 {
		fn(0, n)
		return
	}
	var wg sync.WaitGroup
	chunk := (n + workers - 1) / workers
	for lo := 0; lo < n; lo += chunk {
		hi := min(lo+chunk, n)
		wg.Add(1)
		go func() {
			defer wg.Done()
			fn(lo, hi)
		}()
	}
	wg.Wait()
}
