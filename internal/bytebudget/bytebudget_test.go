package bytebudget

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"
)

// waitBlocked fails the test when got delivers within a short while: the
// call behind it should be waiting.
func waitBlocked[T any](t *testing.T, got <-chan T, what string) {
	t.Helper()
	select {
	case v := <-got:
		t.Fatalf("%s returned %v, want it to wait", what, v)
	case <-time.After(20 * time.Millisecond):
	}
}

func TestTryAcquire(t *testing.T) {
	var b Budget
	if !b.TryAcquire(60, 100) || !b.TryAcquire(40, 100) {
		t.Fatal("takes up to the limit refused")
	}
	if b.TryAcquire(1, 100) {
		t.Fatal("a take over the limit succeeded")
	}
	if !b.TryAcquire(1, 101) {
		t.Fatal("a take under a caller's higher limit refused")
	}
	b.Release(101)
	// One item larger than the limit runs alone, never beside another.
	if !b.TryAcquire(500, 100) {
		t.Fatal("an item over the limit refused with nothing taken")
	}
	if b.TryAcquire(1, 100) {
		t.Fatal("a take beside the oversized item succeeded")
	}
	b.Release(500)
	if !b.TryAcquire(1, 100) || b.TryAcquire(500, 100) {
		t.Fatal("an item over the limit let in beside another")
	}
	b.Release(1)
	if b.InUse() != 0 || b.Taken() != 60+40+1+500+1 {
		t.Fatalf("in use %d, taken %d", b.InUse(), b.Taken())
	}
}

func TestAcquireWaits(t *testing.T) {
	var b Budget
	ctx := context.Background()
	if waited, err := b.Acquire(ctx, nil, 80, 100); err != nil || waited {
		t.Fatalf("acquire with room: waited %v, %v", waited, err)
	}
	got := make(chan error, 1)
	go func() {
		waited, err := b.Acquire(ctx, nil, 30, 100)
		if err == nil && !waited {
			err = errors.New("did not report waiting")
		}
		got <- err
	}()
	waitBlocked(t, got, "acquire over the limit")
	b.Release(5) // not enough
	waitBlocked(t, got, "acquire still over the limit")
	b.Release(5)
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	// A context that ends, or stop, ends the wait; room is looked at
	// first.
	done, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := b.Acquire(done, nil, 30, 100); !errors.Is(err, context.Canceled) {
		t.Fatalf("acquire with ctx done: %v", err)
	}
	if _, err := b.Acquire(done, nil, 0, 100); err != nil {
		t.Fatalf("acquire that fits with ctx done: %v", err)
	}
	stop := make(chan struct{})
	close(stop)
	if _, err := b.Acquire(ctx, stop, 30, 100); !errors.Is(err, ErrStopped) {
		t.Fatalf("acquire after stop: %v", err)
	}
	b.Release(100)
	if b.InUse() != 0 {
		t.Fatalf("in use %d", b.InUse())
	}
}

// TestSmallPassesLarge: waiters are not queued, so a small take that fits
// is not held back by a large one waiting for room (the gateway's reserve
// for small requests relies on it).
func TestSmallPassesLarge(t *testing.T) {
	var b Budget
	ctx := context.Background()
	b.TryAcquire(90, 100)
	large := make(chan error, 1)
	go func() { _, err := b.Acquire(ctx, nil, 50, 100); large <- err }()
	waitBlocked(t, large, "large acquire")
	small := make(chan error, 1)
	go func() { _, err := b.Acquire(ctx, nil, 5, 100); small <- err }()
	select {
	case err := <-small:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a small take that fits waits behind a large one")
	}
	b.Release(95)
	if err := <-large; err != nil {
		t.Fatal(err)
	}
	b.Release(50)
}

