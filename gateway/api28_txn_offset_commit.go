package gateway

// TxnOffsetCommit: v0-4 (txncoord.Coordinator.TxnOffsetCommit). v1 no
// change; v2 the committed leader epoch; v3 flexible, generation, member
// id and group instance id (KIP-447); v4 no change. v5 (KIP-890 part 2:
// no AddOffsetsToTxn first) is not served.

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/disgw/disgw/internal/acl"
	"github.com/disgw/disgw/kafkawire"
)

// TxnOffsetCommit needs WRITE on the transactional id
// (TRANSACTIONAL_ID_AUTHORIZATION_FAILED), READ on the group
// (GROUP_AUTHORIZATION_FAILED) and READ on each topic (its partitions get
// TOPIC_AUTHORIZATION_FAILED, the others are still committed), as Kafka.
func init() {
	registerAPI(28, 0, 4, (*conn).handleTxnOffsetCommit,
		txnIDOp(acl.OpWrite, func(r *kmsg.TxnOffsetCommitRequest) *string { return &r.TransactionalID }, refuseTxnOffsetCommit),
		groupOp(acl.OpRead, func(r *kmsg.TxnOffsetCommitRequest) string { return r.Group }, refuseTxnOffsetCommit),
		denyTopics(acl.OpRead,
			func(r *kmsg.TxnOffsetCommitRequest) *[]kmsg.TxnOffsetCommitRequestTopic { return &r.Topics },
			func(t kmsg.TxnOffsetCommitRequestTopic) string { return t.Topic },
			func(t kmsg.TxnOffsetCommitRequestTopic, code int16) kmsg.TxnOffsetCommitResponseTopic {
				rt := kmsg.NewTxnOffsetCommitResponseTopic()
				rt.Topic = t.Topic
				for _, p := range t.Partitions {
					rp := kmsg.NewTxnOffsetCommitResponseTopicPartition()
					rp.Partition, rp.ErrorCode = p.Partition, code
					rt.Partitions = append(rt.Partitions, rp)
				}
				return rt
			},
			func(r *kmsg.TxnOffsetCommitResponse) *[]kmsg.TxnOffsetCommitResponseTopic { return &r.Topics }))
}

// refuseTxnOffsetCommit answers code on every partition.
func refuseTxnOffsetCommit(r *kmsg.TxnOffsetCommitRequest, code int16) kmsg.Response {
	resp := r.ResponseKind().(*kmsg.TxnOffsetCommitResponse)
	for _, t := range r.Topics {
		rt := kmsg.NewTxnOffsetCommitResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewTxnOffsetCommitResponseTopicPartition()
			rp.Partition, rp.ErrorCode = p.Partition, code
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}

func (c *conn) handleTxnOffsetCommit(req *kafkawire.Request) reply {
	r := req.Body.(*kmsg.TxnOffsetCommitRequest)
	if c.s.txn == nil {
		return ready(req, refuseTxnOffsetCommit(r, errTxnAuth))
	}
	ctx, cancel := c.requestContext(0)
	defer cancel()
	if c.s.cluster != nil {
		return ready(req, c.txnOffsetCommitCluster(ctx, r))
	}
	return ready(req, c.s.txn.TxnOffsetCommit(ctx, r))
}
