package gateway

// DeleteRecords: v0-2 (as Kafka 4.4; disbackend.RecordDeleter: the embedded
// store moves and persists the partition's log start offset; DIS keeps it
// as a checkpoint of a gateway-owned app, the records staying in DIS until
// their data_duration).
//
// Version notes: v1 no change; v2 flexible.
//
// Answers as a one-node Kafka 4.4 does (checked against it): the low
// watermark is the new log start offset, which never moves back (an
// offset below it answers the current one, no error); offset -1 means the
// high watermark; an offset above the high watermark, or below -1, gets
// OFFSET_OUT_OF_RANGE with low watermark -1; a topic whose cleanup.policy
// lacks delete (compact) gets POLICY_VIOLATION; an unknown topic or
// partition UNKNOWN_TOPIC_OR_PARTITION. With several nodes (cluster.go), a
// partition this node does not lead gets NOT_LEADER_OR_FOLLOWER, as from a
// Kafka broker that is not its leader. Afterwards Fetch below it gets
// OFFSET_OUT_OF_RANGE and ListOffsets earliest (-2) returns it. Topics
// past Limits.MaxTopics get INVALID_REQUEST (limits.go).

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/disgw/disgw/disbackend"
	"github.com/disgw/disgw/internal/acl"
	"github.com/disgw/disgw/kafkawire"
)

func init() {
	registerAPI(21, 0, 2, (*conn).handleDeleteRecords, denyTopics(acl.OpDelete,
		func(r *kmsg.DeleteRecordsRequest) *[]kmsg.DeleteRecordsRequestTopic { return &r.Topics },
		func(t kmsg.DeleteRecordsRequestTopic) string { return t.Topic },
		refuseDeleteRecordsTopic,
		func(r *kmsg.DeleteRecordsResponse) *[]kmsg.DeleteRecordsResponseTopic { return &r.Topics }))
}

// refuseDeleteRecordsTopic answers each partition of a refused topic with
// code and no low watermark.
func refuseDeleteRecordsTopic(t kmsg.DeleteRecordsRequestTopic, code int16) kmsg.DeleteRecordsResponseTopic {
	d := kmsg.NewDeleteRecordsResponseTopic()
	d.Topic = t.Topic
	for _, p := range t.Partitions {
		dp := kmsg.NewDeleteRecordsResponseTopicPartition()
		dp.Partition, dp.LowWatermark, dp.ErrorCode = p.Partition, -1, code
		d.Partitions = append(d.Partitions, dp)
	}
	return d
}

func (c *conn) handleDeleteRecords(req *kafkawire.Request) reply {
	r := req.Body.(*kmsg.DeleteRecordsRequest)
	return reply{req: req, finish: func() (kmsg.Response, error) {
		ctx, cancel := c.requestContext(r.TimeoutMillis)
		defer cancel()
		q := newQuota(c.s.cfg.Limits.MaxTopics)
		defer q.report(c, limitTopics, "DeleteRecords")
		resp := r.ResponseKind().(*kmsg.DeleteRecordsResponse)
		resp.Topics = make([]kmsg.DeleteRecordsResponseTopic, 0, len(r.Topics))
		for _, rt := range r.Topics {
			t := kmsg.NewDeleteRecordsResponseTopic()
			t.Topic = rt.Topic
			over := !q.take()
			var st *disbackend.Stream
			if !over {
				if st = c.s.cachedTopic(rt.Topic); st == nil {
					st = c.s.lookupTopic(ctx, rt.Topic)
				}
			}
			t.Partitions = make([]kmsg.DeleteRecordsResponseTopicPartition, 0, len(rt.Partitions))
			for _, rp := range rt.Partitions {
				p := kmsg.NewDeleteRecordsResponseTopicPartition()
				p.Partition = rp.Partition
				p.LowWatermark = -1
				if over {
					p.ErrorCode = errCodeOverCap
				} else if lw, err := c.s.deleteRecords(ctx, st, rp.Partition, rp.Offset); err != nil {
					p.ErrorCode = kafkaError(c.log, err)
				} else {
					p.LowWatermark = lw
				}
				t.Partitions = append(t.Partitions, p)
			}
			resp.Topics = append(resp.Topics, t)
		}
		return resp, nil
	}}
}

// deleteRecords moves one partition's log start offset to offset (-1: the
// high watermark) and returns the new one.
func (s *Server) deleteRecords(ctx context.Context, st *disbackend.Stream, partition int32, offset int64) (int64, error) {
	if st == nil || partition < 0 || partition >= st.PartitionCount {
		return 0, errUnknownTopic
	}
	if st.TopicName == offsetsTopic { // as Kafka's ReplicaManager refuses internal topics
		return 0, kerrWrap(kerr.InvalidTopicException, "Cannot delete records of internal topic "+offsetsTopic)
	}
	if !s.leads(st.Name, partition) {
		// Several nodes: the partition's leader moves its log start
		// offset, as in Kafka, whose admin client sends DeleteRecords
		// to the leader Metadata names.
		return 0, fmt.Errorf("delete records of %s partition %d: %w", st.TopicName, partition, disbackend.ErrNotLeader)
	}
	if !st.Config.Deletes() {
		return 0, kerrWrap(kerr.PolicyViolation, fmt.Sprintf("topic %q has cleanup.policy %s: records of a compacted topic cannot be deleted", st.TopicName, st.Config.CleanupPolicy))
	}
	d, ok := s.backend.(disbackend.RecordDeleter)
	if !ok {
		return 0, kerr.UnsupportedVersion
	}
	if offset == -1 {
		r, err := s.backend.Range(st.Name, partition)
		if err != nil {
			return 0, err
		}
		offset = r.Next
	}
	if offset < 0 {
		return 0, kerrWrap(kerr.OffsetOutOfRange, fmt.Sprintf("offset %d: DeleteRecords takes an offset >= 0 or -1 (the high watermark)", offset))
	}
	return d.DeleteRecords(ctx, st.Name, partition, offset)
}
