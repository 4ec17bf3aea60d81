package gateway

// DescribeTopicPartitions: v0 (KIP-966), flexible. Kafka's admin client
// (kafka-topics --describe) uses it in place of Metadata when served.
//
// The topics and partitions are Metadata's (api03_metadata.go): on one
// node this node leads every partition at leader epoch 0 with replicas and
// ISR [this node]; with several, each partition's owner in the view at its
// epoch (cluster.go); the eligible leader replicas, the last known ELR and the offline
// replicas are empty. TopicAuthorizedOperations is always set: every topic
// operation (no authorizer, authops.go).
//
// Paging as Kafka 4.4 pages (DescribeTopicPartitionsRequestHandler and
// KRaftMetadataCache.getTopicMetadataForDescribeTopicResponse):
//   - the topics are the listed ones, or every topic when the list is
//     empty, each once, sorted by name, from the cursor's topic on (names
//     that sort before it are left out); the cursor's topic starts at the
//     cursor's partition, the others at 0;
//   - at most max(min(ResponsePartitionLimit, 2000), 1) partitions are
//     answered (2000 is Kafka's max.request.partition.size.limit); a topic
//     cut short ends the answer with NextCursor at its next partition; a
//     topic reached with nothing left ends it with NextCursor at that
//     topic's partition 0; a cursor partition past a topic's last gives
//     the topic with no partitions;
//   - a listed topic that does not exist: UNKNOWN_TOPIC_OR_PARTITION, or
//     INVALID_TOPIC_EXCEPTION for an invalid name, with no partitions and
//     a zero topic id, taking no room;
//   - a cursor whose topic is not in a non-empty list, or whose partition
//     is negative: INVALID_REQUEST for every listed topic, in request
//     order, with no NextCursor.
//
// Limits (limits.go): listed topics past Limits.MaxTopics get
// INVALID_REQUEST and only their name, after the others.

import (
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/disgw/disgw/disbackend"
	"github.com/disgw/disgw/internal/acl"
	"github.com/disgw/disgw/kafkawire"
)

func init() {
	registerAPI(75, 0, 0, (*conn).handleDescribeTopicPartitions, (*conn).authorizeDescribeTopicPartitions)
}

// authorizeDescribeTopicPartitions: DESCRIBE on each topic. A listing of
// every topic leaves out those the principal may not describe; a listed one
// is answered TOPIC_AUTHORIZATION_FAILED with no partitions or id. The
// topics' authorized operations are the principal's.
func (c *conn) authorizeDescribeTopicPartitions(req *kafkawire.Request) (kmsg.Response, postAuth) {
	listing := len(req.Body.(*kmsg.DescribeTopicPartitionsRequest).Topics) == 0
	return nil, func(resp kmsg.Response) error {
		dr := resp.(*kmsg.DescribeTopicPartitionsResponse)
		kept := dr.Topics[:0]
		for _, t := range dr.Topics {
			name := ""
			if t.Topic != nil {
				name = *t.Topic
			}
			if !c.mayTopic(acl.OpDescribe, name) {
				if listing {
					continue
				}
				t.ErrorCode, t.Partitions, t.TopicID, t.IsInternal = errTopicAuth, nil, [16]byte{}, false
			} else if t.ErrorCode == 0 {
				t.AuthorizedOperations = c.opsOf(acl.ResourceTopic, name, topicAuthorizedOps)
			}
			kept = append(kept, t)
		}
		dr.Topics = kept
		return nil
	}
}

// maxResponsePartitions is Kafka's max.request.partition.size.limit
// default: the most partitions one DescribeTopicPartitions answers.
const maxResponsePartitions = 2000

