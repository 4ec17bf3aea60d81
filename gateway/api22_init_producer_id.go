package gateway

// InitProducerID: v0-5.
//
// Version notes: v1 no change; v2 flexible; v3 the current producer id and
// epoch (KIP-360: a producer asking to bump its epoch gets a fresh producer
// id, which clients accept); v4 and v5 no change that matters here.
//
// Producer ids come from the backend's persisted allocator, so an id is
// never handed out twice, across restarts too. A transactional id goes to
// the transaction coordinator (txncoord.Coordinator.InitProducerID); where
// none runs (txn.go) it gets TRANSACTIONAL_ID_AUTHORIZATION_FAILED.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/disgw/disgw/internal/acl"
	"github.com/disgw/disgw/kafkawire"
)

// InitProducerID needs WRITE on the transactional id when one is named,
// else IDEMPOTENT_WRITE on the cluster or WRITE on some topic.
func init() {
	registerAPI(22, 0, 5, (*conn).handleInitProducerID,
		txnIDOp(acl.OpWrite, func(r *kmsg.InitProducerIDRequest) *string { return r.TransactionalID }, refuseInitProducerID),
		(*conn).authorizeIdempotentWrite)
}

// authorizeIdempotentWrite: a producer without a transactional id needs
// IDEMPOTENT_WRITE on the cluster or WRITE on any topic (Kafka 4.4's
// KafkaApis), else CLUSTER_AUTHORIZATION_FAILED.
func (c *conn) authorizeIdempotentWrite(req *kafkawire.Request) (kmsg.Response, postAuth) {
	r := req.Body.(*kmsg.InitProducerIDRequest)
	if r.TransactionalID != nil || c.mayCluster(acl.OpIdempotentWrite) ||
		c.s.authz.AuthorizeByResourceType(c.kafkaPrincipal(), c.ip, acl.OpWrite, acl.ResourceTopic) {
		return nil, nil
	}
	return refuseInitProducerID(r, errClustAuth), nil
}

// refuseInitProducerID answers code with no producer id or epoch.
func refuseInitProducerID(r *kmsg.InitProducerIDRequest, code int16) kmsg.Response {
	resp := r.ResponseKind().(*kmsg.InitProducerIDResponse)
	resp.ErrorCode, resp.ProducerID, resp.ProducerEpoch = code, -1, -1
	return resp
}

func (c *conn) handleInitProducerID(req *kafkawire.Request) reply {
	r := req.Body.(*kmsg.InitProducerIDRequest)
	resp := r.ResponseKind().(*kmsg.InitProducerIDResponse)
	ctx, cancel := c.requestContext(0)
	defer cancel()
	if r.TransactionalID != nil {
		if c.s.txn == nil {
			return ready(req, refuseInitProducerID(r, kerr.TransactionalIDAuthorizationFailed.Code))
		}
		return ready(req, c.s.txn.InitProducerID(ctx, r))
	}
	id, epoch, err := c.s.backend.InitProducerID(ctx)
	if err != nil {
		resp.ErrorCode = kafkaError(c.log, err)
		return ready(req, resp)
	}
	resp.ProducerID, resp.ProducerEpoch = id, epoch
	return ready(req, resp)
}
