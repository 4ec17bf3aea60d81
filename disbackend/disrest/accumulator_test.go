package disrest

import (
	"bytes"
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/disgw/disgw/disbackend"
	"github.com/disgw/disgw/disbackend/backendtest"
	"github.com/disgw/disgw/disbackend/dislocal"
)

func putRecordsCount(srv *dislocal.Server) int64 { return srv.Stats().Requests["SendRecords"] }

// TestAccumulatorMerges: appends queued within the linger window share
// PutRecords; each gets its own first sequence number, in order, and the
// records read back in that order.
func TestAccumulatorMerges(t *testing.T) {
	t.Parallel()
	srv, url := startDIS(t, dislocal.Options{})
	s := newStore(t, url, func(o *Options) { o.Linger = 200 * time.Millisecond })
	stream := mkStream(t, s, "acc", 1)
	const n, per = 50, 3
	before := putRecordsCount(srv)
	var pend []*disbackend.Pending
	var batches []disbackend.Batch
	for i := range n {
		b := backendtest.MakeBatch(backendtest.BatchOptions{NumRecords: per, Seed: uint64(i + 1)})
		batches = append(batches, b)
		pend = append(pend, s.Append(stream, 0, backendtest.FromRaw(bytes.Clone(b.Raw))))
	}
	for i, p := range pend {
		res, err := p.Wait(ctxT(t))
		if err != nil || res.BaseOffset != int64(per*i) {
			t.Fatalf("append %d = %+v, %v; want offset %d", i, res, err, per*i)
		}
	}
	puts := putRecordsCount(srv) - before
	t.Logf("%d appends of %d records: %d PutRecords", n, per, puts)
	if puts > 3 {
		t.Fatalf("%d appends within the linger cost %d PutRecords, want at most 3", n, puts)
	}
	got := readBack(t, s, stream, 0, 0)
	if len(got) != n*per {
		t.Fatalf("%d records back, want %d", len(got), n*per)
	}
	for i, b := range batches {
		want, _ := backendtest.DecodeRecords(b.Raw)
		for j := range want {
			if r := got[i*per+j]; r.Offset != int64(i*per+j) || !bytes.Equal(r.Value, want[j].Value) {
				t.Fatalf("record %d of append %d: offset %d value %q, want %q", j, i, r.Offset, r.Value, want[j].Value)
			}
		}
	}

	// From many goroutines: every append's records contiguous, all offsets
	// used once.
	before = putRecordsCount(srv)
	var wg sync.WaitGroup
	offs := make([]int64, n)
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			res, err := s.Append(stream, 0, backendtest.MakeBatch(backendtest.BatchOptions{NumRecords: per, Seed: uint64(i)})).Wait(ctxT(t))
			offs[i], errs[i] = res.BaseOffset, err
		})
	}
	wg.Wait()
	seen := map[int64]bool{}
	for i := range n {
		if errs[i] != nil || offs[i] < n*per || (offs[i]-n*per)%per != 0 || seen[offs[i]] {
			t.Fatalf("concurrent append %d: offset %d, %v", i, offs[i], errs[i])
		}
		seen[offs[i]] = true
	}
	puts = putRecordsCount(srv) - before
	t.Logf("%d concurrent appends of %d records: %d PutRecords", n, per, puts)
	if puts > 5 {
		t.Fatalf("%d concurrent appends cost %d PutRecords", n, puts)
	}
}

