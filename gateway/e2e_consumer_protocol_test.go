package gateway_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/disgw/disgw/gateway"
)

// consumerProtocol serves KIP-848's consumer group protocol (the
// setting's default; startGateway's Config may not have it).
func consumerProtocol(c *gateway.Config) { c.ConsumerGroupProtocol = true }

// protocolOpts are kgo group options using the consumer protocol
// (kgo.ServerSideBalancer, with its default cooperative-sticky balancer:
// the server's uniform assignor).
func protocolOpts(group string, topics ...string) []kgo.Opt {
	return []kgo.Opt{
		kgo.ConsumerGroup(group),
		kgo.ConsumeTopics(topics...),
		kgo.ServerSideBalancer(),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(200 * time.Millisecond),
		kgo.AutoCommitInterval(100 * time.Millisecond),
	}
}

// TestConsumerProtocol: three franz-go consumers with the consumer
// protocol share six partitions (two each, the server's assignment), read
// every record once between them, one leaves and the two others take its
// partitions and read on; the committed offsets reach the end, and
// ConsumerGroupDescribe and ListGroups show the group as a consumer
// group. Without the setting, ApiVersions does not list the APIs and kgo
// stays on the classic protocol.
func TestConsumerProtocol(t *testing.T) {
	g := startGateway(t, fastGroups, consumerProtocol)
	ctx := context.Background()
	const topic, group, parts = "kip848.topic", "kip848-group", 6
	adm := kadm.NewClient(g.client(t))
	if _, err := adm.CreateTopic(ctx, parts, 1, nil, topic); err != nil {
		t.Fatal(err)
	}
	prod := g.client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()))

	a := startConsumer(t, g, protocolOpts(group, topic)...)
	b := startConsumer(t, g, protocolOpts(group, topic)...)
	c := startConsumer(t, g, protocolOpts(group, topic)...)
	all := []*consumer{a, b, c}
	eventually(t, 60*time.Second, "each of 3 consumers owns 2 partitions", func() bool {
		own := map[int32]bool{}
		for _, cs := range all {
			ps := cs.partitions()
			if len(ps) != 2 {
				return false
			}
			for _, p := range ps {
				own[p] = true
			}
		}
		return len(own) == parts
	})
	produceN(t, prod, topic, parts, 20)
	eventually(t, 30*time.Second, "the first 120 records are consumed", func() bool {
		for p := range int32(parts) {
			for o := range int64(20) {
				if !a.saw(p, o) && !b.saw(p, o) && !c.saw(p, o) {
					return false
				}
			}
		}
		return true
	})

	// ConsumerGroupDescribe: a consumer group of three, Stable.
	req := kmsg.NewPtrConsumerGroupDescribeRequest()
	req.Groups = []string{group, "no-such-group"}
	resp, err := req.RequestWith(ctx, g.client(t))
	if err != nil {
		t.Fatal(err)
	}
	if d := resp.Groups[0]; d.ErrorCode != 0 || d.State != "Stable" || len(d.Members) != 3 || d.AssignorName != "uniform" {
		t.Fatalf("describe: %+v", d)
	}
	if d := resp.Groups[1]; d.ErrorCode != kerr.GroupIDNotFound.Code {
		t.Fatalf("describe of a missing group: %+v", d)
	}
	listed, err := adm.ListGroups(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if lg, ok := listed[group]; !ok || lg.ProtocolType != "consumer" || lg.State != "Stable" || lg.GroupType != "consumer" {
		t.Fatalf("listed: %+v", listed[group])
	}

	// a leaves: b and c own all six and read on.
	a.stop()
	eventually(t, 60*time.Second, "the two others own all 6 partitions", func() bool {
		pb, pc := b.partitions(), c.partitions()
		own := map[int32]bool{}
		for _, p := range append(pb, pc...) {
			own[p] = true
		}
		return len(pb) == 3 && len(pc) == 3 && len(own) == parts
	})
	produceN(t, prod, topic, parts, 20) // offsets 20..39
	eventually(t, 30*time.Second, "b and c consume every later record", func() bool {
		for p := range int32(parts) {
			for o := int64(20); o < 40; o++ {
				if !b.saw(p, o) && !c.saw(p, o) {
					return false
				}
			}
		}
		return true
	})
	eventually(t, 30*time.Second, "committed offsets reach 40 on every partition", func() bool {
		offs, err := adm.FetchOffsets(ctx, group)
		if err != nil {
			return false
		}
		for p := range int32(parts) {
			o, ok := offs.Lookup(topic, p)
			if !ok || o.At != 40 {
				return false
			}
		}
		return true
	})

	// A classic member whose subscription does not decode may not join
	// the consumer group (INCONSISTENT_GROUP_PROTOCOL, as Kafka answers).
	join := kmsg.NewPtrJoinGroupRequest()
	join.Group, join.ProtocolType, join.SessionTimeoutMillis, join.RebalanceTimeoutMillis = group, "consumer", 10000, 10000
	join.MemberID = "classic-member" // without one, v4+ is answered MEMBER_ID_REQUIRED first, as Kafka does
	join.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range", Metadata: []byte{0, 0}}}
	jr, err := join.RequestWith(ctx, g.client(t))
	if err != nil {
		t.Fatal(err)
	}
	if jr.ErrorCode != kerr.InconsistentGroupProtocol.Code {
		t.Fatalf("classic JoinGroup to a consumer group: %v", kerr.ErrorForCode(jr.ErrorCode))
	}
}

