package gateway

// DescribeAcls (29) v1-3, CreateAcls (30) v1-3, DeleteAcls (31) v1-3: the
// versions Apache Kafka 4.4 serves (v0 was removed in 4.0, KIP-896).
//
// With no authorizer (Config.Authorizer off) each answers
// SECURITY_DISABLED, as Kafka does. DescribeAcls needs DESCRIBE on the
// cluster, CreateAcls and DeleteAcls ALTER (else
// CLUSTER_AUTHORIZATION_FAILED), checked like every API's authorization
// before the handler runs, but only once the request is known to be
// parseable (aclsParsedFirst). A creation that is not a valid binding
// (unknown or ANY/MATCH codes, empty name, a CLUSTER resource not named
// kafka-cluster, a principal not TYPE:NAME) gets INVALID_REQUEST; so does a
// creation past acl.MaxBindings. A filter with an UNKNOWN code gets
// INVALID_REQUEST. The ACLs are written to the backend (disbackend.ACLStore)
// before the answer; other nodes apply them within their
// ACLRefreshInterval. A backend error answers UNKNOWN_SERVER_ERROR (or
// Kafka's mapping of it) and changes nothing.

import (
	"errors"
	"sort"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/disgw/disgw/internal/acl"
	"github.com/disgw/disgw/kafkawire"
)

func init() {
	registerAPI(29, 1, 3, (*conn).handleDescribeACLs, aclsParsedFirst(clusterOp(acl.OpDescribe, refuseDescribeACLs)))
	registerAPI(30, 1, 3, (*conn).handleCreateACLs, aclsParsedFirst(clusterOp(acl.OpAlter, refuseCreateACLs)))
	registerAPI(31, 1, 3, (*conn).handleDeleteACLs, aclsParsedFirst(clusterOp(acl.OpAlter, refuseDeleteACLs)))
	controllerOnly(30, refuseCreateACLs, aclsChanged)
	controllerOnly(31, refuseDeleteACLs, aclsChanged)
}

// aclsParsedFirst runs check only on an ACL request without UNKNOWN
// elements: Kafka refuses one with them while parsing it, before any
// authorization, so its handler closes the connection whoever sent it.
func aclsParsedFirst(check authCheck) authCheck {
	return func(c *conn, req *kafkawire.Request) (kmsg.Response, postAuth) {
		if hasUnknownACLElements(req.Body) {
			return nil, nil
		}
		return check(c, req)
	}
}

// refuseDescribeACLs answers the request with code.
func refuseDescribeACLs(r *kmsg.DescribeACLsRequest, code int16) kmsg.Response {
	resp := r.ResponseKind().(*kmsg.DescribeACLsResponse)
	resp.ErrorCode = code
	return resp
}

// refuseCreateACLs answers each creation with code.
func refuseCreateACLs(r *kmsg.CreateACLsRequest, code int16) kmsg.Response {
	resp := r.ResponseKind().(*kmsg.CreateACLsResponse)
	resp.Results = make([]kmsg.CreateACLsResponseResult, len(r.Creations))
	for i := range resp.Results {
		resp.Results[i] = kmsg.NewCreateACLsResponseResult()
		resp.Results[i].ErrorCode = code
	}
	return resp
}

// refuseDeleteACLs answers each filter with code.
func refuseDeleteACLs(r *kmsg.DeleteACLsRequest, code int16) kmsg.Response {
	resp := r.ResponseKind().(*kmsg.DeleteACLsResponse)
	resp.Results = make([]kmsg.DeleteACLsResponseResult, len(r.Filters))
	for i := range resp.Results {
		resp.Results[i] = kmsg.NewDeleteACLsResponseResult()
		resp.Results[i].ErrorCode = code
	}
	return resp
}

var msgNoAuthorizer = "No Authorizer is configured."

func (c *conn) handleDescribeACLs(req *kafkawire.Request) reply {
	r := req.Body.(*kmsg.DescribeACLsRequest)
	if hasUnknownACLElements(r) {
		return closeWithoutAnswer(req)
	}
	resp := r.ResponseKind().(*kmsg.DescribeACLsResponse)
	a := c.s.authz
	if a == nil {
		resp.ErrorCode, resp.ErrorMessage = kerr.SecurityDisabled.Code, &msgNoAuthorizer
		return ready(req, resp)
	}
	f := acl.Filter{ResourceType: int8(r.ResourceType), ResourceName: r.ResourceName, PatternType: int8(r.ResourcePatternType),
		Principal: r.Principal, Host: r.Host, Operation: int8(r.Operation), Permission: int8(r.PermissionType)}
	if err := acl.ValidateFilter(f); err != nil {
		msg := err.Error()
		resp.ErrorCode, resp.ErrorMessage = kerr.InvalidRequest.Code, &msg
		return ready(req, resp)
	}
	resp.Resources = describedResources(a.Describe(f))
	return ready(req, resp)
}

