package gateway_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"net"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/disgw/disgw/disbackend/localstore"
	"github.com/disgw/disgw/gateway"
	"github.com/disgw/disgw/kafkawire"
	"github.com/disgw/disgw/kafkawire/batch"
)

// apiVersionsOK asserts a fresh connection gets an ApiVersions answer.
func apiVersionsOK(t *testing.T, g *testGateway) {
	t.Helper()
	r := g.raw(t)
	resp := r.roundTrip(2, kmsg.NewPtrApiVersionsRequest()).(*kmsg.ApiVersionsResponse)
	if resp.ErrorCode != 0 {
		t.Fatalf("ApiVersions error %d", resp.ErrorCode)
	}
	r.c.Close()
}

// startFrame sends the size prefix and the first bytes of a Produce frame
// of n bytes, and no more: a client that stalls inside a frame.
func startFrame(t *testing.T, g *testGateway, n int) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", g.addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	head := binary.BigEndian.AppendUint32(nil, uint32(n))
	head = binary.BigEndian.AppendUint16(head, 0) // Produce
	head = binary.BigEndian.AppendUint16(head, 9)
	head = append(head, make([]byte, 1000)...)
	if _, err := c.Write(head); err != nil {
		t.Fatal(err)
	}
	return c
}

// waitFor polls cond until it holds, failing after 30 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); !cond(); {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestRequestBudgetQueuesFrames: large frames that have started take the
// request budget one after another instead of all at once; small requests
// are still answered meanwhile; a stalled frame is closed after the frame
// read timeout and gives its budget back.
func TestRequestBudgetQueuesFrames(t *testing.T) {
	const frame = 1 << 20
	head := kafkawire.ProduceHeadCost(frame) // about 2 MiB
	g := startGateway(t, func(c *gateway.Config) {
		c.MaxFrameBytes = 4 << 20
		c.QueuedMaxRequestBytes = 8 << 20 // seven eighths: three heads at once
		c.FrameReadTimeout = 2 * time.Second
	})
	var conns []net.Conn
	for range 6 {
		conns = append(conns, startFrame(t, g, frame))
	}
	waitFor(t, "three frames to take the budget", func() bool { return g.srv.RequestBytesInUse() == 3*head })
	for range 5 {
		apiVersionsOK(t, g)
		if got := g.srv.RequestBytesInUse(); got > 7<<20 {
			t.Fatalf("request bytes in use %d, more than seven eighths of the budget", got)
		}
	}
	// Each stalled frame is closed after the frame read timeout; the
	// waiting ones then take the budget and are closed in turn.
	for _, c := range conns {
		_ = c.SetReadDeadline(time.Now().Add(time.Minute))
		if _, err := c.Read(make([]byte, 1)); err == nil {
			t.Fatal("a stalled frame got an answer")
		}
	}
	waitFor(t, "the budget to be given back", func() bool { return g.srv.RequestBytesInUse() == 0 })
	apiVersionsOK(t, g)
}

// TestRequestBudgetCostlyRequestRunsAlone: a request costing more than
// large requests may take of the budget is not refused: it waits to run
// alone, is answered, and gives the budget back.
func TestRequestBudgetCostlyRequestRunsAlone(t *testing.T) {
	g := startGateway(t, func(c *gateway.Config) {
		c.MaxFrameBytes = 4 << 20
		c.QueuedMaxRequestBytes = 8 << 20
		c.AutoCreateTopics = false
	})
	req := kmsg.NewPtrMetadataRequest()
	for i := range 8000 {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(fmt.Sprintf("missing-%06d", i))
		req.Topics = append(req.Topics, rt)
	}
	frame := encodeRequest(3, 4, 1, req)
	if cost := kafkawire.RequestCost(3, 4, len(frame)); cost <= 7<<20 {
		t.Fatalf("the request costs %d bytes, not more than seven eighths of the budget", cost)
	}
	r := g.raw(t)
	resp := r.roundTrip(4, req).(*kmsg.MetadataResponse)
	if len(resp.Topics) != 8000 {
		t.Fatalf("%d topics answered, want 8000", len(resp.Topics))
	}
	waitFor(t, "the budget to be given back", func() bool { return g.srv.RequestBytesInUse() == 0 })
	apiVersionsOK(t, g)
}