// TestConsumerProtocolOff: without the setting, the APIs are not listed,
// are refused with UNSUPPORTED_VERSION, and kgo's ServerSideBalancer falls
// back to the classic protocol.
func TestConsumerProtocolOff(t *testing.T) {
	g := startGateway(t, fastGroups, func(c *gateway.Config) { c.ConsumerGroupProtocol = false })
	ctx := context.Background()
	versions, err := kmsg.NewPtrApiVersionsRequest().RequestWith(ctx, g.client(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range versions.ApiKeys {
		if k.ApiKey == 68 || k.ApiKey == 69 {
			t.Fatalf("API key %d advertised", k.ApiKey)
		}
	}
	const topic, group = "classic.topic", "classic-group"
	adm := kadm.NewClient(g.client(t))
	if _, err := adm.CreateTopic(ctx, 2, 1, nil, topic); err != nil {
		t.Fatal(err)
	}
	cs := startConsumer(t, g, protocolOpts(group, topic)...)
	eventually(t, 60*time.Second, "the consumer owns both partitions through the classic protocol", func() bool {
		return len(cs.partitions()) == 2
	})
	listed, err := adm.ListGroups(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if lg := listed[group]; lg.GroupType != "classic" {
		t.Fatalf("listed: %+v", lg)
	}
}

// TestConsumerProtocolRegexNewTopic: a franz-go consumer with the consumer
// protocol subscribes by regular expression (kgo.ConsumeRegex: KIP-848's
// SubscribedTopicRegex, resolved by the coordinator). A matching topic
// created after the group started is assigned to it at a later heartbeat
// and its records are consumed; a topic that does not match is not.
func TestConsumerProtocolRegexNewTopic(t *testing.T) {
	g := startGateway(t, fastGroups, consumerProtocol)
	ctx := context.Background()
	const group, first, later, other = "kip848-regex", "re.first", "re.later", "other.topic"
	adm := kadm.NewClient(g.client(t))
	if _, err := adm.CreateTopic(ctx, 2, 1, nil, first); err != nil {
		t.Fatal(err)
	}
	prod := g.client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	produceN(t, prod, first, 2, 5)

	var mu sync.Mutex
	seen := map[string]int{} // records read per topic
	cl := g.client(t, kgo.ConsumerGroup(group), kgo.ConsumeRegex(), kgo.ConsumeTopics(`re\..*`),
		kgo.ServerSideBalancer(), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(200*time.Millisecond), kgo.MetadataMinAge(500*time.Millisecond), kgo.MetadataMaxAge(2*time.Second))
	pctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for pctx.Err() == nil {
			cl.PollFetches(pctx).EachRecord(func(r *kgo.Record) {
				mu.Lock()
				seen[r.Topic]++
				mu.Unlock()
			})
		}
	}()
	t.Cleanup(func() { cancel(); <-done })
	count := func(topic string) int {
		mu.Lock()
		defer mu.Unlock()
		return seen[topic]
	}
	eventually(t, 30*time.Second, "the 10 records of "+first+" are consumed", func() bool { return count(first) == 10 })

	// Created after the group started: the coordinator resolves the
	// regular expression again at the member's next heartbeat (5 s apart).
	start := time.Now()
	if _, err := adm.CreateTopic(ctx, 3, 1, nil, later); err != nil {
		t.Fatal(err)
	}
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, other); err != nil {
		t.Fatal(err)
	}
	produceN(t, prod, later, 3, 4)
	produceN(t, prod, other, 1, 4)
	eventually(t, 20*time.Second, "the 12 records of "+later+", created after the group started, are consumed", func() bool { return count(later) == 12 })
	t.Logf("%s picked up and read %.1fs after it was created", later, time.Since(start).Seconds())

	req := kmsg.NewPtrConsumerGroupDescribeRequest()
	req.Groups = []string{group}
	resp, err := req.RequestWith(ctx, g.client(t))
	if err != nil {
		t.Fatal(err)
	}
	d := resp.Groups[0]
	if d.ErrorCode != 0 || len(d.Members) != 1 {
		t.Fatalf("describe: %+v", d)
	}
	assigned := map[string]int{}
	for _, tp := range d.Members[0].Assignment.TopicPartitions {
		assigned[tp.Topic] = len(tp.Partitions)
	}
	if len(assigned) != 2 || assigned[first] != 2 || assigned[later] != 3 {
		t.Fatalf("the member's assignment: %v, want %s 2 partitions and %s 3", assigned, first, later)
	}
	if n := count(other); n != 0 {
		t.Fatalf("%d records of %s, which the regular expression does not match", n, other)
	}
}

// TestApiVersionsGroupVersion: ApiVersions v3+ advertises the group.version
// feature as Kafka 4.4's broker does (its one-node KRaft answer, queried with
// kmsg v4: SupportedFeatures group.version 0-1, FinalizedFeatures
// group.version 1-1 with a positive epoch) when ConsumerGroupHeartbeat is
// served, and no feature without the setting (kgo sends the highest version
// both know, v4 or v5).
func TestApiVersionsGroupVersion(t *testing.T) {
	for _, tc := range []struct {
		name string
		on   bool
		want bool
	}{
		{"group_consumer_protocol on", true, true},
		{"group_consumer_protocol off", false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := startGateway(t, func(c *gateway.Config) { c.ConsumerGroupProtocol = tc.on })
			req := kmsg.NewPtrApiVersionsRequest()
			req.ClientSoftwareName, req.ClientSoftwareVersion = "disgw-test", "1"
			resp, err := req.RequestWith(context.Background(), g.client(t))
			if err != nil {
				t.Fatal(err)
			}
			if !tc.want {
				if len(resp.SupportedFeatures) != 0 || len(resp.FinalizedFeatures) != 0 {
					t.Fatalf("features advertised: %+v %+v", resp.SupportedFeatures, resp.FinalizedFeatures)
				}
				return
			}
			if len(resp.SupportedFeatures) != 1 || len(resp.FinalizedFeatures) != 1 {
				t.Fatalf("features: %+v %+v, want group.version alone", resp.SupportedFeatures, resp.FinalizedFeatures)
			}
			sf, ff := resp.SupportedFeatures[0], resp.FinalizedFeatures[0]
			if sf.Name != "group.version" || sf.MinVersion != 0 || sf.MaxVersion != 1 {
				t.Errorf("supported: %+v, want group.version 0-1", sf)
			}
			if ff.Name != "group.version" || ff.MinVersionLevel != 1 || ff.MaxVersionLevel != 1 {
				t.Errorf("finalized: %+v, want group.version 1-1", ff)
			}
			if resp.FinalizedFeaturesEpoch <= 0 {
				t.Errorf("finalized features epoch %d, want > 0", resp.FinalizedFeaturesEpoch)
			}
		})
	}
}

