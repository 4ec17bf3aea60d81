package backendtest

import (
	"math"
	"sync"
	"testing"

	"github.com/disgw/disgw/disbackend"
)

// idem returns an idempotent batch; its timestamps (ms) follow from seed,
// so that a retry has the original's.
func idem(pid int64, epoch int16, seq, n int32, seed uint64) disbackend.Batch {
	ts := 1_700_000_000_000 + int64(seed)*1000
	return MakeBatch(BatchOptions{NumRecords: n, Idempotent: true, ProducerID: pid, ProducerEpoch: epoch, BaseSequence: seq, Seed: seed,
		FirstTimestamp: ts, MaxTimestamp: ts + int64(n) - 1})
}

func initProducer(t *testing.T, b disbackend.Backend) int64 {
	t.Helper()
	id, epoch, err := b.InitProducerID(ctxT(t))
	if err != nil {
		t.Fatalf("InitProducerID: %v", err)
	}
	if epoch != 0 || id < 0 {
		t.Fatalf("InitProducerID = %d, epoch %d; want id >= 0, epoch 0", id, epoch)
	}
	return id
}

// wantDuplicate appends batch, a retry of a create-time batch identical to
// it, and expects a duplicate of the batch at base, answered as Kafka
// answers a retry: LogAppendTime is the stored batch's max timestamp.
func wantDuplicate(t *testing.T, b disbackend.Backend, stream string, part int32, batch disbackend.Batch, base int64) {
	t.Helper()
	before := mustRange(t, b, stream, part)
	res, err := b.Append(stream, part, batch).Wait(ctxT(t))
	if err != nil {
		t.Fatalf("retry: %v", err)
	}
	if !res.Duplicate || res.BaseOffset != base {
		t.Fatalf("retry = offset %d, duplicate %v; want the original offset %d, duplicate", res.BaseOffset, res.Duplicate, base)
	}
	if res.LogAppendTime != batch.MaxTimestamp || res.LogStartOffset != before.First {
		t.Fatalf("retry = log append time %d, log start offset %d; want the stored max timestamp %d, %d",
			res.LogAppendTime, res.LogStartOffset, batch.MaxTimestamp, before.First)
	}
	if after := mustRange(t, b, stream, part); after != before {
		t.Fatalf("a duplicate moved the range from %+v to %+v", before, after)
	}
}

func wantAppendErr(t *testing.T, what string, b disbackend.Backend, stream string, part int32, batch disbackend.Batch, sentinel error) {
	t.Helper()
	before := mustRange(t, b, stream, part)
	_, err := b.Append(stream, part, batch).Wait(ctxT(t))
	wantErr(t, what, err, sentinel)
	if after := mustRange(t, b, stream, part); after != before {
		t.Fatalf("%s: a refused batch moved the range from %+v to %+v", what, before, after)
	}
}

func testIdempotentDuplicate(t *testing.T, b disbackend.Backend) {
	mustCreate(t, b, spec(t, "idem", 2))
	pid := initProducer(t, b)
	s0 := mustAppend(t, b, "idem", 0, idem(pid, 0, 0, 3, 1))
	s1 := mustAppend(t, b, "idem", 0, idem(pid, 0, 3, 2, 2))
	if s0.base != 0 || s1.base != 3 {
		t.Fatalf("offsets %d, %d; want 0, 3", s0.base, s1.base)
	}
	mustAppend(t, b, "idem", 0, MakeBatch(BatchOptions{NumRecords: 2})) // someone else's batch in between
	wantDuplicate(t, b, "idem", 0, idem(pid, 0, 0, 3, 1), 0)
	wantDuplicate(t, b, "idem", 0, idem(pid, 0, 3, 2, 2), 3)
	// The same producer's sequences are per partition.
	if s := mustAppend(t, b, "idem", 1, idem(pid, 0, 0, 3, 1)); s.base != 0 {
		t.Fatalf("partition 1: offset %d, want 0", s.base)
	}
	// Only the last five batches are remembered: after five more, a retry
	// of the first is out of order (Kafka answers OUT_OF_ORDER_SEQUENCE).
	seq := int32(5)
	for i := 0; i < 5; i++ {
		mustAppend(t, b, "idem", 0, idem(pid, 0, seq, 1, uint64(10+i)))
		seq++
	}
	wantAppendErr(t, "retry of a forgotten batch", b, "idem", 0, idem(pid, 0, 0, 3, 1), disbackend.ErrOutOfOrderSequence)
	wantAppendErr(t, "retry of the sixth newest batch", b, "idem", 0, idem(pid, 0, 3, 2, 2), disbackend.ErrOutOfOrderSequence)
	wantDuplicate(t, b, "idem", 0, idem(pid, 0, 5, 1, 10), 7)
	all := readAll(t, b, "idem", 0, 0, 1<<20)
	if next := checkContiguous(t, all, 0); next != 12 {
		t.Fatalf("partition ends at %d, want 12 (duplicates must write nothing)", next)
	}
	wantPrefix(t, b, "first batches", all, s0.raw, s1.raw)
}