// describedResources groups bindings by resource pattern, sorted.
func describedResources(bs []acl.Binding) []kmsg.DescribeACLsResponseResource {
	type pat struct {
		rt, pt int8
		name   string
	}
	by := map[pat][]kmsg.DescribeACLsResponseResourceACL{}
	for _, b := range bs {
		e := kmsg.NewDescribeACLsResponseResourceACL()
		e.Principal, e.Host, e.Operation, e.PermissionType = b.Principal, b.Host, kmsg.ACLOperation(b.Operation), kmsg.ACLPermissionType(b.Permission)
		k := pat{b.ResourceType, b.PatternType, b.ResourceName}
		by[k] = append(by[k], e)
	}
	keys := make([]pat, 0, len(by))
	for k := range by {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		a, b := keys[i], keys[j]
		if a.rt != b.rt {
			return a.rt < b.rt
		}
		if a.name != b.name {
			return a.name < b.name
		}
		return a.pt < b.pt
	})
	out := make([]kmsg.DescribeACLsResponseResource, 0, len(keys))
	for _, k := range keys {
		res := kmsg.NewDescribeACLsResponseResource()
		res.ResourceType, res.ResourceName, res.ResourcePatternType = kmsg.ACLResourceType(k.rt), k.name, kmsg.ACLResourcePatternType(k.pt)
		res.ACLs = by[k]
		out = append(out, res)
	}
	return out
}

func (c *conn) handleCreateACLs(req *kafkawire.Request) reply {
	r := req.Body.(*kmsg.CreateACLsRequest)
	if hasUnknownACLElements(r) {
		return closeWithoutAnswer(req)
	}
	resp := r.ResponseKind().(*kmsg.CreateACLsResponse)
	resp.Results = make([]kmsg.CreateACLsResponseResult, len(r.Creations))
	a := c.s.authz
	if a == nil {
		for i := range resp.Results {
			resp.Results[i] = kmsg.NewCreateACLsResponseResult()
			resp.Results[i].ErrorCode, resp.Results[i].ErrorMessage = kerr.SecurityDisabled.Code, &msgNoAuthorizer
		}
		return ready(req, resp)
	}
	var add []acl.Binding
	var idx []int
	for i, cr := range r.Creations {
		resp.Results[i] = kmsg.NewCreateACLsResponseResult()
		b := acl.Binding{ResourceType: int8(cr.ResourceType), ResourceName: cr.ResourceName, PatternType: int8(cr.ResourcePatternType),
			Principal: cr.Principal, Host: cr.Host, Operation: int8(cr.Operation), Permission: int8(cr.PermissionType)}
		if err := acl.Validate(b); err != nil {
			msg := err.Error()
			resp.Results[i].ErrorCode, resp.Results[i].ErrorMessage = kerr.InvalidRequest.Code, &msg
			continue
		}
		add = append(add, b)
		idx = append(idx, i)
	}
	if len(add) == 0 {
		return ready(req, resp)
	}
	return reply{req: req, finish: func() (kmsg.Response, error) {
		ctx, cancel := c.requestContext(0)
		defer cancel()
		if err := a.Create(ctx, add); err != nil {
			code := kafkaError(c.log, err)
			if errors.Is(err, acl.ErrTooMany) {
				code = kerr.InvalidRequest.Code
			} else {
				c.log.Warn("create acls failed", zapErr(err))
			}
			msg := err.Error()
			for _, i := range idx {
				resp.Results[i].ErrorCode, resp.Results[i].ErrorMessage = code, &msg
			}
			return resp, nil
		}
		c.log.Info("acls created", zapPrincipal(c.kafkaPrincipal()), zapCount(len(add)))
		return resp, nil
	}}
}

