package groupcoord

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Heartbeat keeps a member's session alive. It answers REBALANCE_IN_PROGRESS
// while the group prepares a rebalance (the member must rejoin),
// ILLEGAL_GENERATION for an old generation, UNKNOWN_MEMBER_ID for a member
// the group does not know (also after a gateway restart) and
// FENCED_INSTANCE_ID for a replaced static member.
func (c *Coordinator) Heartbeat(ctx context.Context, req *kmsg.HeartbeatRequest) *kmsg.HeartbeatResponse {
	r := req.ResponseKind().(*kmsg.HeartbeatResponse)
	if req.Group == "" {
		r.ErrorCode = kerr.InvalidGroupID.Code
		return r
	}
	if code := c.notReadyFor(req.Group); code != 0 {
		r.ErrorCode = code
		return r
	}
	ch := make(chan int16, 1)
	found, err := c.send(req.Group, false, func(g *group) { ch <- g.heartbeat(req) },
		func() { ch <- kerr.NotCoordinator.Code })
	switch {
	case err != nil:
		r.ErrorCode = sendCode(err)
	case !found:
		r.ErrorCode = kerr.UnknownMemberID.Code
	default:
		select {
		case r.ErrorCode = <-ch:
		case <-ctx.Done():
			r.ErrorCode = kerr.CoordinatorNotAvailable.Code
		}
	}
	return r
}

func (g *group) heartbeat(req *kmsg.HeartbeatRequest) int16 {
	if g.isConsumer() {
		return g.classicHeartbeatToConsumer(req)
	}
	if code := g.validateMember(req.MemberID, req.InstanceID); code != 0 {
		return code
	}
	if req.Generation != g.generation {
		return kerr.IllegalGeneration.Code
	}
	m := g.members[req.MemberID]
	switch g.state {
	case PreparingRebalance:
		g.armHeartbeat(m, m.session)
		return kerr.RebalanceInProgress.Code
	case CompletingRebalance, Stable:
		// Members may heartbeat between their JoinGroup and SyncGroup.
		g.armHeartbeat(m, m.session)
		return 0
	}
	return kerr.UnknownMemberID.Code
}
