package gateway

// DescribeGroups: v0-6 (groupcoord).
//
// Version notes:
//   - v1: ThrottleMillis. v3: IncludeAuthorizedOperations (there is no
//     authorizer: READ, DELETE and DESCRIBE are reported).
//   - v4: member InstanceID. v5: flexible.
//   - v6: ErrorMessage; an unknown group is Dead with GROUP_ID_NOT_FOUND.
//
// A group with committed offsets and no members is Empty (from the
// backend's apps), so lag tools work after a gateway restart too.

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/disgw/disgw/kafkawire"
)

func init() { registerAPI(15, 0, 6, (*conn).handleDescribeGroups) }

func (c *conn) handleDescribeGroups(req *kafkawire.Request) reply {
	r := req.Body.(*kmsg.DescribeGroupsRequest)
	return reply{req: req, finish: func() (kmsg.Response, error) {
		ctx, cancel := c.requestContext(0)
		defer cancel()
		return c.s.groups.DescribeGroups(ctx, r), nil
	}}
}
