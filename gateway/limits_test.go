package gateway_test

import (
	"encoding/binary"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap/zapcore"

	"github.com/disgw/disgw/gateway"
	"github.com/disgw/disgw/kafkawire"
)

// attack is a hostile request body: a count, then count copies of one
// minimal entry (the shapes of the issue 11 review), then a tail.
type attack struct {
	name         string
	key, version int16
	head         []byte // body before the array
	entry        func(i int) []byte
	tail         []byte
}

var empty2 = []byte{0, 0} // an empty string (int16 length 0)

func emptyEntry(b []byte) func(int) []byte { return func(int) []byte { return b } }

// named is an entry of a distinct short name ("n" + base-36 i).
func named(i int) []byte {
	s := "n" + fmt.Sprintf("%x", i)
	return append(binary.BigEndian.AppendUint16(nil, uint16(len(s))), s...)
}

var attacks = []attack{
	{name: "Metadata v0 empty names", key: 3, version: 0, entry: emptyEntry(empty2)},
	{name: "Metadata v0 distinct names", key: 3, version: 0, entry: named},
	{name: "DescribeGroups v0 empty ids", key: 15, version: 0, entry: emptyEntry(empty2)},
	{name: "DescribeGroups v0 distinct ids", key: 15, version: 0, entry: named},
	{name: "DeleteTopics v0 empty names", key: 20, version: 0, entry: emptyEntry(empty2), tail: []byte{0, 0, 0, 0}},
	{name: "OffsetFetch v1 empty topics", key: 9, version: 1, head: empty2, entry: emptyEntry([]byte{0, 0, 0, 0, 0, 0})},
	{name: "DescribeConfigs v0 empty resources", key: 32, version: 0, entry: emptyEntry([]byte{2, 0, 0, 0, 0, 0, 0})},
}

func (a attack) frame(n int) []byte {
	f := binary.BigEndian.AppendUint16(nil, uint16(a.key))
	f = binary.BigEndian.AppendUint16(f, uint16(a.version))
	f = binary.BigEndian.AppendUint32(f, 1)
	f = append(f, 0, 4, 't', 'e', 's', 't')
	f = append(f, a.head...)
	f = binary.BigEndian.AppendUint32(f, uint32(n))
	for i := range n {
		f = append(f, a.entry(i)...)
	}
	return append(f, a.tail...)
}

// allocDuring returns the bytes the process allocated while fn ran.
func allocDuring(fn func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	fn()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// TestAttackFramesRefused: the review's frames (5 MiB of empty entries;
// 20 MiB for Metadata) declare millions of entries; the gateway refuses
// them before decoding, closing the connection, having allocated little
// more than the frame it read (the review measured 80-190 times the frame).
func TestAttackFramesRefused(t *testing.T) {
	g := startGatewayLogging(t, t.TempDir(), zapcore.InfoLevel, nil, func(c *gateway.Config) { c.MaxFrameBytes = 32 << 20 })
	for _, a := range attacks {
		t.Run(a.name, func(t *testing.T) {
			size := 5 << 20
			if a.key == 3 {
				size = 20 << 20
			}
			n := size / len(a.entry(1<<20))
			frame := a.frame(n)
			r := g.raw(t)
			alloc := allocDuring(func() {
				r.sendFrame(frame)
				r.expectClosed()
			})
			// The frame is read into one buffer; sendFrame copies it once.
			if limit := uint64(2*len(frame)) + 8<<20; alloc > limit {
				t.Errorf("%d-byte frame of %d entries: %d bytes allocated, want at most %d", len(frame), n, alloc, limit)
			}
			t.Logf("%d-byte frame of %d entries refused; %d bytes allocated (%.1fx)", len(frame), n, alloc, float64(alloc)/float64(len(frame)))
		})
	}
}

// TestAttackAtCeiling: the same shapes with as many entries as a request
// may declare are answered (the entries past the caps with an error each),
// and answering takes no more than kafkawire.RequestCost says.
func TestAttackAtCeiling(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("measures allocations (not under -short or -race)")
	}
	g := startGatewayLogging(t, t.TempDir(), zapcore.InfoLevel, nil, func(c *gateway.Config) { c.AutoCreateTopics = false })
	for _, a := range attacks {
		t.Run(a.name, func(t *testing.T) {
			n := kafkawire.MaxRequestEntries
			frame := a.frame(n)
			r := g.raw(t)
			var body []byte
			alloc := allocDuring(func() {
				r.sendFrame(frame)
				var err error
				_, body, err = r.recv(a.key, a.version)
				if err != nil {
					t.Fatal(err)
				}
			})
			cost := kafkawire.RequestCost(a.key, a.version, len(frame))
			// The test's own reading of the response is in alloc too.
			alloc -= uint64(len(body))
			t.Logf("%d-byte frame of %d entries: answered in %d bytes; %d bytes allocated (%.1fx the frame, %.0f per entry); RequestCost %d",
				len(frame), n, len(body), alloc, float64(alloc)/float64(len(frame)), float64(alloc)/float64(n), cost)
			if int64(alloc) > cost {
				t.Errorf("allocated %d bytes, over RequestCost %d", alloc, cost)
			}
		})
	}
}

