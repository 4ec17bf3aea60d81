package batch

import (
	"context"
	"sync"
	"testing"
)

// BenchmarkBudget: charging and giving back one chunk (BudgetChunk), as a
// decoding of a compressed batch does, alone and from 2 goroutines at once.
func BenchmarkBudget(b *testing.B) {
	ctx := context.Background()
	b.Run("uncontended", func(b *testing.B) {
		bud := NewBudget(256 << 20)
		b.ReportAllocs()
		for range b.N {
			if err := bud.Acquire(ctx, BudgetChunk); err != nil {
				b.Fatal(err)
			}
			bud.Release(BudgetChunk)
		}
	})
	b.Run("2_goroutines", func(b *testing.B) {
		bud := NewBudget(256 << 20)
		b.ReportAllocs()
		var wg sync.WaitGroup
		for range 2 {
			wg.Go(func() {
				for range b.N / 2 {
					if err := bud.Acquire(ctx, BudgetChunk); err != nil {
						b.Error(err)
						return
					}
					bud.Release(BudgetChunk)
				}
			})
		}
		wg.Wait()
	})
}
