package gateway_test

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/disgw/disgw/gateway"
)

// TestAcksZero: acks=0 gets no response; an error closes the connection,
// as Kafka does.
func TestAcksZero(t *testing.T) {
	g := startGateway(t)
	r := g.raw(t)
	r.roundTrip(7, createTopicsReq("a0", 1, nil))
	r.send(9, produceReq(0, "a0", 0, makeBatch(t, batchSpec{n: 2})))
	// The next response on the connection is the Metadata one: the produce
	// had none.
	resp := r.roundTrip(12, metadataReq("a0")).(*kmsg.MetadataResponse)
	if resp.Topics[0].ErrorCode != 0 {
		t.Fatalf("metadata after acks=0: %+v", resp.Topics[0])
	}
	lo := r.roundTrip(9, fetchReq("a0", 0, 0, 0, 1)).(*kmsg.FetchResponse)
	if hw := lo.Topics[0].Partitions[0].HighWatermark; hw != 2 {
		t.Fatalf("acks=0 batch not written: high watermark %d", hw)
	}
	r.send(9, produceReq(0, "a0", 7, makeBatch(t, batchSpec{n: 1}))) // unknown partition
	r.expectClosed()
}

// TestPipelinedOrder: produce requests pipelined on one connection are
// applied in the order sent, and answered in that order.
func TestPipelinedOrder(t *testing.T) {
	g := startGateway(t)
	r := g.raw(t)
	r.roundTrip(7, createTopicsReq("order", 1, nil))
	var corrs []int32
	for i := 0; i < 50; i++ {
		corrs = append(corrs, r.send(9, produceReq(-1, "order", 0, makeBatch(t, batchSpec{n: 2}))))
	}
	for i, want := range corrs {
		corr, body, err := r.recv(0, 9)
		if err != nil || corr != want {
			t.Fatalf("response %d: corr %d want %d (%v)", i, corr, want, err)
		}
		resp := kmsg.NewPtrProduceResponse()
		resp.Version = 9
		if err := resp.ReadFrom(body); err != nil {
			t.Fatal(err)
		}
		if p := resp.Topics[0].Partitions[0]; p.ErrorCode != 0 || p.BaseOffset != int64(2*i) {
			t.Fatalf("request %d got offset %d (error %d), want %d", i, p.BaseOffset, p.ErrorCode, 2*i)
		}
	}
}

// TestFetchSizeLimits (KIP-74): only the first non-empty partition may
// exceed max_bytes and partition_max_bytes, by whole batches; a batch is
// never cut.
func TestFetchSizeLimits(t *testing.T) {
	g := startGateway(t)
	r := g.raw(t)
	r.roundTrip(7, createTopicsReq("kip74", 2, nil))
	big := makeBatch(t, batchSpec{n: 4, valueBytes: 3000})
	for p := int32(0); p < 2; p++ {
		for i := 0; i < 2; i++ {
			if c := r.roundTrip(9, produceReq(-1, "kip74", p, big)).(*kmsg.ProduceResponse).Topics[0].Partitions[0].ErrorCode; c != 0 {
				t.Fatalf("produce: %d", c)
			}
		}
	}
	req := fetchReq("kip74", 0, 0, 0, 1)
	req.MaxBytes = 100
	req.Topics[0].Partitions[0].PartitionMaxBytes = 100
	p1 := kmsg.NewFetchRequestTopicPartition()
	p1.Partition, p1.PartitionMaxBytes = 1, 100
	req.Topics[0].Partitions = append(req.Topics[0].Partitions, p1)
	resp := r.roundTrip(11, req).(*kmsg.FetchResponse)
	ps := resp.Topics[0].Partitions
	if len(ps[0].RecordBatches) != len(big) {
		t.Fatalf("first partition: %d bytes, want exactly one whole batch of %d", len(ps[0].RecordBatches), len(big))
	}
	if len(ps[1].RecordBatches) != 0 || ps[1].HighWatermark != 8 {
		t.Fatalf("second partition: %d bytes (hw %d), want none", len(ps[1].RecordBatches), ps[1].HighWatermark)
	}
	req.MaxBytes = int32(2*len(big) + 10)
	req.Topics[0].Partitions[0].PartitionMaxBytes = int32(len(big))
	req.Topics[0].Partitions[1].PartitionMaxBytes = int32(len(big) + 10)
	ps = r.roundTrip(11, req).(*kmsg.FetchResponse).Topics[0].Partitions
	if len(ps[0].RecordBatches) != len(big) || len(ps[1].RecordBatches) != len(big) {
		t.Fatalf("with room for one batch each: %d and %d bytes", len(ps[0].RecordBatches), len(ps[1].RecordBatches))
	}
}