// TestRequestCaps: with small caps, a request at the cap is served whole,
// and one entry over it gets that entry's error code.
func TestRequestCaps(t *testing.T) {
	g := startGateway(t, func(c *gateway.Config) {
		c.Limits = gateway.RequestLimits{MaxTopics: 3, MaxPartitions: 4, MaxGroups: 2}
		c.AutoCreateTopics = false
	})
	r := g.raw(t)
	for _, topic := range []string{"a", "b", "c", "d"} {
		ct := kmsg.NewPtrCreateTopicsRequest()
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic, rt.NumPartitions, rt.ReplicationFactor = topic, 2, 1
		ct.Topics = append(ct.Topics, rt)
		if got := r.roundTrip(4, ct).(*kmsg.CreateTopicsResponse).Topics[0].ErrorCode; got != 0 {
			t.Fatalf("create %s: %v", topic, kerr.ErrorForCode(got))
		}
	}
	invalid := kerr.InvalidRequest.Code
	// codes of the entries, at the cap and one over it.
	check := func(what string, got []int16, overFrom int, over int16) {
		t.Helper()
		for i, c := range got {
			want := int16(0)
			if i >= overFrom {
				want = over
			}
			if c != want && !(i < overFrom && c != over) {
				t.Errorf("%s: entry %d has %v, want %v (codes %v)", what, i, kerr.ErrorForCode(c), kerr.ErrorForCode(want), got)
			}
		}
	}
	names := func(n int) []string { return []string{"a", "b", "c", "d"}[:n] }

	for _, n := range []int{3, 4} {
		m := kmsg.NewPtrMetadataRequest()
		for _, name := range names(n) {
			mt := kmsg.NewMetadataRequestTopic()
			mt.Topic = kmsg.StringPtr(name)
			m.Topics = append(m.Topics, mt)
		}
		var codes []int16
		for _, t := range r.roundTrip(12, m).(*kmsg.MetadataResponse).Topics {
			codes = append(codes, t.ErrorCode)
		}
		check(fmt.Sprintf("Metadata of %d", n), codes, 3, invalid)

		dc := kmsg.NewPtrDescribeConfigsRequest()
		for _, name := range names(n) {
			res := kmsg.NewDescribeConfigsRequestResource()
			res.ResourceType, res.ResourceName = kmsg.ConfigResourceTypeTopic, name
			dc.Resources = append(dc.Resources, res)
		}
		codes = nil
		for _, res := range r.roundTrip(4, dc).(*kmsg.DescribeConfigsResponse).Resources {
			codes = append(codes, res.ErrorCode)
			if res.ErrorCode == invalid && len(res.Configs) > 0 {
				t.Errorf("refused resource %s carries %d configs", res.ResourceName, len(res.Configs))
			}
		}
		check(fmt.Sprintf("DescribeConfigs of %d", n), codes, 3, invalid)

		dt := kmsg.NewPtrDeleteTopicsRequest()
		dt.TopicNames = []string{"x", "y", "z", "w"}[:n] // unknown: UNKNOWN_TOPIC_OR_PARTITION when served
		codes = nil
		for _, t := range r.roundTrip(3, dt).(*kmsg.DeleteTopicsResponse).Topics {
			codes = append(codes, t.ErrorCode)
		}
		check(fmt.Sprintf("DeleteTopics of %d", n), codes, 3, invalid)

		ct := kmsg.NewPtrCreateTopicsRequest()
		ct.ValidateOnly = true
		for _, name := range []string{"v1", "v2", "v3", "v4"}[:n] {
			rt := kmsg.NewCreateTopicsRequestTopic()
			rt.Topic, rt.NumPartitions, rt.ReplicationFactor = name, 1, 1
			ct.Topics = append(ct.Topics, rt)
		}
		codes = nil
		for _, t := range r.roundTrip(4, ct).(*kmsg.CreateTopicsResponse).Topics {
			codes = append(codes, t.ErrorCode)
		}
		check(fmt.Sprintf("CreateTopics of %d", n), codes, 3, kerr.PolicyViolation.Code)
	}

	// Partitions: cap 4, topics of 2 partitions each.
	for _, n := range []int{2, 3} { // 4 partitions, then 6
		lo := kmsg.NewPtrListOffsetsRequest()
		for _, name := range names(n) {
			lt := kmsg.NewListOffsetsRequestTopic()
			lt.Topic = name
			for p := range int32(2) {
				lp := kmsg.NewListOffsetsRequestTopicPartition()
				lp.Partition, lp.Timestamp = p, -1
				lt.Partitions = append(lt.Partitions, lp)
			}
			lo.Topics = append(lo.Topics, lt)
		}
		var codes []int16
		for _, t := range r.roundTrip(7, lo).(*kmsg.ListOffsetsResponse).Topics {
			for _, p := range t.Partitions {
				codes = append(codes, p.ErrorCode)
			}
		}
		check(fmt.Sprintf("ListOffsets of %d partitions", 2*n), codes, 4, invalid)

		of := kmsg.NewPtrOffsetFetchRequest()
		of.Group = "g"
		for _, name := range names(n) {
			ot := kmsg.NewOffsetFetchRequestTopic()
			ot.Topic, ot.Partitions = name, []int32{0, 1}
			of.Topics = append(of.Topics, ot)
		}
		codes = nil
		for _, t := range r.roundTrip(1, of).(*kmsg.OffsetFetchResponse).Topics {
			for _, p := range t.Partitions {
				codes = append(codes, p.ErrorCode)
			}
		}
		check(fmt.Sprintf("OffsetFetch v1 of %d partitions", 2*n), codes, 4, invalid)

		oc := kmsg.NewPtrOffsetCommitRequest()
		oc.Group, oc.Generation = "g", -1
		for _, name := range names(n) {
			ot := kmsg.NewOffsetCommitRequestTopic()
			ot.Topic = name
			for p := range int32(2) {
				op := kmsg.NewOffsetCommitRequestTopicPartition()
				op.Partition, op.Offset = p, 0
				ot.Partitions = append(ot.Partitions, op)
			}
			oc.Topics = append(oc.Topics, ot)
		}
		codes = nil
		for _, t := range r.roundTrip(8, oc).(*kmsg.OffsetCommitResponse).Topics {
			for _, p := range t.Partitions {
				codes = append(codes, p.ErrorCode)
			}
		}
		check(fmt.Sprintf("OffsetCommit of %d partitions", 2*n), codes, 4, invalid)
	}

	// Groups: cap 2.
	for _, n := range []int{2, 3} {
		groups := []string{"g1", "g2", "g3"}[:n]
		dg := kmsg.NewPtrDescribeGroupsRequest()
		dg.Groups = groups
		var codes []int16
		for _, gr := range r.roundTrip(5, dg).(*kmsg.DescribeGroupsResponse).Groups {
			codes = append(codes, gr.ErrorCode)
		}
		check(fmt.Sprintf("DescribeGroups of %d", n), codes, 2, invalid)

		del := kmsg.NewPtrDeleteGroupsRequest()
		del.Groups = groups
		codes = nil
		for _, gr := range r.roundTrip(2, del).(*kmsg.DeleteGroupsResponse).Groups {
			codes = append(codes, gr.ErrorCode)
		}
		check(fmt.Sprintf("DeleteGroups of %d", n), codes, 2, invalid)

		fc := kmsg.NewPtrFindCoordinatorRequest()
		fc.CoordinatorKeys = groups
		codes = nil
		for _, co := range r.roundTrip(4, fc).(*kmsg.FindCoordinatorResponse).Coordinators {
			codes = append(codes, co.ErrorCode)
		}
		check(fmt.Sprintf("FindCoordinator v4 of %d", n), codes, 2, invalid)

		of := kmsg.NewPtrOffsetFetchRequest()
		for _, id := range groups {
			og := kmsg.NewOffsetFetchRequestGroup()
			og.Group = id
			of.Groups = append(of.Groups, og)
		}
		codes = nil
		for _, gr := range r.roundTrip(8, of).(*kmsg.OffsetFetchResponse).Groups {
			codes = append(codes, gr.ErrorCode)
		}
		check(fmt.Sprintf("OffsetFetch v8 of %d groups", n), codes, 2, invalid)
	}
}

