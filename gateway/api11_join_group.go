package gateway

// JoinGroup: v0-9 (groupcoord).
//
// Version notes:
//   - v1: RebalanceTimeoutMillis (v0 uses the session timeout). v2:
//     ThrottleMillis.
//   - v4: a new dynamic member is given its id with MEMBER_ID_REQUIRED and
//     joins again with it (KIP-394).
//   - v5: InstanceID, static membership (KIP-345). v6: flexible.
//   - v7: ProtocolType in the response. v8: Reason (logged).
//   - v9: SkipAssignment for a static leader rejoining a Stable group with
//     unchanged metadata (KIP-814).
//
// The request parks in the group until the join phase ends, so it is
// answered from finish (the writer goroutine), bounded by the rebalance
// timeout, the initial rebalance delay and the request overhead.

import (
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/disgw/disgw/internal/acl"
	"github.com/disgw/disgw/kafkawire"
)

func init() {
	registerAPI(11, 0, 9, (*conn).handleJoinGroup,
		groupOp(acl.OpRead, func(r *kmsg.JoinGroupRequest) string { return r.Group }, refuseJoinGroup))
}

// refuseJoinGroup answers code with generation -1.
func refuseJoinGroup(r *kmsg.JoinGroupRequest, code int16) kmsg.Response {
	resp := r.ResponseKind().(*kmsg.JoinGroupResponse)
	resp.ErrorCode, resp.Generation = code, -1
	return resp
}

func (c *conn) handleJoinGroup(req *kafkawire.Request) reply {
	r := req.Body.(*kmsg.JoinGroupRequest)
	client := c.groupClient(req)
	client.Topics = consumerTopics{c: c} // a classic member joining a consumer group (KIP-848 migration)
	return reply{req: req, finish: func() (kmsg.Response, error) {
		wait := time.Duration(r.RebalanceTimeoutMillis) * time.Millisecond
		if r.Version == 0 {
			wait = time.Duration(r.SessionTimeoutMillis) * time.Millisecond
		}
		wait += max(c.s.cfg.GroupInitialRebalanceDelay, 0)
		ctx, cancel := c.requestContext(int32(min(wait.Milliseconds(), 1<<31-1)))
		defer cancel()
		return c.s.groups.JoinGroup(ctx, client, r), nil
	}}
}
