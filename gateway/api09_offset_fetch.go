package gateway

// OffsetFetch: v0-10 (groupcoord; DIS GetCheckpoint).
//
// Version notes:
//   - v1: same as v0, but offsets come from the group coordinator (v0 read
//     ZooKeeper in old Kafka; here both read the checkpoints).
//   - v2: null topics = every partition the group committed; top-level
//     ErrorCode (v0-1 carry errors per partition only).
//   - v3: ThrottleMillis. v5: LeaderEpoch, the committed one (OffsetCommit
//     v6+), -1 when the commit had none (or a DIS client moved the
//     checkpoint since).
//   - v6: flexible. v7: RequireStable: a partition with an offset of a
//     transaction not yet committed gets UNSTABLE_OFFSET_COMMIT and no
//     offset (KIP-447; the client retries).
//   - v8: several groups in one request, each with its own error.
//   - v9: MemberID, MemberEpoch (KIP-848; ignored for classic groups).
//   - v10: topics by id (KIP-848 / KAFKA-19186); an unknown id gets
//     UNKNOWN_TOPIC_ID.
//
// Limits (limits.go): partitions past Limits.MaxPartitions, and those of
// topics past Limits.MaxTopics, get INVALID_REQUEST and offset -1, in a
// topic entry of their own; groups (v8+) past Limits.MaxGroups, and a
// group listed again, get INVALID_REQUEST.
//
// A group that does not exist or a partition never committed reads as
// offset -1 with no error, as Kafka answers (librdkafka relies on it).

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/disgw/disgw/disbackend"
	"github.com/disgw/disgw/internal/acl"
	"github.com/disgw/disgw/kafkawire"
)

func init() { registerAPI(9, 0, 10, (*conn).handleOffsetFetch, (*conn).authorizeOffsetFetch) }

// authorizeOffsetFetch: DESCRIBE on each group (else the group is answered
// GROUP_AUTHORIZATION_FAILED without offsets) and on each topic (else its
// partitions are answered TOPIC_AUTHORIZATION_FAILED, or, when the request
// asked for every committed topic, the topic is left out).
func (c *conn) authorizeOffsetFetch(req *kafkawire.Request) (kmsg.Response, postAuth) {
	r := req.Body.(*kmsg.OffsetFetchRequest)
	return nil, func(resp kmsg.Response) error {
		or := resp.(*kmsg.OffsetFetchResponse)
		if r.Version < 8 {
			c.filterOffsetFetchV0(r, or)
			return nil
		}
		for i := range or.Groups {
			c.filterOffsetFetchGroupV8(r, &or.Groups[i])
		}
		return nil
	}
}

// filterOffsetFetchV0 filters or, the answer (v0-7) for r's one group.
func (c *conn) filterOffsetFetchV0(r *kmsg.OffsetFetchRequest, or *kmsg.OffsetFetchResponse) {
	if !c.mayGroup(acl.OpDescribe, r.Group) {
		or.ErrorCode, or.Topics = errGroupAuth, nil
		if r.Version < 2 {
			// v0-1 carry errors per partition only.
			for _, t := range r.Topics {
				rt := kmsg.NewOffsetFetchResponseTopic()
				rt.Topic = t.Topic
				for _, p := range t.Partitions {
					rp := kmsg.NewOffsetFetchResponseTopicPartition()
					rp.Partition, rp.Offset, rp.ErrorCode = p, -1, errGroupAuth
					rt.Partitions = append(rt.Partitions, rp)
				}
				or.Topics = append(or.Topics, rt)
			}
		}
		return
	}
	kept := or.Topics[:0]
	for _, t := range or.Topics {
		if !c.mayTopic(acl.OpDescribe, t.Topic) {
			if r.Topics == nil {
				continue
			}
			for j := range t.Partitions {
				p := &t.Partitions[j]
				p.ErrorCode, p.Offset, p.LeaderEpoch, p.Metadata = errTopicAuth, -1, -1, nil
			}
		}
		kept = append(kept, t)
	}
	or.Topics = kept
}

// filterOffsetFetchGroupV8 filters g, the answer (v8+) for one of r's
// groups.
func (c *conn) filterOffsetFetchGroupV8(r *kmsg.OffsetFetchRequest, g *kmsg.OffsetFetchResponseGroup) {
	if !c.mayGroup(acl.OpDescribe, g.Group) {
		g.ErrorCode, g.Topics = errGroupAuth, nil
		return
	}
	var asked bool
	for _, rg := range r.Groups {
		if rg.Group == g.Group {
			asked = rg.Topics != nil
		}
	}
	kept := g.Topics[:0]
	for _, t := range g.Topics {
		if name := c.topicName(t.Topic, t.TopicID); !c.mayTopic(acl.OpDescribe, name) {
			if !asked {
				continue
			}
			for j := range t.Partitions {
				p := &t.Partitions[j]
				p.ErrorCode, p.Offset, p.LeaderEpoch, p.Metadata = errTopicAuth, -1, -1, nil
			}
		}
		kept = append(kept, t)
	}
	g.Topics = kept
}