// TestRequestBudgetGivenBack: after ordinary traffic, including requests
// whose connection closes before the answer, the budget is back at 0.
func TestRequestBudgetGivenBack(t *testing.T) {
	g := startGateway(t)
	for range 20 {
		r := g.raw(t)
		r.send(3, kmsg.NewPtrApiVersionsRequest())
		r.send(1, kmsg.NewPtrMetadataRequest())
		r.c.Close()
	}
	for range 5 {
		apiVersionsOK(t, g)
	}
	waitFor(t, "the budget to be given back", func() bool { return g.srv.RequestBytesInUse() == 0 })
}

// TestMaxConnections: beyond max_connections_per_ip and max_connections a
// new connection is closed at once and counted; closing one makes room.
func TestMaxConnections(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mutate func(*gateway.Config)
	}{
		{"per ip", func(c *gateway.Config) { c.MaxConnectionsPerIP = 3 }},
		{"total", func(c *gateway.Config) { c.MaxConnections = 3 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := startGateway(t, tc.mutate)
			var open []*rawConn
			for range 3 {
				r := g.raw(t)
				r.roundTrip(3, kmsg.NewPtrApiVersionsRequest())
				open = append(open, r)
			}
			for i := range 2 {
				r := g.raw(t)
				r.expectClosed()
				if got := g.srv.RefusedConnections(); got != int64(i+1) {
					t.Fatalf("refused connections %d, want %d", got, i+1)
				}
			}
			open[0].c.Close()
			for deadline := time.Now().Add(30 * time.Second); ; {
				r := g.raw(t)
				corr := r.send(3, kmsg.NewPtrApiVersionsRequest())
				got, _, err := r.recv(18, 3)
				if err == nil && got == corr {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("no room after closing a connection: %v", err)
				}
				time.Sleep(10 * time.Millisecond)
			}
		})
	}
}

// TestFrameReadTimeout: a frame that has started and stalls closes the
// connection after the frame read timeout, long before the idle timeout.
func TestFrameReadTimeout(t *testing.T) {
	g := startGateway(t, func(c *gateway.Config) {
		c.FrameReadTimeout = 500 * time.Millisecond
		c.IdleTimeout = time.Hour
	})
	r := g.raw(t)
	frame := encodeRequest(18, 3, 1, kmsg.NewPtrApiVersionsRequest())
	out := binary.BigEndian.AppendUint32(nil, uint32(len(frame)))
	if _, err := r.c.Write(append(out, frame[:len(frame)-1]...)); err != nil {
		t.Fatal(err)
	}
	r.expectClosed()
	// An idle connection (no frame started) stays open.
	idle := g.raw(t)
	_ = idle.c.SetReadDeadline(time.Now().Add(time.Second))
	if _, err := idle.c.Read(make([]byte, 1)); err == nil || !strings.Contains(err.Error(), "timeout") {
		t.Fatalf("idle connection: %v, want our own read timeout", err)
	}
	idle.roundTrip(3, kmsg.NewPtrApiVersionsRequest())
}

