package localstore

import (
	"bytes"
	"context"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"
	"unsafe"

	"github.com/cockroachdb/pebble/v2/vfs"
	"go.uber.org/zap"

	"github.com/disgw/disgw/disbackend"
	"github.com/disgw/disgw/disbackend/backendtest"
	"github.com/disgw/disgw/kafkawire/batch"
)

// acked is one acknowledged batch, as stored (base offset set).
type acked struct {
	part       int32
	base, last int64
	raw        []byte
	idem       bool
	pid        int64
	seq        int32
	records    int32
}

// ackLog collects acknowledged batches from several goroutines.
type ackLog struct {
	mu   sync.Mutex
	acks []acked
}

func (l *ackLog) add(a acked) {
	l.mu.Lock()
	l.acks = append(l.acks, a)
	l.mu.Unlock()
}

// snapshot returns the acks so far, by partition in offset order.
func (l *ackLog) snapshot() map[int32][]acked {
	l.mu.Lock()
	defer l.mu.Unlock()
	return byPart(l.acks)
}

func byPart(acks []acked) map[int32][]acked {
	out := map[int32][]acked{}
	for _, a := range acks {
		out[a.part] = append(out[a.part], a)
	}
	for _, l := range out {
		slices.SortFunc(l, func(a, b acked) int { return int(a.base - b.base) })
	}
	return out
}

// idemBatch is an idempotent batch of n records of size bytes each.
func idemBatch(pid int64, seq int32, n int32, size int, seed uint64) disbackend.Batch {
	return backendtest.MakeBatch(backendtest.BatchOptions{NumRecords: n, RecordBytes: size, Seed: seed,
		FirstTimestamp: 1_700_000_000_000 + int64(seed), Idempotent: true, ProducerID: pid, BaseSequence: seq})
}

// writeLoad appends until stop is closed: two plain appenders on
// partitions 0-2 and an idempotent one (producer pid) on partition 3, each
// with a few batches in flight, recording every acknowledgement in l.
func writeLoad(t *testing.T, s *Store, stream string, pid int64, l *ackLog, stop <-chan struct{}) *sync.WaitGroup {
	var wg sync.WaitGroup
	ctx := context.Background()
	type inflight struct {
		p *disbackend.Pending
		a acked
	}
	run := func(w int, idem bool) {
		defer wg.Done()
		rng := rand.New(rand.NewPCG(uint64(w), 11))
		var q []inflight
		seq := int32(0)
		for i := 0; ; i++ {
			select {
			case <-stop:
				for _, f := range q {
					_, _ = f.p.Wait(ctx)
				}
				return
			default:
			}
			n := int32(1 + rng.IntN(6))
			size := 1 + rng.IntN(400)
			if rng.IntN(20) == 0 {
				size = 1500 // a batch larger than the index interval
			}
			var b disbackend.Batch
			a := acked{records: n}
			if idem {
				b = idemBatch(pid, seq, n, size, uint64(w)<<32|uint64(i))
				a.part, a.idem, a.pid, a.seq = 3, true, pid, seq
				seq += n
			} else {
				b = backendtest.MakeBatch(backendtest.BatchOptions{NumRecords: n, RecordBytes: size, Seed: uint64(w)<<32 | uint64(i),
					FirstTimestamp: 1_700_000_000_000 + int64(i)})
				a.part = int32(rng.IntN(3))
			}
			a.raw = append([]byte(nil), b.Raw...)
			q = append(q, inflight{p: s.Append(stream, a.part, b), a: a})
			// The idempotent appender keeps at most 4 batches in flight
			// (at most 3 after waiting), so its last acknowledged batch is
			// always among the last 5 an image holds.
			for len(q) > 3 || (len(q) > 0 && rng.IntN(3) == 0) {
				f := q[0]
				q = q[1:]
				res, err := f.p.Wait(ctx)
				if err != nil {
					t.Errorf("append: %v", err)
					return
				}
				f.a.base = res.BaseOffset
				f.a.last = res.BaseOffset + int64(f.a.records) - 1
				batch.SetBaseOffset(f.a.raw, res.BaseOffset)
				l.add(f.a)
			}
		}
	}
	wg.Add(3)
	go run(0, false)
	go run(1, false)
	go run(2, true)
	return &wg
}

