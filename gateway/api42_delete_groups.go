package gateway

// DeleteGroups: v0-3 (groupcoord; DIS DeleteApp).
//
// Version notes: v1 ThrottleMillis; v2 flexible; v3 ErrorMessage per group.
//
// A group with members gets NON_EMPTY_GROUP; an unknown one
// GROUP_ID_NOT_FOUND. Deleting removes the group's app and every committed
// offset. Groups past Limits.MaxGroups get INVALID_REQUEST (limits.go). A
// group named twice is answered once, as Kafka 4.4 answers.

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/disgw/disgw/internal/acl"
	"github.com/disgw/disgw/kafkawire"
)

func init() {
	registerAPI(42, 0, 3, (*conn).handleDeleteGroups, denyEach(
		func(r *kmsg.DeleteGroupsRequest) *[]string { return &r.Groups },
		func(c *conn, group string) int16 {
			if c.mayGroup(acl.OpDelete, group) {
				return 0
			}
			return errGroupAuth
		},
		refuseDeleteGroupsGroup,
		func(r *kmsg.DeleteGroupsResponse) *[]kmsg.DeleteGroupsResponseGroup { return &r.Groups }))
}

// refuseDeleteGroupsGroup answers a group the principal may not DELETE
// with code.
func refuseDeleteGroupsGroup(group string, code int16) kmsg.DeleteGroupsResponseGroup {
	d := kmsg.NewDeleteGroupsResponseGroup()
	d.Group, d.ErrorCode = group, code
	return d
}

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
		// The coordinator answers a group named twice once: put its
		// answers back by name, each once, among the refused ones.
		byID := make(map[string]kmsg.DeleteGroupsResponseGroup, len(resp.Groups))
		for _, dg := range resp.Groups {
			byID[dg.Group] = dg
		}
		out := make([]kmsg.DeleteGroupsResponseGroup, 0, len(r.Groups))
		for i, id := range r.Groups {
			if codes[i] != 0 {
				dg := kmsg.NewDeleteGroupsResponseGroup()
				dg.Group, dg.ErrorCode = id, codes[i]
				out = append(out, dg)
				continue
			}
			if dg, ok := byID[id]; ok {
				out = append(out, dg)
				delete(byID, id)
			}
		}
		resp.Groups = out
		return resp, nil
	}}
}
