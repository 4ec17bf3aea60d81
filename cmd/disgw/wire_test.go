package main

import (
	bin "encoding/binary"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/disgw/disgw/kafkawire"
	"github.com/disgw/disgw/kafkawire/batch"
)

// wireConn speaks kmsg over one TCP connection at exact versions.
type wireConn struct {
	t    *testing.T
	c    net.Conn
	corr int32
}

func dialWire(t *testing.T, addr string) *wireConn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &wireConn{t: t, c: c}
}

func (w *wireConn) do(version int16, req kmsg.Request) kmsg.Response {
	w.t.Helper()
	w.corr++
	req.SetVersion(version)
	f := kmsg.NewRequestFormatter(kmsg.FormatterClientID("wire-test"))
	frame := f.AppendRequest(nil, req, w.corr)
	_ = w.c.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := w.c.Write(frame); err != nil {
		w.t.Fatal(err)
	}
	body, err := kafkawire.ReadFrame(w.c, 1<<30)
	if err != nil {
		w.t.Fatalf("%s v%d: %v", kmsg.NameForKey(req.Key()), version, err)
	}
	if corr := int32(bin.BigEndian.Uint32(body)); corr != w.corr {
		w.t.Fatalf("correlation id %d, want %d", corr, w.corr)
	}
	body = body[4:]
	resp := req.ResponseKind()
	resp.SetVersion(version)
	if resp.IsFlexible() && req.Key() != 18 {
		body = body[1:] // the response header's tags
	}
	if err := resp.ReadFrom(body); err != nil {
		w.t.Fatalf("decode %s v%d: %v", kmsg.NameForKey(req.Key()), version, err)
	}
	return resp
}

// wireBatch is a magic 2 batch of n records with timestamps ts, ts+1, ...
func wireBatch(n int, ts int64, pid int64, epoch int16, seq int32) []byte {
	var recs []byte
	for i := 0; i < n; i++ {
		r := kmsg.NewRecord()
		r.OffsetDelta, r.TimestampDelta64 = int32(i), int64(i)
		r.Key, r.Value = []byte{'k', byte('0' + i)}, []byte("v")
		body := r.AppendTo(nil)[1:]
		recs = bin.AppendVarint(recs, int64(len(body)))
		recs = append(recs, body...)
	}
	b := kmsg.RecordBatch{PartitionLeaderEpoch: -1, Magic: 2, LastOffsetDelta: int32(n - 1),
		FirstTimestamp: ts, MaxTimestamp: ts + int64(n-1), ProducerID: pid, ProducerEpoch: epoch, FirstSequence: seq,
		NumRecords: int32(n), Records: recs}
	raw := b.AppendTo(nil)
	bin.BigEndian.PutUint32(raw[8:], uint32(len(raw)-12))
	batch.SetCRC(raw)
	return raw
}

// TestWireAnswersAsKafka checks, on both backends with kmsg at exact
// versions, the answers the differential harness (compat kafka-diff)
// found to differ from a one-node Apache Kafka 4.4 in Produce, Fetch,
// CreateTopics, DeleteTopics and CreatePartitions.
func TestWireAnswersAsKafka(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b backendFixture) {
		testWireAnswers(t, b.gateway(t, gatewayOpts{args: b.onDIS("--dis-region", "cn-north-4")}).addr)
	}, disAccount{"wire-ak", "wire-sk", "wireproject"})
}