func testIdempotentDuplicateWhilePending(t *testing.T, b disbackend.Backend) {
	mustCreate(t, b, spec(t, "inflight", 1))
	pid := initProducer(t, b)
	for round := 0; round < 20; round++ {
		seq := int32(round * 2)
		orig := b.Append("inflight", 0, idem(pid, 0, seq, 2, uint64(round)))
		retry := b.Append("inflight", 0, idem(pid, 0, seq, 2, uint64(round)))
		rres, err := retry.Wait(ctxT(t))
		if err != nil {
			t.Fatalf("round %d: retry: %v", round, err)
		}
		if r := mustRange(t, b, "inflight", 0); r.Next <= rres.BaseOffset {
			t.Fatalf("round %d: retry completed (offset %d) before the original was synced (next %d)", round, rres.BaseOffset, r.Next)
		}
		ores, err := orig.Wait(ctxT(t))
		if err != nil {
			t.Fatalf("round %d: original: %v", round, err)
		}
		if ores.Duplicate || !rres.Duplicate || rres.BaseOffset != ores.BaseOffset {
			t.Fatalf("round %d: original %+v, retry %+v; want the retry to be a duplicate with the original's offset", round, ores, rres)
		}
	}
	wantRange(t, b, "inflight", 0, 0, 40)
}

func testIdempotentSequenceErrors(t *testing.T, b disbackend.Backend) {
	mustCreate(t, b, spec(t, "seq", 1))
	pid := initProducer(t, b)
	mustAppend(t, b, "seq", 0, idem(pid, 0, 0, 2, 1))
	wantAppendErr(t, "gap", b, "seq", 0, idem(pid, 0, 5, 1, 2), disbackend.ErrOutOfOrderSequence)
	wantAppendErr(t, "overlap", b, "seq", 0, idem(pid, 0, 1, 2, 3), disbackend.ErrOutOfOrderSequence)
	wantAppendErr(t, "same start, other length", b, "seq", 0, idem(pid, 0, 0, 3, 4), disbackend.ErrOutOfOrderSequence)
	if s := mustAppend(t, b, "seq", 0, idem(pid, 0, 2, 1, 5)); s.base != 2 {
		t.Fatalf("in-order batch after refusals: offset %d, want 2", s.base)
	}
}

