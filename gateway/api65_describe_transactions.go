package gateway

// DescribeTransactions: v0 (KIP-664), flexible: each transactional id's
// state, producer id and epoch, timeout, start time and partitions, from
// the transaction coordinator.
// The start time stays once a transaction has ended (-1 before the first),
// as Kafka shows it. An unknown id gets TRANSACTIONAL_ID_NOT_FOUND; without a coordinator
// (txn.go) every id gets TRANSACTIONAL_ID_AUTHORIZATION_FAILED.

import (
	"sort"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/disgw/disgw/internal/acl"
	"github.com/disgw/disgw/kafkawire"
)

// DescribeTransactions needs DESCRIBE on each transactional id: a refused
// id gets TRANSACTIONAL_ID_AUTHORIZATION_FAILED, as Kafka answers it.
func init() {
	registerAPI(65, 0, 0, (*conn).handleDescribeTransactions,
		denyEach(func(r *kmsg.DescribeTransactionsRequest) *[]string { return &r.TransactionalIDs },
			func(c *conn, id string) int16 {
				if c.may(acl.OpDescribe, acl.ResourceTransactionalID, id) {
					return 0
				}
				return errTxnAuth
			},
			func(id string, code int16) kmsg.DescribeTransactionsResponseTransactionState {
				st := kmsg.NewDescribeTransactionsResponseTransactionState()
				st.TransactionalID, st.ErrorCode = id, code // producer id, epoch and start 0, as Kafka
				return st
			},
			func(r *kmsg.DescribeTransactionsResponse) *[]kmsg.DescribeTransactionsResponseTransactionState {
				return &r.TransactionStates
			}))
}

func (c *conn) handleDescribeTransactions(req *kafkawire.Request) reply {
	r := req.Body.(*kmsg.DescribeTransactionsRequest)
	resp := r.ResponseKind().(*kmsg.DescribeTransactionsResponse)
	for _, id := range r.TransactionalIDs {
		st := kmsg.NewDescribeTransactionsResponseTransactionState()
		st.TransactionalID = id // producer id, epoch and start 0 on an error, as Kafka
		if c.s.txn == nil {
			st.ErrorCode = errTxnAuth
			resp.TransactionStates = append(resp.TransactionStates, st)
			continue
		}
		if !c.s.txn.Owns(id) {
			st.ErrorCode = kerr.NotCoordinator.Code
			resp.TransactionStates = append(resp.TransactionStates, st)
			continue
		}
		d, ok := c.s.txn.Describe(id)
		if !ok {
			st.ErrorCode = kerr.TransactionalIDNotFound.Code
			resp.TransactionStates = append(resp.TransactionStates, st)
			continue
		}
		st.State, st.TimeoutMillis, st.StartTimestamp = d.State.String(), d.TimeoutMS, d.StartMS
		st.ProducerID, st.ProducerEpoch = d.ProducerID, d.Epoch
		topics := make([]string, 0, len(d.Partitions))
		for t := range d.Partitions {
			topics = append(topics, t)
		}
		sort.Strings(topics)
		for _, t := range topics {
			if !c.mayTopic(acl.OpDescribe, t) {
				continue // as Kafka: the topics the principal may not describe are left out
			}
			rt := kmsg.NewDescribeTransactionsResponseTransactionStateTopic()
			rt.Topic, rt.Partitions = t, d.Partitions[t]
			st.Topics = append(st.Topics, rt)
		}
		resp.TransactionStates = append(resp.TransactionStates, st)
	}
	return ready(req, resp)
}
