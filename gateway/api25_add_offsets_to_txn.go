package gateway

// AddOffsetsToTxn: v0-4 (txncoord.Coordinator.AddOffsets). v1 no change;
// v2 no change; v3 flexible; v4 no change.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/disgw/disgw/internal/acl"
	"github.com/disgw/disgw/kafkawire"
)

// AddOffsetsToTxn needs WRITE on the transactional id
// (TRANSACTIONAL_ID_AUTHORIZATION_FAILED) and READ on the group
// (GROUP_AUTHORIZATION_FAILED), as Kafka.
func init() {
	refuse := func(r *kmsg.AddOffsetsToTxnRequest, code int16) kmsg.Response {
		resp := r.ResponseKind().(*kmsg.AddOffsetsToTxnResponse)
		resp.ErrorCode = code
		return resp
	}
	registerAPI(25, 0, 4, (*conn).handleAddOffsetsToTxn,
		txnIDOp(acl.OpWrite, func(r *kmsg.AddOffsetsToTxnRequest) *string { return &r.TransactionalID }, refuse),
		groupOp(acl.OpRead, func(r *kmsg.AddOffsetsToTxnRequest) string { return r.Group }, refuse))
}

func (c *conn) handleAddOffsetsToTxn(req *kafkawire.Request) reply {
	r := req.Body.(*kmsg.AddOffsetsToTxnRequest)
	if c.s.txn == nil {
		resp := r.ResponseKind().(*kmsg.AddOffsetsToTxnResponse)
		resp.ErrorCode = errTxnAuth
		if r.TransactionalID == "" {
			resp.ErrorCode = kerr.InvalidRequest.Code // as Kafka, first
		}
		return ready(req, resp)
	}
	ctx, cancel := c.requestContext(0)
	defer cancel()
	return ready(req, c.s.txn.AddOffsets(ctx, r))
}
