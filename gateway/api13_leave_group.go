package gateway

// LeaveGroup: v0-5 (groupcoord).
//
// Version notes:
//   - v0-2: one MemberID; its error is the top-level error.
//   - v1: ThrottleMillis.
//   - v3: a batch of members, each by member id or by group.instance.id
//     alone (KIP-345, admin removal), with an error each.
//   - v4: flexible. v5: Reason per member (logged).

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/disgw/disgw/internal/acl"
	"github.com/disgw/disgw/kafkawire"
)

func init() {
	registerAPI(13, 0, 5, (*conn).handleLeaveGroup,
		groupOp(acl.OpRead, func(r *kmsg.LeaveGroupRequest) string { return r.Group }, refuseLeaveGroup))
}

// refuseLeaveGroup answers the request with code.
func refuseLeaveGroup(r *kmsg.LeaveGroupRequest, code int16) kmsg.Response {
	resp := r.ResponseKind().(*kmsg.LeaveGroupResponse)
	resp.ErrorCode = code
	return resp
}

func (c *conn) handleLeaveGroup(req *kafkawire.Request) reply {
	r := req.Body.(*kmsg.LeaveGroupRequest)
	members := r.Members
	if r.Version < 3 {
		m := kmsg.NewLeaveGroupRequestMember()
		m.MemberID = r.MemberID
		members = []kmsg.LeaveGroupRequestMember{m}
	}
	return reply{req: req, finish: func() (kmsg.Response, error) {
		ctx, cancel := c.requestContext(0)
		defer cancel()
		resp := c.s.groups.LeaveGroup(ctx, r.Group, members)
		resp.Version = r.Version
		if r.Version < 3 {
			if resp.ErrorCode == 0 && len(resp.Members) > 0 {
				resp.ErrorCode = resp.Members[0].ErrorCode
			}
			resp.Members = nil
		}
		return resp, nil
	}}
}
