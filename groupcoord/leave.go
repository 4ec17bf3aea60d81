package groupcoord

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"
)

// LeaveGroup removes members: one (v0-2, which the gateway passes as a
// one-member list) or a batch (v3+, KIP-345), each by member id or, for
// static members, by group.instance.id alone (admin removal). The answer has
// one entry per member; its top-level error is set only for the whole group.
func (c *Coordinator) LeaveGroup(ctx context.Context, groupID string, members []kmsg.LeaveGroupRequestMember) *kmsg.LeaveGroupResponse {
	r := kmsg.NewPtrLeaveGroupResponse()
	each := func(code int16) *kmsg.LeaveGroupResponse {
		for _, lm := range members {
			rm := kmsg.NewLeaveGroupResponseMember()
			rm.MemberID, rm.InstanceID, rm.ErrorCode = lm.MemberID, lm.InstanceID, code
			r.Members = append(r.Members, rm)
		}
		return r
	}
	if groupID == "" {
		r.ErrorCode = kerr.InvalidGroupID.Code
		return r
	}
	if code := c.notReadyFor(groupID); code != 0 {
		r.ErrorCode = code
		return r
	}
	ch := make(chan []kmsg.LeaveGroupResponseMember, 1)
	found, err := c.send(groupID, false, func(g *group) { ch <- g.leave(members) }, func() { ch <- nil })
	switch {
	case err != nil:
		r.ErrorCode = sendCode(err)
		return r
	case !found:
		return each(kerr.UnknownMemberID.Code)
	}
	select {
	case ms := <-ch:
		if ms == nil {
			r.ErrorCode = kerr.NotCoordinator.Code
		}
		r.Members = ms
	case <-ctx.Done():
		r.ErrorCode = kerr.CoordinatorNotAvailable.Code
	}
	return r
}

func (g *group) leave(members []kmsg.LeaveGroupRequestMember) []kmsg.LeaveGroupResponseMember {
	if g.isConsumer() {
		return g.classicLeaveToConsumer(members)
	}
	out := make([]kmsg.LeaveGroupResponseMember, 0, len(members))
	left := 0
	for _, lm := range members {
		rm := kmsg.NewLeaveGroupResponseMember()
		rm.MemberID, rm.InstanceID = lm.MemberID, lm.InstanceID
		reason := ""
		if lm.Reason != nil {
			reason = *lm.Reason
		}
		switch {
		case lm.MemberID == "":
			// Admin removal of a static member by instance id.
			id, ok := "", false
			if lm.InstanceID != nil {
				id, ok = g.static[*lm.InstanceID]
			}
			if !ok {
				rm.ErrorCode = kerr.UnknownMemberID.Code
				break
			}
			g.log.Info("member leaves", zap.String("member_id", id), zap.String("reason", reason))
			g.removeMember(g.members[id], kerr.UnknownMemberID.Code)
			left++
		case g.pending[lm.MemberID] != nil:
			g.removePending(lm.MemberID)
			left++
		default:
			if code := g.validateMember(lm.MemberID, lm.InstanceID); code != 0 {
				rm.ErrorCode = code
				break
			}
			g.log.Info("member leaves", zap.String("member_id", lm.MemberID), zap.String("reason", reason))
			g.removeMember(g.members[lm.MemberID], kerr.UnknownMemberID.Code)
			left++
		}
		out = append(out, rm)
	}
	if left > 0 {
		switch g.state {
		case Stable, CompletingRebalance:
			g.maybePrepareRebalanceOrCompleteJoin("members left")
		case PreparingRebalance:
			g.maybeCompleteJoinPhase()
		}
	}
	return out
}
