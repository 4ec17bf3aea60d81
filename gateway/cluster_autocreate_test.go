package gateway_test

import (
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/disgw/disgw/gateway"
)

// TestClusterAutoCreateForwarded: a Metadata request that auto-creates a
// topic through a node that is not the controller has the controller
// create it (a CreateTopics in an envelope) and answers the topic, not
// NOT_CONTROLLER, which clients do not retry (librdkafka failed every
// record of such a topic); a node that never forwards (no cluster key)
// answers as if auto-creation were off, UNKNOWN_TOPIC_OR_PARTITION (while
// a forward can be tried but fails, LEADER_NOT_AVAILABLE, which clients
// retry: TestClusterAutoCreate).
func TestClusterAutoCreateForwarded(t *testing.T) {
	metadata := func(topic string) *kmsg.MetadataRequest {
		req := kmsg.NewPtrMetadataRequest()
		req.Topics = []kmsg.MetadataRequestTopic{{Topic: kmsg.StringPtr(topic)}}
		req.AllowAutoTopicCreation = true
		return req
	}
	t.Run("Forwarded", func(t *testing.T) {
		tc := startCluster(t, 3, nil, func(c *gateway.Config) { c.DefaultPartitions = 3 })
		tc.change(func(tc *testCluster) { tc.controller = 2 })
		for _, v := range []int16{3, 12} { // v3 always auto-creates; v12 as asked
			topic := fmt.Sprintf("auto.v%d", v)
			mt := tc.raw(t, 0).roundTrip(v, metadata(topic)).(*kmsg.MetadataResponse).Topics[0]
			if mt.ErrorCode != 0 || len(mt.Partitions) != 3 {
				t.Fatalf("Metadata v%d auto-creating %s at node 0: error %v, %d partitions", v, topic, kerr.ErrorForCode(mt.ErrorCode), len(mt.Partitions))
			}
		}
		if a0, a2 := tc.nodes[0].adminCalls(), tc.nodes[2].adminCalls(); a0 != 0 || a2 != 2 {
			t.Fatalf("admin calls: node 0 %d, node 2 %d; want 0, 2", a0, a2)
		}
		// Known now: answered without another creation.
		if mt := tc.raw(t, 1).roundTrip(12, metadata("auto.v12")).(*kmsg.MetadataResponse).Topics[0]; mt.ErrorCode != 0 || len(mt.Partitions) != 3 {
			t.Fatalf("Metadata of auto.v12 at node 1: error %v, %d partitions", kerr.ErrorForCode(mt.ErrorCode), len(mt.Partitions))
		}
		if a1, a2 := tc.nodes[1].adminCalls(), tc.nodes[2].adminCalls(); a1 != 0 || a2 != 2 {
			t.Fatalf("admin calls: node 1 %d, node 2 %d; want 0, 2", a1, a2)
		}
	})
	t.Run("NotForwarded", func(t *testing.T) {
		tc := startCluster(t, 2, nil, func(c *gateway.Config) { c.ClusterKey = nil })
		tc.change(func(tc *testCluster) { tc.controller = 1 })
		mt := tc.raw(t, 0).roundTrip(12, metadata("auto.refused")).(*kmsg.MetadataResponse).Topics[0]
		if mt.ErrorCode != kerr.UnknownTopicOrPartition.Code {
			t.Fatalf("Metadata auto-creating through node 0 without a cluster key: error %v, want UNKNOWN_TOPIC_OR_PARTITION", kerr.ErrorForCode(mt.ErrorCode))
		}
		if tc.nodes[1].adminCalls() != 0 {
			t.Fatal("the controller created the topic")
		}
	})
}