// TestFetchWithinRequestBudget: a Fetch takes its response's memory from
// the request budget without waiting: it returns at most what the budget
// grants (a third of it per record byte), still the first batch when the
// budget is taken, and gives it all back once written.
func TestFetchWithinRequestBudget(t *testing.T) {
	g := startGateway(t, func(c *gateway.Config) {
		c.MaxFrameBytes = 4 << 20
		c.QueuedMaxRequestBytes = 8 << 20 // large requests: 7 MiB, so a fetch reads at most 7/3 MiB
	})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cl := g.client(t, kgo.DefaultProduceTopic("fb"), kgo.AllowAutoTopicCreation(), kgo.ProducerBatchMaxBytes(200<<10))
	value := make([]byte, 100<<10)
	for range 100 { // 10 MiB
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: value}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	fetch := func() int {
		req := kmsg.NewPtrFetchRequest()
		req.ReplicaID, req.MaxBytes, req.MaxWaitMillis = -1, 55<<20, 0
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic = "fb"
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.PartitionMaxBytes = 55 << 20
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp := g.raw(t).roundTrip(11, req).(*kmsg.FetchResponse)
		p := resp.Topics[0].Partitions[0]
		if p.ErrorCode != 0 {
			t.Fatalf("fetch error %d", p.ErrorCode)
		}
		return len(p.RecordBatches)
	}
	if n := fetch(); n > 7<<20/3 || n < 100<<10 {
		t.Fatalf("fetch returned %d record bytes, want within the budget's grant of %d", n, 7<<20/3)
	}
	waitFor(t, "the budget to be given back", func() bool { return g.srv.RequestBytesInUse() == 0 })
	// With the budget taken by a stalled frame, a fetch still gets its
	// first batch.
	startFrame(t, g, 3<<20) // its head takes about 6 MiB
	waitFor(t, "the stalled frame to take the budget", func() bool { return g.srv.RequestBytesInUse() > 6<<20 })
	if n := fetch(); n < 100<<10 || n > 400<<10 {
		t.Fatalf("fetch under a full budget returned %d record bytes, want about one batch", n)
	}
}

// TestStoredBatchesDoNotPinFrames: the tail cache keeps a small batch of
// a large Produce frame in its frame (no copy on the embedded store), and
// counts the whole frame against its CacheBytes while it does
// (disbackend.FrameKeeper), so tiny cached batches keep at most CacheBytes
// of frames alive, whatever clients send (a review once kept gigabytes of
// frames alive through tiny cached batches). Here 40 frames of 900 KiB
// (about 37 MB if every frame were kept) against a cache of 8 MiB, each
// frame's large batch too large for its partition's cache, so that only
// the tiny batches of the other partitions keep the frames.
func TestStoredBatchesDoNotPinFrames(t *testing.T) {
	if raceEnabled {
		t.Skip("measures the heap (not under -race)")
	}
	const cacheBytes = 8 << 20
	g := startGatewayStore(t, t.TempDir(), localstore.Options{CacheBytes: cacheBytes, CacheBytesPerPartition: 64 << 10}, nil, func(c *gateway.Config) { c.AutoCreateTopics = false })
	r := g.raw(t)
	ct := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = "pins", 200, 1
	ct.Topics = append(ct.Topics, rt)
	r.roundTrip(4, ct)
	tiny := batch.Encode(batch.NewHeader(0), []batch.Record{{Value: []byte("v")}})
	big := batch.Encode(batch.NewHeader(0), []batch.Record{{Value: make([]byte, 900<<10)}})
	heap := func() uint64 {
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return ms.HeapAlloc
	}
	before := heap()
	const requests = 40
	for range requests {
		p := kmsg.NewPtrProduceRequest()
		p.Acks = 1
		pt := kmsg.NewProduceRequestTopic()
		pt.Topic = "pins"
		for i := range 200 {
			pp := kmsg.NewProduceRequestTopicPartition()
			pp.Partition = int32(i)
			pp.Records = bytes.Clone(tiny)
			if i == 0 {
				pp.Records = bytes.Clone(big)
			}
			pt.Partitions = append(pt.Partitions, pp)
		}
		p.Topics = append(p.Topics, pt)
		resp := r.roundTrip(9, p).(*kmsg.ProduceResponse)
		if ec := resp.Topics[0].Partitions[1].ErrorCode; ec != 0 {
			t.Fatalf("produce: error %d", ec)
		}
	}
	grown := int64(heap()) - int64(before)
	t.Logf("heap grew %d KiB after %d frames of %d KiB", grown>>10, requests, len(big)>>10)
	if grown > cacheBytes+cacheBytes/2 { // with every frame kept alive: about 37 MB
		t.Fatalf("heap grew %d bytes, more than the cache's %d: the cached tiny batches keep their frames of %d bytes alive past CacheBytes", grown, cacheBytes, len(big))
	}
}
