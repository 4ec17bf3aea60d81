package gateway

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"

	"github.com/disgw/disgw/internal/acl"
	"github.com/disgw/disgw/kafkawire"
)

// Authorization (issue 16 item 3): with an authorizer configured
// (Config.Authorizer), every request is checked as Apache Kafka 4.4's
// KafkaApis checks it, against the principal of the connection
// (kafkaPrincipal) and its client IP. Requests that change something have
// their refused entries taken out before the handler runs and answered
// with the refusal; read-only requests run and have the refused entries'
// answers replaced (or, for listings, dropped). Refusals are
// TOPIC_AUTHORIZATION_FAILED, GROUP_AUTHORIZATION_FAILED,
// CLUSTER_AUTHORIZATION_FAILED and TRANSACTIONAL_ID_AUTHORIZATION_FAILED
// as Kafka answers each. With no authorizer, nothing is checked.

// kafkaPrincipal is the connection's Kafka principal, "User:ANONYMOUS"
// until SASL (or a client certificate) set one.
func (c *conn) kafkaPrincipal() string {
	if p := c.principal.Load(); p != nil {
		return *p
	}
	return acl.Anonymous
}

// may reports whether the connection may do op on the resource; always
// true with no authorizer.
func (c *conn) may(op, rt int8, name string) bool {
	a := c.s.authz
	if a == nil {
		return true
	}
	ok := a.Authorize(c.kafkaPrincipal(), c.ip, op, rt, name)
	if !ok {
		if ce := c.log.Check(zap.DebugLevel, "authorization refused"); ce != nil {
			ce.Write(zap.String("principal", c.kafkaPrincipal()), zap.Int8("operation", op),
				zap.Int8("resource_type", rt), zap.String("resource_name", name))
		}
	}
	return ok
}

func (c *conn) mayTopic(op int8, topic string) bool { return c.may(op, acl.ResourceTopic, topic) }
func (c *conn) mayGroup(op int8, group string) bool { return c.may(op, acl.ResourceGroup, group) }
func (c *conn) mayCluster(op int8) bool             { return c.may(op, acl.ResourceCluster, acl.ClusterName) }

// opsOf returns the authorized-operations bits (KIP-430) of the resource
// among ops: with no authorizer, all of them.
func (c *conn) opsOf(rt int8, name string, ops int32) int32 {
	if c.s.authz == nil {
		return ops
	}
	var out int32
	for op := int8(0); op < 32; op++ {
		if ops&(1<<op) != 0 && c.may(op, rt, name) {
			out |= 1 << op
		}
	}
	return out
}

// groupAuthorizedOps: READ, DESCRIBE, DELETE (Kafka's group operations).
const groupAuthorizedOps = int32(1<<kmsg.ACLOperationRead | 1<<kmsg.ACLOperationDescribe | 1<<kmsg.ACLOperationDelete)

// topicName is the name of a topic given by name or (name "") by id; ""
// when the id is unknown (the handler answers it).
func (c *conn) topicName(name string, id [16]byte) string {
	if name != "" {
		return name
	}
	if st := c.s.topics.getByID(id); st != nil {
		return st.TopicName
	}
	if ot := c.s.offsetsTopicStream(); ot.TopicID == id {
		return ot.TopicName
	}
	return ""
}

var (
	errTopicAuth = kerr.TopicAuthorizationFailed.Code
	errGroupAuth = kerr.GroupAuthorizationFailed.Code
	errClustAuth = kerr.ClusterAuthorizationFailed.Code
	errTxnAuth   = kerr.TransactionalIDAuthorizationFailed.Code
)

// dispatchAuthorized runs api's handler for req under the authorizer.
func (c *conn) dispatchAuthorized(api *apiEntry, req *kafkawire.Request) reply {
	deny, post := c.authorizeRequest(req)
	if deny != nil {
		if pr, ok := req.Body.(*kmsg.ProduceRequest); ok && pr.Acks == 0 {
			// Kafka closes the connection on an error of an acks=0 produce.
			return reply{req: req, finish: func() (kmsg.Response, error) { return nil, errCloseConn }}
		}
		return ready(req, deny)
	}
	r := api.handle(c, req)
	if post == nil {
		return r
	}
	if r.finish == nil {
		resp := r.resp
		r.resp = nil
		r.finish = func() (kmsg.Response, error) { return resp, nil }
	}
	finish := r.finish
	r.finish = func() (kmsg.Response, error) {
		resp, err := finish()
		if err != nil {
			return resp, err
		}
		if err := post(resp); err != nil {
			return nil, err
		}
		return resp, nil
	}
	return r
}