// checkAcked checks that every acknowledged batch is readable at its offset,
// byte for byte, that each partition reads back contiguous from its first
// offset, and that the idempotent producer's last acknowledged batch is
// still a duplicate.
func checkAcked(t *testing.T, s *Store, stream string, acks map[int32][]acked) {
	t.Helper()
	ctx := context.Background()
	for part, list := range acks {
		for _, a := range list {
			res, err := s.Read(ctx, stream, part, a.base, 1)
			if err != nil || len(res.Batches) == 0 {
				t.Fatalf("partition %d: read at %d: %d batches, %v", part, a.base, len(res.Batches), err)
			}
			if !bytes.Equal(res.Batches[0], a.raw) {
				t.Fatalf("partition %d: the batch at %d differs from the one acknowledged", part, a.base)
			}
		}
		r, err := s.Range(stream, part)
		if err != nil {
			t.Fatal(err)
		}
		if last := list[len(list)-1].last; r.Next <= last {
			t.Fatalf("partition %d: next %d, but %d was acknowledged", part, r.Next, last)
		}
		for off := r.First; off < r.Next; {
			res, err := s.Read(ctx, stream, part, off, 1<<16)
			if err != nil || len(res.Batches) == 0 {
				t.Fatalf("partition %d: read at %d below next %d: %d batches, %v", part, off, r.Next, len(res.Batches), err)
			}
			for _, raw := range res.Batches {
				if b := batch.BaseOffset(raw); b != off {
					t.Fatalf("partition %d: batch at %d where %d was expected", part, b, off)
				}
				off = batch.LastOffset(raw) + 1
			}
		}
	}
	if list := acks[3]; len(list) > 0 {
		a := list[len(list)-1]
		b := backendtest.FromRaw(append([]byte(nil), a.raw...))
		res, err := s.Append(stream, 3, b).Wait(ctx)
		if err != nil || !res.Duplicate || res.BaseOffset != a.base {
			t.Fatalf("retry of the last acknowledged idempotent batch (at %d): %+v, %v; want a duplicate", a.base, res, err)
		}
	}
}

func createStream(t *testing.T, s *Store, name string, parts int32) {
	t.Helper()
	if _, err := s.CreateStream(context.Background(), disbackend.StreamSpec{Name: name, TopicName: name, PartitionCount: parts,
		Config: disbackend.StreamConfig{Retention: disbackend.UnlimitedRetention}}); err != nil {
		t.Fatal(err)
	}
}

// TestIndexLookups checks every read path of the index against a model, on
// interleaved partitions with batches smaller and larger than the index
// interval, in the active segment (chunks in memory) and after a restart
// (index files): Read at every offset with several byte limits,
// BatchAtTimestamp at every timestamp, BatchWithMaxTimestamp,
// PartitionBytes and retention after DeleteRecords moved first into a
// segment.
func TestIndexLookups(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	fs := vfs.NewMem()
	opts := Options{FS: fs, SegmentBytes: 64 << 10, CacheBytesPerPartition: -1, CleanerInterval: -1}
	s := openT(t, "db", opts)
	createStream(t, s, "l", 3)
	rng := rand.New(rand.NewPCG(5, 6))
	var all []acked
	ts := map[int64]int64{} // batch base -> max timestamp, partition 0
	for i := 0; i < 600; i++ {
		part := int32(rng.IntN(3))
		size := 1 + rng.IntN(300)
		if rng.IntN(10) == 0 {
			size = 5000
		}
		// timestamps mostly rise, sometimes fall back
		t0 := int64(1_000_000 + i*10 - rng.IntN(3)*25)
		b := backendtest.MakeBatch(backendtest.BatchOptions{NumRecords: int32(1 + rng.IntN(3)), RecordBytes: size, Seed: uint64(i), FirstTimestamp: t0})
		raw := append([]byte(nil), b.Raw...)
		res, err := s.Append("l", part, b).Wait(ctx)
		if err != nil {
			t.Fatal(err)
		}
		batch.SetBaseOffset(raw, res.BaseOffset)
		all = append(all, acked{part: part, base: res.BaseOffset, last: batch.LastOffset(raw), raw: raw})
		if part == 0 {
			ts[res.BaseOffset] = t0
		}
	}
	model := byPart(all)
	check := func(s *Store, what string, first map[int32]int64) {
		t.Helper()
		for part, list := range model {
			var kept []acked
			for _, a := range list {
				if a.last >= first[part] {
					kept = append(kept, a)
				}
			}
			var size int64
			for _, a := range kept {
				size += int64(len(a.raw))
			}
			if n, _ := s.PartitionBytes("l", part); n != size {
				t.Fatalf("%s: partition %d: PartitionBytes %d, want %d", what, part, n, size)
			}
			for i, a := range kept {
				for _, maxBytes := range []int{1, 700, 1 << 20} {
					for _, off := range []int64{max(a.base, first[part]), a.last} {
						res, err := s.Read(ctx, "l", part, off, maxBytes)
						if err != nil || len(res.Batches) == 0 || !bytes.Equal(res.Batches[0], a.raw) {
							t.Fatalf("%s: partition %d: read at %d (max %d): %d batches, %v", what, part, off, maxBytes, len(res.Batches), err)
						}
						n := 0
						for j, raw := range res.Batches {
							if !bytes.Equal(raw, kept[i+j].raw) {
								t.Fatalf("%s: partition %d: read at %d: batch %d differs", what, part, off, j)
							}
							n += len(raw)
						}
						if want := i + len(res.Batches); want < len(kept) && n+len(kept[want].raw) <= maxBytes {
							t.Fatalf("%s: partition %d: read at %d (max %d) stopped at %d bytes before a batch that fits", what, part, off, maxBytes, n)
						}
					}
				}
			}
			if part != 0 {
				continue
			}
			var maxTS int64 = -1
			var maxAt int64
			for _, a := range kept {
				if ts[a.base] > maxTS {
					maxTS, maxAt = ts[a.base], a.base
				}
			}
			raw, err := s.BatchWithMaxTimestamp(ctx, "l", 0)
			if err != nil || raw == nil || batch.BaseOffset(raw) != maxAt {
				t.Fatalf("%s: BatchWithMaxTimestamp: %d, %v; want %d", what, baseOf(raw), err, maxAt)
			}
			for q := int64(999_000); q <= 1_000_000+6000+10; q += 7 {
				want := int64(-1)
				for _, a := range kept {
					if ts[a.base] >= q {
						want = max(a.base, first[0])
						break
					}
				}
				raw, err := s.BatchAtTimestamp(ctx, "l", 0, q)
				got := int64(-1)
				if raw != nil {
					got = max(batch.BaseOffset(raw), first[0])
				}
				if err != nil || got != want {
					t.Fatalf("%s: BatchAtTimestamp(%d) = batch at %d, %v; want %d", what, q, got, err, want)
				}
			}
		}
	}
	first := map[int32]int64{}
	check(s, "active", first)
	s = reopen(t, s, opts)
	check(s, "sealed", first)
	// DeleteRecords into the middle of a segment, at a batch's second record.
	for part, list := range model {
		a := list[len(list)/2]
		first[part] = a.base + (a.last-a.base)/2
		if _, err := s.DeleteRecords(ctx, "l", part, first[part]); err != nil {
			t.Fatal(err)
		}
	}
	check(s, "after DeleteRecords", first)
	s = reopen(t, s, opts)
	check(s, "after DeleteRecords and a restart", first)
	_ = s.Close()
}

