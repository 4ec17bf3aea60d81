package gateway_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/disgw/disgw/kafkawire/batch"
)

func metadataReq(topics ...string) *kmsg.MetadataRequest {
	r := kmsg.NewPtrMetadataRequest()
	for _, tp := range topics {
		mt := kmsg.NewMetadataRequestTopic()
		mt.Topic = kmsg.StringPtr(tp)
		r.Topics = append(r.Topics, mt)
	}
	return r
}

func createTopicsReq(topic string, partitions int32, configs map[string]string) *kmsg.CreateTopicsRequest {
	r := kmsg.NewPtrCreateTopicsRequest()
	r.TimeoutMillis = 10000
	ct := kmsg.NewCreateTopicsRequestTopic()
	ct.Topic, ct.NumPartitions, ct.ReplicationFactor = topic, partitions, -1
	for k, v := range configs {
		c := kmsg.NewCreateTopicsRequestTopicConfig()
		c.Name, c.Value = k, kmsg.StringPtr(v)
		ct.Configs = append(ct.Configs, c)
	}
	r.Topics = append(r.Topics, ct)
	return r
}

func TestMetadata(t *testing.T) {
	g := startGateway(t)
	r := g.raw(t)

	// v0-v3 auto-create requested topics (no allow flag at those versions).
	for v, topic := range map[int16]string{0: "auto.v0", 1: "auto.v1", 3: "auto.v3"} {
		resp := r.roundTrip(v, metadataReq(topic)).(*kmsg.MetadataResponse)
		if len(resp.Topics) != 1 || resp.Topics[0].ErrorCode != 0 || len(resp.Topics[0].Partitions) != 1 {
			t.Fatalf("v%d: %+v", v, resp.Topics)
		}
		if p := resp.Topics[0].Partitions[0]; p.Leader != 0 || len(p.ISR) != 1 || len(p.Replicas) != 1 {
			t.Fatalf("v%d partition %+v", v, p)
		}
		if len(resp.Brokers) != 1 || resp.Brokers[0].Port == 0 || resp.Brokers[0].Host != "127.0.0.1" {
			t.Fatalf("v%d brokers %+v", v, resp.Brokers)
		}
	}
	// v4+ follow allow_auto_topic_creation.
	req := metadataReq("no.auto")
	req.AllowAutoTopicCreation = false
	resp := r.roundTrip(12, req).(*kmsg.MetadataResponse)
	if resp.Topics[0].ErrorCode != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("allow=false created or errored wrongly: %+v", resp.Topics[0])
	}
	req.AllowAutoTopicCreation = true
	resp = r.roundTrip(12, req).(*kmsg.MetadataResponse)
	if resp.Topics[0].ErrorCode != 0 || resp.Topics[0].TopicID == [16]byte{} {
		t.Fatalf("allow=true: %+v", resp.Topics[0])
	}
	id := resp.Topics[0].TopicID
	// Lookup by id (v10+), and an unknown id.
	byID := kmsg.NewPtrMetadataRequest()
	byID.Topics = []kmsg.MetadataRequestTopic{{TopicID: id}, {TopicID: [16]byte{1}}}
	resp = r.roundTrip(12, byID).(*kmsg.MetadataResponse)
	if *resp.Topics[0].Topic != "no.auto" || resp.Topics[1].ErrorCode != kerr.UnknownTopicID.Code {
		t.Fatalf("by id: %+v", resp.Topics)
	}
	// All topics: v0 empty list, v1+ null; listing never creates.
	all0 := r.roundTrip(0, kmsg.NewPtrMetadataRequest()).(*kmsg.MetadataResponse)
	nullReq := kmsg.NewPtrMetadataRequest()
	nullReq.Topics = nil
	all12 := r.roundTrip(12, nullReq).(*kmsg.MetadataResponse)
	// The 4 created and __consumer_offsets (offsets_topic.go).
	if len(all0.Topics) != 5 || len(all12.Topics) != 5 {
		t.Fatalf("all topics: v0 %d, v12 %d, want 5", len(all0.Topics), len(all12.Topics))
	}
	empty := kmsg.NewPtrMetadataRequest()
	empty.Topics = []kmsg.MetadataRequestTopic{}
	if resp := r.roundTrip(12, empty).(*kmsg.MetadataResponse); len(resp.Topics) != 0 {
		t.Fatalf("empty list at v12 returned %d topics", len(resp.Topics))
	}
	// Invalid and colliding names.
	resp = r.roundTrip(1, metadataReq("bad name", "no_auto", strings.Repeat("x", 250))).(*kmsg.MetadataResponse)
	for _, tp := range resp.Topics {
		if tp.ErrorCode != kerr.InvalidTopicException.Code {
			t.Errorf("%q: error %d, want INVALID_TOPIC_EXCEPTION", *tp.Topic, tp.ErrorCode)
		}
	}
}