func testWireAnswers(t *testing.T, addr string) {
	w := dialWire(t, addr)
	const topic = "wire.r1"

	// CreateTopics v7: a topic answered with an error has partitions and
	// replication factor -1, configs [] and topic id zero; validate_only
	// answers a random topic id.
	ct := kmsg.NewPtrCreateTopicsRequest()
	ct.TimeoutMillis = 30000
	ct.Topics = []kmsg.CreateTopicsRequestTopic{{Topic: topic, NumPartitions: 2, ReplicationFactor: 1}}
	cr := w.do(7, ct).(*kmsg.CreateTopicsResponse)
	if tp := cr.Topics[0]; tp.ErrorCode != 0 || tp.TopicID == ([16]byte{}) {
		t.Fatalf("CreateTopics %s: %+v", topic, tp)
	}
	topicID := cr.Topics[0].TopicID
	ct.Topics = []kmsg.CreateTopicsRequestTopic{
		{Topic: topic, NumPartitions: 2, ReplicationFactor: 1},
		{Topic: "bad name!", NumPartitions: 1, ReplicationFactor: 1},
	}
	for _, tp := range w.do(7, ct).(*kmsg.CreateTopicsResponse).Topics {
		if tp.ErrorCode == 0 || tp.Configs == nil || len(tp.Configs) != 0 || tp.NumPartitions != -1 ||
			tp.ReplicationFactor != -1 || tp.TopicID != ([16]byte{}) {
			t.Errorf("CreateTopics v7 %q (refused): error %d, configs %v (nil %t), partitions %d, replication %d, id %x; want configs [], -1, -1, zero id",
				tp.Topic, tp.ErrorCode, tp.Configs, tp.Configs == nil, tp.NumPartitions, tp.ReplicationFactor, tp.TopicID)
		}
	}
	ct.ValidateOnly = true
	ct.Topics = []kmsg.CreateTopicsRequestTopic{{Topic: "wire.t3", NumPartitions: -1, ReplicationFactor: -1}}
	if tp := w.do(7, ct).(*kmsg.CreateTopicsResponse).Topics[0]; tp.ErrorCode != 0 || tp.TopicID == ([16]byte{}) {
		t.Errorf("CreateTopics v7 validate_only: error %d, id %x; want a random id", tp.ErrorCode, tp.TopicID)
	}

	// DeleteTopics v6: an unknown name or id gets the code's default message.
	dt := kmsg.NewPtrDeleteTopicsRequest()
	dt.TimeoutMillis = 30000
	dt.Topics = []kmsg.DeleteTopicsRequestTopic{{Topic: kmsg.StringPtr("wire.unknown")}, {TopicID: [16]byte{1, 2, 3}}}
	dr := w.do(6, dt).(*kmsg.DeleteTopicsResponse)
	for i, want := range []*kerr.Error{kerr.UnknownTopicOrPartition, kerr.UnknownTopicID} {
		tp := dr.Topics[i]
		if tp.ErrorCode != want.Code || tp.ErrorMessage == nil || *tp.ErrorMessage != want.Description {
			t.Errorf("DeleteTopics v6 topic %d: error %d, message %v; want %d %q", i, tp.ErrorCode, strOrNil(tp.ErrorMessage), want.Code, want.Description)
		}
	}

	// CreatePartitions v3 of an unknown topic: no message.
	cp := kmsg.NewPtrCreatePartitionsRequest()
	cp.TimeoutMillis = 30000
	cp.Topics = []kmsg.CreatePartitionsRequestTopic{{Topic: "wire.unknown", Count: 2}}
	if tp := w.do(3, cp).(*kmsg.CreatePartitionsResponse).Topics[0]; tp.ErrorCode != kerr.UnknownTopicOrPartition.Code || tp.ErrorMessage != nil {
		t.Errorf("CreatePartitions v3 unknown topic: error %d, message %v; want 3 and null", tp.ErrorCode, strOrNil(tp.ErrorMessage))
	}

	// Produce: 3 plain records to partition 0; an idempotent batch to
	// partition 1, its retry (the original's offset, LogAppendTime the
	// stored max timestamp) and a gap (the log start offset, no message).
	const ts = 1_796_191_598_000
	produce := func(version int16, part int32, raw []byte) kmsg.ProduceResponseTopicPartition {
		t.Helper()
		pr := kmsg.NewPtrProduceRequest()
		pr.Acks, pr.TimeoutMillis = -1, 30000
		pr.Topics = []kmsg.ProduceRequestTopic{{Topic: topic, Partitions: []kmsg.ProduceRequestTopicPartition{{Partition: part, Records: raw}}}}
		return w.do(version, pr).(*kmsg.ProduceResponse).Topics[0].Partitions[0]
	}
	if p := produce(9, 0, wireBatch(3, ts, -1, -1, -1)); p.ErrorCode != 0 || p.BaseOffset != 0 {
		t.Fatalf("Produce to partition 0: %+v", p)
	}
	ip := w.do(4, kmsg.NewPtrInitProducerIDRequest()).(*kmsg.InitProducerIDResponse)
	if ip.ErrorCode != 0 {
		t.Fatalf("InitProducerId: %+v", ip)
	}
	if p := produce(9, 1, wireBatch(2, ts, ip.ProducerID, ip.ProducerEpoch, 0)); p.ErrorCode != 0 || p.BaseOffset != 0 || p.LogAppendTime != -1 {
		t.Fatalf("Produce idempotent: %+v", p)
	}
	for _, v := range []int16{3, 9} {
		if p := produce(v, 1, wireBatch(2, ts, ip.ProducerID, ip.ProducerEpoch, 0)); p.ErrorCode != 0 || p.BaseOffset != 0 || p.LogAppendTime != ts+1 {
			t.Errorf("Produce v%d duplicate: error %d, base offset %d, log append time %d; want 0, 0, %d (the stored max timestamp)",
				v, p.ErrorCode, p.BaseOffset, p.LogAppendTime, ts+1)
		}
	}
	if p := produce(9, 1, wireBatch(1, ts, ip.ProducerID, ip.ProducerEpoch, 5)); p.ErrorCode != kerr.OutOfOrderSequenceNumber.Code ||
		p.ErrorMessage != nil || p.LogStartOffset != 0 || p.BaseOffset != -1 {
		t.Errorf("Produce v9 out of order: error %d, message %v, log start offset %d, base offset %d; want 45, null, 0, -1",
			p.ErrorCode, strOrNil(p.ErrorMessage), p.LogStartOffset, p.BaseOffset)
	}

	// Fetch: out of range offsets -1 and aborted transactions null; an
	// unknown partition aborted transactions []; read_committed []; the
	// batches carry leader epoch 0, as Metadata reports.
	fetch := func(version int16, isolation int8, parts map[int32]int64) map[int32]kmsg.FetchResponseTopicPartition {
		t.Helper()
		fr := kmsg.NewPtrFetchRequest()
		fr.ReplicaID, fr.MaxWaitMillis, fr.MinBytes, fr.MaxBytes, fr.SessionEpoch = -1, 200, 1, 1<<20, -1
		fr.IsolationLevel = isolation
		ft := kmsg.FetchRequestTopic{Topic: topic, TopicID: topicID}
		for _, p := range []int32{0, 1, 2, 3} {
			if off, ok := parts[p]; ok {
				ft.Partitions = append(ft.Partitions, kmsg.FetchRequestTopicPartition{Partition: p, FetchOffset: off,
					CurrentLeaderEpoch: -1, LastFetchedEpoch: -1, LogStartOffset: -1, PartitionMaxBytes: 1 << 20})
			}
		}
		fr.Topics = []kmsg.FetchRequestTopic{ft}
		out := map[int32]kmsg.FetchResponseTopicPartition{}
		for _, tp := range w.do(version, fr).(*kmsg.FetchResponse).Topics {
			for _, p := range tp.Partitions {
				out[p.Partition] = p
			}
		}
		return out
	}
	for _, v := range []int16{4, 12, 13} {
		got := fetch(v, 0, map[int32]int64{0: 0, 1: 0})
		for part, n := range map[int32]int{0: 3, 1: 2} {
			p := got[part]
			h, err := batch.ParseHeader(p.RecordBatches)
			if p.ErrorCode != 0 || err != nil || h.PartitionLeaderEpoch != 0 || h.NumRecords != int32(n) || p.AbortedTransactions != nil {
				t.Errorf("Fetch v%d partition %d: error %d, header %+v (%v), aborted %v; want %d records of leader epoch 0, aborted null",
					v, part, p.ErrorCode, h, err, p.AbortedTransactions, n)
			}
		}
		if p := fetch(v, 0, map[int32]int64{0: 100})[0]; p.ErrorCode != kerr.OffsetOutOfRange.Code || p.HighWatermark != -1 ||
			p.LastStableOffset != -1 || v >= 5 && p.LogStartOffset != -1 || p.AbortedTransactions != nil {
			t.Errorf("Fetch v%d out of range: error %d, high watermark %d, last stable %d, log start %d, aborted %v (nil %t); want 1, -1, -1, -1, null",
				v, p.ErrorCode, p.HighWatermark, p.LastStableOffset, p.LogStartOffset, p.AbortedTransactions, p.AbortedTransactions == nil)
		}
		if p := fetch(v, 0, map[int32]int64{3: 0})[3]; p.ErrorCode != kerr.UnknownTopicOrPartition.Code ||
			p.AbortedTransactions == nil || len(p.AbortedTransactions) != 0 || p.HighWatermark != -1 {
			t.Errorf("Fetch v%d unknown partition: error %d, aborted %v (nil %t), high watermark %d; want 3, [], -1",
				v, p.ErrorCode, p.AbortedTransactions, p.AbortedTransactions == nil, p.HighWatermark)
		}
		if p := fetch(v, 1, map[int32]int64{0: 0})[0]; p.ErrorCode != 0 || p.AbortedTransactions == nil || p.HighWatermark != 3 {
			t.Errorf("Fetch v%d read_committed: error %d, aborted %v (nil %t), high watermark %d; want 0, [], 3",
				v, p.ErrorCode, p.AbortedTransactions, p.AbortedTransactions == nil, p.HighWatermark)
		}
	}
}

func strOrNil(s *string) any {
	if s == nil {
		return nil
	}
	return *s
}