// TestMemoryIndependentOfStored writes one-record batches at two sizes to a
// store on disk, restarts it, and checks that the live heap after the
// restart does not grow with what is stored (nor, beyond the tail cache and
// the active segments' bounded index, while writing).
func TestMemoryIndependentOfStored(t *testing.T) {
	sizes := []int{200_000, 1_000_000}
	if testing.Short() {
		sizes = sizes[:1]
	}
	measure := func(n int) (written, restarted int64) {
		dir := t.TempDir()
		opts := Options{Logger: zap.NewNop(), RetentionCheckInterval: -1, CleanerInterval: -1}
		base := int64(heapAfterGC())
		s, err := Open(dir, opts)
		if err != nil {
			t.Fatal(err)
		}
		benchCreate1(t, s, "m")
		fillSmall(t, s, "m", 0, n, 1_700_000_000_000)
		written = int64(heapAfterGC()) - base
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		if s, err = Open(dir, opts); err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		if r, _ := s.Range("m", 0); r.Next != int64(n) {
			t.Fatalf("%d batches after the restart, want %d", r.Next, n)
		}
		restarted = int64(heapAfterGC()) - base
		t.Logf("%d batches: heap %d KiB while writing, %d KiB after a restart", n, written>>10, restarted>>10)
		return written, restarted
	}
	smallW, smallR := measure(10_000)
	const slack = 4 << 20
	for _, n := range sizes {
		w, r := measure(n)
		if r > smallR+slack {
			t.Errorf("%d batches: heap after a restart %d KiB, %d KiB with 10,000; want no growth with what is stored", n, r>>10, smallR>>10)
		}
		if limit := smallW + defaultPartitionCache + maxActiveChunks*int64(unsafe.Sizeof(chunk{})) + slack; w > limit {
			t.Errorf("%d batches: heap while writing %d KiB, want at most %d KiB (10,000: %d KiB, plus the tail cache and the active index)",
				n, w>>10, limit>>10, smallW>>10)
		}
	}
}

