package gateway_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/disgw/disgw/disbackend"
	"github.com/disgw/disgw/disbackend/localstore"
	"github.com/disgw/disgw/gateway"
	"github.com/disgw/disgw/internal/bombtest"
	"github.com/disgw/disgw/kafkawire/batch"
)

var (
	rleBomb     = bombtest.RLEZstd
	bombRecord  = bombtest.RecordStart
	zstdBatchOf = bombtest.ZstdBatch
)

func listOffset(r *rawConn, topic string, ts int64) kmsg.ListOffsetsResponseTopicPartition {
	req := kmsg.NewPtrListOffsetsRequest()
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Timestamp = ts
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return r.roundTrip(7, req).(*kmsg.ListOffsetsResponse).Topics[0].Partitions[0]
}

// waitBudget waits until the budget's bytes in use satisfy ok (it is given
// back on the goroutine that completes an append, which may run after
// the response left).
func waitBudget(t *testing.T, b *batch.Budget, ok func(int64) bool, what string) {
	t.Helper()
	for range 1000 {
		if ok(b.InUse()) {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("decompression budget: %d bytes in use, want %s", b.InUse(), what)
}

// TestProduceDecompressionBombs: zstd bombs of a few KB claiming 1 GiB
// (zeros; one record of 1 GiB; one record of 120 MiB, the hostile
// review's 3,875-byte batch), sent by 8 connections at once to 3
// partitions, are each answered INVALID_RECORD; nothing is stored; the
// budget is back at 0 and was never charged anywhere near the claims.
func TestProduceDecompressionBombs(t *testing.T) {
	t.Parallel()
	g := startGateway(t)
	r := g.raw(t)
	if resp := r.roundTrip(7, createTopicsReq("bombs", 3, nil)).(*kmsg.CreateTopicsResponse); resp.Topics[0].ErrorCode != 0 {
		t.Fatalf("create: %+v", resp.Topics[0])
	}
	bombs := [][]byte{
		zstdBatchOf(rleBomb(nil, 1<<30)),
		zstdBatchOf(rleBomb(bombRecord(1<<30), 1<<30+1)),
		zstdBatchOf(rleBomb(bombRecord(120<<20), 120<<20+1)),
	}
	for _, b := range bombs {
		if len(b) > 40<<10 {
			t.Fatalf("a bomb of %d bytes", len(b))
		}
	}
	var wg sync.WaitGroup
	for c := range 8 {
		rc := g.raw(t)
		wg.Go(func() {
			for i, b := range bombs {
				part := int32((c + i) % 3)
				resp := rc.roundTrip(9, produceReq(-1, "bombs", part, b)).(*kmsg.ProduceResponse)
				if p := resp.Topics[0].Partitions[0]; p.ErrorCode != kerr.InvalidRecord.Code {
					t.Errorf("connection %d bomb %d: error %d (%v), want INVALID_RECORD", c, i, p.ErrorCode, p.ErrorMessage)
				}
			}
		})
	}
	wg.Wait()
	budget := g.srv.DecompressionBudget()
	waitBudget(t, budget, func(n int64) bool { return n == 0 }, "0")
	if got := budget.Acquired(); got > 24*2*batch.BudgetChunk {
		t.Fatalf("24 bombs charged %d bytes in all: they were inflated", got)
	}
	for p := range int32(3) {
		pr, err := g.store.Range("bombs", p)
		if err != nil || pr.Next != 0 {
			t.Fatalf("partition %d: range %+v, %v: a bomb was stored", p, pr, err)
		}
	}
}

// TestMaxDecompressedMessageBytes: the topic config is set by
// CreateTopics and IncrementalAlterConfigs and shown by DescribeConfigs
// (the gateway's default for a topic without it); a compressed batch
// decompressing past it gets INVALID_RECORD and is not stored, while
// max.message.bytes stays the limit of the compressed batch.
func TestMaxDecompressedMessageBytes(t *testing.T) {
	t.Parallel()
	g := startGateway(t, func(c *gateway.Config) { c.MaxDecompressedMessageBytes = 8 << 20 })
	r := g.raw(t)
	if resp := r.roundTrip(7, createTopicsReq("mdm", 1, map[string]string{"max.decompressed.message.bytes": "1048576"})).(*kmsg.CreateTopicsResponse); resp.Topics[0].ErrorCode != 0 {
		t.Fatalf("create: %+v", resp.Topics[0])
	}
	r.roundTrip(7, createTopicsReq("dflt", 1, nil))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	adm := kadm.NewClient(g.client(t))
	show := func(topic string) string {
		t.Helper()
		rc, err := adm.DescribeTopicConfigs(ctx, topic)
		if err != nil {
			t.Fatal(err)
		}
		c, err := rc.On(topic, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range c.Configs {
			if e.Key == "max.decompressed.message.bytes" {
				return e.MaybeValue()
			}
		}
		t.Fatalf("%s: no max.decompressed.message.bytes in %+v", topic, c.Configs)
		return ""
	}
	if got := show("mdm"); got != "1048576" {
		t.Fatalf("mdm shows %q", got)
	}
	if got := show("dflt"); got != "8388608" {
		t.Fatalf("dflt shows %q, want the gateway's default", got)
	}

	big := makeBatch(t, batchSpec{n: 2, codec: 1, valueBytes: 1 << 20}) // 2 MiB of gzip'd 'v's
	if len(big) > 1<<20 {
		t.Fatalf("compressed batch of %d bytes", len(big))
	}
	produce := func(topic string) kmsg.ProduceResponseTopicPartition {
		return r.roundTrip(9, produceReq(-1, topic, 0, big)).(*kmsg.ProduceResponse).Topics[0].Partitions[0]
	}
	if p := produce("mdm"); p.ErrorCode != kerr.InvalidRecord.Code {
		t.Fatalf("2 MiB over a 1 MiB limit: error %d, want INVALID_RECORD", p.ErrorCode)
	}
	if p := produce("dflt"); p.ErrorCode != 0 {
		t.Fatalf("2 MiB under the default 8 MiB: error %d %v", p.ErrorCode, p.ErrorMessage)
	}
	if pr, _ := g.store.Range("mdm", 0); pr.Next != 0 {
		t.Fatalf("the refused batch was stored: %+v", pr)
	}
	if _, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Name: "max.decompressed.message.bytes", Value: kmsgStr("4194304")}}, "mdm"); err != nil {
		t.Fatal(err)
	}
	if p := produce("mdm"); p.ErrorCode != 0 {
		t.Fatalf("2 MiB after raising the limit to 4 MiB: error %d %v", p.ErrorCode, p.ErrorMessage)
	}
	waitBudget(t, g.srv.DecompressionBudget(), func(n int64) bool { return n == 0 }, "0")
}

