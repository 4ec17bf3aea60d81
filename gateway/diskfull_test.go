package gateway_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/disgw/disgw/disbackend/localstore"
)

// TestDiskFullIdempotentProducer: with the embedded store's disk below
// its free-space mark, franz-go's idempotent producer (acks=all) gets its
// batch failed within its delivery timeout, not a hang (the store answers
// KAFKA_STORAGE_ERROR, which says "not written", rather than
// REQUEST_TIMED_OUT, "maybe written"); once the space is back the same
// client produces again without a restart, and every acknowledged record
// is read back.
func TestDiskFullIdempotentProducer(t *testing.T) {
	t.Parallel()
	mem := vfs.NewMem()
	setFree := func(n uint64) {
		mem.TestingSetDiskUsage(vfs.DiskUsage{AvailBytes: n, TotalBytes: 2 << 30, UsedBytes: 2<<30 - n})
	}
	setFree(1 << 30)
	g := startGatewayStore(t, "data", localstore.Options{FS: mem, MinFreeBytes: 64 << 20, BallastBytes: 1 << 20}, nil)
	ctx := context.Background()
	adm := kadm.NewClient(g.client(t))
	if resp, err := adm.CreateTopic(ctx, 1, 1, nil, "full"); err != nil || resp.Err != nil {
		t.Fatalf("create topic: %v %v", err, resp.Err)
	}
	const delivery = 3 * time.Second
	cl := g.client(t, kgo.DefaultProduceTopic("full"), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.RecordDeliveryTimeout(delivery), kgo.RetryBackoffFn(func(int) time.Duration { return 100 * time.Millisecond }))
	acked := 0
	for i := range 5 {
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte{byte(i)}}).FirstErr(); err != nil {
			t.Fatal(err)
		}
		acked++
	}

	setFree(1 << 20) // below the 64 MiB mark; the store reads it every second
	deadline := time.Now().Add(3 * time.Second)
	for g.store.StorageNotReady() == "" {
		if time.Now().After(deadline) {
			t.Fatal("the store did not see the full disk within 3 s")
		}
		time.Sleep(10 * time.Millisecond)
	}
	start := time.Now()
	res := make(chan error, 1)
	cl.Produce(ctx, &kgo.Record{Value: []byte("refused")}, func(_ *kgo.Record, err error) { res <- err })
	var err error
	select {
	case err = <-res:
	case <-time.After(4 * delivery):
		// An idempotent producer told "maybe written" (REQUEST_TIMED_OUT)
		// never fails the batch: the hang.
		t.Fatalf("produce on a full disk: no answer after %v, its delivery timeout is %v", 4*delivery, delivery)
	}
	took := time.Since(start)
	if !errors.Is(err, kgo.ErrRecordTimeout) && !errors.Is(err, kerr.KafkaStorageError) {
		t.Fatalf("produce on a full disk after %v: %v, want the record timed out (its retries answered KAFKA_STORAGE_ERROR)", took, err)
	}
	if took > delivery+2*time.Second {
		t.Fatalf("produce on a full disk failed after %v, want about its delivery timeout %v", took, delivery)
	}

	setFree(1 << 30)
	deadline = time.Now().Add(3 * time.Second)
	for g.store.StorageNotReady() != "" {
		if time.Now().After(deadline) {
			t.Fatal("the store did not leave the disk-full state within 3 s of the space coming back")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte{9}}).FirstErr(); err != nil {
		t.Fatalf("produce once space is back, same client: %v", err)
	}
	acked++

	cons := g.client(t, kgo.ConsumeTopics("full"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	got := 0
	fctx, fcancel := context.WithTimeout(ctx, 10*time.Second)
	defer fcancel()
	for got < acked {
		fs := cons.PollFetches(fctx)
		if err := fs.Err0(); err != nil {
			t.Fatalf("consume: %v (%d of %d records)", err, got, acked)
		}
		fs.EachRecord(func(r *kgo.Record) {
			if string(r.Value) == "refused" {
				t.Errorf("the refused record was stored, at offset %d", r.Offset)
			}
			got++
		})
	}
	if got != acked {
		t.Fatalf("read %d records, %d acknowledged", got, acked)
	}
}
