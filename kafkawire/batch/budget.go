package batch

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/disgw/disgw/internal/bytebudget"
)

// Budget bounds the decompressed bytes that every connection and request
// holds at once, in bytes: a decoder charges what it decompresses as it
// grows (in chunks of at least BudgetChunk) and gives it back when the data
// is dropped. When the budget is spent, Acquire waits for room with the
// caller's context; a request that times out so gets REQUEST_TIMED_OUT
// from the gateway. Safe for concurrent use. A nil *Budget bounds nothing.
type Budget struct {
	total int64
	bytes bytebudget.Budget // the bytes charged; its own lock, taken after mu

	mu   sync.Mutex // guards prio
	prio any        // the holder waiting for room (see acquire), or nil
}

// BudgetChunk is the smallest step, in bytes, by which a decoder grows its
// charge on a Budget (1 MiB), so that a batch of small records takes the
// budget's lock a few times, not once per record.
const BudgetChunk = 1 << 20

// NewBudget returns a budget of total bytes (> 0).
func NewBudget(total int64) *Budget {
	return &Budget{total: total}
}

// Total is the budget's size in bytes; 0 for a nil Budget.
func (b *Budget) Total() int64 {
	if b == nil {
		return 0
	}
	return b.total
}

// InUse is how many bytes are charged now.
func (b *Budget) InUse() int64 {
	if b == nil {
		return 0
	}
	return b.bytes.InUse()
}

// Acquired is how many bytes were ever charged (for tests: how much one
// operation decompressed).
func (b *Budget) Acquired() int64 {
	if b == nil {
		return 0
	}
	return b.bytes.Taken()
}

// Acquire charges n bytes, waiting until they fit. It fails at once when n
// is more than the whole budget (waiting could never end), and with
// ctx.Err() wrapped when ctx ends first.
func (b *Budget) Acquire(ctx context.Context, n int64) error {
	return b.acquire(ctx, n, nil)
}

// errRestart tells a decoding that holds part of the budget and needs more
// to give back what it holds and start again: another holder is already
// waiting for room (see acquire).
var errRestart = errors.New("batch: decompression budget: give back and restart")

// acquire is Acquire for holder, a decoding that already holds part of
// the budget (nil: one that holds nothing). Waiting while holding could
// deadlock (every decoding holding a part, each waiting for another's), so
// at most one holder waits: the first to need room becomes the priority
// holder, and until it is served nobody else takes from the budget; a
// second holder that needs room gets errRestart, gives back what it holds
// and waits as a decoding that holds nothing.
func (b *Budget) acquire(ctx context.Context, n int64, holder any) error {
	if b == nil || n <= 0 {
		return nil
	}
	if n > b.total {
		return fmt.Errorf("%w: %d bytes is more than the whole decompression budget of %d bytes", ErrDecompressedTooLarge, n, b.total)
	}
	for {
		b.mu.Lock()
		var room <-chan struct{}
		if b.prio == nil || b.prio == holder {
			var ok bool
			if ok, room = b.bytes.TryAcquireOrWait(n, b.total); ok {
				if b.prio != nil {
					b.prio = nil
					b.bytes.Wake() // the others may take again
				}
				b.mu.Unlock()
				return nil
			}
			if holder != nil {
				b.prio = holder
			}
		} else if holder != nil {
			b.mu.Unlock()
			return errRestart
		} else {
			room = b.bytes.Released()
		}
		b.mu.Unlock()
		select {
		case <-room:
		case <-ctx.Done():
			b.mu.Lock()
			if holder != nil && b.prio == holder {
				b.prio = nil
				b.bytes.Wake()
			}
			b.mu.Unlock()
			return fmt.Errorf("%w: waiting for %d bytes of the decompression budget (%d bytes): %w", ErrBudgetWait, n, b.total, ctx.Err())
		}
	}
}

// waitNoPriority waits until no holder has priority, for a decoding that
// gave everything back after errRestart.
func (b *Budget) waitNoPriority(ctx context.Context) error {
	for b != nil {
		b.mu.Lock()
		if b.prio == nil {
			b.mu.Unlock()
			return nil
		}
		room := b.bytes.Released()
		b.mu.Unlock()
		select {
		case <-room:
		case <-ctx.Done():
			return fmt.Errorf("%w: waiting for the decompression budget (%d bytes): %w", ErrBudgetWait, b.total, ctx.Err())
		}
	}
	return nil
}

// Release gives back n bytes charged by Acquire. It panics when more is
// given back than was charged.
func (b *Budget) Release(n int64) {
	if b == nil || n <= 0 {
		return
	}
	b.bytes.Release(n)
}

// Limits bound one batch's decompression.
type Limits struct {
	// MaxBytes is the most bytes the batch's records may decompress to
	// (the topic's max.decompressed.message.bytes); <= 0 or more than
	// MaxDecompressedBytes means MaxDecompressedBytes. Exceeding it is
	// ErrDecompressedTooLarge, found while decompressing.
	MaxBytes int64
	// Budget is charged with the decompressed data while it is held; nil
	// charges nothing.
	Budget *Budget
}

func (l Limits) maxBytes() int64 {
	if l.MaxBytes <= 0 || l.MaxBytes > MaxDecompressedBytes {
		return MaxDecompressedBytes
	}
	return l.MaxBytes
}

// Hold is decompressed data charged to a Budget, held by whoever keeps the
// records that alias it. Release gives it back; call it once the records
// are dropped. The zero Hold holds nothing.
type Hold struct {
	b *Budget
	n int64
}

// Bytes is how many bytes the hold charges.
func (h Hold) Bytes() int64 { return h.n }

// Release gives the hold's bytes back to its budget. Call it once.
func (h Hold) Release() { h.b.Release(h.n) }

// charger charges one decoding's memory to a budget in chunks of at least
// BudgetChunk.
type charger struct {
	ctx      context.Context
	b        *Budget
	reserved int64 // acquired from b
	used     int64 // of reserved, what the decoding holds now
}

// charge counts n more bytes held, acquiring more of the budget as needed.
func (c *charger) charge(n int64) error {
	if c.b == nil || n <= 0 {
		c.used += n
		return nil
	}
	if c.used+n > c.reserved {
		need := c.used + n - c.reserved
		if c.reserved+need > c.b.total {
			return fmt.Errorf("%w: %d bytes is more than the whole decompression budget of %d bytes", ErrDecompressedTooLarge, c.used+n, c.b.total)
		}
		more := max(need, BudgetChunk)
		if c.reserved+more > c.b.total {
			more = need // the chunk would not fit; the exact need does
		}
		var holder any
		if c.reserved > 0 {
			holder = c
		}
		if err := c.b.acquire(c.ctx, more, holder); err != nil {
			return err
		}
		c.reserved += more
	}
	c.used += n
	return nil
}

// hold returns what is used as a Hold and gives the rest of the
// reservation back.
func (c *charger) hold() Hold {
	c.b.Release(c.reserved - c.used)
	c.reserved = c.used
	if c.b == nil {
		return Hold{}
	}
	return Hold{b: c.b, n: c.used}
}

// releaseAll gives everything back (the data is dropped).
func (c *charger) releaseAll() {
	c.b.Release(c.reserved)
	c.reserved, c.used = 0, 0
}