func testIdempotentEpochs(t *testing.T, b disbackend.Backend) {
	mustCreate(t, b, spec(t, "epochs", 1))
	pid := initProducer(t, b)
	mustAppend(t, b, "epochs", 0, idem(pid, 0, 0, 2, 1))
	mustAppend(t, b, "epochs", 0, idem(pid, 0, 2, 2, 2))
	wantAppendErr(t, "new epoch not starting at 0", b, "epochs", 0, idem(pid, 1, 4, 1, 3), disbackend.ErrOutOfOrderSequence)
	mustAppend(t, b, "epochs", 0, idem(pid, 1, 0, 1, 4))
	wantAppendErr(t, "old epoch", b, "epochs", 0, idem(pid, 0, 4, 1, 5), disbackend.ErrInvalidProducerEpoch)
	wantAppendErr(t, "old epoch retry", b, "epochs", 0, idem(pid, 0, 2, 2, 2), disbackend.ErrInvalidProducerEpoch)
	// The new epoch goes on from its own sequence numbers.
	mustAppend(t, b, "epochs", 0, idem(pid, 1, 1, 1, 6))
	wantRange(t, b, "epochs", 0, 0, 6)
}

func testIdempotentWrap(t *testing.T, b disbackend.Backend) {
	mustCreate(t, b, spec(t, "wrap", 1))
	// A producer without state may start anywhere, here just below the top.
	pid := initProducer(t, b)
	mustAppend(t, b, "wrap", 0, idem(pid, 0, math.MaxInt32-2, 3, 1))
	wantAppendErr(t, "no wrap to MaxInt32+1", b, "wrap", 0, idem(pid, 0, 1, 1, 2), disbackend.ErrOutOfOrderSequence)
	mustAppend(t, b, "wrap", 0, idem(pid, 0, 0, 2, 3))
	// A batch whose sequences cross the top: last sequence 2.
	pid2 := initProducer(t, b)
	s := mustAppend(t, b, "wrap", 0, idem(pid2, 0, math.MaxInt32-1, 5, 4))
	wantDuplicate(t, b, "wrap", 0, idem(pid2, 0, math.MaxInt32-1, 5, 4), s.base)
	wantAppendErr(t, "after a wrapping batch, gap", b, "wrap", 0, idem(pid2, 0, 4, 1, 5), disbackend.ErrOutOfOrderSequence)
	mustAppend(t, b, "wrap", 0, idem(pid2, 0, 3, 1, 6))
}

func testIdempotentErrorsAreIsolated(t *testing.T, b disbackend.Backend) {
	mustCreate(t, b, spec(t, "isolated", 1))
	p1, p2 := initProducer(t, b), initProducer(t, b)
	pend := []*disbackend.Pending{
		b.Append("isolated", 0, idem(p1, 0, 0, 2, 1)),
		b.Append("isolated", 0, idem(p1, 0, 7, 1, 2)), // gap
		b.Append("isolated", 0, idem(p2, 0, 0, 1, 3)),
		b.Append("isolated", 0, MakeBatch(BatchOptions{NumRecords: 3})),
		b.Append("isolated", 0, idem(p1, 0, 2, 1, 4)),
	}
	wantOK := []bool{true, false, true, true, true}
	var next int64
	for i, p := range pend {
		res, err := p.Wait(ctxT(t))
		if wantOK[i] != (err == nil) {
			t.Fatalf("append %d: error %v, want ok=%v", i, err, wantOK[i])
		}
		if err != nil {
			wantErr(t, "gap", err, disbackend.ErrOutOfOrderSequence)
			continue
		}
		if res.BaseOffset != next {
			t.Fatalf("append %d: offset %d, want %d", i, res.BaseOffset, next)
		}
		next = res.BaseOffset + int64([]int{2, 0, 1, 3, 1}[i])
	}
	wantRange(t, b, "isolated", 0, 0, 7)
}

func testInitProducerIDUnique(t *testing.T, b disbackend.Backend) {
	const n = 64
	ids := make(chan int64, n)
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			id, epoch, err := b.InitProducerID(ctxT(t))
			if err != nil || epoch != 0 {
				t.Errorf("InitProducerID = %d, epoch %d, %v; want epoch 0", id, epoch, err)
			}
			ids <- id
		}()
	}
	wg.Wait()
	close(ids)
	seen := map[int64]bool{}
	for id := range ids {
		if seen[id] {
			t.Fatalf("InitProducerID returned %d twice", id)
		}
		seen[id] = true
	}
}