func kmsgStr(s string) *string { return &s }

// heldRecordStore is a localstore that asks for the decoded records, as
// disrest does, and completes each append only when release is closed: the
// records stay with the backend until then.
type heldRecordStore struct {
	*localstore.Store
	release chan struct{}
}

func (heldRecordStore) StoresRecords() bool { return true }

func (s heldRecordStore) Append(stream string, part int32, b disbackend.Batch) *disbackend.Pending {
	inner := s.Store.Append(stream, part, b)
	out := disbackend.NewPending()
	go func() {
		<-inner.Done()
		<-s.release
		out.Complete(inner.Result())
	}()
	return out
}

// TestDecompressionBudgetHeldByRecords: on a backend that stores records,
// a compressed batch's decoded records stay charged to the budget until
// the backend completes the append, then the budget is back at 0.
func TestDecompressionBudgetHeldByRecords(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	g := startGatewayWrapped(t, t.TempDir(), func(s *localstore.Store) disbackend.Backend { return heldRecordStore{s, release} })
	r := g.raw(t)
	r.roundTrip(7, createTopicsReq("held", 1, nil))
	budget := g.srv.DecompressionBudget()
	done := make(chan kmsg.ProduceResponseTopicPartition)
	go func() {
		resp := r.roundTrip(9, produceReq(-1, "held", 0, makeBatch(t, batchSpec{n: 2, codec: 4, valueBytes: 1 << 20})))
		done <- resp.(*kmsg.ProduceResponse).Topics[0].Partitions[0]
	}()
	waitBudget(t, budget, func(n int64) bool { return n >= 2<<20 }, "the 2 MiB of records held while the append waits")
	close(release)
	if p := <-done; p.ErrorCode != 0 {
		t.Fatalf("produce: error %d %v", p.ErrorCode, p.ErrorMessage)
	}
	waitBudget(t, budget, func(n int64) bool { return n == 0 }, "0 once the append completed")
}

// TestListOffsetsDecodesOneBatch: ListOffsets by timestamp finds the batch
// from batch max timestamps and decodes only it (each batch holds one
// compressed record of 4 MiB): each lookup charges the budget with one
// decoder, holds no record, and gives it back.
func TestListOffsetsDecodesOneBatch(t *testing.T) {
	t.Parallel()
	g := startGateway(t)
	r := g.raw(t)
	r.roundTrip(7, createTopicsReq("lots", 1, nil))
	for i := range 4 {
		b := makeBatch(t, batchSpec{n: 1, codec: 1, firstTS: int64(1000 * (i + 1)), valueBytes: 4 << 20})
		if p := r.roundTrip(9, produceReq(-1, "lots", 0, b)).(*kmsg.ProduceResponse).Topics[0].Partitions[0]; p.ErrorCode != 0 {
			t.Fatalf("produce %d: error %d", i, p.ErrorCode)
		}
	}
	budget := g.srv.DecompressionBudget()
	for _, q := range []struct{ ts, off, got int64 }{{500, 0, 1000}, {1500, 1, 2000}, {3000, 2, 3000}, {4000, 3, 4000}, {4001, -1, -1}} {
		before := budget.Acquired()
		p := listOffset(r, "lots", q.ts)
		if p.ErrorCode != 0 || p.Offset != q.off || p.Timestamp != q.got {
			t.Fatalf("at %d: offset %d ts %d error %d; want %d %d", q.ts, p.Offset, p.Timestamp, p.ErrorCode, q.off, q.got)
		}
		charged := budget.Acquired() - before
		// The lookup walks the batch's records without keeping them: it
		// charges one decoder's first chunk (its window), per batch decoded.
		if q.off >= 0 && (charged == 0 || charged > batch.BudgetChunk) {
			t.Fatalf("at %d: the lookup charged %d bytes, want one batch's decoder (%d)", q.ts, charged, batch.BudgetChunk)
		}
		if q.off < 0 && charged != 0 {
			t.Fatalf("at %d (past every batch): %d bytes charged, want no batch decoded", q.ts, charged)
		}
		if budget.InUse() != 0 {
			t.Fatalf("at %d: %d bytes still in use", q.ts, budget.InUse())
		}
	}
}
