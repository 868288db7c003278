// Package parallel splits loops over the available cores.
package parallel

import (
	"runtime"
	"sync/atomic"
)

// For runs fn over [0, n) split into at most GOMAXPROCS contiguous ranges,
// one call per range, and waits for all of them. Loops cheaper than minWork
// iterations per extra range run inline. The ranges are handed out through
// Run, so a core that is busy elsewhere leaves its range to the others.
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
	chunk := (n + workers - 1) / workers
	ranges := (n + chunk - 1) / chunk
	var next atomic.Int64
	Run(ranges, func() {
		for {
			r := int(next.Add(1) - 1)
			if r >= ranges {
				return
			}
			fn(r*chunk, min((r+1)*chunk, n))
		}
	})
}
