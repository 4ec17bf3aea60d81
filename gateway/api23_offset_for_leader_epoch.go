package gateway

// OffsetForLeaderEpoch: v0-4.
//
// Version notes: v1 leader epoch in the response; v2 current leader epoch
// fencing (KIP-320); v3 replica id; v4 flexible.
//
// On one node every partition has had one leader epoch, 0, since it was
// created, so the end offset of epoch 0 is the high watermark; a later
// epoch is unknown (-1/-1, as Kafka answers an epoch it has not seen), and
// an epoch below 0 is also answered -1/-1. With several nodes
// (cluster.go), the current epoch is the answering view's cluster epoch E
// and any epoch from 0 to E is answered with itself and the high
// watermark as its end offset: DIS never truncates a partition, so no
// epoch ended before a record a client already read, and Kafka's
// truncation check finds nothing (docs/cluster.md §5); a later epoch is
// -1/-1. Any node answers every partition. Partitions past the request
// limits get INVALID_REQUEST (limits.go).

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/disgw/disgw/internal/acl"
	"github.com/disgw/disgw/kafkawire"
)

func init() {
	registerAPI(23, 0, 4, (*conn).handleOffsetForLeaderEpoch, (*conn).authorizeOffsetForLeaderEpoch)
}

// authorizeOffsetForLeaderEpoch: DESCRIBE on each topic, or, for a
// replica (v3+), CLUSTER_ACTION on the cluster; a refused topic is answered
// TOPIC_AUTHORIZATION_FAILED on each partition, without an epoch or offset.
func (c *conn) authorizeOffsetForLeaderEpoch(req *kafkawire.Request) (kmsg.Response, postAuth) {
	r := req.Body.(*kmsg.OffsetForLeaderEpochRequest)
	return nil, func(resp kmsg.Response) error {
		or := resp.(*kmsg.OffsetForLeaderEpochResponse)
		for i := range or.Topics {
			t := &or.Topics[i]
			ok := c.mayTopic(acl.OpDescribe, t.Topic)
			if r.ReplicaID >= 0 && r.Version >= 3 {
				ok = c.mayCluster(acl.OpClusterAction)
			}
			if !ok {
				for j := range t.Partitions {
					p := &t.Partitions[j]
					p.ErrorCode, p.LeaderEpoch, p.EndOffset = errTopicAuth, -1, -1
				}
			}
		}
		return nil
	}
}

func (c *conn) handleOffsetForLeaderEpoch(req *kafkawire.Request) reply {
	r := req.Body.(*kmsg.OffsetForLeaderEpochRequest)
	resp := r.ResponseKind().(*kmsg.OffsetForLeaderEpochResponse)
	s := c.s
	lim := s.newPartitionQuota()
	defer lim.report(c, "OffsetForLeaderEpoch")
	epoch := s.currentEpoch()
	for _, rt := range r.Topics {
		t := kmsg.NewOffsetForLeaderEpochResponseTopic()
		t.Topic = rt.Topic
		lim.topic()
		st := s.topics.get(rt.Topic)
		for _, rp := range rt.Partitions {
			p := kmsg.NewOffsetForLeaderEpochResponseTopicPartition()
			p.Partition = rp.Partition
			switch {
			case !lim.partition():
				p.ErrorCode = errCodeOverCap
			case st == nil || rp.Partition < 0 || rp.Partition >= st.PartitionCount:
				p.ErrorCode = kerr.UnknownTopicOrPartition.Code
			case r.Version >= 2 && rp.CurrentLeaderEpoch >= 0 && rp.CurrentLeaderEpoch < epoch:
				p.ErrorCode = kerr.FencedLeaderEpoch.Code
			case r.Version >= 2 && rp.CurrentLeaderEpoch > epoch:
				p.ErrorCode = kerr.UnknownLeaderEpoch.Code
			case rp.LeaderEpoch >= 0 && rp.LeaderEpoch <= epoch:
				pr, err := s.backend.Range(st.Name, rp.Partition)
				if err != nil {
					p.ErrorCode = kafkaError(c.log, err)
					break
				}
				p.LeaderEpoch, p.EndOffset = rp.LeaderEpoch, pr.Next
			default:
				p.LeaderEpoch, p.EndOffset = -1, -1
			}
			t.Partitions = append(t.Partitions, p)
		}
		resp.Topics = append(resp.Topics, t)
	}
	return ready(req, resp)
}
