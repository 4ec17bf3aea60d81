package gateway

// OffsetCommit: v0-10 (groupcoord; DIS CommitCheckpoint, LAST_READ).
//
// Version notes:
//   - v1: Generation, MemberID, per-partition Timestamp (ignored).
//   - v2-4: RetentionTimeMillis (ignored: retention is the group's, Kafka
//     offsets.retention.minutes). v3: ThrottleMillis.
//   - v6: LeaderEpoch (not kept; OffsetFetch answers -1).
//   - v7: InstanceID (KIP-345: FENCED_INSTANCE_ID for a replaced static
//     member). v8: flexible.
//   - v9: no change for classic groups (KIP-848 member epochs).
//   - v10: topics by id (KIP-848 / KAFKA-19186), resolved through the topic
//     cache; an unknown id gets UNKNOWN_TOPIC_ID.
//
// Each offset is stored unchanged as the app's checkpoint (the next offset
// to read) and the commit metadata as its metadata; the answer waits for
// the sync. Generation -1 with no member id is a standalone commit, accepted
// while the group has no members.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/disgw/disgw/kafkawire"
)

func init() { registerAPI(8, 0, 10, (*conn).handleOffsetCommit) }

func (c *conn) handleOffsetCommit(req *kafkawire.Request) reply {
	r := req.Body.(*kmsg.OffsetCommitRequest)
	return reply{req: req, finish: func() (kmsg.Response, error) {
		var unknownIDs []kmsg.OffsetCommitResponseTopic
		if r.Version >= 10 {
			known := r.Topics[:0:0]
			for _, t := range r.Topics {
				st := c.s.topics.getByID(t.TopicID)
				if st == nil {
					rt := kmsg.NewOffsetCommitResponseTopic()
					rt.TopicID = t.TopicID
					for _, p := range t.Partitions {
						rp := kmsg.NewOffsetCommitResponseTopicPartition()
						rp.Partition, rp.ErrorCode = p.Partition, kerr.UnknownTopicID.Code
						rt.Partitions = append(rt.Partitions, rp)
					}
					unknownIDs = append(unknownIDs, rt)
					continue
				}
				t.Topic = st.TopicName
				known = append(known, t)
			}
			r.Topics = known
		}
		ctx, cancel := c.requestContext(0)
		defer cancel()
		resp := c.s.groups.CommitOffsets(ctx, r)
		resp.Topics = append(resp.Topics, unknownIDs...)
		return resp, nil
	}}
}
