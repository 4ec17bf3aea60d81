package gateway

// AlterPartitionReassignments: v0-1 (KIP-455), flexible; v1 adds
// AllowReplicationFactorChange (KIP-860), echoed in the response.
//
// This node (Config.NodeID) is the only broker and the only replica of
// every partition, so nothing can move. Each partition is answered as a
// one-node Kafka 4.4 answers (ReplicationControlManager), in this order:
//   - an unknown topic: UNKNOWN_TOPIC_OR_PARTITION ("Unable to find a
//     topic named T."); an unknown partition: the same ("Unable to find
//     partition T:P.");
//   - null replicas (cancel): NO_REASSIGNMENT_IN_PROGRESS;
//   - replicas [this node]: no error (the assignment it already has);
//   - an empty list, a broker listed twice or any other broker id:
//     INVALID_REPLICA_ASSIGNMENT with Kafka's message.
//
// With no topics the top-level ErrorMessage is "" (Kafka's), else null.
// Limits (limits.go): partitions past Limits.MaxTopics or
// Limits.MaxPartitions get INVALID_REQUEST.

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/disgw/disgw/disbackend"
	"github.com/disgw/disgw/internal/acl"
	"github.com/disgw/disgw/kafkawire"
)

func init() {
	registerAPI(45, 0, 1, (*conn).handleAlterPartitionAssignments, clusterOp(acl.OpAlter, refuseAlterPartitionAssignments))
}

// refuseAlterPartitionAssignments answers the request with code.
func refuseAlterPartitionAssignments(r *kmsg.AlterPartitionAssignmentsRequest, code int16) kmsg.Response {
	resp := r.ResponseKind().(*kmsg.AlterPartitionAssignmentsResponse)
	resp.ErrorCode = code
	return resp
}

func (c *conn) handleAlterPartitionAssignments(req *kafkawire.Request) reply {
	r := req.Body.(*kmsg.AlterPartitionAssignmentsRequest)
	resp := r.ResponseKind().(*kmsg.AlterPartitionAssignmentsResponse)
	s := c.s
	resp.AllowReplicationFactorChange = r.AllowReplicationFactorChange
	if len(r.Topics) == 0 {
		empty := ""
		resp.ErrorMessage = &empty
		return ready(req, resp)
	}
	ctx, cancel := c.requestContext(r.TimeoutMillis)
	defer cancel()
	q := s.newPartitionQuota()
	defer q.report(c, "AlterPartitionAssignments")
	resp.Topics = make([]kmsg.AlterPartitionAssignmentsResponseTopic, 0, len(r.Topics))
	for _, rt := range r.Topics {
		t := kmsg.NewAlterPartitionAssignmentsResponseTopic()
		t.Topic = rt.Topic
		served := q.topic()
		st := s.topics.get(rt.Topic)
		if st == nil && served && len(rt.Partitions) > 0 {
			st = s.lookupTopic(ctx, rt.Topic)
		}
		for _, rp := range rt.Partitions {
			p := kmsg.NewAlterPartitionAssignmentsResponseTopicPartition()
			p.Partition = rp.Partition
			if !q.partition() {
				p.ErrorCode = errCodeOverCap
			} else {
				var msg string
				p.ErrorCode, msg = s.reassignment(st, rt.Topic, rp)
				if msg != "" {
					p.ErrorMessage = &msg
				}
			}
			t.Partitions = append(t.Partitions, p)
		}
		resp.Topics = append(resp.Topics, t)
	}
	return ready(req, resp)
}

// reassignment answers one partition's reassignment to rp.Replicas (nil:
// cancel) on topic st (nil: unknown): a Kafka error code and message.
func (s *Server) reassignment(st *disbackend.Stream, topic string, rp kmsg.AlterPartitionAssignmentsRequestTopicPartition) (int16, string) {
	switch {
	case st == nil:
		return kerr.UnknownTopicOrPartition.Code, fmt.Sprintf("Unable to find a topic named %s.", topic)
	case rp.Partition < 0 || rp.Partition >= st.PartitionCount:
		return kerr.UnknownTopicOrPartition.Code, fmt.Sprintf("Unable to find partition %s:%d.", topic, rp.Partition)
	case rp.Replicas == nil:
		return kerr.NoReassignmentInProgress.Code, ""
	}
	if msg := s.replicaAssignmentError(rp.Replicas, -1); msg != "" {
		return kerr.InvalidReplicaAssignment.Code, msg
	}
	return 0, ""
}