func TestCreateTopics(t *testing.T) {
	g := startGateway(t)
	r := g.raw(t)
	ok := r.roundTrip(7, createTopicsReq("a.b", 3, map[string]string{"retention.ms": "-1", "cleanup.policy": "delete", "min.insync.replicas": "2"})).(*kmsg.CreateTopicsResponse)
	if tp := ok.Topics[0]; tp.ErrorCode != 0 || tp.NumPartitions != 3 || tp.TopicID == [16]byte{} {
		t.Fatalf("create: %+v", tp)
	}
	cases := []struct {
		topic string
		parts int32
		cfg   map[string]string
		want  *kerr.Error
	}{
		{"a.b", 1, nil, kerr.TopicAlreadyExists},
		// An existing topic whatever the request's configs and partitions.
		{"a.b", 0, map[string]string{"cleanup.policy": "nope", "no.such.config": "1"}, kerr.TopicAlreadyExists},
		{"a_b", 1, nil, kerr.InvalidTopicException},
		{strings.Repeat("n", 250), 1, nil, kerr.InvalidTopicException},
		{strings.Repeat("n.", 124) + "n", 1, nil, nil},
		{"compact", 1, map[string]string{"cleanup.policy": "compact", "delete.retention.ms": "1000", "min.cleanable.dirty.ratio": "0.01"}, nil},
		{"both", 1, map[string]string{"cleanup.policy": "delete,compact", "segment.ms": "100", "segment.bytes": "1048576"}, nil},
		{"bad.policy", 1, map[string]string{"cleanup.policy": "compact,forever"}, kerr.InvalidConfig},
		{"bad.ratio", 1, map[string]string{"min.cleanable.dirty.ratio": "1.5"}, kerr.InvalidConfig},
		{"bad.segment", 1, map[string]string{"segment.bytes": "13"}, kerr.InvalidConfig},
		{"bad.lag", 1, map[string]string{"max.compaction.lag.ms": "0"}, kerr.InvalidConfig},
		{"unknown.cfg", 1, map[string]string{"no.such.config": "1"}, kerr.InvalidConfig},
		{"bad.format", 1, map[string]string{"dis.record.format": "plain"}, kerr.InvalidConfig},
		{"envelope", 1, map[string]string{"dis.record.format": "envelope"}, nil},
		{"zero", 0, nil, kerr.InvalidPartitions},
	}
	for _, tc := range cases {
		resp := r.roundTrip(7, createTopicsReq(tc.topic, tc.parts, tc.cfg)).(*kmsg.CreateTopicsResponse)
		tp := resp.Topics[0]
		if tc.want == nil {
			if tp.ErrorCode != 0 {
				t.Errorf("%s: error %d, want none", tc.topic, tp.ErrorCode)
			}
			continue
		}
		if tp.ErrorCode != tc.want.Code {
			t.Errorf("%s: error %d, want %s", tc.topic, tp.ErrorCode, tc.want.Message)
		}
		if tc.want == kerr.InvalidTopicException && strings.HasPrefix(tc.topic, "nnn") && !strings.Contains(*tp.ErrorMessage, "249") {
			t.Errorf("long name: message %q does not name the limit", *tp.ErrorMessage)
		}
	}
	// DescribeConfigs shows what was set.
	describe := func(topic string) (map[string]string, map[string]bool) {
		dc := kmsg.NewPtrDescribeConfigsRequest()
		res := kmsg.NewDescribeConfigsRequestResource()
		res.ResourceType, res.ResourceName = kmsg.ConfigResourceTypeTopic, topic
		dc.Resources = append(dc.Resources, res)
		dresp := r.roundTrip(4, dc).(*kmsg.DescribeConfigsResponse)
		got, def := map[string]string{}, map[string]bool{}
		for _, c := range dresp.Resources[0].Configs {
			got[c.Name] = *c.Value
			def[c.Name] = c.Source == kmsg.ConfigSourceDefaultConfig
		}
		return got, def
	}
	got, def := describe("a.b")
	if got["retention.ms"] != "-1" || got["cleanup.policy"] != "delete" || got["max.message.bytes"] == "" || got["message.timestamp.type"] != "CreateTime" ||
		got["dis.record.format"] != "auto" || !def["dis.record.format"] {
		t.Fatalf("describe configs: %v (default: %v)", got, def)
	}
	if got, def := describe("envelope"); got["dis.record.format"] != "envelope" || def["dis.record.format"] {
		t.Fatalf("describe configs of a topic with dis.record.format=envelope: %v (default: %v)", got["dis.record.format"], def["dis.record.format"])
	}
	// The compaction and segment configs: Kafka's defaults, or what was set.
	if got["delete.retention.ms"] != "86400000" || got["min.cleanable.dirty.ratio"] != "0.5" || got["min.compaction.lag.ms"] != "0" ||
		got["max.compaction.lag.ms"] != "9223372036854775807" || got["segment.bytes"] != "1073741824" || got["segment.ms"] != "604800000" ||
		!def["delete.retention.ms"] || !def["segment.ms"] {
		t.Fatalf("describe configs, compaction defaults: %v (default: %v)", got, def)
	}
	if got, def := describe("compact"); got["cleanup.policy"] != "compact" || got["delete.retention.ms"] != "1000" ||
		got["min.cleanable.dirty.ratio"] != "0.01" || def["cleanup.policy"] || def["delete.retention.ms"] || !def["segment.ms"] {
		t.Fatalf("describe configs of a compacted topic: %v (default: %v)", got, def)
	}
	if got, _ := describe("both"); got["cleanup.policy"] != "delete,compact" || got["segment.ms"] != "100" || got["segment.bytes"] != "1048576" {
		t.Fatalf("describe configs of a topic created with cleanup.policy delete,compact (kept in that order, as Kafka keeps it): %v", got)
	}
	// A compacted topic refuses a record without a key (Kafka: INVALID_RECORD).
	keyless := makeBatch(t, batchSpec{n: 2, noKey: true})
	if p := r.roundTrip(9, produceReq(-1, "compact", 0, keyless)).(*kmsg.ProduceResponse).Topics[0].Partitions[0]; p.ErrorCode != kerr.InvalidRecord.Code {
		t.Fatalf("keyless record to a compacted topic: %+v", p)
	}
	if p := r.roundTrip(9, produceReq(-1, "compact", 0, makeBatch(t, batchSpec{n: 2}))).(*kmsg.ProduceResponse).Topics[0].Partitions[0]; p.ErrorCode != 0 {
		t.Fatalf("keyed records to a compacted topic: %+v", p)
	}
	if p := r.roundTrip(9, produceReq(-1, "a.b", 0, keyless)).(*kmsg.ProduceResponse).Topics[0].Partitions[0]; p.ErrorCode != 0 {
		t.Fatalf("keyless records to a delete topic: %+v", p)
	}
	// CreatePartitions: increase only.
	cp := kmsg.NewPtrCreatePartitionsRequest()
	cpt := kmsg.NewCreatePartitionsRequestTopic()
	cpt.Topic, cpt.Count = "a.b", 3
	cp.Topics = append(cp.Topics, cpt)
	if resp := r.roundTrip(3, cp).(*kmsg.CreatePartitionsResponse); resp.Topics[0].ErrorCode != kerr.InvalidPartitions.Code {
		t.Fatalf("same count: %+v", resp.Topics[0])
	}
	cp.Topics[0].Count = 5
	if resp := r.roundTrip(3, cp).(*kmsg.CreatePartitionsResponse); resp.Topics[0].ErrorCode != 0 {
		t.Fatalf("increase: %+v", resp.Topics[0])
	}
	if resp := r.roundTrip(12, metadataReq("a.b")).(*kmsg.MetadataResponse); len(resp.Topics[0].Partitions) != 5 {
		t.Fatalf("after increase: %d partitions", len(resp.Topics[0].Partitions))
	}
	// DeleteTopics, then a re-created topic gets a new id and starts at 0.
	dt := kmsg.NewPtrDeleteTopicsRequest()
	dt.TopicNames = []string{"a.b"}
	if resp := r.roundTrip(4, dt).(*kmsg.DeleteTopicsResponse); resp.Topics[0].ErrorCode != 0 {
		t.Fatalf("delete: %+v", resp.Topics[0])
	}
	again := r.roundTrip(7, createTopicsReq("a.b", 1, nil)).(*kmsg.CreateTopicsResponse)
	if again.Topics[0].ErrorCode != 0 || again.Topics[0].TopicID == ok.Topics[0].TopicID {
		t.Fatalf("re-created: %+v (old id %x)", again.Topics[0], ok.Topics[0].TopicID)
	}
}

