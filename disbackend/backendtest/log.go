package backendtest

import (
	"bytes"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/disgw/disgw/disbackend"
	"github.com/disgw/disgw/kafkawire/batch"
)

func testAppendRead(t *testing.T, b disbackend.Backend) {
	ctx := ctxT(t)
	mustCreate(t, b, spec(t, "log", 2))
	var batches []stored
	var raws [][]byte
	for i, n := range []int32{1, 5, 2, 10, 1, 3} {
		s := mustAppend(t, b, "log", 1, MakeBatch(BatchOptions{NumRecords: n, RecordBytes: 40 + i, Seed: uint64(i)}))
		if len(batches) > 0 {
			prev := batches[len(batches)-1]
			if want := lastOffset(prev.raw) + 1; s.base != want {
				t.Fatalf("batch %d: base offset %d, want %d", i, s.base, want)
			}
		} else if s.base != 0 {
			t.Fatalf("first batch: base offset %d, want 0", s.base)
		}
		batches = append(batches, s)
		raws = append(raws, s.raw)
	}
	next := lastOffset(raws[len(raws)-1]) + 1
	wantRange(t, b, "log", 1, 0, next)
	wantRange(t, b, "log", 0, 0, 0)
	for i, s := range batches {
		for off := s.base; off <= lastOffset(s.raw); off++ {
			res, err := b.Read(ctx, "log", 1, off, 1<<20)
			if err != nil {
				t.Fatalf("Read(%d): %v", off, err)
			}
			if optsOf(b).RecordLevel {
				if recs := flatten(t, res.Batches); len(recs) == 0 || recs[0].Offset != off {
					t.Fatalf("Read(%d) of a record-level backend does not start at %d", off, off)
				}
			}
			wantBatches(t, b, "Read from inside a batch", res.Batches, raws[i:]...)
			if res.Range != (disbackend.PartitionRange{First: 0, Next: next}) {
				t.Fatalf("Read(%d): range %+v, want [0 : %d]", off, res.Range, next)
			}
			n := 0
			for _, r := range res.Batches {
				n += len(r)
			}
			if res.Bytes != n {
				t.Fatalf("Read(%d): Bytes %d, want %d", off, res.Bytes, n)
			}
		}
	}
	if got := checkContiguous(t, readAll(t, b, "log", 1, 0, 1), 0); got != next {
		t.Fatalf("batches end at %d, want %d", got, next)
	}
}

func testReadMaxBytes(t *testing.T, b disbackend.Backend) {
	ctx := ctxT(t)
	mustCreate(t, b, spec(t, "sizes", 1))
	var raws [][]byte
	for i := 0; i < 4; i++ {
		raws = append(raws, mustAppend(t, b, "sizes", 0, MakeBatch(BatchOptions{NumRecords: 2, RecordBytes: 500 * (i + 1), Seed: uint64(i)})).raw)
	}
	l0, l1, l2 := len(raws[0]), len(raws[1]), len(raws[2])
	for _, tc := range []struct {
		name     string
		offset   int64
		maxBytes int
		want     [][]byte
	}{
		{"one byte still returns one whole batch", 0, 1, raws[:1]},
		{"zero still returns one whole batch", 3, 0, raws[1:2]},
		{"exactly two batches", 0, l0 + l1, raws[:2]},
		{"one byte short of two", 0, l0 + l1 - 1, raws[:1]},
		{"three from the middle", 2, l1 + l2 + len(raws[3]), raws[1:]},
		{"everything", 0, 1 << 30, raws},
	} {
		res, err := b.Read(ctx, "sizes", 0, tc.offset, tc.maxBytes)
		if err != nil {
			t.Fatalf("%s: Read: %v", tc.name, err)
		}
		wantBatches(t, b, tc.name, res.Batches, tc.want...)
	}
}

func testReadEmptyAndOutOfRange(t *testing.T, b disbackend.Backend) {
	ctx := ctxT(t)
	mustCreate(t, b, spec(t, "edges", 1))
	res, err := b.Read(ctx, "edges", 0, 0, 1<<20)
	if err != nil || len(res.Batches) != 0 || res.Bytes != 0 || res.Range != (disbackend.PartitionRange{}) {
		t.Fatalf("Read of empty partition = %+v, %v; want empty, range [0 : 0]", res, err)
	}
	res, err = b.Read(ctx, "edges", 0, 1, 1<<20)
	wantErr(t, "read past next of empty partition", err, disbackend.ErrOffsetOutOfRange)
	mustAppend(t, b, "edges", 0, MakeBatch(BatchOptions{NumRecords: 4}))
	res, err = b.Read(ctx, "edges", 0, 4, 1<<20)
	if err != nil || len(res.Batches) != 0 || res.Range.Next != 4 {
		t.Fatalf("Read at next = %+v, %v; want no batches, next 4", res, err)
	}
	for _, off := range []int64{5, 100, -1} {
		res, err = b.Read(ctx, "edges", 0, off, 1<<20)
		wantErr(t, "read out of range", err, disbackend.ErrOffsetOutOfRange)
		if res.Range != (disbackend.PartitionRange{First: 0, Next: 4}) {
			t.Fatalf("Read(%d) out of range: result range %+v, want [0 : 4]", off, res.Range)
		}
	}
}

