package main

import (
	"bytes"
	bin "encoding/binary"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/disgw/disgw/kafkawire/batch"
)

// recordsBatch is a magic 2 batch of n records compressed with codec
// (kgo's compressor; nil: none); rec sets record i's key and headers (its
// value is "v<i>").
func recordsBatch(t *testing.T, n int, codec *kgo.CompressionCodec, rec func(i int, r *kmsg.Record)) []byte {
	t.Helper()
	var recs []byte
	for i := range n {
		r := kmsg.NewRecord()
		r.OffsetDelta, r.TimestampDelta64, r.Value = int32(i), int64(i), fmt.Appendf(nil, "v%d", i)
		rec(i, &r)
		body := r.AppendTo(nil)[1:]
		recs = bin.AppendVarint(recs, int64(len(body)))
		recs = append(recs, body...)
	}
	attrs := int16(0)
	if codec != nil {
		c, err := kgo.DefaultCompressor(*codec)
		if err != nil {
			t.Fatal(err)
		}
		out, used := c.Compress(new(bytes.Buffer), recs)
		recs, attrs = bytes.Clone(out), int16(used)
	}
	ts := time.Now().UnixMilli()
	b := kmsg.RecordBatch{PartitionLeaderEpoch: -1, Magic: 2, Attributes: attrs, LastOffsetDelta: int32(n - 1),
		FirstTimestamp: ts, MaxTimestamp: ts + int64(n-1), ProducerID: -1, ProducerEpoch: -1, FirstSequence: -1,
		NumRecords: int32(n), Records: recs}
	raw := b.AppendTo(nil)
	bin.BigEndian.PutUint32(raw[8:], uint32(len(raw)-12))
	batch.SetCRC(raw)
	return raw
}

// TestProduceRecordErrors: a batch refused for some of its records is
// answered as Kafka 4.4 answers it (KIP-467, LogValidator and
// ReplicaManager's RecordValidationException), on both backends: 100
// records, every tenth without a key, to a compacted topic get
// INVALID_RECORD with record_errors naming exactly those 10 (Kafka's
// message each), Kafka's error_message, base offset -1 and the log start
// offset, from Produce v8 (v7 has neither field), compressed or not, by
// name or by topic id (v13); librdkafka (confluent-kafka-python) counts 10
// INVALID_RECORD and 90 _INVALID_DIFFERENT_RECORD as its test 0011 does
// against Kafka, or, one record a batch, 10 INVALID_RECORD and 90
// delivered. On DIS, dis.record.format native refuses the records that
// need an envelope the same way (the embedded store keeps them).
func TestProduceRecordErrors(t *testing.T) {
	t.Parallel()
	forEachBackend(t, testProduceRecordErrors)
}