func TestProduceFetchErrors(t *testing.T) {
	g := startGateway(t)
	r := g.raw(t)
	r.roundTrip(7, createTopicsReq("pf", 1, map[string]string{"max.message.bytes": "2000"}))
	pcode := func(version int16, req *kmsg.ProduceRequest) int16 {
		t.Helper()
		return r.roundTrip(version, req).(*kmsg.ProduceResponse).Topics[0].Partitions[0].ErrorCode
	}
	if c := pcode(9, produceReq(-1, "nope", 0, makeBatch(t, batchSpec{n: 1}))); c != kerr.UnknownTopicOrPartition.Code {
		t.Errorf("unknown topic: %d", c)
	}
	if c := pcode(9, produceReq(-1, "pf", 4, makeBatch(t, batchSpec{n: 1}))); c != kerr.UnknownTopicOrPartition.Code {
		t.Errorf("unknown partition: %d", c)
	}
	if c := pcode(9, produceReq(-1, "pf", 0, makeBatch(t, batchSpec{n: 3, valueBytes: 1000}))); c != kerr.MessageTooLarge.Code {
		t.Errorf("too large: %d", c)
	}
	if c := pcode(6, produceReq(-1, "pf", 0, makeBatch(t, batchSpec{n: 2, codec: 4}))); c != kerr.UnsupportedCompressionType.Code {
		t.Errorf("zstd at v6: %d", c)
	}
	if c := pcode(9, produceReq(2, "pf", 0, makeBatch(t, batchSpec{n: 1}))); c != kerr.InvalidRequiredAcks.Code {
		t.Errorf("acks=2: %d", c)
	}
	for _, codec := range []int8{0, 1, 2, 3, 4} {
		if c := pcode(9, produceReq(1, "pf", 0, makeBatch(t, batchSpec{n: 2, codec: codec}))); c != 0 {
			t.Errorf("codec %d: %d", codec, c)
		}
	}
	// Fetch: out of range, zstd below v10, fetch sessions, leader epochs.
	fcode := func(version int16, req *kmsg.FetchRequest) *kmsg.FetchResponse {
		t.Helper()
		return r.roundTrip(version, req).(*kmsg.FetchResponse)
	}
	// As Kafka 4.4 answers it: offsets -1 on OFFSET_OUT_OF_RANGE.
	if p := fcode(11, fetchReq("pf", 0, 11, 0, 1)).Topics[0].Partitions[0]; p.ErrorCode != kerr.OffsetOutOfRange.Code || p.HighWatermark != -1 || p.LogStartOffset != -1 {
		t.Errorf("above next: %+v", p)
	}
	if p := fcode(9, fetchReq("pf", 0, 8, 0, 1)).Topics[0].Partitions[0]; p.ErrorCode != kerr.UnsupportedCompressionType.Code {
		t.Errorf("zstd at v9: %d", p.ErrorCode)
	}
	if p := fcode(10, fetchReq("pf", 0, 8, 0, 1)).Topics[0].Partitions[0]; p.ErrorCode != 0 || len(p.RecordBatches) == 0 {
		t.Errorf("zstd at v10: %+v", p)
	}
	// An offset inside a stored batch returns the whole batch.
	if p := fcode(11, fetchReq("pf", 0, 1, 0, 1)).Topics[0].Partitions[0]; p.ErrorCode != 0 || int64(len(p.RecordBatches)) == 0 || kmsgBaseOffset(p.RecordBatches) != 0 {
		t.Errorf("inside batch: %+v", p)
	}
	sess := fetchReq("pf", 0, 0, 0, 1)
	sess.SessionID, sess.SessionEpoch = 42, 1
	if resp := fcode(11, sess); resp.ErrorCode != kerr.FetchSessionIDNotFound.Code {
		t.Errorf("unknown session: %d", resp.ErrorCode)
	}
	sess.SessionID, sess.SessionEpoch = 0, 0 // asks for a session: declined with id 0
	if resp := fcode(11, sess); resp.ErrorCode != 0 || resp.SessionID != 0 {
		t.Errorf("session request: %+v", resp)
	}
	ep := fetchReq("pf", 0, 0, 0, 1)
	ep.Topics[0].Partitions[0].CurrentLeaderEpoch = 1
	if p := fcode(11, ep).Topics[0].Partitions[0]; p.ErrorCode != kerr.UnknownLeaderEpoch.Code {
		t.Errorf("newer epoch: %d", p.ErrorCode)
	}
}