func (c *conn) handleDescribeTopicPartitions(req *kafkawire.Request) reply {
	r := req.Body.(*kmsg.DescribeTopicPartitionsRequest)
	resp := r.ResponseKind().(*kmsg.DescribeTopicPartitionsResponse)
	s := c.s
	all := len(r.Topics) == 0
	cursorTopic := ""
	if r.Cursor != nil {
		cursorTopic = r.Cursor.Topic
	}

	// names: the topics to answer, once each, sorted, from the cursor on.
	var names []string
	if all {
		for _, st := range s.topics.all() {
			if st.TopicName >= cursorTopic {
				names = append(names, st.TopicName)
			}
		}
		if offsetsTopic >= cursorTopic { // listed as Metadata lists it
			names = append(names, offsetsTopic)
		}
		slices.Sort(names)
	} else {
		for _, rt := range r.Topics {
			if rt.Topic >= cursorTopic {
				names = append(names, rt.Topic)
			}
		}
		slices.Sort(names)
		names = slices.Compact(names)
	}
	if r.Cursor != nil && (!all && !slices.Contains(names, cursorTopic) || r.Cursor.Partition < 0) {
		for _, rt := range r.Topics {
			t := kmsg.NewDescribeTopicPartitionsResponseTopic()
			t.Topic, t.ErrorCode = kmsg.StringPtr(rt.Topic), kerr.InvalidRequest.Code
			resp.Topics = append(resp.Topics, t)
		}
		return ready(req, resp)
	}
	var overCap []string
	if !all && len(names) > s.cfg.Limits.MaxTopics {
		names, overCap = names[:s.cfg.Limits.MaxTopics], names[s.cfg.Limits.MaxTopics:]
		q := quota{refused: len(overCap)}
		q.report(c, limitTopics, "DescribeTopicPartitions")
	}

	ctx, cancel := c.requestContext(0)
	defer cancel()
	kv := c.kafkaView()
	left := max(min(r.ResponsePartitionLimit, maxResponsePartitions), 1)
	for _, name := range names {
		if left == 0 {
			resp.NextCursor = &kmsg.DescribeTopicPartitionsResponseNextCursor{Topic: name, Partition: 0}
			break
		}
		st := s.cachedTopic(name)
		if st == nil && !all {
			st = s.lookupTopic(ctx, name)
		}
		if st == nil {
			if all {
				continue
			}
			t := kmsg.NewDescribeTopicPartitionsResponseTopic()
			t.Topic, t.ErrorCode = kmsg.StringPtr(name), kerr.UnknownTopicOrPartition.Code
			if disbackend.ValidateTopicName(name) != nil {
				t.ErrorCode = kerr.InvalidTopicException.Code
			}
			t.AuthorizedOperations = topicAuthorizedOps
			resp.Topics = append(resp.Topics, t)
			continue
		}
		first := int32(0)
		if name == cursorTopic {
			first = r.Cursor.Partition
		}
		t, next := s.describeTopicPartitions(st, first, left, kv)
		resp.Topics = append(resp.Topics, t)
		if next >= 0 {
			resp.NextCursor = &kmsg.DescribeTopicPartitionsResponseNextCursor{Topic: name, Partition: next}
			break
		}
		left -= int32(len(t.Partitions))
	}
	for _, name := range overCap {
		t := kmsg.NewDescribeTopicPartitionsResponseTopic()
		t.Topic, t.ErrorCode = kmsg.StringPtr(name), errCodeOverCap
		resp.Topics = append(resp.Topics, t)
	}
	return ready(req, resp)
}

// describeTopicPartitions answers topic st from partition first, at most
// n partitions, from Metadata's answer for it (kv: the cluster view, nil on
// one node); next is the first partition left out, -1 when none is.
func (s *Server) describeTopicPartitions(st *disbackend.Stream, first, n int32, kv *kafkaView) (kmsg.DescribeTopicPartitionsResponseTopic, int32) {
	mt := s.metadataTopic(new(kmsg.MetadataRequest).MaxVersion(), st, kv)
	t := kmsg.NewDescribeTopicPartitionsResponseTopic()
	t.Topic, t.TopicID, t.IsInternal = mt.Topic, mt.TopicID, mt.IsInternal
	t.AuthorizedOperations = topicAuthorizedOps
	count := int32(len(mt.Partitions))
	upper := int32(min(int64(count), int64(first)+int64(n))) // first+n may pass MaxInt32
	next := int32(-1)
	if upper < count {
		next = upper
	}
	t.Partitions = []kmsg.DescribeTopicPartitionsResponseTopicPartition{}
	for i := first; i < upper; i++ {
		mp := mt.Partitions[i]
		p := kmsg.NewDescribeTopicPartitionsResponseTopicPartition()
		p.ErrorCode, p.Partition = mp.ErrorCode, mp.Partition
		p.LeaderID, p.LeaderEpoch = mp.Leader, mp.LeaderEpoch
		p.Replicas, p.ISR, p.OfflineReplicas = mp.Replicas, mp.ISR, mp.OfflineReplicas
		p.EligibleLeaderReplicas, p.LastKnownELR = []int32{}, []int32{}
		t.Partitions = append(t.Partitions, p)
	}
	return t, next
}
