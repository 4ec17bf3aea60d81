package gateway

// AddPartitionsToTxn: v0-3, the client form (txncoord.Coordinator.AddPartitions).
//
// Version notes: v1 no change; v2 no change; v3 flexible. v4 and v5 are
// the batched form Kafka's brokers send each other (KIP-890 part 1
// verification, CLUSTER_ACTION): not served, as a gateway has no brokers
// to ask it; the Java client and franz-go send v3 at most.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/disgw/disgw/internal/acl"
	"github.com/disgw/disgw/kafkawire"
)

// AddPartitionsToTxn needs WRITE on the transactional id (else every
// partition gets TRANSACTIONAL_ID_AUTHORIZATION_FAILED) and WRITE on each
// topic: a refused topic's partitions get TOPIC_AUTHORIZATION_FAILED and
// the others OPERATION_NOT_ATTEMPTED, nothing added (Kafka KafkaApis).
func init() {
	registerAPI(24, 0, 3, (*conn).handleAddPartitionsToTxn,
		txnIDOp(acl.OpWrite, func(r *kmsg.AddPartitionsToTxnRequest) *string { return &r.TransactionalID },
			func(r *kmsg.AddPartitionsToTxnRequest, code int16) kmsg.Response {
				return answerAddPartitions(r, code, nil)
			}),
		(*conn).authorizeAddPartitionsTopics)
}

func (c *conn) authorizeAddPartitionsTopics(req *kafkawire.Request) (kmsg.Response, postAuth) {
	r := req.Body.(*kmsg.AddPartitionsToTxnRequest)
	denied := map[string]bool{}
	for _, t := range r.Topics {
		if !c.mayTopic(acl.OpWrite, t.Topic) {
			denied[t.Topic] = true
		}
	}
	if len(denied) == 0 {
		return nil, nil
	}
	return answerAddPartitions(r, kerr.OperationNotAttempted.Code, denied), nil
}

// answerAddPartitions answers every partition code, those of the topics in
// denied TOPIC_AUTHORIZATION_FAILED.
func answerAddPartitions(r *kmsg.AddPartitionsToTxnRequest, code int16, denied map[string]bool) *kmsg.AddPartitionsToTxnResponse {
	resp := r.ResponseKind().(*kmsg.AddPartitionsToTxnResponse)
	for _, rt := range r.Topics {
		t := kmsg.NewAddPartitionsToTxnResponseTopic()
		t.Topic = rt.Topic
		for _, p := range rt.Partitions {
			rp := kmsg.NewAddPartitionsToTxnResponseTopicPartition()
			rp.Partition, rp.ErrorCode = p, code
			if denied[rt.Topic] {
				rp.ErrorCode = errTopicAuth
			}
			t.Partitions = append(t.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, t)
	}
	return resp
}

func (c *conn) handleAddPartitionsToTxn(req *kafkawire.Request) reply {
	r := req.Body.(*kmsg.AddPartitionsToTxnRequest)
	switch {
	case c.s.txn == nil && r.TransactionalID == "":
		return ready(req, answerAddPartitions(r, kerr.InvalidRequest.Code, nil)) // as Kafka, first
	case c.s.txn == nil:
		return ready(req, answerAddPartitions(r, errTxnAuth, nil))
	}
	ctx, cancel := c.requestContext(0)
	defer cancel()
	return ready(req, c.s.txn.AddPartitions(ctx, r))
}
