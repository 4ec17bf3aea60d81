package gateway

// ListGroups: v0-5 (groupcoord).
//
// Version notes:
//   - v1: ThrottleMillis. v3: flexible.
//   - v4: StatesFilter (KIP-518), case-insensitive.
//   - v5: TypesFilter and GroupType (KIP-848); every group here is
//     "classic".
//
// Groups are listed from what the backend stores (one DIS app per group,
// App.GroupID) plus the groups with members in memory.

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/disgw/disgw/internal/acl"
	"github.com/disgw/disgw/kafkawire"
)

func init() { registerAPI(16, 0, 5, (*conn).handleListGroups, (*conn).authorizeListGroups) }

// authorizeListGroups: with DESCRIBE on the cluster every group is listed,
// else only those the principal may DESCRIBE.
func (c *conn) authorizeListGroups(*kafkawire.Request) (kmsg.Response, postAuth) {
	if c.mayCluster(acl.OpDescribe) {
		return nil, nil
	}
	return nil, func(resp kmsg.Response) error {
		lr := resp.(*kmsg.ListGroupsResponse)
		kept := lr.Groups[:0]
		for _, g := range lr.Groups {
			if c.mayGroup(acl.OpDescribe, g.Group) {
				kept = append(kept, g)
			}
		}
		lr.Groups = kept
		return nil
	}
}

func (c *conn) handleListGroups(req *kafkawire.Request) reply {
	r := req.Body.(*kmsg.ListGroupsRequest)
	return reply{req: req, finish: func() (kmsg.Response, error) {
		ctx, cancel := c.requestContext(0)
		defer cancel()
		return c.s.groups.ListGroups(ctx, r), nil
	}}
}
