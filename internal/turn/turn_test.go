package turn

import (
	"context"
	"errors"
	"testing"
	"time"
)

// Ensure a turn is held by one at a time, a waiter gives up when its
// context ends (holding nothing), and the next waiter gets the turn once
// it is given back.
func TestTurn(t *testing.T) {
	tu := New()
	release, err := tu.Take(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if r, err := tu.Take(ctx); !errors.Is(err, context.DeadlineExceeded) || r != nil {
		t.Fatalf("a second Take while held = %v; want its deadline", err)
	}
	got := make(chan error, 1)
	go func() {
		r, err := tu.Take(context.Background())
		if err == nil {
			r()
		}
		got <- err
	}()
	release()
	select {
	case err := <-got:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a waiter did not get the turn given back")
	}
	if r, err := tu.Take(context.Background()); err != nil {
		t.Fatalf("the turn is not free after both gave it back: %v", err)
	} else {
		r()
	}
}