// testConcurrentAppends appends from several goroutines to one partition
// and checks the offsets are contiguous with no gaps or overlaps.
func testConcurrentAppends(t *testing.T, b disbackend.Backend) {
	mustCreate(t, b, spec(t, "busy", 2))
	const writers, perWriter = 8, 40
	var mu sync.Mutex
	got := map[int64][]byte{}
	var wg sync.WaitGroup
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			pend := make([]*disbackend.Pending, 0, perWriter)
			wants := make([][]byte, 0, perWriter)
			for i := 0; i < perWriter; i++ {
				bt := MakeBatch(BatchOptions{NumRecords: int32(1 + (w+i)%7), RecordBytes: 30, Seed: uint64(w*1000 + i)})
				wants = append(wants, bytes.Clone(bt.Raw))
				pend = append(pend, b.Append("busy", 0, bt))
			}
			for i, p := range pend {
				res, err := p.Wait(ctxT(t))
				if err != nil {
					t.Errorf("writer %d append %d: %v", w, i, err)
					return
				}
				batch.SetBaseOffset(wants[i], res.BaseOffset)
				mu.Lock()
				if _, dup := got[res.BaseOffset]; dup {
					t.Errorf("offset %d given twice", res.BaseOffset)
				}
				got[res.BaseOffset] = wants[i]
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	offsets := make([]int64, 0, len(got))
	for off := range got {
		offsets = append(offsets, off)
	}
	sort.Slice(offsets, func(i, j int) bool { return offsets[i] < offsets[j] })
	var want [][]byte
	for _, off := range offsets {
		want = append(want, got[off])
	}
	all := readAll(t, b, "busy", 0, 0, 64<<10)
	next := checkContiguous(t, all, 0)
	wantBatches(t, b, "all batches", all, want...)
	wantRange(t, b, "busy", 0, 0, next)
	wantRange(t, b, "busy", 1, 0, 0)
}

// testAppendOrderPerGoroutine checks that batches enqueued by one goroutine,
// without waiting, are applied in call order.
func testAppendOrderPerGoroutine(t *testing.T, b disbackend.Backend) {
	mustCreate(t, b, spec(t, "ordered", 3))
	var pend []*disbackend.Pending
	for i := 0; i < 200; i++ {
		pend = append(pend, b.Append("ordered", int32(i%3), MakeBatch(BatchOptions{NumRecords: 2, Seed: uint64(i)})))
	}
	last := map[int32]int64{0: -1, 1: -1, 2: -1}
	for i, p := range pend {
		res, err := p.Wait(ctxT(t))
		if err != nil {
			t.Fatalf("append %d: %v", i, err)
		}
		part := int32(i % 3)
		if res.BaseOffset != last[part]+1 {
			t.Fatalf("append %d to partition %d: offset %d, want %d (call order)", i, part, res.BaseOffset, last[part]+1)
		}
		last[part] = res.BaseOffset + 1
	}
}

func testChangedWakes(t *testing.T, b disbackend.Backend) {
	mustCreate(t, b, spec(t, "poll", 1))
	ch := b.Changed()
	select {
	case <-ch:
		t.Fatal("Changed closed before anything changed")
	default:
	}
	woke := make(chan int64, 1)
	go func() {
		<-ch
		r, err := b.Range("poll", 0)
		if err != nil {
			t.Errorf("Range after wake-up: %v", err)
		}
		woke <- r.Next
	}()
	time.Sleep(10 * time.Millisecond) // let the waiter park; not needed for correctness
	p := b.Append("poll", 0, MakeBatch(BatchOptions{NumRecords: 3}))
	select {
	case next := <-woke:
		if next != 3 {
			t.Fatalf("woken with next %d, want 3 (the wake-up must follow the synced range)", next)
		}
	case <-time.After(waitTimeout):
		t.Fatal("waiter not woken by an append")
	}
	if _, err := p.Wait(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	waitClosed(t, ch, "Changed")
	ch2 := b.Changed()
	mustAppend(t, b, "poll", 0, MakeBatch(BatchOptions{}))
	waitClosed(t, ch2, "second Changed")
}

func testTimestamps(t *testing.T, b disbackend.Backend) {
	ctx := ctxT(t)
	mustCreate(t, b, spec(t, "times", 2))
	got, err := b.BatchAtTimestamp(ctx, "times", 0, 0)
	if err != nil || got != nil {
		t.Fatalf("BatchAtTimestamp on empty partition = %d bytes, %v; want nil", len(got), err)
	}
	got, err = b.BatchWithMaxTimestamp(ctx, "times", 0)
	if err != nil || got != nil {
		t.Fatalf("BatchWithMaxTimestamp on empty partition = %d bytes, %v; want nil", len(got), err)
	}
	var raws [][]byte
	for i, ts := range [][2]int64{{100, 150}, {120, 300}, {200, 250}, {260, 300}, {270, 280}} {
		raws = append(raws, mustAppend(t, b, "times", 0, MakeBatch(BatchOptions{
			NumRecords: 2, FirstTimestamp: ts[0], MaxTimestamp: ts[1], Seed: uint64(i)})).raw)
	}
	for _, tc := range []struct {
		ts   int64
		want []byte
	}{
		{-1, raws[0]}, {0, raws[0]}, {150, raws[0]}, {151, raws[1]}, {250, raws[1]}, {300, raws[1]}, {301, nil},
	} {
		got, err := b.BatchAtTimestamp(ctx, "times", 0, tc.ts)
		if err != nil {
			t.Fatalf("BatchAtTimestamp(%d): %v", tc.ts, err)
		}
		if !sameBatchAt(t, b, got, tc.want, tc.ts) {
			t.Fatalf("BatchAtTimestamp(%d): got batch at %d (%d bytes), want the one at %d", tc.ts,
				baseOrMinus1(got), len(got), baseOrMinus1(tc.want))
		}
	}
	got, err = b.BatchWithMaxTimestamp(ctx, "times", 0)
	if err != nil || !sameBatchAt(t, b, got, raws[1], 300) {
		t.Fatalf("BatchWithMaxTimestamp = batch at %d, %v; want the first holding 300 (at %d)", baseOrMinus1(got), err, baseOrMinus1(raws[1]))
	}
}

func baseOrMinus1(raw []byte) int64 {
	if raw == nil {
		return -1
	}
	return batch.BaseOffset(raw)
}

func testClose(t *testing.T, b disbackend.Backend) {
	ctx := ctxT(t)
	mustCreate(t, b, spec(t, "closing", 1))
	var pend []*disbackend.Pending
	for i := 0; i < 50; i++ {
		pend = append(pend, b.Append("closing", 0, MakeBatch(BatchOptions{Seed: uint64(i)})))
	}
	if err := b.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	for i, p := range pend {
		select {
		case <-p.Done():
		default:
			t.Fatalf("append %d queued before Close still pending after Close", i)
		}
		if _, err := p.Result(); err != nil {
			t.Fatalf("append %d queued before Close: %v (Close must complete queued appends)", i, err)
		}
	}
	_, err := b.Append("closing", 0, MakeBatch(BatchOptions{})).Wait(ctx)
	wantErr(t, "append after Close", err, disbackend.ErrClosed)
}

// testLogAppendTime checks that a LogAppendTime stream stamps batches with
// the append time: attribute bit 3 set, max timestamp = append time (ms),
// CRC recomputed; the timestamp lookups use that time.
func testLogAppendTime(t *testing.T, b disbackend.Backend) {
	ctx := ctxT(t)
	sp := spec(t, "stamped", 1)
	sp.Config.TimestampType = disbackend.LogAppendTime
	mustCreate(t, b, sp)
	before := time.Now().UnixMilli()
	bt := MakeBatch(BatchOptions{NumRecords: 3, FirstTimestamp: 5, MaxTimestamp: 7})
	if _, err := b.Append("stamped", 0, bt).Wait(ctx); err != nil {
		t.Fatal(err)
	}
	after := time.Now().UnixMilli()
	res, err := b.Read(ctx, "stamped", 0, 0, 1<<20)
	if err != nil || len(res.Batches) != 1 {
		t.Fatalf("Read = %d batches, %v", len(res.Batches), err)
	}
	raw := res.Batches[0]
	h, err := batch.ParseHeader(raw)
	if err != nil {
		t.Fatal(err)
	}
	if !h.LogAppendTime() {
		t.Fatalf("attributes %#x: LogAppendTime bit not set", h.Attributes)
	}
	if maxTS := h.MaxTimestamp; maxTS < before || maxTS > after {
		t.Fatalf("max timestamp %d, want the append time in [%d, %d]", h.MaxTimestamp, before, after)
	}
	if !CheckCRC(raw) {
		t.Fatal("CRC not recomputed after stamping")
	}
	got, err := b.BatchAtTimestamp(ctx, "stamped", 0, before)
	if err != nil || got == nil {
		t.Fatalf("BatchAtTimestamp(append time) = %v, %v; want the batch", got, err)
	}
}
