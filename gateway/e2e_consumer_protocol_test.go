package gateway_test

import (
	"context"
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

	// A classic member may not join the consumer group.
	join := kmsg.NewPtrJoinGroupRequest()
	join.Group, join.ProtocolType, join.SessionTimeoutMillis, join.RebalanceTimeoutMillis = group, "consumer", 10000, 10000
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