// TestConsumerProtocolThenClassic: a group used with the consumer protocol
// and left empty takes classic consumers again (Kafka tombstones the empty
// consumer group at a classic JoinGroup): a franz-go classic consumer
// resumes at the commits the consumer-protocol member made, its own
// commits are accepted, and DescribeGroups shows it Stable with its one
// member. (A newcomer's kcat run found the group taking the join but
// refusing its commits with UNKNOWN_MEMBER_ID.)
func TestConsumerProtocolThenClassic(t *testing.T) {
	g := startGateway(t, fastGroups, consumerProtocol)
	ctx := context.Background()
	const topic, group, parts = "kip848.back", "kip848-back", 2
	adm := kadm.NewClient(g.client(t))
	if _, err := adm.CreateTopic(ctx, parts, 1, nil, topic); err != nil {
		t.Fatal(err)
	}
	prod := g.client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	produceN(t, prod, topic, parts, 10)
	committed := func(want int64) func() bool {
		return func() bool {
			os, err := adm.FetchOffsets(ctx, group)
			if err != nil {
				return false
			}
			for p := range int32(parts) {
				if o, ok := os.Lookup(topic, p); !ok || o.At != want {
					return false
				}
			}
			return true
		}
	}
	a := startConsumer(t, g, protocolOpts(group, topic)...)
	eventually(t, 60*time.Second, "the consumer-protocol member commits 10 on each partition", committed(10))
	a.stop()

	produceN(t, prod, topic, parts, 5)
	b := startConsumer(t, g, kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
		kgo.FetchMaxWait(200*time.Millisecond), kgo.AutoCommitInterval(100*time.Millisecond))
	eventually(t, 60*time.Second, "the classic member reads offsets 10 to 14 and commits 15", func() bool {
		for p := range int32(parts) {
			for o := int64(10); o < 15; o++ {
				if !b.saw(p, o) {
					return false
				}
			}
		}
		return committed(15)()
	})
	for p := range int32(parts) {
		for o := range int64(10) {
			if b.saw(p, o) {
				t.Fatalf("the classic member read %d/%d, before the commits", p, o)
			}
		}
	}
	gs, err := adm.DescribeGroups(ctx, group)
	if err != nil {
		t.Fatal(err)
	}
	if d := gs[group]; d.Err != nil || d.State != "Stable" || d.ProtocolType != "consumer" || len(d.Members) != 1 {
		t.Fatalf("described: %+v", d)
	}
}

