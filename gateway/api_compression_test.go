package gateway_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestCompressionTypeRecompresses produces gzip batches with kgo to topics
// of each compression.type and reads the stored batches back with a raw
// Fetch: the batch's codec is the topic's (the producer's for producer),
// and kgo consumes the records intact, as from Kafka, which recompresses
// in its LogValidator. A gateway restart keeps the config.
func TestCompressionTypeRecompresses(t *testing.T) {
	dir := t.TempDir()
	g := startGatewayAt(t, dir)
	r := g.raw(t)
	want := map[string]int8{"producer": 1, "uncompressed": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
	levels := map[string]map[string]string{
		"gzip": {"compression.gzip.level": "9"},
		"lz4":  {"compression.lz4.level": "17"},
		"zstd": {"compression.zstd.level": "19"},
	}
	for ct := range want {
		cfg := map[string]string{"compression.type": ct}
		for k, v := range levels[ct] {
			cfg[k] = v
		}
		if resp := r.roundTrip(7, createTopicsReq("comp-"+ct, 1, cfg)).(*kmsg.CreateTopicsResponse); resp.Topics[0].ErrorCode != 0 {
			t.Fatalf("create comp-%s: %d", ct, resp.Topics[0].ErrorCode)
		}
	}
	cl := g.client(t, kgo.ProducerBatchCompression(kgo.GzipCompression()), kgo.ProducerLinger(50*time.Millisecond))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for ct := range want {
		for i := range 20 {
			cl.Produce(ctx, &kgo.Record{Topic: "comp-" + ct, Key: []byte(fmt.Sprint(i)), Value: []byte(strings.Repeat("v", 200) + fmt.Sprint(i))}, nil)
		}
	}
	if err := cl.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	check := func(r *rawConn) {
		t.Helper()
		for ct, codec := range want {
			f := kmsg.NewPtrFetchRequest()
			f.MaxWaitMillis, f.MaxBytes, f.ReplicaID = 100, 1<<20, -1
			ft := kmsg.NewFetchRequestTopic()
			ft.Topic = "comp-" + ct
			fp := kmsg.NewFetchRequestTopicPartition()
			fp.PartitionMaxBytes = 1 << 20
			ft.Partitions = append(ft.Partitions, fp)
			f.Topics = append(f.Topics, ft)
			resp := r.roundTrip(11, f).(*kmsg.FetchResponse)
			p := resp.Topics[0].Partitions[0]
			if p.ErrorCode != 0 || len(p.RecordBatches) == 0 {
				t.Fatalf("%s: fetch error %d, %d bytes", ct, p.ErrorCode, len(p.RecordBatches))
			}
			var kb kmsg.RecordBatch
			if err := kb.ReadFrom(p.RecordBatches); err != nil {
				t.Fatal(err)
			}
			if got := int8(kb.Attributes & 7); got != codec {
				t.Errorf("comp-%s: stored batch codec %d, want %d", ct, got, codec)
			}
		}
	}
	check(r)
	// The records as a consumer reads them.
	for ct := range want {
		cons := g.client(t, kgo.ConsumeTopics("comp-"+ct), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
		n := 0
		for n < 20 {
			fs := cons.PollFetches(ctx)
			if err := fs.Err(); err != nil {
				t.Fatalf("%s: %v", ct, err)
			}
			fs.EachRecord(func(rec *kgo.Record) {
				if string(rec.Value) != strings.Repeat("v", 200)+string(rec.Key) {
					t.Errorf("%s: record %q = %q", ct, rec.Key, rec.Value)
				}
				n++
			})
		}
	}
	g.stop(t)
	g = startGatewayAt(t, dir)
	r = g.raw(t)
	got := map[string]string{}
	for ct := range want {
		dc := kmsg.NewPtrDescribeConfigsRequest()
		res := kmsg.NewDescribeConfigsRequestResource()
		res.ResourceType, res.ResourceName = kmsg.ConfigResourceTypeTopic, "comp-"+ct
		res.ConfigNames = []string{"compression.type", "compression.gzip.level", "compression.lz4.level", "compression.zstd.level"}
		dc.Resources = append(dc.Resources, res)
		for _, c := range r.roundTrip(4, dc).(*kmsg.DescribeConfigsResponse).Resources[0].Configs {
			got[ct+" "+c.Name] = *c.Value + " " + c.Source.String()
		}
	}
	for k, v := range map[string]string{
		"zstd compression.type":         "zstd DYNAMIC_TOPIC_CONFIG",
		"zstd compression.zstd.level":   "19 DYNAMIC_TOPIC_CONFIG",
		"lz4 compression.lz4.level":     "17 DYNAMIC_TOPIC_CONFIG",
		"gzip compression.gzip.level":   "9 DYNAMIC_TOPIC_CONFIG",
		"producer compression.type":     "producer DYNAMIC_TOPIC_CONFIG", // set explicitly, at its default: as Kafka 4.4 reports it
		"zstd compression.gzip.level":   "-1 DEFAULT_CONFIG",
		"uncompressed compression.type": "uncompressed DYNAMIC_TOPIC_CONFIG",
	} {
		if got[k] != v {
			t.Errorf("after restart %s = %q, want %q", k, got[k], v)
		}
	}
}

// TestCompressionConfigsRefused: the values Kafka 4.4 refuses, with its
// messages (asked of Kafka with CreateTopics validate_only).
func TestCompressionConfigsRefused(t *testing.T) {
	g := startGateway(t)
	r := g.raw(t)
	for kv, msg := range map[string]string{
		"compression.type=brotli":            "String must be one of: uncompressed, zstd, lz4, snappy, gzip, producer",
		"compression.type=ZSTD":              "String must be one of: uncompressed, zstd, lz4, snappy, gzip, producer",
		"compression.gzip.level=0":           "Value must be between 1 and 9 or equal to -1",
		"compression.gzip.level=10":          "Value must be between 1 and 9 or equal to -1",
		"compression.gzip.level=x":           "Not a number of type INT",
		"compression.lz4.level=0":            "Value must be at least 1",
		"compression.lz4.level=18":           "Value must be no more than 17",
		"compression.zstd.level=23":          "Value must be no more than 22",
		"compression.zstd.level=-131073":     "Value must be at least -131072",
		"message.downconversion.enable=true": "message.downconversion.enable",
	} {
		k, v, _ := strings.Cut(kv, "=")
		resp := r.roundTrip(7, createTopicsReq("refused", 1, map[string]string{k: v})).(*kmsg.CreateTopicsResponse)
		tp := resp.Topics[0]
		if tp.ErrorCode != kerr.InvalidConfig.Code || tp.ErrorMessage == nil || !strings.Contains(*tp.ErrorMessage, msg) {
			t.Errorf("%s: error %d %v, want INVALID_CONFIG %q", kv, tp.ErrorCode, strp(tp.ErrorMessage), msg)
		}
	}
	for i, kv := range []string{"compression.gzip.level=-1", "compression.zstd.level=-131072", "compression.zstd.level=0", "compression.lz4.level=1"} {
		k, v, _ := strings.Cut(kv, "=")
		if resp := r.roundTrip(7, createTopicsReq(fmt.Sprint("ok-", i), 1, map[string]string{k: v})).(*kmsg.CreateTopicsResponse); resp.Topics[0].ErrorCode != 0 {
			t.Errorf("%s: error %d", kv, resp.Topics[0].ErrorCode)
		}
	}
}

// TestCompressionTypeAltered: kadm's AlterTopicConfigs (IncrementalAlterConfigs)
// SETs compression.type and a level and DELETEs them back to the defaults,
// and produced batches follow the current value.
func TestCompressionTypeAltered(t *testing.T) {
	g := startGateway(t)
	r := g.raw(t)
	if resp := r.roundTrip(7, createTopicsReq("alter-comp", 1, nil)).(*kmsg.CreateTopicsResponse); resp.Topics[0].ErrorCode != 0 {
		t.Fatal(resp.Topics[0].ErrorCode)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl := g.client(t, kgo.ProducerBatchCompression(kgo.GzipCompression()), kgo.DefaultProduceTopic("alter-comp"))
	adm := kadm.NewClient(cl)
	describe := func() string {
		t.Helper()
		rcs, err := adm.DescribeTopicConfigs(ctx, "alter-comp")
		if err != nil {
			t.Fatal(err)
		}
		rc, err := rcs.On("alter-comp", nil)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, c := range rc.Configs {
			if c.Key == "compression.type" || c.Key == "compression.lz4.level" {
				out = append(out, c.Key+"="+c.MaybeValue()+"/"+c.Source.String())
			}
		}
		return strings.Join(out, " ")
	}
	lastCodec := func() int8 {
		t.Helper()
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte(strings.Repeat("z", 300))}).FirstErr(); err != nil {
			t.Fatal(err)
		}
		f := kmsg.NewPtrFetchRequest()
		f.MaxWaitMillis, f.MaxBytes, f.ReplicaID = 100, 1<<20, -1
		ft := kmsg.NewFetchRequestTopic()
		ft.Topic = "alter-comp"
		fp := kmsg.NewFetchRequestTopicPartition()
		fp.PartitionMaxBytes = 1 << 20
		ft.Partitions = append(ft.Partitions, fp)
		f.Topics = append(f.Topics, ft)
		raw := r.roundTrip(11, f).(*kmsg.FetchResponse).Topics[0].Partitions[0].RecordBatches
		var codec int8
		for len(raw) > 0 {
			var kb kmsg.RecordBatch
			if err := kb.ReadFrom(raw); err != nil {
				t.Fatal(err)
			}
			codec = int8(kb.Attributes & 7)
			raw = raw[12+kb.Length:]
		}
		return codec
	}
	lz4, level := "lz4", "3"
	if rs, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Name: "compression.type", Value: &lz4}, {Name: "compression.lz4.level", Value: &level}}, "alter-comp"); err != nil || rs[0].Err != nil {
		t.Fatalf("alter: %v %v", err, rs)
	}
	if got := describe(); got != "compression.lz4.level=3/DYNAMIC_TOPIC_CONFIG compression.type=lz4/DYNAMIC_TOPIC_CONFIG" {
		t.Errorf("after SET: %s", got)
	}
	if c := lastCodec(); c != 3 {
		t.Errorf("after SET lz4: stored codec %d", c)
	}
	if rs, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.DeleteConfig, Name: "compression.type"}, {Op: kadm.DeleteConfig, Name: "compression.lz4.level"}}, "alter-comp"); err != nil || rs[0].Err != nil {
		t.Fatalf("delete: %v %v", err, rs)
	}
	if got := describe(); got != "compression.lz4.level=9/DEFAULT_CONFIG compression.type=producer/DEFAULT_CONFIG" {
		t.Errorf("after DELETE: %s", got)
	}
	if c := lastCodec(); c != 1 {
		t.Errorf("after DELETE: stored codec %d, want the producer's gzip", c)
	}
}

