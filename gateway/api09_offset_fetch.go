package gateway

// OffsetFetch: v0-10 (groupcoord; DIS GetCheckpoint).
//
// Version notes:
//   - v1: same as v0, but offsets come from the group coordinator (v0 read
//     ZooKeeper in old Kafka; here both read the checkpoints).
//   - v2: null topics = every partition the group committed; top-level
//     ErrorCode (v0-1 carry errors per partition only).
//   - v3: ThrottleMillis. v5: LeaderEpoch (always -1: not kept).
//   - v6: flexible. v7: RequireStable (no transactions, so always stable).
//   - v8: several groups in one request, each with its own error.
//   - v9: MemberID, MemberEpoch (KIP-848; ignored for classic groups).
//   - v10: topics by id (KIP-848 / KAFKA-19186); an unknown id gets
//     UNKNOWN_TOPIC_ID.
//
// A group that does not exist or a partition never committed reads as
// offset -1 with no error, as Kafka answers (librdkafka relies on it).

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/disgw/disgw/kafkawire"
)

func init() { registerAPI(9, 0, 10, (*conn).handleOffsetFetch) }

func (c *conn) handleOffsetFetch(req *kafkawire.Request) reply {
	r := req.Body.(*kmsg.OffsetFetchRequest)
	return reply{req: req, finish: func() (kmsg.Response, error) {
		resp := r.ResponseKind().(*kmsg.OffsetFetchResponse)
		ctx, cancel := c.requestContext(0)
		defer cancel()
		if r.Version < 8 {
			rg := kmsg.NewOffsetFetchRequestGroup()
			rg.Group = r.Group
			if r.Topics != nil || r.Version < 2 {
				rg.Topics = make([]kmsg.OffsetFetchRequestGroupTopic, 0, len(r.Topics))
			}
			for _, t := range r.Topics {
				rt := kmsg.NewOffsetFetchRequestGroupTopic()
				rt.Topic, rt.Partitions = t.Topic, t.Partitions
				rg.Topics = append(rg.Topics, rt)
			}
			sg := c.s.groups.FetchOffsets(ctx, rg)
			resp.ErrorCode = sg.ErrorCode
			for _, t := range sg.Topics {
				rt := kmsg.NewOffsetFetchResponseTopic()
				rt.Topic = t.Topic
				for _, p := range t.Partitions {
					rp := kmsg.NewOffsetFetchResponseTopicPartition()
					rp.Partition, rp.Offset, rp.LeaderEpoch, rp.Metadata, rp.ErrorCode = p.Partition, p.Offset, p.LeaderEpoch, p.Metadata, p.ErrorCode
					rt.Partitions = append(rt.Partitions, rp)
				}
				resp.Topics = append(resp.Topics, rt)
			}
			if r.Version < 2 && sg.ErrorCode != 0 {
				// No top-level error before v2: every partition carries it.
				resp.Topics = resp.Topics[:0]
				for _, t := range r.Topics {
					rt := kmsg.NewOffsetFetchResponseTopic()
					rt.Topic = t.Topic
					for _, p := range t.Partitions {
						rp := kmsg.NewOffsetFetchResponseTopicPartition()
						rp.Partition, rp.Offset, rp.ErrorCode = p, -1, sg.ErrorCode
						rt.Partitions = append(rt.Partitions, rp)
					}
					resp.Topics = append(resp.Topics, rt)
				}
			}
			return resp, nil
		}
		for _, rg := range r.Groups {
			var unknownIDs []kmsg.OffsetFetchResponseGroupTopic
			if r.Version >= 10 && rg.Topics != nil {
				known := make([]kmsg.OffsetFetchRequestGroupTopic, 0, len(rg.Topics))
				for _, t := range rg.Topics {
					st := c.s.topics.getByID(t.TopicID)
					if st == nil {
						rt := kmsg.NewOffsetFetchResponseGroupTopic()
						rt.TopicID = t.TopicID
						for _, p := range t.Partitions {
							rp := kmsg.NewOffsetFetchResponseGroupTopicPartition()
							rp.Partition, rp.Offset, rp.LeaderEpoch, rp.ErrorCode = p, -1, -1, kerr.UnknownTopicID.Code
							rt.Partitions = append(rt.Partitions, rp)
						}
						unknownIDs = append(unknownIDs, rt)
						continue
					}
					t.Topic = st.TopicName
					known = append(known, t)
				}
				rg.Topics = known
			}
			sg := c.s.groups.FetchOffsets(ctx, rg)
			sg.Topics = append(sg.Topics, unknownIDs...)
			resp.Groups = append(resp.Groups, sg)
		}
		return resp, nil
	}}
}
