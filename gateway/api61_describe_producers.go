package gateway

// DescribeProducers: v0 (KIP-664), flexible.
//
// Each listed partition gets the idempotent producer states its backend
// keeps (disbackend.ProducerDescriber): producer id, epoch, the last
// sequence of its last batch and the time of its last append (ms; Kafka
// gives the batch's max timestamp), by producer id. A producer with a
// transaction open on the partition (txncoord) has CurrentTxnStartOffset
// the transaction's first offset there (its lower
// bound: the high watermark when the partition was added), and is listed
// even before its first batch; CoordinatorEpoch is -1, as Kafka 4.4 shows
// it, and CurrentTxnStartOffset -1 for an idempotent producer. The embedded store's states
// are those its log implies (rebuilt at start); the DIS backend's are this
// process's (see docs/dis-backend.md, "Idempotent producers").
//
// As a one-node Kafka 4.4: an unknown topic gets
// UNKNOWN_TOPIC_OR_PARTITION with "This server does not host this
// topic-partition.", a partition the topic lacks the same code with no
// message. With several nodes (cluster.go) a partition this node does not
// lead gets NOT_LEADER_OR_FOLLOWER, as from a Kafka broker that is not its
// leader; the admin client asks the leader Metadata names. Limits (limits.go): partitions past Limits.MaxTopics or
// Limits.MaxPartitions get INVALID_REQUEST.

import (
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/disgw/disgw/disbackend"
	"github.com/disgw/disgw/internal/acl"
	"github.com/disgw/disgw/kafkawire"
	"github.com/disgw/disgw/txncoord"
)

func init() {
	registerAPI(61, 0, 0, (*conn).handleDescribeProducers, filterTopics(acl.OpRead,
		func(r *kmsg.DescribeProducersResponse) []kmsg.DescribeProducersResponseTopic { return r.Topics },
		func(t *kmsg.DescribeProducersResponseTopic) string { return t.Topic },
		refuseDescribeProducersTopic))
}

// refuseDescribeProducersTopic answers each partition of a topic the
// principal may not READ with TOPIC_AUTHORIZATION_FAILED and no producers.
func refuseDescribeProducersTopic(t *kmsg.DescribeProducersResponseTopic) {
	for j := range t.Partitions {
		p := &t.Partitions[j]
		p.ErrorCode, p.ErrorMessage, p.ActiveProducers = errTopicAuth, nil, nil
	}
}

// notHostedMessage is Kafka's message for a partition of an unknown topic;
// every such answer points at it (encoding only reads it).
var notHostedMessage = "This server does not host this topic-partition."

func (c *conn) handleDescribeProducers(req *kafkawire.Request) reply {
	r := req.Body.(*kmsg.DescribeProducersRequest)
	resp := r.ResponseKind().(*kmsg.DescribeProducersResponse)
	s := c.s
	ctx, cancel := c.requestContext(0)
	defer cancel()
	q := s.newPartitionQuota()
	defer q.report(c, "DescribeProducers")
	pd, _ := s.backend.(disbackend.ProducerDescriber)
	for _, rt := range r.Topics {
		t := kmsg.NewDescribeProducersResponseTopic()
		t.Topic = rt.Topic
		served := q.topic()
		st := s.topics.get(rt.Topic)
		internal := rt.Topic == offsetsTopic
		if internal {
			// Metadata lists it, so kafka-transactions find-hanging asks for
			// its partitions: no producers write there (offsets are apps'
			// checkpoints), as an answer, not UNKNOWN_TOPIC_OR_PARTITION,
			// which the admin client retries until it times out.
			st = s.offsetsTopicStream()
		} else if st == nil && served && len(rt.Partitions) > 0 {
			st = s.lookupTopic(ctx, rt.Topic)
		}
		for _, part := range rt.Partitions {
			p := kmsg.NewDescribeProducersResponseTopicPartition()
			p.Partition = part
			p.ActiveProducers = []kmsg.DescribeProducersResponseTopicPartitionActiveProducer{}
			switch {
			case !q.partition():
				p.ErrorCode = errCodeOverCap
			case st == nil:
				p.ErrorCode, p.ErrorMessage = kerr.UnknownTopicOrPartition.Code, &notHostedMessage
			case part < 0 || part >= st.PartitionCount:
				p.ErrorCode = kerr.UnknownTopicOrPartition.Code
			case !s.leads(st.Name, part):
				// Several nodes: the producer states are the leader's
				// (ReplicaManager.activeProducerState's answer, no
				// message).
				p.ErrorCode = kerr.NotLeaderForPartition.Code
			case internal:
			case pd != nil:
				states, err := pd.ActiveProducers(ctx, st.Name, part)
				if err != nil {
					p.ErrorCode, p.ErrorMessage = kafkaError(s.log, err), errMessage(err)
					break
				}
				var open []txncoord.OpenProducer
				if s.txn != nil {
					open = s.txn.OpenOn(st.TopicID, part)
				}
				for _, a := range states {
					ap := kmsg.NewDescribeProducersResponseTopicPartitionActiveProducer()
					ap.ProducerID, ap.ProducerEpoch = a.ProducerID, int32(a.Epoch)
					ap.LastSequence, ap.LastTimestamp = a.LastSequence, a.LastAppendMS
					ap.CoordinatorEpoch, ap.CurrentTxnStartOffset = -1, -1
					if k := slices.IndexFunc(open, func(o txncoord.OpenProducer) bool { return o.ProducerID == a.ProducerID }); k >= 0 {
						ap.CurrentTxnStartOffset = open[k].FirstOffset
						open = slices.Delete(open, k, k+1)
					}
					p.ActiveProducers = append(p.ActiveProducers, ap)
				}
				for _, o := range open { // no batch yet
					ap := kmsg.NewDescribeProducersResponseTopicPartitionActiveProducer()
					ap.ProducerID, ap.ProducerEpoch, ap.LastSequence, ap.LastTimestamp = o.ProducerID, int32(o.Epoch), -1, o.StartMS
					ap.CoordinatorEpoch, ap.CurrentTxnStartOffset = -1, o.FirstOffset
					p.ActiveProducers = append(p.ActiveProducers, ap)
				}
			}
			t.Partitions = append(t.Partitions, p)
		}
		resp.Topics = append(resp.Topics, t)
	}
	return ready(req, resp)
}