// TestRollClassicToConsumerAndBack: a classic group of three franz-go
// consumers is rolled one member at a time to the consumer protocol
// (kgo.ServerSideBalancer) and back (docs/consumer-protocol.md §8): the
// first consumer-protocol member upgrades the classic group online, the
// classic members go on in the consumer group, the last consumer-protocol
// member leaving downgrades it. Records are produced before each step and
// read and committed to the end before the next, so none may be read twice
// (no uncommitted tail) and none may be missed; the group's type and its
// members' protocols are checked at each step.
func TestRollClassicToConsumerAndBack(t *testing.T) { rollClassicToConsumerAndBack(t, false) }

// TestRollStaticClassicToConsumerAndBack: the same with static members
// (group.instance.id): a member stopped sends no LeaveGroup (classic) or
// leaves for a while (consumer protocol, epoch -2), and its replacement of
// the other protocol takes its place under its instance id; the last
// consumer-protocol member replaced downgrades the group.
func TestRollStaticClassicToConsumerAndBack(t *testing.T) { rollClassicToConsumerAndBack(t, true) }

func rollClassicToConsumerAndBack(t *testing.T, static bool) {
	g := startGateway(t, fastGroups, consumerProtocol)
	ctx := context.Background()
	const topic, group, parts = "roll.topic", "roll-group", 6
	adm := kadm.NewClient(g.client(t))
	if _, err := adm.CreateTopic(ctx, parts, 1, nil, topic); err != nil {
		t.Fatal(err)
	}
	prod := g.client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	classicOpts := []kgo.Opt{kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(200 * time.Millisecond), kgo.AutoCommitInterval(100 * time.Millisecond),
		kgo.HeartbeatInterval(500 * time.Millisecond)}
	var all []*consumer // every consumer ever started
	start := func(i int, classic bool) *consumer {
		opts := protocolOpts(group, topic)
		if classic {
			opts = classicOpts
		}
		if static {
			opts = append(slices.Clone(opts), kgo.InstanceID(fmt.Sprintf("instance-%d", i)))
		}
		c := startConsumer(t, g, opts...)
		all = append(all, c)
		return c
	}
	produced := int64(0)
	step := func(what string, members []*consumer, wantType string, wantClassic int) {
		t.Helper()
		eventually(t, 60*time.Second, what+": the 3 members own 2 partitions each", func() bool {
			own := map[int32]bool{}
			for _, c := range members {
				ps := c.partitions()
				if len(ps) != 2 {
					return false
				}
				for _, p := range ps {
					own[p] = true
				}
			}
			return len(own) == parts
		})
		produceN(t, prod, topic, parts, 5)
		produced += 5
		eventually(t, 60*time.Second, what+": every record read and committed", func() bool {
			for p := range int32(parts) {
				for o := range produced {
					if !slices.ContainsFunc(all, func(c *consumer) bool { return c.saw(p, o) }) {
						return false
					}
				}
			}
			offs, err := adm.FetchOffsets(ctx, group)
			if err != nil {
				return false
			}
			for p := range int32(parts) {
				if o, ok := offs.Lookup(topic, p); !ok || o.At != produced {
					return false
				}
			}
			return true
		})
		// Classic members catch up with the group's epoch when a
		// heartbeat tells them to join again: the group is Stable then.
		var listed kadm.ListedGroups
		eventually(t, 30*time.Second, what+": the group listed Stable, of type "+wantType, func() bool {
			var err error
			listed, err = adm.ListGroups(ctx)
			return err == nil && listed[group].GroupType == wantType && listed[group].State == "Stable"
		})
		if wantType == "consumer" {
			req := kmsg.NewPtrConsumerGroupDescribeRequest()
			req.Groups = []string{group}
			resp, err := req.RequestWith(ctx, g.client(t))
			if err != nil {
				t.Fatal(err)
			}
			classic := 0
			for _, m := range resp.Groups[0].Members {
				if m.MemberType == 0 {
					classic++
				}
			}
			if d := resp.Groups[0]; d.ErrorCode != 0 || len(d.Members) != 3 || classic != wantClassic {
				t.Fatalf("%s: described %d members, %d classic, want 3 and %d: %+v", what, len(d.Members), classic, wantClassic, d)
			}
		}
	}

	members := []*consumer{start(0, true), start(1, true), start(2, true)}
	step("classic group", members, "classic", 3)
	for i := range members {
		members[i].stop()
		members[i] = start(i, false)
		step(fmt.Sprintf("member %d on the consumer protocol", i), members, "consumer", 2-i)
	}
	for i := range members {
		members[i].stop()
		members[i] = start(i, true)
		want := "consumer"
		if i == len(members)-1 {
			want = "classic" // the last consumer-protocol member left: downgraded
		}
		step(fmt.Sprintf("member %d back on the classic protocol", i), members, want, i+1)
	}
	for p := range int32(parts) {
		for o := range produced {
			readers := 0
			for _, c := range all {
				if c.saw(p, o) {
					readers++
				}
			}
			if readers != 1 {
				t.Errorf("record %d/%d read by %d consumers", p, o, readers)
			}
		}
	}
	for i, c := range all {
		if c.again > 0 {
			t.Errorf("consumer %d read %d records again", i, c.again)
		}
	}
}
