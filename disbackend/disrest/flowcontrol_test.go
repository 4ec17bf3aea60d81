package disrest

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/disgw/disgw/disbackend/backendtest"
	"github.com/disgw/disgw/disbackend/dislocal"
)

// TestFlowControlRetried: another writer of the partition has used up DIS's
// buckets, so DIS refuses the Store's PutRecords with DIS.4303 (per record,
// in an HTTP 200 answer) however the Store paces. The Store sends the
// records again, with backoff, until DIS takes them, and reports those
// backoffs as throttle time; the records land once, in order. dislocal's
// clock stands still until two refusals were answered, so its buckets
// refill only then.
func TestFlowControlRetried(t *testing.T) {
	t.Parallel()
	base := time.Now()
	var refill atomic.Bool
	clock := func() time.Time {
		if refill.Load() {
			return base.Add(10 * time.Second)
		}
		return base
	}
	d, url := startDIS(t, dislocal.Options{FlowControl: true, Now: clock})
	s := newStore(t, url, func(o *Options) { o.Linger = -1 })
	stream := mkStream(t, s, "flow.retried", 1)

	// The other writer: 1000 records in one PutRecords empty dislocal's
	// record bucket (a COMMON partition takes 1000 a second).
	other := newStore(t, url, func(o *Options) { o.Linger = -1 })
	if _, err := other.Append(stream, 0, backendtest.MakeBatch(backendtest.BatchOptions{NumRecords: 1000, RecordBytes: 1})).Wait(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	sends := func() int64 { return d.Stats().Requests["SendRecords"] }
	before := sends()

	p := s.Append(stream, 0, backendtest.MakeBatch(backendtest.BatchOptions{NumRecords: 3, RecordBytes: 1, Seed: 7}))
	// A third PutRecords of s means the first two were answered, refused.
	for ctx := ctxT(t); sends() < before+3; {
		select {
		case <-ctx.Done():
			t.Fatalf("%d PutRecords after the other writer's, want 3", sends()-before)
		case <-p.Done():
			_, err := p.Wait(ctx)
			t.Fatalf("append completed before DIS could take it: %v", err)
		case <-time.After(time.Millisecond):
		}
	}
	refill.Store(true)
	res, err := p.Wait(ctxT(t))
	if err != nil {
		t.Fatalf("append refused with DIS.4303: %v, want it sent again until DIS takes it", err)
	}
	if res.BaseOffset != 1000 {
		t.Fatalf("offset %d, want 1000", res.BaseOffset)
	}
	// Two backoffs at least: RetryBackoff 10 ms, halved by the jitter at
	// most, then doubled.
	if min := 15 * time.Millisecond; res.Throttle < min {
		t.Fatalf("throttle %v, want at least %v: the backoffs after DIS.4303 are throttle time", res.Throttle, min)
	}
	if r, err := s.Range(stream, 0); err != nil || r.Next != 1003 {
		t.Fatalf("range %+v, %v; want next 1003: each record once", r, err)
	}
	if n := s.OutOfOrder(); n != 0 {
		t.Fatalf("OutOfOrder() = %d", n)
	}
}
