package gateway

// OffsetCommit: v0-10 (groupcoord; DIS CommitCheckpoint, LAST_READ).
//
// Version notes:
//   - v0: no generation or member id; stored whatever the group's state,
//     as Kafka 3.x stored v0 commits in ZooKeeper without checking the
//     group (Kafka 4 removed v0-1, KIP-896).
//   - v1: Generation, MemberID, per-partition Timestamp (ignored).
//   - v2-4: RetentionTimeMillis (ignored: retention is the group's, Kafka
//     offsets.retention.minutes). v3: ThrottleMillis.
//   - v6: LeaderEpoch, kept with the checkpoint as given (the embedded
//     store in the checkpoint, DIS in the app's epoch app, out of sight of
//     DIS applications) and returned by OffsetFetch v5+; -1 before v6.
//   - v7: InstanceID (KIP-345: FENCED_INSTANCE_ID for a replaced static
//     member). v8: flexible.
//   - v9: no change for classic groups (KIP-848 member epochs).
//   - v10: topics by id (KIP-848 / KAFKA-19186), resolved through the topic
//     cache; an unknown id gets UNKNOWN_TOPIC_ID.
//
// Partitions past the request limits (limits.go) get INVALID_REQUEST, in
// a topic entry of their own after the served ones.
//
// Each offset is stored unchanged as the app's checkpoint (the next offset
// to read) and the commit metadata as its metadata; the answer waits for
// the sync. Any offset is taken, as Kafka takes it (below the log start,
// past the end, on an empty partition): DIS holds a checkpoint only inside
// the partition's range, so the DIS backend keeps one outside it beside the
// checkpoint (docs/dis-backend.md, "Kept commits"). Generation -1 with no
// member id is a standalone commit, accepted while the group has no members.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/disgw/disgw/internal/acl"
	"github.com/disgw/disgw/kafkawire"
)

func init() { registerAPI(8, 0, 10, (*conn).handleOffsetCommit, (*conn).authorizeOffsetCommit) }

// authorizeOffsetCommit: READ on the group (else the request is refused,
// GROUP_AUTHORIZATION_FAILED on every partition) and on each topic (else
// the topic is taken out and answered TOPIC_AUTHORIZATION_FAILED on each
// partition).
func (c *conn) authorizeOffsetCommit(req *kafkawire.Request) (kmsg.Response, postAuth) {
	r := req.Body.(*kmsg.OffsetCommitRequest)
	groupOK := c.mayGroup(acl.OpRead, r.Group)
	var denied []kmsg.OffsetCommitResponseTopic
	kept := r.Topics[:0]
	for _, t := range r.Topics {
		code := int16(0)
		if !groupOK {
			code = errGroupAuth
		} else if name := c.topicName(t.Topic, t.TopicID); name != "" && !c.mayTopic(acl.OpRead, name) {
			code = errTopicAuth
		}
		if code == 0 {
			kept = append(kept, t)
			continue
		}
		d := kmsg.NewOffsetCommitResponseTopic()
		d.Topic, d.TopicID = t.Topic, t.TopicID
		for _, p := range t.Partitions {
			dp := kmsg.NewOffsetCommitResponseTopicPartition()
			dp.Partition, dp.ErrorCode = p.Partition, code
			d.Partitions = append(d.Partitions, dp)
		}
		denied = append(denied, d)
	}
	if !groupOK {
		resp := r.ResponseKind().(*kmsg.OffsetCommitResponse)
		resp.Topics = denied
		return resp, nil
	}
	r.Topics = kept
	return nil, appendDenied(denied, func(r *kmsg.OffsetCommitResponse) *[]kmsg.OffsetCommitResponseTopic { return &r.Topics })
}

func (c *conn) handleOffsetCommit(req *kafkawire.Request) reply {
	r := req.Body.(*kmsg.OffsetCommitRequest)
	return reply{req: req, finish: func() (kmsg.Response, error) {
		var unknownIDs []kmsg.OffsetCommitResponseTopic
		if r.Version >= 10 {
			// Unknown ids are answered without being counted: their
			// answer is as small as a refused one.
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
		refused := c.capOffsetCommit(r)
		ctx, cancel := c.requestContext(0)
		defer cancel()
		if check := c.disOffsetsCheck(ctx); check != nil {
			// The dis authentication mode: a topic the principal's key
			// may not describe gets TOPIC_AUTHORIZATION_FAILED, and its
			// offsets are not written with the gateway's credentials.
			kept := r.Topics[:0:0]
			for _, t := range r.Topics {
				err := check(t.Topic)
				if err == nil {
					kept = append(kept, t)
					continue
				}
				rt := kmsg.NewOffsetCommitResponseTopic()
				rt.Topic, rt.TopicID = t.Topic, t.TopicID
				for _, p := range t.Partitions {
					rp := kmsg.NewOffsetCommitResponseTopicPartition()
					rp.Partition, rp.ErrorCode = p.Partition, kafkaError(c.log, err)
					rt.Partitions = append(rt.Partitions, rp)
				}
				refused = append(refused, rt)
			}
			r.Topics = kept
		}
		resp := c.s.groups.CommitOffsets(ctx, r)
		resp.Topics = append(resp.Topics, unknownIDs...)
		resp.Topics = append(resp.Topics, refused...)
		return resp, nil
	}}
}

// capOffsetCommit removes from r the partitions past the request limits
// and returns their answers.
func (c *conn) capOffsetCommit(r *kmsg.OffsetCommitRequest) []kmsg.OffsetCommitResponseTopic {
	lim := c.s.newPartitionQuota()
	defer lim.report(c, "OffsetCommit")
	var refused []kmsg.OffsetCommitResponseTopic
	kept := r.Topics[:0:0]
	for _, t := range r.Topics {
		lim.topic()
		served := t.Partitions[:0:0]
		var rt *kmsg.OffsetCommitResponseTopic
		for _, p := range t.Partitions {
			if lim.partition() {
				served = append(served, p)
				continue
			}
			if rt == nil {
				refused = append(refused, kmsg.NewOffsetCommitResponseTopic())
				rt = &refused[len(refused)-1]
				rt.Topic, rt.TopicID = t.Topic, t.TopicID
			}
			rp := kmsg.NewOffsetCommitResponseTopicPartition()
			rp.Partition, rp.ErrorCode = p.Partition, errCodeOverCap
			rt.Partitions = append(rt.Partitions, rp)
		}
		if len(served) > 0 || len(t.Partitions) == 0 {
			t.Partitions = served
			kept = append(kept, t)
		}
	}
	r.Topics = kept
	return refused
}