func testProduceRecordErrors(t *testing.T, b backendFixture) {
	addr := b.gateway(t, gatewayOpts{}).addr
	w := dialWire(t, addr)
	const compact, native = "rec.compact", "rec.native"
	ct := kmsg.NewPtrCreateTopicsRequest()
	ct.TimeoutMillis = 30000
	ct.Topics = []kmsg.CreateTopicsRequestTopic{
		{Topic: compact, NumPartitions: 1, ReplicationFactor: 1,
			Configs: []kmsg.CreateTopicsRequestTopicConfig{{Name: "cleanup.policy", Value: kmsg.StringPtr("compact")}}},
		{Topic: native, NumPartitions: 1, ReplicationFactor: 1,
			Configs: []kmsg.CreateTopicsRequestTopicConfig{{Name: "dis.record.format", Value: kmsg.StringPtr("native")}}},
		{Topic: "rec.py", NumPartitions: 1, ReplicationFactor: 1,
			Configs: []kmsg.CreateTopicsRequestTopicConfig{{Name: "cleanup.policy", Value: kmsg.StringPtr("compact")}}},
	}
	ids := map[string][16]byte{}
	for _, tp := range w.do(7, ct).(*kmsg.CreateTopicsResponse).Topics {
		if tp.ErrorCode != 0 {
			t.Fatalf("CreateTopics %s: %+v", tp.Topic, tp)
		}
		ids[tp.Topic] = tp.TopicID
	}
	produce := func(version int16, topic string, raw []byte) kmsg.ProduceResponseTopicPartition {
		t.Helper()
		pr := kmsg.NewPtrProduceRequest()
		pr.Acks, pr.TimeoutMillis = -1, 30000
		pr.Topics = []kmsg.ProduceRequestTopic{{Topic: topic, TopicID: ids[topic],
			Partitions: []kmsg.ProduceRequestTopicPartition{{Partition: 0, Records: raw}}}}
		return w.do(version, pr).(*kmsg.ProduceResponse).Topics[0].Partitions[0]
	}
	// check asserts a refusal of the records want with code and, from v8,
	// record messages msg(i) and Kafka's summary.
	check := func(label string, version int16, p kmsg.ProduceResponseTopicPartition, code int16, want []int32, msg func(i int32) string) {
		t.Helper()
		if p.ErrorCode != code || p.BaseOffset != -1 || p.LogStartOffset != 0 || p.LogAppendTime != -1 {
			t.Errorf("%s v%d: error %d, base offset %d, log start offset %d, log append time %d; want %d, -1, 0, -1",
				label, version, p.ErrorCode, p.BaseOffset, p.LogStartOffset, p.LogAppendTime, code)
		}
		if version < 8 {
			if p.ErrorRecords != nil || p.ErrorMessage != nil {
				t.Errorf("%s v%d: record errors %v, message %s; want none below v8", label, version, p.ErrorRecords, strOrNull(p.ErrorMessage))
			}
			return
		}
		var got []int32
		var first3 []string
		for _, e := range p.ErrorRecords {
			got = append(got, e.RelativeOffset)
			if e.ErrorMessage == nil || *e.ErrorMessage != msg(e.RelativeOffset) {
				t.Errorf("%s v%d: record %d: message %s, want %q", label, version, e.RelativeOffset, strOrNull(e.ErrorMessage), msg(e.RelativeOffset))
			}
			if len(first3) < 3 {
				first3 = append(first3, fmt.Sprintf("RecordError(batchIndex=%d, message='%s')", e.RelativeOffset, msg(e.RelativeOffset)))
			}
		}
		if !slices.Equal(got, want) {
			t.Errorf("%s v%d: record errors %v, want %v", label, version, got, want)
		}
		// Kafka's LogValidator.processRecordErrors.
		summary := fmt.Sprintf("One or more records have been rejected due to %d record errors in total, and only showing the first three errors at most: [%s]",
			len(want), strings.Join(first3, ", "))
		if p.ErrorMessage == nil || *p.ErrorMessage != summary {
			t.Errorf("%s v%d: error message %s, want %q", label, version, strOrNull(p.ErrorMessage), summary)
		}
	}

	// A compacted topic: every tenth record without a key.
	everyTenth := []int32{0, 10, 20, 30, 40, 50, 60, 70, 80, 90}
	keyless := func(i int, r *kmsg.Record) {
		if i%10 != 0 {
			r.Key = fmt.Appendf(nil, "k%d", i)
		}
	}
	keyMsg := func(int32) string {
		return "Compacted topic cannot accept message without key in topic partition " + compact + "-0"
	}
	for _, tc := range []struct {
		version int16
		codec   *kgo.CompressionCodec
	}{{7, nil}, {8, nil}, {9, ptr(kgo.GzipCompression())}, {12, ptr(kgo.ZstdCompression())}, {13, ptr(kgo.Lz4Compression())}} {
		p := produce(tc.version, compact, recordsBatch(t, 100, tc.codec, keyless))
		check("keyless records to a compacted topic", tc.version, p, kerr.InvalidRecord.Code, everyTenth, keyMsg)
	}
	if p := produce(9, compact, recordsBatch(t, 100, nil, func(i int, r *kmsg.Record) { r.Key = []byte{byte(i)} })); p.ErrorCode != 0 || p.ErrorRecords != nil || p.ErrorMessage != nil {
		t.Errorf("keyed records to a compacted topic: %+v", p)
	}

	// dis.record.format native: records 5 and 50 have headers, 70 a null
	// value. The embedded store keeps batches whole and takes them.
	withHeaders := func(i int, r *kmsg.Record) {
		r.Key = fmt.Appendf(nil, "k%d", i)
		switch i {
		case 5, 50:
			r.Headers = []kmsg.Header{{Key: "h", Value: []byte("x")}}
		case 70:
			r.Value = nil
		}
	}
	p := produce(9, native, recordsBatch(t, 100, nil, withHeaders))
	if b.dis == nil {
		if p.ErrorCode != 0 || p.ErrorRecords != nil {
			t.Errorf("records with headers to a native topic on the embedded store: %+v", p)
		}
	} else {
		check("records that need an envelope to a native topic", 9, p, kerr.InvalidRecord.Code, []int32{5, 50, 70}, func(i int32) string {
			reason := "it has headers"
			if i == 70 {
				reason = "its value is null (a tombstone)"
			}
			return "dis.record.format native cannot store the record without an envelope: " + reason
		})
	}

	librdkafkaCounts(t, addr, "rec.py")
}

