package disrest

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/disgw/disgw/disbackend"
	"github.com/disgw/disgw/disbackend/dislocal"
	"github.com/disgw/disgw/kafkawire/batch"
)

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
	key, val := kmsg.NewControlRecordKey(), kmsg.NewEndTxnMarker()
	key.Type = kmsg.ControlRecordKeyTypeCommit
	h := batch.NewHeader(0)
	h.Attributes = batch.AttrTransactional | batch.AttrControl
	h.ProducerID, h.ProducerEpoch = 42, 3
	raw := batch.Encode(h, []batch.Record{{Key: key.AppendTo(nil), Value: val.AppendTo(nil), Timestamp: ts0}})
	hdr, err := batch.ParseHeader(raw)
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range []disbackend.Batch{plain, txn, {Raw: raw, Header: hdr}} {
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