func (c *conn) handleDeleteACLs(req *kafkawire.Request) reply {
	r := req.Body.(*kmsg.DeleteACLsRequest)
	if hasUnknownACLElements(r) {
		return closeWithoutAnswer(req)
	}
	resp := r.ResponseKind().(*kmsg.DeleteACLsResponse)
	resp.Results = make([]kmsg.DeleteACLsResponseResult, len(r.Filters))
	a := c.s.authz
	if a == nil {
		for i := range resp.Results {
			resp.Results[i] = kmsg.NewDeleteACLsResponseResult()
			resp.Results[i].ErrorCode, resp.Results[i].ErrorMessage = kerr.SecurityDisabled.Code, &msgNoAuthorizer
		}
		return ready(req, resp)
	}
	var filters []acl.Filter
	var idx []int
	for i, f := range r.Filters {
		resp.Results[i] = kmsg.NewDeleteACLsResponseResult()
		af := acl.Filter{ResourceType: int8(f.ResourceType), ResourceName: f.ResourceName, PatternType: int8(f.ResourcePatternType),
			Principal: f.Principal, Host: f.Host, Operation: int8(f.Operation), Permission: int8(f.PermissionType)}
		if err := acl.ValidateFilter(af); err != nil {
			msg := err.Error()
			resp.Results[i].ErrorCode, resp.Results[i].ErrorMessage = kerr.InvalidRequest.Code, &msg
			continue
		}
		filters = append(filters, af)
		idx = append(idx, i)
	}
	if len(filters) == 0 {
		return ready(req, resp)
	}
	return reply{req: req, finish: func() (kmsg.Response, error) {
		ctx, cancel := c.requestContext(0)
		defer cancel()
		deleted, err := a.Delete(ctx, filters)
		if err != nil {
			c.log.Warn("delete acls failed", zapErr(err))
			code, msg := kafkaError(c.log, err), err.Error()
			for _, i := range idx {
				resp.Results[i].ErrorCode, resp.Results[i].ErrorMessage = code, &msg
			}
			return resp, nil
		}
		n := 0
		for j, i := range idx {
			for _, b := range deleted[j] {
				m := kmsg.NewDeleteACLsResponseResultMatchingACL()
				m.ResourceType, m.ResourceName, m.ResourcePatternType = kmsg.ACLResourceType(b.ResourceType), b.ResourceName, kmsg.ACLResourcePatternType(b.PatternType)
				m.Principal, m.Host, m.Operation, m.PermissionType = b.Principal, b.Host, kmsg.ACLOperation(b.Operation), kmsg.ACLPermissionType(b.Permission)
				resp.Results[i].MatchingACLs = append(resp.Results[i].MatchingACLs, m)
				n++
			}
		}
		c.log.Info("acls deleted", zapPrincipal(c.kafkaPrincipal()), zapCount(n))
		return resp, nil
	}}
}

// unknownACLElements reports whether a binding or filter has an UNKNOWN
// (0, or a code Kafka does not know) resource type (ANY 1 .. USER 7),
// pattern type (ANY 1 .. PREFIXED 4), operation (ANY 1 .. TWO_PHASE_COMMIT
// 15) or permission type (ANY 1 .. ALLOW 3). Kafka's Describe/Create/
// DeleteAclsRequest refuse such a request while parsing it
// (IllegalArgumentException "... contain UNKNOWN elements"), so the broker
// closes the connection without an answer; so does disgw.
func unknownACLElements(rt kmsg.ACLResourceType, pt kmsg.ACLResourcePatternType, op kmsg.ACLOperation, perm kmsg.ACLPermissionType) bool {
	return rt < 1 || rt > 7 || pt < 1 || pt > 4 || op < 1 || op > 15 || perm < 1 || perm > 3
}

// hasUnknownACLElements reports whether an ACL request (DescribeAcls'
// filter, a CreateAcls creation, a DeleteAcls filter) has UNKNOWN elements
// (unknownACLElements).
func hasUnknownACLElements(body kmsg.Request) bool {
	switch r := body.(type) {
	case *kmsg.DescribeACLsRequest:
		return unknownACLElements(r.ResourceType, r.ResourcePatternType, r.Operation, r.PermissionType)
	case *kmsg.CreateACLsRequest:
		for _, cr := range r.Creations {
			if unknownACLElements(cr.ResourceType, cr.ResourcePatternType, cr.Operation, cr.PermissionType) {
				return true
			}
		}
	case *kmsg.DeleteACLsRequest:
		for _, f := range r.Filters {
			if unknownACLElements(f.ResourceType, f.ResourcePatternType, f.Operation, f.PermissionType) {
				return true
			}
		}
	}
	return false
}

// closeWithoutAnswer closes the connection without answering req.
func closeWithoutAnswer(req *kafkawire.Request) reply {
	return reply{req: req, finish: func() (kmsg.Response, error) { return nil, errCloseConn }}
}
