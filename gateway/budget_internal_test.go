package gateway

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestRequestBudget(t *testing.T) {
	b := newRequestBudget(128 << 20) // reserve 16 MiB, small = at most 1 MiB
	ctx := context.Background()
	stop := make(chan struct{})
	if _, err := b.acquire(ctx, stop, 112<<20+1); !errors.Is(err, errOverBudget) {
		t.Fatalf("acquire over seven eighths: %v, want errOverBudget", err)
	}
	if b.refuses(3*112<<20) || !b.refuses(3*112<<20+1) {
		t.Fatal("refuses: want costs over three times seven eighths of the budget refused, no others")
	}
	if _, err := b.acquire(ctx, stop, 100<<20); err != nil {
		t.Fatal(err)
	}
	// A large request must leave the reserve free.
	tctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if _, err := b.acquire(tctx, stop, 13<<20); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("large acquire into the reserve: %v, want to wait", err)
	}
	// Small requests may take the reserve.
	for range 28 {
		if waited, err := b.acquire(ctx, stop, 1<<20); err != nil || waited {
			t.Fatalf("small acquire: waited %v, %v", waited, err)
		}
	}
	if got := b.inUse(); got != 128<<20 {
		t.Fatalf("in use %d, want %d", got, 128<<20)
	}
	// A waiting request gets its room once enough is released.
	got := make(chan error, 1)
	go func() {
		_, err := b.acquire(ctx, stop, 1<<20)
		got <- err
	}()
	select {
	case err := <-got:
		t.Fatalf("acquire with nothing free returned %v, want to wait", err)
	case <-time.After(20 * time.Millisecond):
	}
	b.release(1 << 20)
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	// stop ends a wait.
	close(stop)
	if _, err := b.acquire(ctx, stop, 100<<20); !errors.Is(err, errStopped) {
		t.Fatalf("acquire after stop: %v, want errStopped", err)
	}
	b.release(100<<20 + 28<<20)
	if got := b.inUse(); got != 0 {
		t.Fatalf("in use %d after releasing everything", got)
	}
}

// TestRequestBudgetGrow: growing a reservation takes the difference when
// there is room, and otherwise gives the reservation back while it waits,
// so two readers growing at once cannot hold the budget between them.
func TestRequestBudgetGrow(t *testing.T) {
	b := newRequestBudget(128 << 20) // large requests: at most 112 MiB
	ctx := context.Background()
	if _, err := b.acquire(ctx, nil, 10<<20); err != nil {
		t.Fatal(err)
	}
	if err := b.grow(ctx, nil, 10<<20, 20<<20); err != nil || b.inUse() != 20<<20 {
		t.Fatalf("grow with room: %v, in use %d", err, b.inUse())
	}
	b.release(20 << 20)
	// Two readers hold 50 MiB each and want 70 MiB: both waiting while
	// holding would never end.
	for range 2 {
		if _, err := b.acquire(ctx, nil, 50<<20); err != nil {
			t.Fatal(err)
		}
	}
	done := make(chan error, 1)
	go func() { done <- b.grow(ctx, nil, 50<<20, 70<<20) }()
	for b.inUse() != 50<<20 { // the first gave its 50 MiB back to wait
		time.Sleep(time.Millisecond)
	}
	if err := b.grow(ctx, nil, 50<<20, 70<<20); err != nil || b.inUse() != 70<<20 {
		t.Fatalf("second grow: %v, in use %d, want 70 MiB at once", err, b.inUse())
	}
	b.release(70 << 20)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	b.release(70 << 20)
	if b.inUse() != 0 {
		t.Fatalf("in use %d", b.inUse())
	}
}
