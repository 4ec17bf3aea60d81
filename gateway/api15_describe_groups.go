package gateway

// DescribeGroups: v0-6 (groupcoord).
//
// Version notes:
//   - v1: ThrottleMillis. v3: IncludeAuthorizedOperations (there is no
//     authorizer: READ, DELETE, DESCRIBE, DESCRIBE_CONFIGS and
//     ALTER_CONFIGS are reported, 3400 as Kafka 4.4 gives, on groups
//     answered without an error).
//   - v4: member InstanceID. v5: flexible.
//   - v6: ErrorMessage; an unknown group is Dead with GROUP_ID_NOT_FOUND.
//
// A group with committed offsets and no members is Empty (from the
// backend's apps), so lag tools work after a gateway restart too.
//
// Limits (limits.go): groups past Limits.MaxGroups get INVALID_REQUEST and
// only their id; a group listed twice is described once, its repeats get
// INVALID_REQUEST (Kafka would describe it again: a request could then
// repeat one large answer).

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/disgw/disgw/internal/acl"
	"github.com/disgw/disgw/kafkawire"
)

func init() { registerAPI(15, 0, 6, (*conn).handleDescribeGroups, (*conn).authorizeDescribeGroups) }

// authorizeDescribeGroups: DESCRIBE on each group, else the group is
// answered GROUP_AUTHORIZATION_FAILED and nothing else; the authorized
// operations (KIP-430), when asked for, are the principal's.
func (c *conn) authorizeDescribeGroups(req *kafkawire.Request) (kmsg.Response, postAuth) {
	r := req.Body.(*kmsg.DescribeGroupsRequest)
	return nil, func(resp kmsg.Response) error {
		dr := resp.(*kmsg.DescribeGroupsResponse)
		for i := range dr.Groups {
			g := &dr.Groups[i]
			if !c.mayGroup(acl.OpDescribe, g.Group) {
				name := g.Group
				*g = kmsg.NewDescribeGroupsResponseGroup()
				g.Group, g.ErrorCode = name, errGroupAuth
				continue
			}
			if r.IncludeAuthorizedOperations {
				g.AuthorizedOperations = c.opsOf(acl.ResourceGroup, g.Group, groupAuthorizedOps)
			}
		}
		return nil
	}
}

func (c *conn) handleDescribeGroups(req *kafkawire.Request) reply {
	r := req.Body.(*kmsg.DescribeGroupsRequest)
	q := newQuota(c.s.cfg.Limits.MaxGroups)
	served, codes := capNames(r.Groups, &q, true)
	q.report(c, limitGroups, "DescribeGroups")
	return reply{req: req, finish: func() (kmsg.Response, error) {
		ctx, cancel := c.requestContext(0)
		defer cancel()
		sub := *r
		sub.Groups = served
		resp := c.s.groups.DescribeGroups(ctx, &sub)
		if len(served) == len(r.Groups) {
			return resp, nil
		}
		resp.Groups = withRefused(resp.Groups, r.Groups, codes, func(id string, code int16) kmsg.DescribeGroupsResponseGroup {
			dg := kmsg.NewDescribeGroupsResponseGroup()
			dg.Group, dg.ErrorCode = id, code
			return dg
		})
		return resp, nil
	}}
}