// TestDuplicatesAnsweredOnce: a topic listed twice in Metadata is answered
// once; a group or config resource listed twice is described once, its
// repeat gets INVALID_REQUEST.
func TestDuplicatesAnsweredOnce(t *testing.T) {
	g := startGatewayLogging(t, t.TempDir(), zapcore.InfoLevel, nil, func(c *gateway.Config) { c.AutoCreateTopics = false })
	r := g.raw(t)
	m := kmsg.NewPtrMetadataRequest()
	for range 3 {
		mt := kmsg.NewMetadataRequestTopic()
		mt.Topic = kmsg.StringPtr("dup")
		m.Topics = append(m.Topics, mt)
	}
	if got := r.roundTrip(12, m).(*kmsg.MetadataResponse).Topics; len(got) != 1 {
		t.Errorf("Metadata of one topic listed 3 times: %d answers", len(got))
	}
	dg := kmsg.NewPtrDescribeGroupsRequest()
	dg.Groups = []string{"g", "g"}
	got := r.roundTrip(5, dg).(*kmsg.DescribeGroupsResponse).Groups
	if len(got) != 2 || got[0].ErrorCode != 0 || got[1].ErrorCode != kerr.InvalidRequest.Code {
		t.Errorf("DescribeGroups of one group twice: %+v", got)
	}
}

