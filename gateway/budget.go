package gateway

import (
	"context"
	"errors"
	"fmt"

	"github.com/disgw/disgw/internal/bytebudget"
)

// errOverBudget: a request costs more than the request budget could ever
// give it. The connection is closed, as for a frame over max_frame_bytes.
var errOverBudget = errors.New("request larger than the request budget")

// requestBudget bounds the memory of requests being read, decoded and
// answered, across all connections (Kafka queued.max.request.bytes): a
// reader takes a request's cost (kafkawire.RequestCost) before it reads the
// frame's body and gives it back once the response is written, so large
// frames queue instead of all being held at once.
//
// The last reserve bytes are kept for small requests (at most smallBytes
// each), so ApiVersions, Metadata, heartbeats and commits are answered
// while large requests wait.
type requestBudget struct {
	capacity   int64 // bytes
	reserve    int64 // bytes only small requests may take
	smallBytes int64 // a request costing at most this is small

	bytes bytebudget.Budget // the bytes taken; its own lock
}

func newRequestBudget(capacity int64) *requestBudget {
	reserve := capacity / 8
	return &requestBudget{
		capacity:   capacity,
		reserve:    reserve,
		smallBytes: min(reserve/16, 1<<20),
	}
}

// limit is the most a request of cost n may bring the budget's use to.
func (b *requestBudget) limit(n int64) int64 {
	if n <= b.smallBytes {
		return b.capacity
	}
	return b.capacity - b.reserve
}

// maxCostFactor: a request costing more than this many times what large
// requests may take is refused (its connection closed, as for a frame over
// max_frame_bytes) rather than run alone: alone it would still take
// several times the budget.
const maxCostFactor = 3

// refuses reports whether a request costing n is refused outright.
func (b *requestBudget) refuses(n int64) bool { return n > maxCostFactor*(b.capacity-b.reserve) }

// clamp bounds a request's cost by what a large request may take, so a
// request costing more than that waits until it can run alone instead of
// being refused.
func (b *requestBudget) clamp(n int64) int64 { return min(n, b.capacity-b.reserve) }

// acquire takes n bytes, waiting for room until ctx is done or stop is
// closed. Errors: errOverBudget when n could never fit; ctx's error;
// errStopped when stop closed first.
func (b *requestBudget) acquire(ctx context.Context, stop <-chan struct{}, n int64) (waited bool, err error) {
	if n > b.limit(n) {
		return false, fmt.Errorf("%w: the request costs %d bytes, the budget gives at most %d", errOverBudget, n, b.limit(n))
	}
	waited, err = b.bytes.Acquire(ctx, stop, n, b.limit(n))
	if errors.Is(err, bytebudget.ErrStopped) {
		err = errStopped
	}
	return waited, err
}

// takeUpTo takes, without waiting, as much of n bytes as a large request
// may still take, and returns what it took (0 when the budget is full).
func (b *requestBudget) takeUpTo(n int64) int64 { return b.bytes.TakeUpTo(n, b.capacity-b.reserve) }

// grow turns a held reservation of held bytes into one of total bytes
// (total > held): at once when there is room, else it gives held back and
// waits for total, so that readers waiting to grow never hold the budget
// between them. On error nothing is held. Errors as acquire.
func (b *requestBudget) grow(ctx context.Context, stop <-chan struct{}, held, total int64) error {
	if b.bytes.Resize(held, total, b.limit(total)) {
		return nil
	}
	b.release(held)
	_, err := b.acquire(ctx, stop, total)
	return err
}

// release gives n bytes back and wakes the waiting readers.
func (b *requestBudget) release(n int64) { b.bytes.Release(n) }

// inUse returns the bytes taken now.
func (b *requestBudget) inUse() int64 { return b.bytes.InUse() }

var errStopped = errors.New("connection stops reading")
