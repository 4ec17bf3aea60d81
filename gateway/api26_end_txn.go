package gateway

// EndTxn: v0-4 (txncoord.Coordinator.EndTxn). v1 no change; v2 no change;
// v3 flexible; v4 no change. v5 (KIP-890 part 2: the epoch bumped at each
// end) is not served: transaction.version 2 is not advertised.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/disgw/disgw/internal/acl"
	"github.com/disgw/disgw/kafkawire"
)

// EndTxn needs WRITE on the transactional id
// (TRANSACTIONAL_ID_AUTHORIZATION_FAILED).
func init() {
	registerAPI(26, 0, 4, (*conn).handleEndTxn,
		txnIDOp(acl.OpWrite, func(r *kmsg.EndTxnRequest) *string { return &r.TransactionalID }, refuseEndTxn))
}

func refuseEndTxn(r *kmsg.EndTxnRequest, code int16) kmsg.Response {
	resp := r.ResponseKind().(*kmsg.EndTxnResponse)
	resp.ErrorCode, resp.ProducerID, resp.ProducerEpoch = code, -1, -1
	return resp
}

func (c *conn) handleEndTxn(req *kafkawire.Request) reply {
	r := req.Body.(*kmsg.EndTxnRequest)
	switch {
	case c.s.txn == nil && r.TransactionalID == "":
		return ready(req, refuseEndTxn(r, kerr.InvalidRequest.Code)) // as Kafka, first
	case c.s.txn == nil:
		return ready(req, refuseEndTxn(r, errTxnAuth))
	}
	// The markers are appended and synced before the answer: a few
	// milliseconds, within the request overhead.
	ctx, cancel := c.requestContext(0)
	defer cancel()
	return ready(req, c.s.txn.EndTxn(ctx, r))
}