// TestAccumulatorFullBatch: records that fill a PutRecords are sent before
// the linger ends; a batch larger than BatchCount is split.
func TestAccumulatorFullBatch(t *testing.T) {
	t.Parallel()
	srv, url := startDIS(t, dislocal.Options{})
	s := newStore(t, url, func(o *Options) { o.Linger = time.Hour; o.BatchCount = 10 })
	stream := mkStream(t, s, "full", 1)
	before := putRecordsCount(srv)
	var pend []*disbackend.Pending
	for i := range 5 {
		pend = append(pend, s.Append(stream, 0, backendtest.MakeBatch(backendtest.BatchOptions{NumRecords: 2, Seed: uint64(i)})))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for i, p := range pend {
		if res, err := p.Wait(ctx); err != nil || res.BaseOffset != int64(2*i) {
			t.Fatalf("append %d of a full batch = %+v, %v (linger is an hour)", i, res, err)
		}
	}
	if puts := putRecordsCount(srv) - before; puts != 1 {
		t.Fatalf("a full batch cost %d PutRecords, want 1", puts)
	}
	// 25 records in one append: sent at once in three PutRecords.
	before = putRecordsCount(srv)
	if res, err := s.Append(stream, 0, backendtest.MakeBatch(backendtest.BatchOptions{NumRecords: 25})).Wait(ctx); err != nil || res.BaseOffset != 10 {
		t.Fatalf("large append = %+v, %v", res, err)
	}
	if puts := putRecordsCount(srv) - before; puts != 3 {
		t.Fatalf("25 records at batch count 10 cost %d PutRecords, want 3", puts)
	}
}

// TestAccumulatorIdempotent: an idempotent producer's consecutive batches
// share a PutRecords; a retry queued behind its original is answered as a
// duplicate with the original's offset.
func TestAccumulatorIdempotent(t *testing.T) {
	t.Parallel()
	srv, url := startDIS(t, dislocal.Options{})
	s := newStore(t, url, func(o *Options) { o.Linger = 200 * time.Millisecond })
	stream := mkStream(t, s, "idem", 1)
	mk := func(seq int32) disbackend.Batch {
		return backendtest.MakeBatch(backendtest.BatchOptions{NumRecords: 2, Idempotent: true, ProducerID: 7, BaseSequence: seq, Seed: uint64(seq)})
	}
	before := putRecordsCount(srv)
	var pend []*disbackend.Pending
	for i := range 5 {
		pend = append(pend, s.Append(stream, 0, mk(int32(2*i))))
	}
	retry := s.Append(stream, 0, mk(2))
	bad := s.Append(stream, 0, mk(100))
	for i, p := range pend {
		if res, err := p.Wait(ctxT(t)); err != nil || res.BaseOffset != int64(2*i) || res.Duplicate {
			t.Fatalf("append %d = %+v, %v", i, res, err)
		}
	}
	if res, err := retry.Wait(ctxT(t)); err != nil || !res.Duplicate || res.BaseOffset != 2 {
		t.Fatalf("retry = %+v, %v; want the duplicate of offset 2", res, err)
	}
	if _, err := bad.Wait(ctxT(t)); !errors.Is(err, disbackend.ErrOutOfOrderSequence) {
		t.Fatalf("sequence gap: %v", err)
	}
	if puts := putRecordsCount(srv) - before; puts > 2 {
		t.Fatalf("5 consecutive idempotent batches cost %d PutRecords", puts)
	}
}

// TestBufferBackpressure: with the buffer full, Append blocks until the
// waiting batches are sent, and past BufferWait fails with ErrUnavailable.
func TestBufferBackpressure(t *testing.T) {
	t.Parallel()
	_, url := startDIS(t, dislocal.Options{})
	b := backendtest.MakeBatch(backendtest.BatchOptions{NumRecords: 1})
	// A long linger keeps the first batch waiting: the second one blocks
	// in Append until BufferWait ends.
	s := newStore(t, url, func(o *Options) {
		o.Linger = time.Hour
		o.BufferBytes = len(b.Raw)
		o.BufferWait = 50 * time.Millisecond
	})
	stream := mkStream(t, s, "buf", 1)
	first := s.Append(stream, 0, b)
	second := s.Append(stream, 0, backendtest.MakeBatch(backendtest.BatchOptions{NumRecords: 1}))
	select {
	case <-second.Done():
	default:
		t.Fatal("an append beyond the buffer returned pending")
	}
	if _, err := second.Result(); !errors.Is(err, disbackend.ErrUnavailable) {
		t.Fatalf("append beyond the buffer: %v, want ErrUnavailable", err)
	}
	select {
	case <-first.Done():
		t.Fatal("the lingering batch completed")
	default:
	}
	// Close sends what waits; a blocked Append then gets in.
	s2 := newStore(t, url, func(o *Options) {
		o.Linger = 100 * time.Millisecond
		o.BufferBytes = len(b.Raw)
	})
	p1 := s2.Append(stream, 0, backendtest.MakeBatch(backendtest.BatchOptions{NumRecords: 1}))
	p2 := s2.Append(stream, 0, backendtest.MakeBatch(backendtest.BatchOptions{NumRecords: 1})) // waits for p1
	select {
	case <-p1.Done():
	default:
		t.Fatal("the second Append returned before the first batch was sent")
	}
	if _, err := p2.Wait(ctxT(t)); err != nil {
		t.Fatal(err)
	}
}

// TestThrottle: appends that waited for the pacer report it: the first
// (the pacer starts empty, as DIS's buckets may have been used by a
// previous process) and one right after a second's worth.
func TestThrottle(t *testing.T) {
	t.Parallel()
	_, url := startDIS(t, dislocal.Options{})
	s := newStore(t, url, func(o *Options) { o.Linger = -1 })
	stream := mkStream(t, s, "throttle", 1)
	_, rr := paceRates(false)
	res, err := s.Append(stream, 0, backendtest.MakeBatch(backendtest.BatchOptions{NumRecords: int32(rr), RecordBytes: 1})).Wait(ctxT(t))
	if err != nil || res.Throttle <= 0 {
		t.Fatalf("a second's worth first = %+v, %v; want a throttle", res, err)
	}
	res, err = s.Append(stream, 0, backendtest.MakeBatch(backendtest.BatchOptions{NumRecords: int32(rr / 10), RecordBytes: 1})).Wait(ctxT(t))
	if err != nil || res.Throttle <= 0 || res.BaseOffset != int64(rr) {
		t.Fatalf("the next append = %+v, %v; want a throttle", res, err)
	}
	t.Logf("throttle %v", res.Throttle)
}

// TestIdempotentStateAcrossRestart pins the guarantee docs/dis-backend.md
// states for idempotent producers on DIS: their dedupe window is kept in DIS
// (idem.go). Within one Store a retried batch is a duplicate; so it is in
// a new Store (a gateway restart), which also checks the producer's next
// sequence. (Until the window was kept in DIS, the new Store wrote the
// retry again at offset 3.)
func TestIdempotentStateAcrossRestart(t *testing.T) {
	t.Parallel()
	_, url := startDIS(t, dislocal.Options{})
	s1 := newStore(t, url, nil)
	stream := mkStream(t, s1, "idem.restart", 1)
	mk := func(seq int32) disbackend.Batch {
		return backendtest.MakeBatch(backendtest.BatchOptions{NumRecords: 3, Idempotent: true, ProducerID: 9, BaseSequence: seq, Seed: uint64(seq)})
	}
	app := func(s *Store, seq int32) disbackend.AppendResult {
		t.Helper()
		res, err := s.Append(stream, 0, mk(seq)).Wait(ctxT(t))
		if err != nil {
			t.Fatalf("append of sequence %d: %v", seq, err)
		}
		return res
	}
	if res := app(s1, 0); res.BaseOffset != 0 || res.Duplicate {
		t.Fatalf("first batch = %+v", res)
	}
	if res := app(s1, 0); res.BaseOffset != 0 || !res.Duplicate {
		t.Fatalf("retry in the same process = %+v, want the duplicate of offset 0", res)
	}
	if err := s1.Close(); err != nil {
		t.Fatal(err)
	}

	s2 := newStore(t, url, nil)
	if res := app(s2, 0); res.BaseOffset != 0 || !res.Duplicate {
		t.Fatalf("retry after the restart = %+v, want the duplicate of offset 0", res)
	}
	if res := app(s2, 3); res.BaseOffset != 3 || res.Duplicate {
		t.Fatalf("next batch = %+v", res)
	}
	if _, err := s2.Append(stream, 0, mk(100)).Wait(ctxT(t)); !errors.Is(err, disbackend.ErrOutOfOrderSequence) {
		t.Fatalf("a sequence gap after the restart: %v, want ErrOutOfOrderSequence", err)
	}
	if r, _ := s2.Range(stream, 0); r.Next != 6 {
		t.Fatalf("partition holds %d records, want 6 (the batches of sequence 0 and 3, once each)", r.Next)
	}
}
