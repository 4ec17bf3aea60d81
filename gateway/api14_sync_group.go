package gateway

// SyncGroup: v0-5 (groupcoord).
//
// Version notes:
//   - v1: ThrottleMillis. v3: InstanceID (KIP-345). v4: flexible.
//   - v5: ProtocolType and Protocol, checked against the group's
//     (INCONSISTENT_GROUP_PROTOCOL) and returned.
//
// Assignments are opaque bytes passed from the leader to each member
// unchanged. A member's SyncGroup parks until the leader's arrives; the
// group's own timers (the rebalance timeout) bound the wait.

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/disgw/disgw/internal/acl"
	"github.com/disgw/disgw/kafkawire"
)

func init() {
	registerAPI(14, 0, 5, (*conn).handleSyncGroup,
		groupOp(acl.OpRead, func(r *kmsg.SyncGroupRequest) string { return r.Group }, refuseSyncGroup))
}

// refuseSyncGroup answers the request with code.
func refuseSyncGroup(r *kmsg.SyncGroupRequest, code int16) kmsg.Response {
	resp := r.ResponseKind().(*kmsg.SyncGroupResponse)
	resp.ErrorCode = code
	return resp
}

func (c *conn) handleSyncGroup(req *kafkawire.Request) reply {
	r := req.Body.(*kmsg.SyncGroupRequest)
	return reply{req: req, finish: func() (kmsg.Response, error) {
		return c.s.groups.SyncGroup(c.ctx, r), nil
	}}
}