func (c *conn) handleOffsetFetch(req *kafkawire.Request) reply {
	r := req.Body.(*kmsg.OffsetFetchRequest)
	return reply{req: req, finish: func() (kmsg.Response, error) {
		resp := r.ResponseKind().(*kmsg.OffsetFetchResponse)
		ctx, cancel := c.requestContext(0)
		defer cancel()
		lim := c.s.newPartitionQuota()
		defer lim.report(c, "OffsetFetch")
		if r.Version < 8 {
			rg := kmsg.NewOffsetFetchRequestGroup()
			rg.Group = r.Group
			if r.Topics != nil || r.Version < 2 {
				rg.Topics = make([]kmsg.OffsetFetchRequestGroupTopic, 0, min(len(r.Topics), c.s.cfg.Limits.MaxTopics))
			}
			var refused []kmsg.OffsetFetchResponseTopic
			for _, t := range r.Topics {
				ok, served, over := capPartitions(lim, t.Partitions)
				if !ok || len(over) > 0 {
					rt := kmsg.NewOffsetFetchResponseTopic()
					rt.Topic = t.Topic
					rt.Partitions = refusedPartitions(over, kmsg.NewOffsetFetchResponseTopicPartition,
						func(rp *kmsg.OffsetFetchResponseTopicPartition, p int32) {
							rp.Partition, rp.Offset, rp.LeaderEpoch, rp.ErrorCode = p, -1, -1, errCodeOverCap
						})
					refused = append(refused, rt)
				}
				if ok && (len(served) > 0 || len(t.Partitions) == 0) {
					rt := kmsg.NewOffsetFetchRequestGroupTopic()
					rt.Topic, rt.Partitions = t.Topic, served
					rg.Topics = append(rg.Topics, rt)
				}
			}
			sg := c.s.groups.FetchOffsets(ctx, rg)
			resp.ErrorCode = sg.ErrorCode
			for _, t := range sg.Topics {
				rt := kmsg.NewOffsetFetchResponseTopic()
				rt.Topic = t.Topic
				for _, p := range t.Partitions {
					rp := kmsg.NewOffsetFetchResponseTopicPartition()
					rp.Partition, rp.Offset, rp.LeaderEpoch, rp.Metadata, rp.ErrorCode = p.Partition, p.Offset, p.LeaderEpoch, p.Metadata, p.ErrorCode
					if c.unstable(r.RequireStable, r.Group, t.Topic, p.Partition) {
						rp.Offset, rp.LeaderEpoch, rp.Metadata, rp.ErrorCode = -1, -1, &noMetadata, kerr.UnstableOffsetCommit.Code
					}
					rt.Partitions = append(rt.Partitions, rp)
				}
				resp.Topics = append(resp.Topics, rt)
			}
			resp.Topics = append(resp.Topics, refused...)
			if check := c.disOffsetsCheck(ctx); check != nil {
				resp.Topics = filterOffsets(c, resp.Topics, r.Topics == nil, check,
					func(t *kmsg.OffsetFetchResponseTopic) string { return t.Topic },
					func(t *kmsg.OffsetFetchResponseTopic, code int16) {
						for j := range t.Partitions {
							p := &t.Partitions[j]
							p.Offset, p.LeaderEpoch, p.Metadata, p.ErrorCode = -1, -1, nil, code
						}
					})
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
		groups := newQuota(c.s.cfg.Limits.MaxGroups)
		names := make([]string, len(r.Groups))
		for i := range r.Groups {
			names[i] = r.Groups[i].Group
		}
		_, codes := capNames(names, &groups, true)
		groups.report(c, limitGroups, "OffsetFetch")
		for i, rg := range r.Groups {
			if codes[i] != 0 {
				sg := kmsg.NewOffsetFetchResponseGroup()
				sg.Group, sg.ErrorCode = rg.Group, codes[i]
				resp.Groups = append(resp.Groups, sg)
				continue
			}
			var refused []kmsg.OffsetFetchResponseGroupTopic
			if rg.Topics != nil {
				kept := make([]kmsg.OffsetFetchRequestGroupTopic, 0, len(rg.Topics))
				for _, t := range rg.Topics {
					ok, served, over := capPartitions(lim, t.Partitions)
					if !ok || len(over) > 0 {
						rt := kmsg.NewOffsetFetchResponseGroupTopic()
						rt.Topic, rt.TopicID = t.Topic, t.TopicID
						rt.Partitions = refusedPartitions(over, kmsg.NewOffsetFetchResponseGroupTopicPartition,
							func(rp *kmsg.OffsetFetchResponseGroupTopicPartition, p int32) {
								rp.Partition, rp.Offset, rp.LeaderEpoch, rp.ErrorCode = p, -1, -1, errCodeOverCap
							})
						refused = append(refused, rt)
					}
					if ok && (len(served) > 0 || len(t.Partitions) == 0) {
						t.Partitions = served
						kept = append(kept, t)
					}
				}
				rg.Topics = kept
			}
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
			for i := range sg.Topics {
				t := &sg.Topics[i]
				for j := range t.Partitions {
					if p := &t.Partitions[j]; c.unstable(r.RequireStable, rg.Group, t.Topic, p.Partition) {
						p.Offset, p.LeaderEpoch, p.Metadata, p.ErrorCode = -1, -1, &noMetadata, kerr.UnstableOffsetCommit.Code
					}
				}
			}
			if check := c.disOffsetsCheck(ctx); check != nil {
				sg.Topics = filterOffsets(c, sg.Topics, rg.Topics == nil, check,
					func(t *kmsg.OffsetFetchResponseGroupTopic) string { return c.topicName(t.Topic, t.TopicID) },
					func(t *kmsg.OffsetFetchResponseGroupTopic, code int16) {
						for j := range t.Partitions {
							p := &t.Partitions[j]
							p.Offset, p.LeaderEpoch, p.Metadata, p.ErrorCode = -1, -1, nil, code
						}
					})
			}
			sg.Topics = append(sg.Topics, unknownIDs...)
			sg.Topics = append(sg.Topics, refused...)
			resp.Groups = append(resp.Groups, sg)
		}
		return resp, nil
	}}
}

// noMetadata is the empty metadata Kafka answers with UNSTABLE_OFFSET_COMMIT
// (encoding only reads it).
var noMetadata = ""

// unstable reports whether an OffsetFetch that asked for stable offsets
// (require_stable, v7+) must refuse a partition: a transaction not yet
// committed holds an offset of the group for it.
func (c *conn) unstable(requireStable bool, group, topic string, part int32) bool {
	if !requireStable || c.s.txn == nil {
		return false
	}
	if c.s.cluster != nil {
		// Another node may coordinate the transaction: its records saved
		// before this node's view began must have reached it (a group that
		// moved here), else the answer is not known.
		if err := c.s.txn.Follow(c.backendCtx(), c.s.currentEpoch()); err != nil {
			c.log.Info("require_stable: reading the transaction records failed", zapErr(err))
			return true
		}
	}
	return c.s.txn.PendingOffsets(group, topic, part)
}

// capPartitions applies the request limits to a topic and its partitions:
// ok is false for a topic past the topic cap (all its partitions are
// over), else served are the partitions within the partition cap.
func capPartitions(lim *partitionQuota, ps []int32) (ok bool, served, over []int32) {
	if !lim.topic() {
		lim.partitions.refused += len(ps)
		return false, nil, ps
	}
	n := min(len(ps), lim.partitions.left)
	lim.partitions.left -= n
	lim.partitions.refused += len(ps) - n
	return true, ps[:n:n], ps[n:]
}

// refusedPartitions answers partitions past the request limits.
func refusedPartitions[P any](ps []int32, mk func() P, set func(*P, int32)) []P {
	out := make([]P, 0, len(ps))
	for _, p := range ps {
		rp := mk()
		set(&rp, p)
		out = append(out, rp)
	}
	return out
}

// filterOffsets applies check to the topics of an OffsetFetch answer (v0-7
// or a v8+ group's): a refused topic is left out when all topics were
// asked (as Kafka's authorizer does), else its partitions get the error's
// code (refuse) and no offset.
func filterOffsets[T any](c *conn, ts []T, all bool, check func(string) error, name func(*T) string, refuse func(*T, int16)) []T {
	kept := ts[:0]
	for i := range ts {
		t := &ts[i]
		if err := check(name(t)); err != nil {
			if all {
				continue
			}
			refuse(t, kafkaError(c.log, err))
		}
		kept = append(kept, *t)
	}
	return kept
}

// disOffsetsCheck is, in the dis authentication mode, the check of a
// topic's committed offsets for the connection's principal: its key must
// be let describe the stream (DescribeStream signed with it, remembered
// dis_principal_ttl), as Metadata asks; the offsets are read with the
// gateway's own credentials. nil outside that mode. Errors become the
// partitions' codes (TOPIC_AUTHORIZATION_FAILED); a topic the gateway
// does not know passes (FetchOffsets answers it).
func (c *conn) disOffsetsCheck(ctx context.Context) func(topic string) error {
	if c.s.disAuth == nil || c.disCreds.Load() == nil {
		return nil
	}
	seen := map[string]error{}
	return func(topic string) error {
		if err, ok := seen[topic]; ok {
			return err
		}
		var err error
		if st := c.s.topics.get(topic); st != nil && topic != offsetsTopic {
			err = c.s.disAuth.AuthorizeStream(ctx, st.Name, disbackend.AccessDescribe)
			c.noteBackendErr(err)
		}
		seen[topic] = err
		return err
	}
}