func kmsgBaseOffset(b []byte) int64 {
	var rb kmsg.RecordBatch
	_ = rb.ReadFrom(b)
	return rb.FirstOffset
}

// TestFetchLongPoll: a fetch with nothing new waits and is woken by a
// synced produce on another connection, well before max_wait_ms.
func TestFetchLongPoll(t *testing.T) {
	g := startGateway(t)
	r := g.raw(t)
	r.roundTrip(7, createTopicsReq("lp", 1, nil))
	fetcher := g.raw(t)
	corr := fetcher.send(11, fetchReq("lp", 0, 0, 60000, 1))
	got := make(chan *kmsg.FetchResponse, 1)
	go func() {
		c, body, err := fetcher.recv(1, 11)
		resp := kmsg.NewPtrFetchResponse()
		resp.Version = 11
		if err == nil && c == corr && resp.ReadFrom(body) == nil {
			got <- resp
		}
		close(got)
	}()
	select {
	case <-got:
		t.Fatal("fetch returned before any produce")
	case <-time.After(200 * time.Millisecond):
	}
	if c := r.roundTrip(9, produceReq(-1, "lp", 0, makeBatch(t, batchSpec{n: 2}))).(*kmsg.ProduceResponse).Topics[0].Partitions[0].ErrorCode; c != 0 {
		t.Fatalf("produce: %d", c)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	select {
	case resp, ok := <-got:
		if !ok || len(resp.Topics[0].Partitions[0].RecordBatches) == 0 || resp.Topics[0].Partitions[0].HighWatermark != 2 {
			t.Fatalf("woken fetch: %+v", resp)
		}
	case <-ctx.Done():
		t.Fatal("long poll not woken by the produce")
	}
}

func TestListOffsets(t *testing.T) {
	g := startGateway(t)
	r := g.raw(t)
	r.roundTrip(7, createTopicsReq("lo", 1, nil))
	// Two batches; timestamps per record: 1000,1010,1020 then 500,2000.
	r.roundTrip(9, produceReq(-1, "lo", 0, makeBatch(t, batchSpec{n: 3, firstTS: 1000, tsStep: 10})))
	r.roundTrip(9, produceReq(-1, "lo", 0, makeBatch(t, batchSpec{n: 2, firstTS: 500, tsStep: 1500})))
	lo := func(version int16, ts int64) kmsg.ListOffsetsResponseTopicPartition {
		t.Helper()
		req := kmsg.NewPtrListOffsetsRequest()
		rt := kmsg.NewListOffsetsRequestTopic()
		rt.Topic = "lo"
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Timestamp = ts
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		return r.roundTrip(version, req).(*kmsg.ListOffsetsResponse).Topics[0].Partitions[0]
	}
	check := func(version int16, ts, wantOff, wantTS int64, wantErr int16) {
		t.Helper()
		p := lo(version, ts)
		if p.ErrorCode != wantErr || wantErr == 0 && (p.Offset != wantOff || p.Timestamp != wantTS) {
			t.Errorf("v%d ts %d: offset %d ts %d error %d; want %d %d %d", version, ts, p.Offset, p.Timestamp, p.ErrorCode, wantOff, wantTS, wantErr)
		}
	}
	check(1, -1, 5, -1, 0)
	check(1, -2, 0, -1, 0)
	check(1, 1005, 1, 1010, 0) // inside the first batch: per record
	check(1, 1020, 2, 1020, 0) // exact
	check(1, 1021, 4, 2000, 0) // second batch: its first record (500) is too early
	check(1, 2001, -1, -1, 0)  // none that late
	check(1, 0, 0, 1000, 0)    // from the start
	check(7, -3, 4, 2000, 0)   // max timestamp (KIP-734)
	check(6, -3, 0, 0, kerr.UnsupportedVersion.Code)
	check(8, -4, 0, -1, 0)
	check(9, -5, -1, -1, 0)
	check(1, -7, 0, 0, kerr.UnsupportedVersion.Code)
}

// TestListOffsetsTrustsRecords: a batch whose header claims a larger max
// timestamp than its records have is stored with its records' largest, as
// Kafka's broker does, so ListOffsets by timestamp finds the right records.
func TestListOffsetsTrustsRecords(t *testing.T) {
	g := startGateway(t)
	r := g.raw(t)
	r.roundTrip(7, createTopicsReq("lying", 1, nil))
	lying := makeBatch(t, batchSpec{n: 3, firstTS: 1000, tsStep: 1}) // records at 1000-1002
	batch.SetMaxTimestamp(lying, 100_000)
	for _, b := range [][]byte{lying, makeBatch(t, batchSpec{n: 3, firstTS: 1200, tsStep: 1})} {
		if p := r.roundTrip(9, produceReq(-1, "lying", 0, b)).(*kmsg.ProduceResponse).Topics[0].Partitions[0]; p.ErrorCode != 0 {
			t.Fatalf("produce: %+v", p)
		}
	}
	for _, tc := range []struct{ ts, want int64 }{{1050, 3}, {1201, 4}, {1001, 1}, {1300, -1}} {
		req := kmsg.NewPtrListOffsetsRequest()
		rt := kmsg.NewListOffsetsRequestTopic()
		rt.Topic = "lying"
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Timestamp = tc.ts
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		p := r.roundTrip(4, req).(*kmsg.ListOffsetsResponse).Topics[0].Partitions[0]
		if p.ErrorCode != 0 || p.Offset != tc.want {
			t.Errorf("ListOffsets(%d) = offset %d, error %d; want %d", tc.ts, p.Offset, p.ErrorCode, tc.want)
		}
	}
	fr := r.roundTrip(11, fetchReq("lying", 0, 0, 0, 0)).(*kmsg.FetchResponse)
	if raw := fr.Topics[0].Partitions[0].RecordBatches; len(raw) < batch.HeaderLen {
		t.Fatalf("fetch: %d bytes", len(raw))
	} else if h, err := batch.ParseHeader(raw); err != nil || h.MaxTimestamp != 1002 || !batch.CheckCRC(raw[:h.Length+12]) {
		t.Fatalf("stored header %+v, %v: want max timestamp 1002 and a valid CRC", h, err)
	}
}

// TestIdempotentRetry: a retried idempotent batch is answered with its
// original offsets; a gap gets OUT_OF_ORDER_SEQUENCE_NUMBER.
func TestIdempotentRetry(t *testing.T) {
	g := startGateway(t)
	r := g.raw(t)
	r.roundTrip(7, createTopicsReq("idem", 1, nil))
	ip := r.roundTrip(4, kmsg.NewPtrInitProducerIDRequest()).(*kmsg.InitProducerIDResponse)
	if ip.ErrorCode != 0 || ip.ProducerID < 0 {
		t.Fatalf("init producer id: %+v", ip)
	}
	send := func(seq int32, n int) kmsg.ProduceResponseTopicPartition {
		t.Helper()
		b := makeBatch(t, batchSpec{n: n, idem: true, pid: ip.ProducerID, epoch: ip.ProducerEpoch, seq: seq})
		return r.roundTrip(9, produceReq(-1, "idem", 0, b)).(*kmsg.ProduceResponse).Topics[0].Partitions[0]
	}
	if p := send(0, 3); p.ErrorCode != 0 || p.BaseOffset != 0 {
		t.Fatalf("first: %+v", p)
	}
	if p := send(3, 2); p.ErrorCode != 0 || p.BaseOffset != 3 {
		t.Fatalf("second: %+v", p)
	}
	if p := send(0, 3); p.ErrorCode != 0 || p.BaseOffset != 0 {
		t.Fatalf("retry of first: %+v", p)
	}
	if p := send(9, 1); p.ErrorCode != kerr.OutOfOrderSequenceNumber.Code {
		t.Fatalf("gap: %+v", p)
	}
	if p := send(5, 1); p.ErrorCode != 0 || p.BaseOffset != 5 {
		t.Fatalf("next in order: %+v", p)
	}
	// Pipelined on one connection: the retry sent while the original waits
	// for its sync is answered with the original offset.
	b := makeBatch(t, batchSpec{n: 4, idem: true, pid: ip.ProducerID, epoch: ip.ProducerEpoch, seq: 6})
	c1 := r.send(9, produceReq(-1, "idem", 0, b))
	c2 := r.send(9, produceReq(-1, "idem", 0, append([]byte(nil), b...)))
	for _, want := range []int32{c1, c2} {
		corr, body, err := r.recv(0, 9)
		if err != nil || corr != want {
			t.Fatalf("pipelined: corr %d want %d: %v", corr, want, err)
		}
		resp := kmsg.NewPtrProduceResponse()
		resp.Version = 9
		if err := resp.ReadFrom(body); err != nil {
			t.Fatal(err)
		}
		if p := resp.Topics[0].Partitions[0]; p.ErrorCode != 0 || p.BaseOffset != 6 {
			t.Fatalf("pipelined response %d: %+v", corr, p)
		}
	}
}
