package gateway_test

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/disgw/disgw/disbackend"
	"github.com/disgw/disgw/disbackend/localstore"
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
	g := startGatewayWrapped(t, t.TempDir(), func(s *localstore.Store) disbackend.Backend { return throttledStore{s} })
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