// TestRestart: topics (with their ids), records and idempotent producer
// state survive a restart of the gateway on the same data directory.
func TestRestart(t *testing.T) {
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var id [16]byte
	var pid int64
	var epoch int16
	func() {
		g := startGatewayAt(t, dir)
		r := g.raw(t)
		resp := r.roundTrip(7, createTopicsReq("restart.me", 2, nil)).(*kmsg.CreateTopicsResponse)
		id = resp.Topics[0].TopicID
		ip := r.roundTrip(4, kmsg.NewPtrInitProducerIDRequest()).(*kmsg.InitProducerIDResponse)
		pid, epoch = ip.ProducerID, ip.ProducerEpoch
		b := makeBatch(t, batchSpec{n: 3, idem: true, pid: pid, epoch: epoch, seq: 0})
		if p := r.roundTrip(9, produceReq(-1, "restart.me", 1, b)).(*kmsg.ProduceResponse).Topics[0].Partitions[0]; p.ErrorCode != 0 {
			t.Fatalf("produce: %+v", p)
		}
		g.stop(t)
	}()
	g := startGatewayAt(t, dir)
	r := g.raw(t)
	meta := r.roundTrip(12, metadataReq("restart.me")).(*kmsg.MetadataResponse)
	if meta.Topics[0].TopicID != id || len(meta.Topics[0].Partitions) != 2 {
		t.Fatalf("after restart: id %x (was %x), %d partitions", meta.Topics[0].TopicID, id, len(meta.Topics[0].Partitions))
	}
	// The retried batch is still recognised; a gap is still refused.
	b := makeBatch(t, batchSpec{n: 3, idem: true, pid: pid, epoch: epoch, seq: 0})
	if p := r.roundTrip(9, produceReq(-1, "restart.me", 1, b)).(*kmsg.ProduceResponse).Topics[0].Partitions[0]; p.ErrorCode != 0 || p.BaseOffset != 0 {
		t.Fatalf("retry after restart: %+v", p)
	}
	gap := makeBatch(t, batchSpec{n: 1, idem: true, pid: pid, epoch: epoch, seq: 7})
	if p := r.roundTrip(9, produceReq(-1, "restart.me", 1, gap)).(*kmsg.ProduceResponse).Topics[0].Partitions[0]; p.ErrorCode != kerr.OutOfOrderSequenceNumber.Code {
		t.Fatalf("gap after restart: %+v", p)
	}
	ip := r.roundTrip(4, kmsg.NewPtrInitProducerIDRequest()).(*kmsg.InitProducerIDResponse)
	if ip.ProducerID == pid {
		t.Fatalf("producer id %d handed out twice", pid)
	}
	cl := g.client(t, kgo.ConsumeTopics("restart.me"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	n := 0
	for n < 3 {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %d of 3 after restart", n)
		}
		n += fs.NumRecords()
	}
}

// TestLogAppendTime: a LogAppendTime topic answers the append time in the
// produce response and stores it in the batch, as Kafka.
func TestLogAppendTime(t *testing.T) {
	g := startGateway(t)
	r := g.raw(t)
	r.roundTrip(7, createTopicsReq("lat", 1, map[string]string{"message.timestamp.type": "LogAppendTime"}))
	before := time.Now().UnixMilli()
	p := r.roundTrip(9, produceReq(-1, "lat", 0, makeBatch(t, batchSpec{n: 2, firstTS: 5}))).(*kmsg.ProduceResponse).Topics[0].Partitions[0]
	if p.ErrorCode != 0 || p.LogAppendTime < before {
		t.Fatalf("produce: %+v", p)
	}
	f := r.roundTrip(11, fetchReq("lat", 0, 0, 0, 1)).(*kmsg.FetchResponse).Topics[0].Partitions[0]
	var b kmsg.RecordBatch
	if err := b.ReadFrom(f.RecordBatches); err != nil {
		t.Fatal(err)
	}
	if b.Attributes&0x08 == 0 || b.MaxTimestamp != p.LogAppendTime {
		t.Fatalf("stored batch attributes %#x max timestamp %d, want LogAppendTime %d", b.Attributes, b.MaxTimestamp, p.LogAppendTime)
	}
	cr := r.roundTrip(9, produceReq(-1, "lat", 0, makeBatch(t, batchSpec{n: 1})))
	if cr.(*kmsg.ProduceResponse).Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatal("second produce failed")
	}
}

