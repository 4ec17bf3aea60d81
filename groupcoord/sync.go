package groupcoord

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"
)

// SyncGroup delivers the leader's assignment. A member's SyncGroup during
// CompletingRebalance is parked until the leader's arrives; the leader's
// (whose assignments are opaque bytes, returned byte for byte) makes the
// group Stable and answers every parked one. From v5 the protocol type and
// name must be given (else INCONSISTENT_GROUP_PROTOCOL, as Kafka answers),
// are checked against the group's and returned.
func (c *Coordinator) SyncGroup(ctx context.Context, req *kmsg.SyncGroupRequest) *kmsg.SyncGroupResponse {
	fail := func(code int16) *kmsg.SyncGroupResponse {
		r := req.ResponseKind().(*kmsg.SyncGroupResponse)
		r.ErrorCode = code
		return r
	}
	if req.Version >= 5 && (req.ProtocolType == nil || req.Protocol == nil) {
		// Kafka checks this first (KafkaApis.handleSyncGroupRequest,
		// SyncGroupRequest.areMandatoryProtocolTypeAndNamePresent).
		return fail(kerr.InconsistentGroupProtocol.Code)
	}
	if req.Group == "" {
		return fail(kerr.InvalidGroupID.Code)
	}
	if code := c.notReadyFor(req.Group); code != 0 {
		return fail(code)
	}
	ch := make(chan *kmsg.SyncGroupResponse, 1)
	reply := func(r *kmsg.SyncGroupResponse) { ch <- r }
	found, err := c.send(req.Group, false, func(g *group) { g.syncGroup(req, reply) },
		func() { reply(fail(kerr.NotCoordinator.Code)) })
	switch {
	case err != nil:
		return fail(sendCode(err))
	case !found:
		return fail(kerr.UnknownMemberID.Code)
	}
	select {
	case r := <-ch:
		return r
	case <-ctx.Done():
		return fail(kerr.CoordinatorNotAvailable.Code)
	}
}

func (g *group) syncGroup(req *kmsg.SyncGroupRequest, reply func(*kmsg.SyncGroupResponse)) {
	fail := func(code int16) {
		r := req.ResponseKind().(*kmsg.SyncGroupResponse)
		r.ErrorCode = code
		reply(r)
	}
	if code := g.validateMember(req.MemberID, req.InstanceID); code != 0 {
		fail(code)
		return
	}
	if req.Generation != g.generation {
		fail(kerr.IllegalGeneration.Code)
		return
	}
	if inconsistent(req.ProtocolType, g.protocolType) || inconsistent(req.Protocol, g.protocol) {
		fail(kerr.InconsistentGroupProtocol.Code)
		return
	}
	m := g.members[req.MemberID]
	switch g.state {
	case PreparingRebalance:
		fail(kerr.RebalanceInProgress.Code)
	case CompletingRebalance:
		g.replySyncError(m, kerr.RebalanceInProgress.Code) // an earlier SyncGroup of the same member
		m.sync = &parkedSync{version: req.Version, reply: reply}
		g.removePendingSync(m.id)
		if m.id != g.leader {
			return
		}
		assigned := make(map[string][]byte, len(req.GroupAssignment))
		for _, a := range req.GroupAssignment {
			assigned[a.MemberID] = a.MemberAssignment
		}
		for _, o := range g.members {
			a, ok := assigned[o.id]
			if !ok || a == nil {
				a = []byte{} // Kafka sends an empty assignment to members the leader left out
			}
			o.assignment = a
		}
		if err := g.saveState(); err != nil {
			// This node lost the group (with several nodes, a node paused
			// past its lease answers from a stale view): the assignment
			// was not saved and must not be handed out, or two
			// coordinators' members would own the same partitions. As
			// Kafka's resetAndPropagateAssignmentError: every parked
			// SyncGroup is answered NOT_COORDINATOR (the members look
			// the coordinator up again), and the group rebalances.
			for _, o := range g.sortedMembers() {
				o.assignment = nil
				g.replySyncError(o, kerr.NotCoordinator.Code)
			}
			g.prepareRebalance("the group's assignment could not be saved: this node no longer coordinates it")
			return
		}
		g.state = Stable
		g.log.Info("group is stable", zap.Int32("generation", g.generation), zap.Int("members", len(g.members)))
		for _, o := range g.sortedMembers() {
			if p := o.sync; p != nil {
				o.sync = nil
				p.reply(g.syncResponse(p.version, o))
				g.armHeartbeat(o, o.session)
			}
		}
	case Stable:
		g.removePendingSync(m.id)
		reply(g.syncResponse(req.Version, m))
	default:
		fail(kerr.UnknownMemberID.Code)
	}
}

func (g *group) syncResponse(version int16, m *member) *kmsg.SyncGroupResponse {
	r := kmsg.NewPtrSyncGroupResponse()
	r.Version = version
	pt, p := g.protocolType, g.protocol
	r.ProtocolType = &pt
	r.Protocol = &p
	r.MemberAssignment = m.assignment
	return r
}

// removePendingSync notes that a member sent its SyncGroup; the sync timer
// stops once everyone has.
func (g *group) removePendingSync(id string) {
	delete(g.pendingSync, id)
	if len(g.pendingSync) == 0 {
		g.cancelSyncTimer()
	}
}

// inconsistent: the request names a protocol (type) and it is not the
// group's (Kafka isProtocolInconsistent).
func inconsistent(req *string, group string) bool {
	return req != nil && group != "" && *req != group
}