func TestTakeUpTo(t *testing.T) {
	var b Budget
	if got := b.TakeUpTo(70, 100); got != 70 {
		t.Fatalf("took %d of 70", got)
	}
	if got := b.TakeUpTo(70, 100); got != 30 {
		t.Fatalf("took %d, want the 30 left", got)
	}
	if got := b.TakeUpTo(70, 100); got != 0 {
		t.Fatalf("took %d of a full budget", got)
	}
	if got := b.TakeUpTo(70, 50); got != 0 {
		t.Fatalf("took %d over a lower limit", got)
	}
	b.Release(100)
}

func TestResize(t *testing.T) {
	var b Budget
	b.TryAcquire(30, 100)
	b.TryAcquire(50, 100)
	if !b.Resize(30, 50, 100) || b.InUse() != 100 {
		t.Fatalf("resize with room: in use %d", b.InUse())
	}
	if b.Resize(50, 51, 100) || b.InUse() != 100 {
		t.Fatalf("resize over the limit succeeded: in use %d", b.InUse())
	}
	b.Release(50)
	// Alone, a holder may grow past the limit, as an item larger than the
	// limit is let in alone.
	if !b.Resize(50, 500, 100) || b.InUse() != 500 {
		t.Fatalf("resize alone: in use %d", b.InUse())
	}
	b.Release(500)
	if b.Taken() != 30+50+20+450 {
		t.Fatalf("taken %d", b.Taken())
	}
}

func TestReleasePanics(t *testing.T) {
	var b Budget
	b.TryAcquire(10, 100)
	defer func() {
		if recover() == nil {
			t.Fatal("releasing more than taken did not panic")
		}
	}()
	b.Release(11)
}

// TestReleasedAndWake: a caller waiting on its own terms misses no
// Release, and Wake wakes it without one.
func TestReleasedAndWake(t *testing.T) {
	var b Budget
	b.TryAcquire(100, 100)
	ok, released := b.TryAcquireOrWait(1, 100)
	if ok {
		t.Fatal("took from a full budget")
	}
	b.Release(1) // before the caller looks at released
	select {
	case <-released:
	default:
		t.Fatal("the Release after the failed try is missed")
	}
	w := b.Released()
	b.Wake()
	select {
	case <-w:
	default:
		t.Fatal("Wake left a waiter asleep")
	}
	b.Release(99)
}

// TestConcurrent: many holders at once never exceed the limit and leave
// the budget at 0.
func TestConcurrent(t *testing.T) {
	var b Budget
	const limit = 1000
	var over sync.Once
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			n := int64(100 + 50*i)
			for range 200 {
				if _, err := b.Acquire(context.Background(), nil, n, limit); err != nil {
					t.Error(err)
					return
				}
				if b.InUse() > limit {
					over.Do(func() { t.Errorf("in use %d over the limit %d", b.InUse(), limit) })
				}
				b.Release(n)
			}
		})
	}
	wg.Wait()
	if b.InUse() != 0 {
		t.Fatalf("in use %d", b.InUse())
	}
}

// BenchmarkAcquireRelease: taking and giving back a small amount (4 KiB),
// alone and from 2 goroutines at once.
func BenchmarkAcquireRelease(b *testing.B) {
	ctx := context.Background()
	b.Run("uncontended", func(b *testing.B) {
		var bb Budget
		b.ReportAllocs()
		for range b.N {
			if _, err := bb.Acquire(ctx, nil, 4<<10, 128<<20); err != nil {
				b.Fatal(err)
			}
			bb.Release(4 << 10)
		}
	})
	b.Run("2_goroutines", func(b *testing.B) {
		var bb Budget
		b.ReportAllocs()
		var wg sync.WaitGroup
		for range 2 {
			wg.Go(func() {
				for range b.N / 2 {
					if _, err := bb.Acquire(ctx, nil, 4<<10, 128<<20); err != nil {
						b.Error(err)
						return
					}
					bb.Release(4 << 10)
				}
			})
		}
		wg.Wait()
	})
}
