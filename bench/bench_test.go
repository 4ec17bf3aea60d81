package bench

import (
	"context"
	"testing"
	"time"
)

// BenchmarkProduce: b.N records of 1 KiB random bytes to a 3-partition
// topic, async Produce with at most window unacknowledged, then Flush;
// acks=all, idempotent, no compression. disgw acknowledges only after
// localstore synced the batch.
func BenchmarkProduce(b *testing.B) {
	for _, name := range targetNames {
		b.Run(name, func(b *testing.B) {
			t := startTarget(b, name)
			cl := newClient(b, t.addr)
			defer cl.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
			defer cancel()
			values() // generate the random values before timing
			b.SetBytes(valueSize)
			b.ReportAllocs()
			stopProfile := profileTimed(b)
			b.ResetTimer()
			got, err := produce(ctx, cl, t.topic, b.N)
			b.StopTimer()
			stopProfile()
			if err != nil {
				b.Fatal(err)
			}
			if want := expected(b.N); got != want {
				b.Fatalf("acknowledged %+v, want %+v", got, want)
			}
		})
	}
}

// BenchmarkFetch: b.N records are produced (untimed, as in
// BenchmarkProduce), then a fresh consumer reads them all from the start;
// only the reading is timed: the consumer's metadata, offset lookup and
// fetches.
func BenchmarkFetch(b *testing.B) {
	for _, name := range targetNames {
		b.Run(name, func(b *testing.B) {
			t := startTarget(b, name)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
			defer cancel()
			prod := newClient(b, t.addr)
			want, err := produce(ctx, prod, t.topic, b.N)
			prod.Close()
			if err != nil {
				b.Fatal(err)
			}
			b.SetBytes(valueSize)
			b.ReportAllocs()
			stopProfile := profileTimed(b)
			b.ResetTimer()
			// A consuming client starts fetching as soon as it exists, so
			// it is created inside the timed section.
			cons := newClient(b, t.addr, consumerOpts(t.topic)...)
			got, err := consume(ctx, cons, b.N)
			b.StopTimer()
			stopProfile()
			cons.Close()
			if err != nil {
				b.Fatal(err)
			}
			if got != want {
				b.Fatalf("read %+v, want %+v", got, want)
			}
		})
	}
}