// TestCleanupPolicyAppend: IncrementalAlterConfigs APPEND and SUBTRACT on
// cleanup.policy, a list in Kafka (asked of Kafka 4.4: APPEND compact to
// delete gives "delete,compact", and so does disgw); a
// replication throttle (an ignored list) accepts APPEND; a key that is not
// a list refuses it with INVALID_CONFIG.
func TestCleanupPolicyAppend(t *testing.T) {
	g := startGateway(t)
	r := g.raw(t)
	if resp := r.roundTrip(7, createTopicsReq("append-cp", 1, nil)).(*kmsg.CreateTopicsResponse); resp.Topics[0].ErrorCode != 0 {
		t.Fatal(resp.Topics[0].ErrorCode)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	adm := kadm.NewClient(g.client(t))
	value := func() string {
		rcs, err := adm.DescribeTopicConfigs(ctx, "append-cp")
		if err != nil {
			t.Fatal(err)
		}
		rc, _ := rcs.On("append-cp", nil)
		for _, c := range rc.Configs {
			if c.Key == "cleanup.policy" {
				return c.MaybeValue()
			}
		}
		return ""
	}
	alter := func(op kadm.IncrementalOp, key, v string) error {
		rs, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: op, Name: key, Value: &v}}, "append-cp")
		if err != nil {
			t.Fatal(err)
		}
		return rs[0].Err
	}
	if err := alter(kadm.AppendConfig, "cleanup.policy", "compact"); err != nil || value() != "delete,compact" { // as Kafka 4.4 answers
		t.Errorf("APPEND compact: %v, %q", err, value())
	}
	if err := alter(kadm.SubtractConfig, "cleanup.policy", "delete"); err != nil || value() != "compact" {
		t.Errorf("SUBTRACT delete: %v, %q", err, value())
	}
	if err := alter(kadm.AppendConfig, "leader.replication.throttled.replicas", "0:0"); err != nil {
		t.Errorf("APPEND to a throttle list: %v", err)
	}
	if err := alter(kadm.AppendConfig, "segment.ms", "1"); !errors.Is(err, kerr.InvalidConfig) {
		t.Errorf("APPEND to segment.ms: %v, want INVALID_CONFIG", err)
	}
}