// librdkafkaCounts runs librdkafka's 0011 test_message_single_partition_
// record_fail through confluent-kafka-python, librdkafka 2.4 or newer (its
// KIP-467 support): 100 records, every tenth without a key, to the
// compacted topic, in one batch (10 INVALID_RECORD, 90
// _INVALID_DIFFERENT_RECORD) and one record a batch (10 INVALID_RECORD, 90
// delivered). The compat venv's, else /usr/bin/python3's; skipped when
// neither has a librdkafka that new.
func librdkafkaCounts(t *testing.T, addr, topic string) {
	t.Helper()
	home, _ := os.UserHomeDir()
	var py string
	for _, cand := range []string{filepath.Join(home, ".cache", "disgw-compat", "venv", "bin", "python"), "/usr/bin/python3"} {
		if exec.Command(cand, "-c", "import confluent_kafka as c; assert c.libversion()[1] >= 0x02040000").Run() == nil {
			py = cand
			break
		}
	}
	if py == "" {
		t.Log("skipping the librdkafka count: no confluent-kafka-python with librdkafka 2.4 or newer (KIP-467)")
		return
	}
	script := fmt.Sprintf(`
import sys
from confluent_kafka import Producer, KafkaError
def run(extra):
    counts = {}
    def dr(err, msg):
        k = "ok" if err is None else str(err.code())
        counts[k] = counts.get(k, 0) + 1
    p = Producer(dict({"bootstrap.servers": %q, "linger.ms": 500}, **extra))
    for i in range(100):
        v = ("msg %%d" %% i).encode()
        if i %% 10 == 0:
            p.produce(%q, value=v, partition=0, on_delivery=dr)
        else:
            p.produce(%q, value=v, key=v, partition=0, on_delivery=dr)
    assert p.flush(60) == 0, "unflushed"
    return counts
ir, idr = str(KafkaError.INVALID_RECORD), str(KafkaError._INVALID_DIFFERENT_RECORD)
one = run({})
single = run({"batch.size": 1})
print("one batch:", one, "one record a batch:", single)
assert one == {ir: 10, idr: 90}, one
assert single == {ir: 10, "ok": 90}, single
print("ok")
`, addr, topic, topic)
	out, err := exec.Command(py, "-c", script).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "ok") {
		t.Fatalf("confluent-kafka-python (%s): %v\n%s", py, err, out)
	}
	t.Logf("%s", bytes.TrimSpace(out))
}

func ptr[T any](v T) *T { return &v }

// strOrNull is *s quoted, or null.
func strOrNull(s *string) string {
	if s == nil {
		return "null"
	}
	return fmt.Sprintf("%q", *s)
}
