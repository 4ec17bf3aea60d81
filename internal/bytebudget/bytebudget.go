// Package bytebudget counts bytes taken from a budget by concurrent holders
// and lets them wait for room: the one byte budget under the gateway's
// request budget (Kafka queued.max.request.bytes), the disrest Store's
// buffer (buffer.memory) and the record-batch codec's decompression budget.
// Each of those keeps its own policy (the limit a take may reach, what a
// take larger than the budget means, who may wait); this package keeps the
// count, the lock and the wake-up. It is a leaf: it imports nothing of
// disgw, so every layer may import it.
//
// Waiters are not queued: every Release wakes them all and each tries
// again, so a small take passes a large one that waits. The gateway's
// reserve for small requests (ApiVersions, heartbeats, commits answered
// while large produces wait) relies on it. That is why this is not
// golang.org/x/sync/semaphore's Weighted, which serves waiters in order (a
// large one at the head holds back every small one behind it) and has no
// gauge, no take of what is left, no resize of a held take and no take
// larger than the budget.
package bytebudget

import (
	"context"
	"errors"
	"sync"
)

// ErrStopped: Acquire's stop channel closed before there was room.
var ErrStopped = errors.New("bytebudget: stopped waiting for room")

// Budget counts the bytes taken now. The limit a take may bring the count
// to is each call's argument (the caller's policy), so a Budget has no size
// of its own. The zero Budget is empty and ready. Safe for concurrent use.
type Budget struct {
	mu    sync.Mutex    // guards the fields below
	used  int64         // bytes taken now
	taken int64         // bytes ever taken (tests, metrics)
	wake  chan struct{} // nil while nobody waits; closed and cleared by Release and Wake
}

// fitsLocked reports whether n more bytes fit under limit, given that
// held of the bytes taken are the caller's own: when used+n <= limit, or
// when nothing else is taken, so that one item larger than limit runs
// alone rather than never (callers that refuse such items check first).
// b.mu is held.
func (b *Budget) fitsLocked(held, n, limit int64) bool {
	others := b.used - held
	return others == 0 || others+n <= limit
}

// TryAcquire takes n bytes when they fit under limit (see Acquire) and
// reports whether it did; it never waits.
func (b *Budget) TryAcquire(n, limit int64) bool {
	ok, _ := b.tryAcquire(n, limit, false)
	return ok
}

// TryAcquireOrWait is TryAcquire for a caller that waits on its own terms:
// when n does not fit, released is a channel closed at the next Release or
// Wake, after which the caller tries again. Taking the channel in the same
// lock as the failed try means no Release between the two is missed.
func (b *Budget) TryAcquireOrWait(n, limit int64) (ok bool, released <-chan struct{}) {
	return b.tryAcquire(n, limit, true)
}

func (b *Budget) tryAcquire(n, limit int64, wait bool) (bool, <-chan struct{}) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.fitsLocked(0, n, limit) {
		b.used += n
		b.taken += n
		return true, nil
	}
	if !wait {
		return false, nil
	}
	return false, b.wakeLocked()
}

// Acquire takes n bytes, waiting until they fit under limit: when the bytes
// taken plus n are at most limit, or nothing is taken at all (one item
// larger than limit runs alone). Room is checked before ctx, so a take that
// fits succeeds even with ctx done. waited reports whether it had to wait.
// Errors: ctx.Err() when ctx ends first; ErrStopped when stop (nil: never)
// closes first.
func (b *Budget) Acquire(ctx context.Context, stop <-chan struct{}, n, limit int64) (waited bool, err error) {
	for {
		ok, released := b.TryAcquireOrWait(n, limit)
		if ok {
			return waited, nil
		}
		waited = true
		select {
		case <-released:
		case <-ctx.Done():
			return waited, ctx.Err()
		case <-stop:
			return waited, ErrStopped
		}
	}
}

// TakeUpTo takes, without waiting, as much of n bytes as limit still
// leaves, and returns what it took (0 when nothing is left).
func (b *Budget) TakeUpTo(n, limit int64) int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	got := max(min(n, limit-b.used), 0)
	b.used += got
	b.taken += got
	return got
}

// Resize turns a take of held bytes into one of total bytes (total >
// held) when total fits under limit beside what the others hold (see
// Acquire), and reports whether it did; it never waits, and on false the
// caller still holds held.
func (b *Budget) Resize(held, total, limit int64) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.fitsLocked(held, total, limit) {
		return false
	}
	b.used += total - held
	b.taken += total - held
	return true
}

// Release gives back n bytes (n <= 0: nothing) and wakes every waiter. It
// panics when more is given back than was taken: a caller's bug that would
// otherwise unbound the budget.
func (b *Budget) Release(n int64) {
	if n <= 0 {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.used -= n
	if b.used < 0 {
		panic("bytebudget: released more than was taken")
	}
	b.wakeAllLocked()
}

// Released returns a channel closed at the next Release or Wake, for a
// caller that waits for a change of its own policy (see Wake).
func (b *Budget) Released() <-chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.wakeLocked()
}

// Wake wakes every waiter without giving anything back, for a caller whose
// own policy changed what may be taken (the decompression budget's
// priority holder).
func (b *Budget) Wake() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.wakeAllLocked()
}

// wakeLocked returns the channel the next Release or Wake closes, making
// it when nobody waited yet (so a Release with no waiter allocates
// nothing). b.mu is held.
func (b *Budget) wakeLocked() chan struct{} {
	if b.wake == nil {
		b.wake = make(chan struct{})
	}
	return b.wake
}

// wakeAllLocked closes the waiters' channel, if any; b.mu is held.
func (b *Budget) wakeAllLocked() {
	if b.wake != nil {
		close(b.wake)
		b.wake = nil
	}
}

// InUse returns the bytes taken now.
func (b *Budget) InUse() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used
}

// Taken returns every byte ever taken (Acquire, TryAcquire, TakeUpTo and
// the growth of Resize), for tests and metrics.
func (b *Budget) Taken() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.taken
}
