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
