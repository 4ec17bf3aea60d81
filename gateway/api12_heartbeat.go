package gateway

// Heartbeat: v0-4 (groupcoord).
//
// Version notes: v1 ThrottleMillis; v3 InstanceID (KIP-345; a replaced
// static member gets FENCED_INSTANCE_ID); v4 flexible.

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/disgw/disgw/internal/acl"
	"github.com/disgw/disgw/kafkawire"
)

func init() {
	registerAPI(12, 0, 4, (*conn).handleHeartbeat,
		groupOp(acl.OpRead, func(r *kmsg.HeartbeatRequest) string { return r.Group }, refuseHeartbeat))
}

// refuseHeartbeat answers the request with code.
func refuseHeartbeat(r *kmsg.HeartbeatRequest, code int16) kmsg.Response {
	resp := r.ResponseKind().(*kmsg.HeartbeatResponse)
	resp.ErrorCode = code
	return resp
}

func (c *conn) handleHeartbeat(req *kafkawire.Request) reply {
	r := req.Body.(*kmsg.HeartbeatRequest)
	return reply{req: req, finish: func() (kmsg.Response, error) {
		ctx, cancel := c.requestContext(0)
		defer cancel()
		return c.s.groups.Heartbeat(ctx, r), nil
	}}
}
