package disrest

import (
	"sync"
	"time"
)

// buffer counts the bytes of batches waiting for DIS across a Store
// (Options.BufferBytes, the DIS Kafka Adapter's buffer.memory). A batch is
// counted from Append until its Pending completes.
type buffer struct {
	max int

	// mu guards used and freed.
	mu    sync.Mutex
	used  int
	freed chan struct{} // closed and replaced when bytes are released
}

func (b *buffer) init(max int) {
	b.max = max
	b.freed = make(chan struct{})
}

// acquire takes n bytes, waiting up to wait for room; false when there was
// none by then. A batch is always let in when nothing waits, however large.
func (b *buffer) acquire(n int, wait time.Duration) bool {
	var t *time.Timer
	for {
		b.mu.Lock()
		if b.used == 0 || b.used+n <= b.max {
			b.used += n
			b.mu.Unlock()
			if t != nil {
				t.Stop()
			}
			return true
		}
		freed := b.freed
		b.mu.Unlock()
		if t == nil {
			t = time.NewTimer(wait)
		}
		select {
		case <-freed:
		case <-t.C:
			return false
		}
	}
}

func (b *buffer) release(n int) {
	b.mu.Lock()
	b.used -= n
	close(b.freed)
	b.freed = make(chan struct{})
	b.mu.Unlock()
}

func (b *buffer) waiting() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used
}
