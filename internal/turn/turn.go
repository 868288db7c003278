// Package turn is a lock whose waiters give up when their context ends:
// a host's training step or adapter load may hold it for minutes, and a
// request queued behind one must not wait past its own deadline.
package turn

import "context"

// Turn is one holder at a time. The zero value is not usable: make it
// with New.
type Turn chan struct{}

// New returns a free turn.
func New() Turn { return make(Turn, 1) }

// Take waits for the turn or for ctx to end, whichever comes first, and
// returns the function that gives the turn back; on ctx's end it returns
// ctx's error and holds nothing.
func (t Turn) Take(ctx context.Context) (release func(), err error) {
	select {
	case t <- struct{}{}:
		return func() { <-t }, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}
