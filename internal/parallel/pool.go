package parallel

import (
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// Run calls work on the caller's goroutine and on up to n-1 helper
// goroutines at once, and returns when every call has returned. work must
// take its pieces from a shared source (a counter) and return when none is
// left: a helper that joins late finds nothing to do, and one that does not
// join in time (a busy machine) leaves its share to the others instead of
// delaying the call.
//
// The helpers are kept between calls, spinning briefly before they sleep:
// a decoding step makes about a hundred parallel calls of a few hundred
// microseconds each, and waking a parked goroutine for each of them cost
// 5–15 % of the step's time in idle cores.
func Run(n int, work func()) {
	if n <= 1 {
		work()
		return
	}
	shared.run(n, work)
}

// spinFor is how long an idle helper keeps polling for the next call
// before it sleeps. Between the matrix products of one decoding step the
// caller is busy for a few to tens of microseconds; between steps
// (sampling, the server) usually longer.
const spinFor = 200 * time.Microsecond

// shared is the process's helper pool: like the Go runtime's own worker
// threads, it is a resource of the process, not state a caller sees. Its
// helpers live as long as the process.
var shared = newPool()

type pool struct {
	mu      sync.Mutex
	helpers int // started

	gen      atomic.Uint64 // bumped when cur changes
	cur      atomic.Pointer[batch]
	sleeping atomic.Int32
	wake     chan struct{}
}

// batch is one Run call as the helpers see it.
type batch struct {
	work  func()
	slots atomic.Int32 // helpers that may still join
	// left counts the slots neither closed nor finished: the call is over
	// when it reaches 0, and whoever brings it there closes done.
	left atomic.Int32
	done chan struct{}
}

// finish accounts for n slots (finished or closed).
func (b *batch) finish(n int32) {
	if n != 0 && b.left.Add(-n) == 0 {
		close(b.done)
	}
}

// wait returns when every claimed slot has finished. It polls first: a
// helper finishing its last piece is microseconds away, and a caller
// parked on a channel would be woken onto the helper's core, where it
// waits for that core instead of running on its own.
func (b *batch) wait() {
	start := time.Now()
	for i := 1; b.left.Load() != 0; i++ {
		if i%64 == 0 {
			if time.Since(start) > spinFor {
				<-b.done
				return
			}
			runtime.Gosched()
		}
	}
}

func newPool() *pool { return &pool{wake: make(chan struct{}, 1024)} }

func (p *pool) run(n int, work func()) {
	p.start(n - 1)
	b := &batch{work: work, done: make(chan struct{})}
	b.slots.Store(int32(n - 1))
	b.left.Store(int32(n - 1))
	p.cur.Store(b)
	p.gen.Add(1)
	// Sleepers: wake as many as can join. A token that finds no sleeper
	// (it just found the batch while spinning) only causes one spurious
	// wake-up later.
	for range min(n-1, int(p.sleeping.Load())) {
		select {
		case p.wake <- struct{}{}:
		default:
		}
	}
	work()
	// Slots nobody claimed are closed: the work is done, so no helper
	// joining now could help.
	b.finish(b.slots.Swap(0))
	b.wait()
	p.cur.CompareAndSwap(b, nil)
}

// start makes sure at least n helpers exist.
func (p *pool) start(n int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for ; p.helpers < n; p.helpers++ {
		go p.helper()
	}
}

func (p *pool) helper() {
	var seen uint64
	for {
		b := p.next(&seen)
		if b.claim() {
			b.work()
			b.finish(1)
		}
	}
}

// next waits for a batch newer than generation *seen that still has a
// free slot: polling for spinFor, then asleep until Run wakes it.
func (p *pool) next(seen *uint64) *batch {
	for {
		start := time.Now()
		for i := 1; ; i++ {
			if b := p.fresh(seen); b != nil {
				return b
			}
			if i%64 == 0 {
				if time.Since(start) > spinFor {
					break
				}
				// Let goroutines queued on this core run rather than
				// holding it while polling.
				runtime.Gosched()
			}
		}
		p.sleeping.Add(1)
		// Run bumps gen before it reads sleeping, so a batch published
		// after this check finds this helper counted and wakes it.
		if b := p.fresh(seen); b != nil {
			p.sleeping.Add(-1)
			return b
		}
		<-p.wake
		p.sleeping.Add(-1)
	}
}

// fresh returns the current batch if it is newer than *seen and open.
func (p *pool) fresh(seen *uint64) *batch {
	g := p.gen.Load()
	if g == *seen {
		return nil
	}
	*seen = g
	if b := p.cur.Load(); b != nil && b.slots.Load() > 0 {
		return b
	}
	return nil
}

// claim takes one of b's slots, if any is left.
func (b *batch) claim() bool {
	for {
		s := b.slots.Load()
		if s <= 0 {
			return false
		}
		if b.slots.CompareAndSwap(s, s-1) {
			return true
		}
	}
}
