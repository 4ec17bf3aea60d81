package disrest

import (
	"math"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/disgw/disgw/disbackend"
	"github.com/disgw/disgw/disbackend/dislocal"
	"github.com/disgw/disgw/kafkawire/batch"
)

// markerBatch is the COMMIT (or ABORT) control batch of producer pid at
// epoch, as the transaction coordinator writes it.
func markerBatch(t *testing.T, pid int64, epoch int16, commit bool) disbackend.Batch {
	t.Helper()
	key, val := kmsg.NewControlRecordKey(), kmsg.NewEndTxnMarker()
	if commit {
		key.Type = kmsg.ControlRecordKeyTypeCommit
	}
	h := batch.NewHeader(0)
	h.Attributes = batch.AttrTransactional | batch.AttrControl
	h.ProducerID, h.ProducerEpoch = pid, epoch
	raw := batch.Encode(h, []batch.Record{{Key: key.AppendTo(nil), Value: val.AppendTo(nil), Timestamp: 1_700_000_000_000}})
	hdr, err := batch.ParseHeader(raw)
	if err != nil {
		t.Fatal(err)
	}
	return disbackend.Batch{Raw: raw, Header: hdr}
}

// TestTxnBatchesReadBack: a transactional producer's batch and its marker
// are stored as envelopes (version 2) and read back as Kafka's batches: a
// plain batch, the producer's transactional batch, and the control batch
// of its marker, each with its producer id, epoch and bits, at their
// offsets.
func TestTxnBatchesReadBack(t *testing.T) {
	t.Parallel()
	_, url := startDIS(t, dislocal.Options{})
	s := newStore(t, url, nil)
	stream := mkStream(t, s, "txn-read", 1)
	const ts0 = 1_700_000_000_000
	plain := kafkaBatch(testRecords()[:2], ts0)
	txn := kafkaBatch(testRecords()[:2], ts0)
	txn.Attributes |= batch.AttrTransactional
	txn.ProducerID, txn.ProducerEpoch, txn.BaseSequence = 42, 3, 0
	for _, b := range []disbackend.Batch{plain, txn, markerBatch(t, 42, 3, true)} {
		if _, err := s.Append(stream, 0, b).Wait(ctxT(t)); err != nil {
			t.Fatal(err)
		}
	}
	res, err := s.Read(ctxT(t), stream, 0, 0, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	type want struct {
		base  int64
		n     int32
		attrs int16
		pid   int64
		epoch int16
	}
	wants := []want{{0, 2, 0, -1, -1}, {2, 2, batch.AttrTransactional, 42, 3}, {4, 1, batch.AttrTransactional | batch.AttrControl, 42, 3}}
	if len(res.Batches) != len(wants) {
		t.Fatalf("read %d batches, want %d", len(res.Batches), len(wants))
	}
	for i, b := range res.Batches {
		h, err := batch.ParseHeader(b)
		if err != nil {
			t.Fatal(err)
		}
		got := want{h.BaseOffset, h.NumRecords, h.Attributes &^ batch.AttrCodecMask, h.ProducerID, h.ProducerEpoch}
		if got != wants[i] {
			t.Errorf("batch %d: %+v, want %+v", i, got, wants[i])
		}
	}
}

// TestCompactorTxn: the compactor of a compacted DIS partition indexes a
// committed transaction's record, leaves out an aborted one's and the
// markers, and holds copies of a key whose transaction is still open (at
// or past the last stable offset) until the view says it has ended; with
// no view at all, every transactional record waits.
func TestCompactorTxn(t *testing.T) {
	t.Parallel()
	_, url := startDIS(t, dislocal.Options{})
	s := newStore(t, url, func(o *Options) { o.NoCompactor = true })
	name, err := disbackend.StreamNameForTopic("txn-compact")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.CreateStream(ctxT(t), disbackend.StreamSpec{Name: name, TopicName: "txn-compact", PartitionCount: 1,
		Config: disbackend.StreamConfig{Retention: 24 * time.Hour, MaxMessageBytes: 1 << 20, CleanupPolicy: disbackend.CleanupCompact}}); err != nil {
		t.Fatal(err)
	}
	const ts0 = 1_700_000_000_000
	rec := func(v string) kmsg.Record { return kmsg.Record{Key: []byte("k"), Value: []byte(v)} }
	txnB := func(v string, pid int64) disbackend.Batch {
		b := kafkaBatch([]kmsg.Record{rec(v)}, ts0)
		b.Attributes |= batch.AttrTransactional
		b.ProducerID, b.ProducerEpoch, b.BaseSequence = pid, 0, 0
		return b
	}
	marker := func(pid int64, commit bool) disbackend.Batch { return markerBatch(t, pid, 0, commit) }
	// 0 plain v1; 1 v2 of producer 8, committed at 2; 3 v3 of producer 7,
	// aborted at 4; 5 v4 of producer 9, open.
	for _, b := range []disbackend.Batch{kafkaBatch([]kmsg.Record{rec("v1")}, ts0), txnB("v2", 8), marker(8, true),
		txnB("v3", 7), marker(7, false), txnB("v4", 9)} {
		if _, err := s.Append(name, 0, b).Wait(ctxT(t)); err != nil {
			t.Fatal(err)
		}
	}
	si, err := s.streamInfo(ctxT(t), name, false)
	if err != nil {
		t.Fatal(err)
	}
	k := partKey{name, 0}
	h := hashKey([]byte("k"))
	index := func() *cpart {
		cp := newCpart(k, si.st)
		if _, err := s.compact.tail(ctxT(t), cp, 0, 6, false); err != nil {
			t.Fatal(err)
		}
		return cp
	}
	cp := index() // no view
	if e, ok := cp.keys[h]; !ok || e.off != 0 || cp.indexed != 1 || cp.undecided[h] != 5 {
		t.Fatalf("with no view: key at %+v (indexed %v), position %d, undecided %v; want 0, 1, 5", e, ok, cp.indexed, cp.undecided[h])
	}
	lso := int64(5)
	s.SetTxnView(func(stream string, part int32) ([]disbackend.AbortedRange, int64) {
		return []disbackend.AbortedRange{{ProducerID: 7, FirstOffset: 3, LastOffset: 4}}, lso
	})
	cp = index()
	if e := cp.keys[h]; e.off != 1 || cp.indexed != 5 || cp.undecided[h] != 5 {
		t.Fatalf("key at %d, position %d, undecided %d; want 1 (the committed value), 5, 5", e.off, cp.indexed, cp.undecided[h])
	}
	r := disbackend.Record{Key: []byte("k"), Value: []byte("v2")}
	if kept, _, _ := s.compact.begin(cp, []disbackend.Record{r}, []int64{1}); len(kept) != 0 {
		t.Fatal("a copy of k was kept while a transaction with k is open")
	}
	lso = math.MaxInt64 // the transaction at 5 committed
	if _, err := s.Append(name, 0, marker(9, true)).Wait(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.compact.tail(ctxT(t), cp, cp.indexed, 7, false); err != nil {
		t.Fatal(err)
	}
	if e, open := cp.keys[h], len(cp.undecided) > 0; e.off != 5 || cp.indexed != 7 || open {
		t.Fatalf("after the commit: key at %d, position %d, undecided %v; want 5, 7, none", e.off, cp.indexed, cp.undecided)
	}
}

// TestTxnStreamLazy: reading the transaction records of a project without
// TxnStream makes none; the first save does, and a new Store reads it back.
func TestTxnStreamLazy(t *testing.T) {
	t.Parallel()
	_, url := startDIS(t, dislocal.Options{})
	s := newStore(t, url, nil)
	if recs, err := s.TxnRecords(ctxT(t)); err != nil || len(recs) != 0 {
		t.Fatalf("TxnRecords of a new project: %v, %v", recs, err)
	}
	if _, err := s.DescribeStream(ctxT(t), TxnStream); err == nil {
		t.Fatal("TxnRecords created the stream")
	}
	if err := s.SaveTxnRecord(ctxT(t), "t/a", []byte("1")); err != nil {
		t.Fatal(err)
	}
	if err := s.SaveTxnRecord(ctxT(t), "t/a", []byte("2")); err != nil {
		t.Fatal(err)
	}
	if err := s.SaveTxnRecord(ctxT(t), "t/b", []byte("x")); err != nil {
		t.Fatal(err)
	}
	if err := s.SaveTxnRecord(ctxT(t), "t/b", nil); err != nil {
		t.Fatal(err)
	}
	recs, err := newStore(t, url, nil).TxnRecords(ctxT(t))
	if err != nil || len(recs) != 1 || string(recs["t/a"]) != "2" {
		t.Fatalf("a new Store read %v, %v; want t/a=2 alone", recs, err)
	}
}
