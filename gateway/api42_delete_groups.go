package gateway

// DeleteGroups: v0-3 (groupcoord; DIS DeleteApp).
//
// Version notes: v1 ThrottleMillis; v2 flexible; v3 ErrorMessage per group.
//
// A group with members gets NON_EMPTY_GROUP; an unknown one
// GROUP_ID_NOT_FOUND. Deleting removes the group's app and every committed
// offset. Groups past Limits.MaxGroups get INVALID_REQUEST (limits.go).

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/disgw/disgw/kafkawire"
)

func init() { registerAPI(42, 0, 3, (*conn).handleDeleteGroups) }

func (c *conn) handleDeleteGroups(req *kafkawire.Request) reply {
	r := req.Body.(*kmsg.DeleteGroupsRequest)
	q := newQuota(c.s.cfg.Limits.MaxGroups)
	served, codes := capNames(r.Groups, &q, false)
	q.report(c, limitGroups, "DeleteGroups")
	return reply{req: req, finish: func() (kmsg.Response, error) {
		ctx, cancel := c.requestContext(0)
		defer cancel()
		sub := *r
		sub.Groups = served
		resp := c.s.groups.DeleteGroups(ctx, &sub)
		if len(served) == len(r.Groups) {
			return resp, nil
		}
		resp.Groups = withRefused(resp.Groups, r.Groups, codes, func(id string, code int16) kmsg.DeleteGroupsResponseGroup {
			dg := kmsg.NewDeleteGroupsResponseGroup()
			dg.Group, dg.ErrorCode = id, code
			return dg
		})
		return resp, nil
	}}
}
