package gateway

// ElectLeaders: v0-2 (KIP-183, KIP-460).
//
// Version notes: v1 adds ElectionType (0 preferred, 1 unclean) and a
// top-level ErrorCode; v2 is flexible.
//
// One node leads every partition and is its only replica, so no election
// is ever needed, as on a one-node Kafka 4.4:
//   - a listed partition that exists: ELECTION_NOT_NEEDED ("Leader
//     election not needed for topic partition."), for either type;
//   - a partition or topic that does not exist: UNKNOWN_TOPIC_OR_PARTITION
//     ("No such partition as T-P", "No such topic as T");
//   - null topics (every partition, kafka-leader-election
//     --all-topic-partitions): every topic with no partition results
//     (Kafka leaves out the partitions whose leader is already the
//     preferred one); an empty list: no topics;
//   - an election type other than 0 or 1: INVALID_REQUEST, no topics.
//
// Topics are answered in request order, a repeated one again, as Kafka
// does. Limits (limits.go): partitions past Limits.MaxTopics or
// Limits.MaxPartitions get INVALID_REQUEST.

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/disgw/disgw/internal/acl"
	"github.com/disgw/disgw/kafkawire"
)

func init() {
	registerAPI(43, 0, 2, (*conn).handleElectLeaders, clusterOp(acl.OpAlter, refuseElectLeaders))
}

// refuseElectLeaders answers the request and each of its partitions with
// code.
func refuseElectLeaders(r *kmsg.ElectLeadersRequest, code int16) kmsg.Response {
	resp := r.ResponseKind().(*kmsg.ElectLeadersResponse)
	resp.ErrorCode = code
	for _, t := range r.Topics {
		rt := kmsg.NewElectLeadersResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewElectLeadersResponseTopicPartition()
			rp.Partition, rp.ErrorCode = p, code
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}

// electionNotNeededMessage is Kafka's message with ELECTION_NOT_NEEDED;
// every such answer points at it (encoding only reads it).
var electionNotNeededMessage = "Leader election not needed for topic partition."

func (c *conn) handleElectLeaders(req *kafkawire.Request) reply {
	r := req.Body.(*kmsg.ElectLeadersRequest)
	resp := r.ResponseKind().(*kmsg.ElectLeadersResponse)
	s := c.s
	if r.ElectionType != 0 && r.ElectionType != 1 {
		resp.ErrorCode = kerr.InvalidRequest.Code
		return ready(req, resp)
	}
	if r.Topics == nil {
		for _, st := range s.topics.all() {
			t := kmsg.NewElectLeadersResponseTopic()
			t.Topic = st.TopicName
			t.Partitions = []kmsg.ElectLeadersResponseTopicPartition{}
			resp.Topics = append(resp.Topics, t)
		}
		t := kmsg.NewElectLeadersResponseTopic() // as Kafka lists its internal topic
		t.Topic = offsetsTopic
		t.Partitions = []kmsg.ElectLeadersResponseTopicPartition{}
		resp.Topics = append(resp.Topics, t)
		return ready(req, resp)
	}
	ctx, cancel := c.requestContext(r.TimeoutMillis)
	defer cancel()
	q := s.newPartitionQuota()
	defer q.report(c, "ElectLeaders")
	resp.Topics = make([]kmsg.ElectLeadersResponseTopic, 0, len(r.Topics))
	for _, rt := range r.Topics {
		t := kmsg.NewElectLeadersResponseTopic()
		t.Topic = rt.Topic
		t.Partitions = make([]kmsg.ElectLeadersResponseTopicPartition, 0, len(rt.Partitions))
		served := q.topic()
		st := s.cachedTopic(rt.Topic)
		if st == nil && served && len(rt.Partitions) > 0 {
			st = s.lookupTopic(ctx, rt.Topic)
		}
		var noTopic *string // one message for every partition of an unknown topic
		if st == nil && len(rt.Partitions) > 0 {
			noTopic = kmsg.StringPtr("No such topic as " + rt.Topic)
		}
		for _, part := range rt.Partitions {
			p := kmsg.NewElectLeadersResponseTopicPartition()
			p.Partition = part
			switch {
			case !q.partition():
				p.ErrorCode = errCodeOverCap
			case st == nil:
				p.ErrorCode, p.ErrorMessage = kerr.UnknownTopicOrPartition.Code, noTopic
			case part < 0 || part >= st.PartitionCount:
				p.ErrorCode = kerr.UnknownTopicOrPartition.Code
				p.ErrorMessage = kmsg.StringPtr(fmt.Sprintf("No such partition as %s-%d", rt.Topic, part))
			default:
				p.ErrorCode, p.ErrorMessage = kerr.ElectionNotNeeded.Code, &electionNotNeededMessage
			}
			t.Partitions = append(t.Partitions, p)
		}
		resp.Topics = append(resp.Topics, t)
	}
	return ready(req, resp)
}
