package gateway

// DeleteGroups: v0-3 (groupcoord; DIS DeleteApp).
//
// Version notes: v1 ThrottleMillis; v2 flexible; v3 ErrorMessage per group.
//
// A group with members gets NON_EMPTY_GROUP; an unknown one
// GROUP_ID_NOT_FOUND. Deleting removes the group's app and every committed
// offset.

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/disgw/disgw/kafkawire"
)

func init() { registerAPI(42, 0, 3, (*conn).handleDeleteGroups) }

func (c *conn) handleDeleteGroups(req *kafkawire.Request) reply {
	r := req.Body.(*kmsg.DeleteGroupsRequest)
	return reply{req: req, finish: func() (kmsg.Response, error) {
		ctx, cancel := c.requestContext(0)
		defer cancel()
		return c.s.groups.DeleteGroups(ctx, r), nil
	}}
}
