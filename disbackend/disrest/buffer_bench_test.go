package disrest

import (
	"sync"
	"testing"
	"time"
)

// BenchmarkBuffer: counting a small batch (4 KiB) into the Store's buffer
// and out again, as every Append does, alone and from 2 goroutines at once.
func BenchmarkBuffer(b *testing.B) {
	b.Run("uncontended", func(b *testing.B) {
		var buf buffer
		buf.init(64 << 20)
		b.ReportAllocs()
		for range b.N {
			if !buf.acquire(4<<10, time.Second) {
				b.Fatal("no room")
			}
			buf.release(4 << 10)
		}
	})
	b.Run("2_goroutines", func(b *testing.B) {
		var buf buffer
		buf.init(64 << 20)
		b.ReportAllocs()
		var wg sync.WaitGroup
		for range 2 {
			wg.Go(func() {
				for range b.N / 2 {
					if !buf.acquire(4<<10, time.Second) {
						b.Error("no room")
						return
					}
					buf.release(4 << 10)
				}
			})
		}
		wg.Wait()
	})
}
