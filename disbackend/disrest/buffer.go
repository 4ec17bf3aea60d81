package disrest

import (
	"context"
	"time"

	"github.com/disgw/disgw/internal/bytebudget"
)

// buffer counts the bytes of batches waiting for DIS across a Store
// (Options.BufferBytes, the DIS Kafka Adapter's buffer.memory). A batch is
// counted from Append until its Pending completes.
type buffer struct {
	max   int
	bytes bytebudget.Budget // the bytes counted; its own lock
}

func (b *buffer) init(max int) { b.max = max }

// acquire takes n bytes, waiting up to wait for room; false when there was
// none by then. A batch is always let in when nothing waits, however large.
func (b *buffer) acquire(n int, wait time.Duration) bool {
	if b.bytes.TryAcquire(int64(n), int64(b.max)) {
		return true
	}
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	_, err := b.bytes.Acquire(ctx, nil, int64(n), int64(b.max))
	return err == nil
}

func (b *buffer) release(n int) { b.bytes.Release(int64(n)) }

// waiting returns the bytes counted now.
func (b *buffer) waiting() int { return int(b.bytes.InUse()) }
