package gateway

import (
	"context"
	"encoding/binary"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"

	"github.com/disgw/disgw/disbackend"
	"github.com/disgw/disgw/disbackend/localstore"
	"github.com/disgw/disgw/kafkawire/batch"
)

// TestFirstTxnBatch: firstTxnBatch finds the first transactional data
// batch of a producer in [from, to) over a real store: not another
// producer's, not a non-transactional one, not a control batch, not one
// at or past to; a batch that starts before from counts from from; a from
// below the log start offset reads from there.
func TestFirstTxnBatch(t *testing.T) {
	store, err := localstore.Open("txn", localstore.Options{FS: vfs.NewMem(), RetentionCheckInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	ctx := context.Background()
	if _, err := store.CreateStream(ctx, disbackend.StreamSpec{Name: "t", TopicName: "t", PartitionCount: 1,
		Config: disbackend.StreamConfig{Retention: disbackend.UnlimitedRetention}}); err != nil {
		t.Fatal(err)
	}
	next := int64(0)
	seqs := map[int64]int32{}
	write := func(pid int64, n int32, attrs int16) {
		t.Helper()
		b := kmsg.RecordBatch{PartitionLeaderEpoch: -1, Magic: 2, Attributes: attrs, LastOffsetDelta: n - 1,
			ProducerID: pid, ProducerEpoch: 0, FirstSequence: -1, NumRecords: n}
		if pid >= 0 && attrs&batch.AttrControl == 0 {
			b.FirstSequence = seqs[pid]
			seqs[pid] += n
		}
		for i := range n {
			r := kmsg.NewRecord()
			r.OffsetDelta = i
			r.Value = []byte("v")
			body := r.AppendTo(nil)[1:]
			b.Records = binary.AppendVarint(b.Records, int64(len(body)))
			b.Records = append(b.Records, body...)
		}
		raw := b.AppendTo(nil)
		binary.BigEndian.PutUint32(raw[8:], uint32(len(raw)-12))
		batch.SetCRC(raw)
		h, err := batch.ParseHeader(raw)
		if err != nil {
			t.Fatal(err)
		}
		res, err := store.Append("t", 0, disbackend.Batch{Raw: raw, Header: h}).Wait(ctx)
		if err != nil || res.BaseOffset != next {
			t.Fatalf("append at %d: %+v, %v", next, res, err)
		}
		next += int64(n)
	}
	const txn, control = batch.AttrTransactional, batch.AttrTransactional | batch.AttrControl
	write(-1, 10, 0)     // 0-9: not idempotent
	write(7, 5, 0)       // 10-14: producer 7, idempotent, not transactional
	write(8, 5, txn)     // 15-19: producer 8's transaction
	write(7, 1, control) // 20: a marker of producer 7
	write(7, 5, txn)     // 21-25: producer 7's transaction
	write(8, 5, txn)     // 26-30
	s := &Server{backend: store}
	for _, c := range []struct {
		pid, from, to, want int64
	}{
		{7, 0, 31, 21},
		{7, 0, 21, 21},  // the batch is at to: none
		{7, 0, 22, 21},  // starts before to
		{7, 23, 31, 23}, // the batch holds from
		{8, 0, 31, 15},
		{8, 20, 31, 26},
		{9, 0, 31, 31}, // no batch of the producer
		{7, 31, 31, 31},
	} {
		got, err := s.firstTxnBatch(ctx, "t", 0, c.pid, c.from, c.to)
		if err != nil || got != c.want {
			t.Errorf("firstTxnBatch(pid %d, [%d, %d)) = %d, %v; want %d", c.pid, c.from, c.to, got, err, c.want)
		}
	}
	// Past the bytes it may read, it stops where it got to: one batch a
	// read, one read allowed.
	defer func(r, b int) { firstTxnBatchReadBytes, firstTxnBatchScanBytes = r, b }(firstTxnBatchReadBytes, firstTxnBatchScanBytes)
	firstTxnBatchReadBytes, firstTxnBatchScanBytes = 1, 1
	s.log = zap.NewNop()
	if got, err := s.firstTxnBatch(ctx, "t", 0, 7, 0, 31); err != nil || got != 10 {
		t.Errorf("firstTxnBatch(pid 7, [0, 31)) reading one batch: %d, %v; want 10 (the end of the batch read)", got, err)
	}
}
