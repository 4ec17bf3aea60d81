package gateway_test

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestFranzGoProduceConsume: franz-go with default options (idempotent
// producer, newest versions: Produce v13 and Fetch v18 by topic id) writes
// 10,000 records over 3 partitions with keys, headers, a binary key, a null
// key and a tombstone; a second client reads them all back in order per
// partition, byte-identical, offsets 0..n-1 per partition.
func TestFranzGoProduceConsume(t *testing.T) {
	g := startGateway(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const topic, parts, n = "orders.v1", 3, 10000

	adm := kadm.NewClient(g.client(t))
	if _, err := adm.CreateTopic(ctx, parts, 1, nil, topic); err != nil {
		t.Fatal(err)
	}

	prod := g.client(t, kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	want := make([][]*kgo.Record, parts)
	for i := 0; i < n; i++ {
		r := &kgo.Record{Partition: int32(i % parts)}
		switch i {
		case 7:
			r.Key = nil // null key
			r.Value = []byte("null key")
		case 8:
			r.Key = []byte{0xff, 0x00, 0xfe} // binary key
			r.Value = []byte("binary key")
		case 9:
			r.Key = []byte("tombstone")
			r.Value = nil
		default:
			r.Key = []byte(fmt.Sprintf("key-%d", i))
			r.Value = bytes.Repeat([]byte{byte(i)}, 1+i%300)
			r.Headers = []kgo.RecordHeader{{Key: "h1", Value: []byte(fmt.Sprint(i))}, {Key: "empty", Value: nil}}
		}
		want[r.Partition] = append(want[r.Partition], r)
		prod.Produce(ctx, r, func(_ *kgo.Record, err error) {
			if err != nil {
				t.Errorf("produce: %v", err)
			}
		})
	}
	if err := prod.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	for p := range want {
		for i, r := range want[p] {
			if r.Offset != int64(i) {
				t.Fatalf("partition %d record %d acknowledged at offset %d", p, i, r.Offset)
			}
		}
	}

	cons := g.client(t, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	got := make([][]*kgo.Record, parts)
	total := 0
	for total < n {
		fs := cons.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("consumed %d of %d: %v", total, n, err)
		}
		fs.EachError(func(topic string, p int32, err error) { t.Fatalf("fetch %s/%d: %v", topic, p, err) })
		fs.EachRecord(func(r *kgo.Record) {
			got[r.Partition] = append(got[r.Partition], r)
			total++
		})
	}
	for p := range want {
		if len(got[p]) != len(want[p]) {
			t.Fatalf("partition %d: %d records, want %d", p, len(got[p]), len(want[p]))
		}
		for i, w := range want[p] {
			r := got[p][i]
			if r.Offset != int64(i) || !bytes.Equal(r.Key, w.Key) || !bytes.Equal(r.Value, w.Value) ||
				(r.Key == nil) != (w.Key == nil) || (r.Value == nil) != (w.Value == nil) || len(r.Headers) != len(w.Headers) {
				t.Fatalf("partition %d record %d: got offset %d key %q value %d bytes (nil %v), want key %q value %d bytes (nil %v)",
					p, i, r.Offset, r.Key, len(r.Value), r.Value == nil, w.Key, len(w.Value), w.Value == nil)
			}
			for h := range w.Headers {
				if r.Headers[h].Key != w.Headers[h].Key || !bytes.Equal(r.Headers[h].Value, w.Headers[h].Value) {
					t.Fatalf("partition %d record %d header %d: %+v, want %+v", p, i, h, r.Headers[h], w.Headers[h])
				}
			}
		}
	}
}
