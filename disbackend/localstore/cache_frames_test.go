package localstore

import (
	"context"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/disgw/disgw/disbackend"
	"github.com/disgw/disgw/disbackend/backendtest"
)

// cacheKept is what the tail caches of every stream keep in memory, as
// tailCache.bytes should count it: each distinct frame once, each batch of
// its own by its length.
func cacheKept(s *Store) (kept, batches int64) {
	frames := map[*disbackend.Frame]bool{}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, st := range s.streams {
		for _, p := range st.parts {
			p.mu.RLock()
			for _, b := range p.cache {
				batches++
				switch {
				case b.frame == nil:
					kept += int64(len(b.raw))
				case !frames[b.frame]:
					frames[b.frame] = true
					kept += int64(b.frame.Size)
				}
			}
			p.mu.RUnlock()
		}
	}
	return kept, batches
}

// TestCacheFrames: batches that alias their Produce request's frame
// (Batch.Frame) count the frame once against the bound of all tail caches
// (CacheBytes) while any of them is cached, and free it when the last one
// leaves: evicted by a partition's bound, by the bound of all, or dropped
// with its stream. Batches of their own count their length.
func TestCacheFrames(t *testing.T) {
	const recBytes = 10 << 10
	s := openT(t, "db", Options{FS: vfs.NewMem(), CacheBytesPerPartition: 5 * recBytes, CacheBytes: 12 * recBytes})
	defer s.Close()
	ctx := context.Background()
	if _, err := s.CreateStream(ctx, disbackend.StreamSpec{Name: "f", TopicName: "f", PartitionCount: 3,
		Config: disbackend.StreamConfig{Retention: disbackend.UnlimitedRetention}}); err != nil {
		t.Fatal(err)
	}
	check := func(what string) {
		t.Helper()
		want, n := cacheKept(s)
		if got := s.cache.bytes.Load(); got != want || s.cache.live.Load() != n {
			t.Fatalf("%s: the caches count %d bytes and %d batches; they keep %d bytes in %d batches", what, got, s.cache.live.Load(), want, n)
		}
		if want > s.cache.total {
			t.Fatalf("%s: the caches keep %d bytes, more than their bound %d", what, want, s.cache.total)
		}
	}
	seed := uint64(0)
	// request appends one frame holding a batch for each of parts (the
	// frame has a few bytes of its own, as a Produce request's header).
	request := func(parts ...int32) {
		t.Helper()
		var bs []disbackend.Batch
		frame := make([]byte, 0, 64)
		frame = append(frame, make([]byte, 64)...)
		var spans [][2]int
		for range parts {
			seed++
			b := backendtest.MakeBatch(backendtest.BatchOptions{NumRecords: 1, RecordBytes: recBytes, Seed: seed})
			spans = append(spans, [2]int{len(frame), len(frame) + len(b.Raw)})
			frame = append(frame, b.Raw...)
			bs = append(bs, b)
		}
		f := &disbackend.Frame{Size: len(frame)}
		var pends []*disbackend.Pending
		for i, part := range parts {
			b := bs[i]
			b.Raw, b.Frame = frame[spans[i][0]:spans[i][1]:spans[i][1]], f
			pends = append(pends, s.Append("f", part, b))
		}
		for _, p := range pends {
			if _, err := p.Wait(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	own := func(part int32) {
		t.Helper()
		seed++
		if _, err := s.Append("f", part, backendtest.MakeBatch(backendtest.BatchOptions{NumRecords: 1, RecordBytes: recBytes, Seed: seed})).Wait(ctx); err != nil {
			t.Fatal(err)
		}
	}

	request(0, 1, 2)
	check("one frame of three batches")
	if got, _ := cacheKept(s); got < 3*recBytes || got > 4*recBytes {
		t.Fatalf("one frame of three batches of %d bytes: %d bytes kept", recBytes, got)
	}
	own(0)
	check("and a batch of its own")
	// Partition 0 alone goes past its bound: its oldest batches leave,
	// the frame stays with partitions 1 and 2.
	for range 6 {
		own(0)
		check("partition 0 past its bound")
	}
	// Frames of one and two batches, until the bound of all evicts.
	for i := range 12 {
		if i%2 == 0 {
			request(1)
		} else {
			request(1, 2)
		}
		check("past the bound of all")
	}
	if err := s.DeleteStream(ctx, "f"); err != nil {
		t.Fatal(err)
	}
	check("stream deleted")
	if s.cache.bytes.Load() != 0 {
		t.Fatalf("stream deleted: the caches count %d bytes", s.cache.bytes.Load())
	}
}
