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
//
// How each API is authorized is a column of the dispatch table: the
// checks its registerAPI names (apiEntry.auth), built from the kinds
// below (authNone, clusterOp, groupOp, txnIDOp, denyEach, denyTopics,
// filterTopics) or, where none fits, a function next to the API's handler
// (authorizeProduce, authorizeMetadata, ...). registerAPI refuses a row
// without checks, so no API is served before its authorization is decided.

// postAuth completes a handler's response under the authorizer: it
// replaces or drops the answers of refused entries, or appends the answers
// of entries taken out of the request. An error (errCloseConn) closes the
// connection instead of answering.
type postAuth func(kmsg.Response) error

// authCheck is one check of an API's authorization. It returns a complete
// refusal (deny), or nil and a post (nil when there is nothing to
// complete); it may take refused entries out of req.Body, whose answers
// its post then appends. Checks run on the connection's reader goroutine.
type authCheck func(c *conn, req *kafkawire.Request) (deny kmsg.Response, post postAuth)

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

// groupAuthorizedOps: READ, DESCRIBE, DELETE, DESCRIBE_CONFIGS and
// ALTER_CONFIGS (Kafka 4.4's group operations, AclEntry.supportedOperations).
const groupAuthorizedOps = int32(1<<kmsg.ACLOperationRead | 1<<kmsg.ACLOperationDescribe | 1<<kmsg.ACLOperationDelete |
	1<<kmsg.ACLOperationDescribeConfigs | 1<<kmsg.ACLOperationAlterConfigs)

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

// authorizeRequest runs api's checks in order; super users pass every
// check. The first refusal is the answer; the posts of the checks that
// passed run in order after the handler.
func (c *conn) authorizeRequest(api *apiEntry, req *kafkawire.Request) (deny kmsg.Response, post postAuth) {
	if c.s.authz.IsSuperUser(c.kafkaPrincipal()) {
		return nil, nil
	}
	for _, check := range api.auth {
		d, p := check(c, req)
		if d != nil {
			return d, nil
		}
		post = chainPost(post, p)
	}
	return nil, post
}