// TestAutoCreateLimits: a Metadata request naming 1000 new topics creates
// the per-request cap and answers the rest UNKNOWN_TOPIC_OR_PARTITION with
// a throttle time; the per-second bucket is shared by the next requests
// and refills with the (injected) clock.
func TestAutoCreateLimits(t *testing.T) {
	g := startGateway(t, func(c *gateway.Config) {
		c.Limits.AutoCreatePerRequest, c.Limits.AutoCreatePerSecond = 10, 5
	})
	var mu sync.Mutex
	now := time.Unix(1_000_000, 0)
	gateway.SetLimitsClock(g.srv, func() time.Time { mu.Lock(); defer mu.Unlock(); return now })
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }

	r := g.raw(t)
	next := 0
	ask := func(n int) (created int, throttle int32) {
		t.Helper()
		m := kmsg.NewPtrMetadataRequest()
		m.AllowAutoTopicCreation = true
		for range n {
			mt := kmsg.NewMetadataRequestTopic()
			mt.Topic = kmsg.StringPtr(fmt.Sprintf("auto-%d", next))
			next++
			m.Topics = append(m.Topics, mt)
		}
		resp := r.roundTrip(12, m).(*kmsg.MetadataResponse)
		for _, mt := range resp.Topics {
			switch mt.ErrorCode {
			case 0:
				created++
			case kerr.UnknownTopicOrPartition.Code:
			default:
				t.Fatalf("topic %s: %v", *mt.Topic, kerr.ErrorForCode(mt.ErrorCode))
			}
		}
		return created, resp.ThrottleMillis
	}
	if created, throttle := ask(1000); created != 10 || throttle <= 0 {
		t.Fatalf("1000 new topics: %d created, throttle %d ms; want 10 and a throttle", created, throttle)
	}
	// The bucket (10 tokens, 5 a second) is empty now: 2 s to refill it.
	if created, throttle := ask(20); created != 0 || throttle != 2000 {
		t.Fatalf("20 more at once: %d created, throttle %d ms; want 0 and 2000", created, throttle)
	}
	advance(time.Second)
	if created, _ := ask(20); created != 5 {
		t.Fatalf("20 more a second later: %d created, want 5", created)
	}
	advance(time.Hour) // a full bucket, never more
	if created, _ := ask(30); created != 10 {
		t.Fatalf("30 more an hour later: %d created, want 10", created)
	}
	if created, throttle := ask(1); created != 0 || throttle != 200 {
		t.Fatalf("1 more: %d created, throttle %d; want 0 and 200 ms", created, throttle)
	}
	streams, err := g.store.ListStreams(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(streams) != 25 {
		t.Errorf("%d topics exist, want the 25 created", len(streams))
	}
}