// TestRetentionInsideSegment: retention moves each partition's first to the
// batch after the last one appended before the cutoff, found through the
// chunks' running append times, inside a segment and across chunks, in
// the active segment and from the index files after a restart.
func TestRetentionInsideSegment(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clock := backendtest.NewFakeClock(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	fs := vfs.NewMem()
	opts := Options{FS: fs, Now: clock.Now, SegmentBytes: 256 << 10, CacheBytesPerPartition: -1, CleanerInterval: -1}
	s := openT(t, "db", opts)
	if _, err := s.CreateStream(ctx, disbackend.StreamSpec{Name: "r", TopicName: "r", PartitionCount: 2,
		Config: disbackend.StreamConfig{Retention: time.Hour}}); err != nil {
		t.Fatal(err)
	}
	// At minute i, a batch to partition 0 and, every fifth minute, one to
	// partition 1: partition 0's frames come in runs of five minutes, so a
	// cut falls inside its chunks.
	var model [2][]int64 // by minute, the base of the first batch at or after it
	for i := 0; i < 400; i++ {
		for p := int32(0); p < 2; p++ {
			if p == 1 && i%5 != 0 {
				model[p] = append(model[p], -1)
				continue
			}
			res, err := s.Append("r", p, backendtest.MakeBatch(backendtest.BatchOptions{NumRecords: 2, RecordBytes: 40, Seed: uint64(i)})).Wait(ctx)
			if err != nil {
				t.Fatal(err)
			}
			model[p] = append(model[p], res.BaseOffset)
		}
		clock.Advance(time.Minute)
	}
	model[1][399] = model[1][395] + 2 // none after minute 395: first moves to next
	for i := 398; i >= 0; i-- {
		if model[1][i] < 0 {
			model[1][i] = model[1][i+1]
		}
	}
	start := clock.Now().Add(-400 * time.Minute)
	for _, cut := range []int{5, 37, 38, 150, 151, 399} {
		if cut == 150 {
			s = reopen(t, s, opts)
		}
		// Batches of minute < cut expire: the clock is an hour after minute cut.
		clock.Set(start.Add(time.Duration(cut)*time.Minute + time.Hour))
		if err := s.EnforceRetention(); err != nil {
			t.Fatal(err)
		}
		for p := int32(0); p < 2; p++ {
			r, _ := s.Range("r", p)
			if want := model[p][cut]; r.First != want {
				t.Fatalf("cut at minute %d: partition %d first %d, want %d", cut, p, r.First, want)
			}
			if r.First == r.Next {
				continue
			}
			res, err := s.Read(ctx, "r", p, r.First, 1)
			if err != nil || len(res.Batches) == 0 || batch.BaseOffset(res.Batches[0]) != r.First {
				t.Fatalf("cut at minute %d: partition %d: read at first: %d batches, %v", cut, p, len(res.Batches), err)
			}
		}
	}
	_ = s.Close()
}

// TestSeekOffset reads at offsets all along a sealed segment of many
// chunks whose batches are unevenly sized (one region of large batches
// among small ones), so that the interpolated windows of seekOffset miss
// and narrow, and checks each read starts at the batch holding the
// offset.
func TestSeekOffset(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	opts := Options{FS: vfs.NewMem(), CacheBytesPerPartition: -1, CleanerInterval: -1}
	s := openT(t, "db", opts)
	createStream(t, s, "k", 1)
	var bases []int64
	var q []*disbackend.Pending
	for i := 0; i < 12000; i++ {
		n, size := int32(1), 10
		switch {
		case i >= 3000 && i < 3300:
			size = 3000 // a region of large batches
		case i%97 == 0:
			n = 50 // and some batches of many records
		}
		q = append(q, s.Append("k", 0, backendtest.MakeBatch(backendtest.BatchOptions{NumRecords: n, RecordBytes: size, Seed: uint64(i)})))
	}
	for _, p := range q {
		res, err := p.Wait(ctx)
		if err != nil {
			t.Fatal(err)
		}
		bases = append(bases, res.BaseOffset)
	}
	s = reopen(t, s, opts)
	defer s.Close()
	if sv := sealedView(s.streams["k"].parts[0].segs[0]); sv.n <= 4*seekWindow {
		t.Fatalf("%d chunks; want many more than a window", sv.n)
	}
	r, _ := s.Range("k", 0)
	for off := int64(0); off < r.Next; off += 7 {
		i, _ := slices.BinarySearch(bases, off+1)
		want := bases[i-1]
		res, err := s.Read(ctx, "k", 0, off, 1)
		if err != nil || len(res.Batches) != 1 || batch.BaseOffset(res.Batches[0]) != want {
			t.Fatalf("read at %d: %d batches, %v; want the batch at %d", off, len(res.Batches), err, want)
		}
	}
}
