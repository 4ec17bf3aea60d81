package gateway_test

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap/zaptest"

	"github.com/disgw/disgw/disbackend"
	"github.com/disgw/disgw/disbackend/localstore"
	"github.com/disgw/disgw/gateway"
)

// throttledStore reports a throttle on partition 1's appends, as disrest
// does for an append that waited for DIS's limits.
type throttledStore struct{ *localstore.Store }

func (s throttledStore) Append(stream string, part int32, b disbackend.Batch) *disbackend.Pending {
	inner := s.Store.Append(stream, part, b)
	if part != 1 {
		return inner
	}
	out := disbackend.NewPending()
	go func() {
		<-inner.Done()
		res, err := inner.Result()
		res.Throttle = 1234 * time.Millisecond
		out.Complete(res, err)
	}()
	return out
}

// TestProduceThrottle: throttle_time_ms is the largest of the request's
// partitions' throttles (KIP-219), and 0 when none waited.
func TestProduceThrottle(t *testing.T) {
	t.Parallel()
	log := zaptest.NewLogger(t)
	store, err := localstore.Open(t.TempDir(), localstore.Options{Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	cfg := gateway.DefaultConfig()
	cfg.Listen = "127.0.0.1:0"
	srv, err := gateway.New(cfg, throttledStore{store}, log)
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Listen(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve() }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
		<-done
		_ = store.Close()
	})
	g := &testGateway{srv: srv, addr: srv.AdvertisedAddr()}
	r := g.raw(t)
	if resp := r.roundTrip(7, createTopicsReq("thr", 2, nil)).(*kmsg.CreateTopicsResponse); resp.Topics[0].ErrorCode != 0 {
		t.Fatalf("create: %+v", resp.Topics[0])
	}
	req := produceReq(-1, "thr", 0, makeBatch(t, batchSpec{n: 2}))
	resp := r.roundTrip(9, req).(*kmsg.ProduceResponse)
	if p := resp.Topics[0].Partitions[0]; p.ErrorCode != 0 || resp.ThrottleMillis != 0 {
		t.Fatalf("unthrottled produce: throttle %d, %+v", resp.ThrottleMillis, p)
	}
	req = produceReq(-1, "thr", 0, makeBatch(t, batchSpec{n: 2}))
	p1 := kmsg.NewProduceRequestTopicPartition()
	p1.Partition, p1.Records = 1, makeBatch(t, batchSpec{n: 1})
	req.Topics[0].Partitions = append(req.Topics[0].Partitions, p1)
	resp = r.roundTrip(9, req).(*kmsg.ProduceResponse)
	for _, p := range resp.Topics[0].Partitions {
		if p.ErrorCode != 0 {
			t.Fatalf("partition %d: error %d", p.Partition, p.ErrorCode)
		}
	}
	if resp.ThrottleMillis != 1234 {
		t.Fatalf("throttle_time_ms %d, want 1234 (partition 1's)", resp.ThrottleMillis)
	}
}