// TestPartitionMutationQuota: CreateTopics and CreatePartitions take their
// partitions from one bucket (KIP-599): a request is admitted while the
// bucket is not empty, past it THROTTLING_QUOTA_EXCEEDED with a throttle
// time, and the bucket refills at the configured rate.
func TestPartitionMutationQuota(t *testing.T) {
	g := startGateway(t, func(c *gateway.Config) { c.Limits.PartitionMutationsPerSecond = 10 }) // a bucket of 100
	var mu sync.Mutex
	now := time.Unix(1_000_000, 0)
	gateway.SetLimitsClock(g.srv, func() time.Time { mu.Lock(); defer mu.Unlock(); return now })
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	r := g.raw(t)
	create := func(parts ...int32) *kmsg.CreateTopicsResponse {
		t.Helper()
		req := kmsg.NewPtrCreateTopicsRequest()
		req.TimeoutMillis = 10000
		for i, n := range parts {
			rt := kmsg.NewCreateTopicsRequestTopic()
			rt.Topic, rt.NumPartitions, rt.ReplicationFactor = fmt.Sprintf("mut-%d-%d", now.Unix(), i), n, 1
			req.Topics = append(req.Topics, rt)
		}
		return r.roundTrip(7, req).(*kmsg.CreateTopicsResponse)
	}
	resp := create(60, 60, 1)
	if got := []int16{resp.Topics[0].ErrorCode, resp.Topics[1].ErrorCode, resp.Topics[2].ErrorCode}; got[0] != 0 || got[1] != 0 || got[2] != kerr.ThrottlingQuotaExceeded.Code {
		t.Fatalf("error codes %v, want 0, 0 (the bucket goes to -20), THROTTLING_QUOTA_EXCEEDED", got)
	}
	if resp.ThrottleMillis < 2000 || resp.ThrottleMillis > 2200 {
		t.Fatalf("throttle %d ms, want about 2100 (21 tokens at 10 a second)", resp.ThrottleMillis)
	}
	// CreatePartitions takes from the same bucket.
	cp := kmsg.NewPtrCreatePartitionsRequest()
	cp.TimeoutMillis = 10000
	ct := kmsg.NewCreatePartitionsRequestTopic()
	ct.Topic, ct.Count = resp.Topics[0].Topic, 70
	cp.Topics = append(cp.Topics, ct)
	if cr := r.roundTrip(3, cp).(*kmsg.CreatePartitionsResponse); cr.Topics[0].ErrorCode != kerr.ThrottlingQuotaExceeded.Code {
		t.Fatalf("CreatePartitions with an empty bucket: error %d", cr.Topics[0].ErrorCode)
	}
	advance(3 * time.Second) // -20 + 30 = 10 tokens
	if resp := create(5); resp.Topics[0].ErrorCode != 0 {
		t.Fatalf("after the refill: error %d", resp.Topics[0].ErrorCode)
	}
	if cr := r.roundTrip(3, cp).(*kmsg.CreatePartitionsResponse); cr.Topics[0].ErrorCode != 0 {
		t.Fatalf("CreatePartitions after the refill: error %d", cr.Topics[0].ErrorCode)
	}
}
