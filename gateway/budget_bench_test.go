package gateway

import (
	"context"
	"sync"
	"testing"
)

// BenchmarkRequestBudget: taking and giving back a small request's cost
// (4 KiB), as every request does, alone and from 2 goroutines at once.
func BenchmarkRequestBudget(b *testing.B) {
	ctx := context.Background()
	b.Run("uncontended", func(b *testing.B) {
		rb := newRequestBudget(128 << 20)
		b.ReportAllocs()
		for range b.N {
			if _, err := rb.acquire(ctx, nil, 4<<10); err != nil {
				b.Fatal(err)
			}
			rb.release(4 << 10)
		}
	})
	b.Run("2_goroutines", func(b *testing.B) {
		rb := newRequestBudget(128 << 20)
		b.ReportAllocs()
		var wg sync.WaitGroup
		for range 2 {
			wg.Go(func() {
				for range b.N / 2 {
					if _, err := rb.acquire(ctx, nil, 4<<10); err != nil {
						b.Error(err)
						return
					}
					rb.release(4 << 10)
				}
			})
		}
		wg.Wait()
	})
}
