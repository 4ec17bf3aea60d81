package main

import (
	"context"
	"errors"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/disgw/disgw/kafkawire/batch"
)

// fetchedRecord is one record readTopic read.
type fetchedRecord struct {
	Offset     int64
	Key, Value []byte
}

// readTopic reads every partition of topic from its start to its high
// watermark with Fetch requests of its own (a compacted partition may end
// in a batch without records, which a consumer passes without a record to
// show), decoding the batches as a consumer does.
func readTopic(t *testing.T, addr, topic string) map[int32][]fetchedRecord {
	t.Helper()
	out, err := readTopicErr(t, addr, topic)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// readTopicErr is readTopic returning a Fetch's error code (for a start
// that moves under the read) instead of failing.
func readTopicErr(t *testing.T, addr, topic string) (map[int32][]fetchedRecord, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	starts, err := adm.ListStartOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	topics, err := adm.ListTopics(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	id := topics[topic].ID
	out := map[int32][]fetchedRecord{}
	var ferr error
	starts.Each(func(o kadm.ListedOffset) {
		for off := o.Offset; ; {
			req := kmsg.NewPtrFetchRequest()
			req.MaxWaitMillis, req.MaxBytes = 10, 1<<20
			rt := kmsg.NewFetchRequestTopic()
			rt.Topic, rt.TopicID = topic, id // the client picks the version, v13+ by id
			rp := kmsg.NewFetchRequestTopicPartition()
			rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes = o.Partition, off, 1<<20
			rt.Partitions = append(rt.Partitions, rp)
			req.Topics = append(req.Topics, rt)
			resp, err := req.RequestWith(ctx, cl)
			if err != nil {
				t.Fatalf("fetch %s[%d] at %d: %v", topic, o.Partition, off, err)
			}
			fp := resp.Topics[0].Partitions[0]
			if fp.ErrorCode != 0 {
				ferr = fmt.Errorf("fetch %s[%d] at %d: %w", topic, o.Partition, off, kerr.ErrorForCode(fp.ErrorCode))
				return
			}
			if off >= fp.HighWatermark {
				return
			}
			for b := fp.RecordBatches; len(b) >= batch.HeaderLen; {
				raw := b[:12+int(uint32(b[8])<<24|uint32(b[9])<<16|uint32(b[10])<<8|uint32(b[11]))]
				b = b[len(raw):]
				recs, err := batch.DecodeRecords(raw)
				if err != nil {
					t.Fatalf("batch at %d: %v", batch.BaseOffset(raw), err)
				}
				base := batch.BaseOffset(raw)
				for _, r := range recs {
					if r.Offset(base) >= off {
						out[o.Partition] = append(out[o.Partition], fetchedRecord{r.Offset(base), r.Key, r.Value})
					}
				}
				off = batch.LastOffset(raw) + 1
			}
		}
	})
	return out, ferr
}

// TestCompactedTopic: a compacted topic on the embedded store, through a
// real gateway process and franz-go: 1,000 keys × 10 versions and 100
// tombstones; once the log cleaner ran, reading from the start yields each
// live key's latest value at the offset it was produced at, and past
// delete.retention.ms no tombstoned key; a restart keeps that and the
// cluster id.
func TestCompactedTopic(t *testing.T) {
	t.Parallel()
	p := startGateway(t, gatewayOpts{env: []string{"DISGW_CLEANER_CHECK_INTERVAL=100ms"}})
	addr := p.addr
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DefaultProduceTopic("compacted"))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	str := func(s string) *string { return &s }
	if _, err := adm.CreateTopic(ctx, 2, 1, map[string]*string{
		"cleanup.policy": str("compact"), "segment.ms": str("300"), "segment.bytes": str("65536"),
		"min.cleanable.dirty.ratio": str("0.01"), "delete.retention.ms": str("3000"),
	}, "compacted"); err != nil {
		t.Fatal(err)
	}
	meta, err := adm.BrokerMetadata(ctx)
	if err != nil {
		t.Fatal(err)
	}
	clusterID := meta.Cluster

	type latest struct {
		offset int64
		value  []byte
	}
	want := map[string]latest{}
	var records []*kgo.Record
	for v := range 10 {
		for k := range 1000 {
			records = append(records, &kgo.Record{Key: fmt.Appendf(nil, "key-%04d", k), Value: fmt.Appendf(nil, "key-%04d version %d", k, v)})
		}
	}
	for k := range 100 {
		records = append(records, &kgo.Record{Key: fmt.Appendf(nil, "key-%04d", k)}) // tombstones
	}
	res := cl.ProduceSync(ctx, records...)
	if err := res.FirstErr(); err != nil {
		t.Fatal(err)
	}
	for _, r := range res {
		want[string(r.Record.Key)] = latest{r.Record.Offset, r.Record.Value}
	}

	// check reads the topic; tombstones may still be there unless gone.
	check := func(gone bool) error {
		seen := map[string]bool{}
		for part, rs := range readTopic(t, addr, "compacted") {
			for _, r := range rs {
				key := string(r.Key)
				w, ok := want[key]
				switch {
				case !ok:
					return fmt.Errorf("partition %d offset %d: unknown key %q", part, r.Offset, key)
				case seen[key]:
					return fmt.Errorf("partition %d offset %d: key %q again (not compacted yet)", part, r.Offset, key)
				case r.Offset != w.offset || string(r.Value) != string(w.value) || (r.Value == nil) != (w.value == nil):
					return fmt.Errorf("partition %d: key %q at %d = %q, want its latest at %d", part, key, r.Offset, r.Value, w.offset)
				case w.value == nil && gone:
					return fmt.Errorf("partition %d: tombstoned key %q still there at %d", part, key, r.Offset)
				}
				seen[key] = true
			}
		}
		for key, w := range want {
			if w.value != nil && !seen[key] {
				return fmt.Errorf("live key %q (latest at %d) not read", key, w.offset)
			}
		}
		return nil
	}
	waitCond := func(what string, cond func() error) {
		t.Helper()
		deadline := time.Now().Add(60 * time.Second)
		for {
			err := cond()
			if err == nil {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: %v", what, err)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	waitCond("compaction", func() error { return check(false) })
	waitCond("tombstones past delete.retention.ms", func() error { return check(true) })

	if code := p.stop(t, syscall.SIGTERM); code != 0 {
		t.Fatalf("exit code %d", code)
	}
	p = p.restart(t)
	addr = p.addr
	if err := check(true); err != nil {
		t.Fatalf("after a restart: %v", err)
	}
	cl2, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl2.Close()
	if meta, err := kadm.NewClient(cl2).BrokerMetadata(ctx); err != nil || meta.Cluster != clusterID || clusterID == "" {
		t.Fatalf("cluster id after a restart = %q, %v; want %q", meta.Cluster, err, clusterID)
	}
	// A record without a key is refused, as Kafka refuses it.
	err = cl2.ProduceSync(ctx, &kgo.Record{Topic: "compacted", Value: []byte("no key")}).FirstErr()
	if !errors.Is(err, kerr.InvalidRecord) {
		t.Fatalf("keyless record to a compacted topic: %v, want INVALID_RECORD", err)
	}
}