// dispatchAuthorized runs api's handler for req under the authorizer.
func (c *conn) dispatchAuthorized(api *apiEntry, req *kafkawire.Request) reply {
	deny, post := c.authorizeRequest(api, req)
	if deny != nil {
		if pr, ok := req.Body.(*kmsg.ProduceRequest); ok && pr.Acks == 0 {
			// Kafka closes the connection on an error of an acks=0 produce.
			return reply{req: req, finish: func() (kmsg.Response, error) { return nil, errCloseConn }}
		}
		return ready(req, deny)
	}
	r := c.handleOrForward(api, req)
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

// authNone is the check of the APIs that are not authorized: ApiVersions,
// and SaslHandshake and SaslAuthenticate, which establish the principal.
func authNone(*conn, *kafkawire.Request) (kmsg.Response, postAuth) { return nil, nil }

// clusterOp refuses the whole request unless the principal may do op on
// the cluster; refuse builds the answer (CLUSTER_AUTHORIZATION_FAILED as
// code) from the request R.
func clusterOp[R kmsg.Request](op int8, refuse func(r R, code int16) kmsg.Response) authCheck {
	return func(c *conn, req *kafkawire.Request) (kmsg.Response, postAuth) {
		if c.mayCluster(op) {
			return nil, nil
		}
		return refuse(req.Body.(R), errClustAuth), nil
	}
}

// groupOp refuses the whole request unless the principal may do op on the
// group the request names; refuse builds the answer
// (GROUP_AUTHORIZATION_FAILED as code).
func groupOp[R kmsg.Request](op int8, group func(R) string, refuse func(r R, code int16) kmsg.Response) authCheck {
	return func(c *conn, req *kafkawire.Request) (kmsg.Response, postAuth) {
		r := req.Body.(R)
		if c.mayGroup(op, group(r)) {
			return nil, nil
		}
		return refuse(r, errGroupAuth), nil
	}
}

// txnIDOp refuses the whole request unless the principal may do op on the
// transactional id it names (id nil: none named, nothing to check); refuse
// builds the answer (TRANSACTIONAL_ID_AUTHORIZATION_FAILED as code).
func txnIDOp[R kmsg.Request](op int8, id func(R) *string, refuse func(r R, code int16) kmsg.Response) authCheck {
	return func(c *conn, req *kafkawire.Request) (kmsg.Response, postAuth) {
		r := req.Body.(R)
		if tid := id(r); tid == nil || c.may(op, acl.ResourceTransactionalID, *tid) {
			return nil, nil
		}
		return refuse(r, errTxnAuth), nil
	}
}

// denyEach checks each entry of one list of the request (list): refusal
// gives its error code, 0 to keep it. The refused entries are taken out
// before the handler runs, and their answers (answer) are appended to the
// response's list (answers). Kafka does so for requests that change
// something, so that a refused entry is never acted on.
func denyEach[R kmsg.Request, P kmsg.Response, T, D any](list func(R) *[]T, refusal func(c *conn, e T) int16,
	answer func(e T, code int16) D, answers func(P) *[]D) authCheck {
	return func(c *conn, req *kafkawire.Request) (kmsg.Response, postAuth) {
		l := list(req.Body.(R))
		var denied []D
		kept := (*l)[:0]
		for _, e := range *l {
			if code := refusal(c, e); code != 0 {
				denied = append(denied, answer(e, code))
				continue
			}
			kept = append(kept, e)
		}
		*l = kept
		return nil, appendDenied(denied, answers)
	}
}

// denyTopics is denyEach of op on the topic each entry names (name):
// refused entries are answered TOPIC_AUTHORIZATION_FAILED.
func denyTopics[R kmsg.Request, P kmsg.Response, T, D any](op int8, list func(R) *[]T, name func(T) string,
	answer func(e T, code int16) D, answers func(P) *[]D) authCheck {
	refusal := func(c *conn, e T) int16 {
		if c.mayTopic(op, name(e)) {
			return 0
		}
		return errTopicAuth
	}
	return denyEach(list, refusal, answer, answers)
}

// filterTopics lets the handler run, then has refuse replace, in place,
// the answer of each topic of the response's list (list) the principal
// may not do op on. Kafka does so for read-only requests.
func filterTopics[P kmsg.Response, D any](op int8, list func(P) []D, name func(*D) string, refuse func(*D)) authCheck {
	return func(c *conn, _ *kafkawire.Request) (kmsg.Response, postAuth) {
		return nil, func(resp kmsg.Response) error {
			l := list(resp.(P))
			for i := range l {
				if !c.mayTopic(op, name(&l[i])) {
					refuse(&l[i])
				}
			}
			return nil
		}
	}
}

// appendDenied returns a post that appends the refused entries to the
// response's list, nil when there are none.
func appendDenied[P kmsg.Response, T any](denied []T, list func(P) *[]T) postAuth {
	if len(denied) == 0 {
		return nil
	}
	return func(resp kmsg.Response) error {
		if resp == nil {
			return nil
		}
		l := list(resp.(P))
		*l = append(*l, denied...)
		return nil
	}
}

// chainPost runs a, then b (either may be nil).
func chainPost(a, b postAuth) postAuth {
	if a == nil {
		return b
	}
	if b == nil {
		return a
	}
	return func(resp kmsg.Response) error {
		if err := a(resp); err != nil {
			return err
		}
		return b(resp)
	}
}

// kmsgUnknownTopicID is UNKNOWN_TOPIC_ID, what Kafka answers for a topic id
// the principal may not describe (it does not tell that it exists).
const kmsgUnknownTopicID = int16(100)

// configAuth is the refusal (0 when allowed) of op on a config resource:
// topics need op on the topic, brokers and broker loggers on the cluster,
// groups on the group.
func (c *conn) configAuth(op int8, rt kmsg.ConfigResourceType, name string) int16 {
	switch rt {
	case kmsg.ConfigResourceTypeTopic:
		if !c.mayTopic(op, name) {
			return errTopicAuth
		}
	case kmsg.ConfigResourceTypeGroupConfig:
		if !c.mayGroup(op, name) {
			return errGroupAuth
		}
	default:
		if !c.mayCluster(op) {
			return errClustAuth
		}
	}
	return 0
}

// topicExists reports whether topic exists, looking it up in the backend
// when this node does not know it yet.
func (c *conn) topicExists(topic string) bool {
	if topic == offsetsTopic || c.s.topics.get(topic) != nil {
		return true
	}
	ctx, cancel := c.requestContext(0)
	defer cancel()
	return c.s.lookupTopic(ctx, topic) != nil
}