// TestHostileSizes: absurd partition counts are refused before anything
// is allocated, and a fetch asking for unlimited bytes is capped by the
// broker's fetch max bytes, with max_bytes 0 giving one batch (as Kafka).
func TestHostileSizes(t *testing.T) {
	g := startGateway(t, func(c *gateway.Config) { c.FetchMaxBytes = 64 << 10 })
	r := g.raw(t)
	if c := r.roundTrip(7, createTopicsReq("huge", 2000000000, nil)).(*kmsg.CreateTopicsResponse).Topics[0].ErrorCode; c != kerr.InvalidPartitions.Code {
		t.Fatalf("2e9 partitions: error %d", c)
	}
	r.roundTrip(7, createTopicsReq("sizes", 1, nil))
	cp := kmsg.NewPtrCreatePartitionsRequest()
	cpt := kmsg.NewCreatePartitionsRequestTopic()
	cpt.Topic, cpt.Count = "sizes", 2000000000
	cp.Topics = append(cp.Topics, cpt)
	if c := r.roundTrip(3, cp).(*kmsg.CreatePartitionsResponse).Topics[0].ErrorCode; c != kerr.InvalidPartitions.Code {
		t.Fatalf("CreatePartitions to 2e9: error %d", c)
	}
	batch := makeBatch(t, batchSpec{n: 10, valueBytes: 1000})
	for i := 0; i < 20; i++ {
		r.roundTrip(9, produceReq(-1, "sizes", 0, batch))
	}
	// max_bytes 0: one batch.
	req := fetchReq("sizes", 0, 0, 0, 1)
	req.MaxBytes = 0
	if n := len(r.roundTrip(11, req).(*kmsg.FetchResponse).Topics[0].Partitions[0].RecordBatches); n != len(batch) {
		t.Fatalf("max_bytes 0: %d bytes, want one batch of %d", n, len(batch))
	}
	// Unlimited asks, the same partition listed 50 times: capped at the
	// broker's 64 KiB (plus at most the first batch).
	req = fetchReq("sizes", 0, 0, 0, 1)
	req.MaxBytes = 1 << 30
	req.Topics[0].Partitions[0].PartitionMaxBytes = 1 << 30
	for i := 0; i < 49; i++ {
		req.Topics[0].Partitions = append(req.Topics[0].Partitions, req.Topics[0].Partitions[0])
	}
	total := 0
	for _, p := range r.roundTrip(11, req).(*kmsg.FetchResponse).Topics[0].Partitions {
		total += len(p.RecordBatches)
	}
	if total > 64<<10+len(batch) {
		t.Fatalf("fetch returned %d bytes, over the 64 KiB cap", total)
	}
}
