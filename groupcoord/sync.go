package groupcoord

import (
	"context"
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"

	"github.com/disgw/disgw/disbackend"
	"github.com/disgw/disgw/internal/errmap"
)

// SyncGroup delivers the leader's assignment. A member's SyncGroup during
// CompletingRebalance is parked until the leader's arrives; the leader's
// (whose assignments are opaque bytes, returned byte for byte) saves the
// group's state (persist.go), makes the group Stable and answers every
// parked one. With several nodes (Config.Owns set) a save that fails
// fails the rebalance instead: every parked SyncGroup answers
// NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE or UNKNOWN_SERVER_ERROR
// (saveErrorCode) and the members rejoin (failRebalance). From v5 the
// protocol type and name must be given (else INCONSISTENT_GROUP_PROTOCOL,
// as Kafka answers), are checked against the group's and returned.
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
	if g.isConsumer() {
		g.classicSyncToConsumer(req, reply)
		return
	}
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
			// With several nodes the saved state is what the next
			// coordinator restores, so an assignment not saved must not
			// be handed out; so too whenever the backend refuses the save
			// because this node no longer coordinates the group (only a
			// node of several can be told so).
			if g.c.cfg.Owns != nil || errors.Is(err, disbackend.ErrNotCoordinator) {
				g.failRebalance(err)
				return
			}
			g.logSaveFailed(err) // one node: only a restart of this node would read it back
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

// failRebalance ends a rebalance whose state could not be saved, as
// Kafka's coordinator does when it cannot write the group's assignment
// (GroupMetadataManager.classicGroupSyncToClassicGroup's append callback:
// resetAndPropagateAssignmentWithError, then
// maybePrepareRebalanceOrCompleteJoin): every parked SyncGroup, the
// leader's included, answers the save's error (saveErrorCode) with no
// assignment, each member so answered has its session timer started again,
// and the group goes to PreparingRebalance, so the members rejoin and a
// later SyncGroup of this generation answers REBALANCE_IN_PROGRESS. The
// group is never Stable with an assignment its saved state does not hold:
// with several nodes the node the group moves to restores the saved
// state (docs/cluster.md §6), and members holding partitions of a
// generation it never heard of would lose them there.
func (g *group) failRebalance(err error) {
	code, mapped := saveErrorCode(err)
	level := zap.WarnLevel
	if !mapped {
		level = zap.ErrorLevel
	}
	g.log.Log(level, "saving the group's state failed: the rebalance fails and its members rejoin",
		zap.Int32("generation", g.generation), zap.Int16("error_code", code), zap.Error(err))
	for _, m := range g.sortedMembers() {
		if m.sync != nil {
			g.replySyncError(m, code)
			g.armHeartbeat(m, m.session)
		}
	}
	g.prepareRebalance("saving the group's state failed")
}

// saveRows map the error of a failed save of a group's state to the code
// the rebalance's SyncGroups answer, as Kafka maps the error of its write
// to __consumer_offsets (GroupMetadataManager
// .appendGroupMetadataErrorToResponseError): a coordinator that lost the
// group (NOT_LEADER_OR_FOLLOWER there) answers NOT_COORDINATOR; storage
// unavailable or too slow (REQUEST_TIMED_OUT, NOT_ENOUGH_REPLICAS,
// UNKNOWN_TOPIC_OR_PARTITION there) COORDINATOR_NOT_AVAILABLE. Clients
// look the coordinator up again and rejoin on both.
var saveRows = []errmap.Row{
	{Err: disbackend.ErrNotCoordinator, Code: kerr.NotCoordinator}, // the group moved, or this node's lease lapsed
	{Err: disbackend.ErrNotLeader, Code: kerr.NotCoordinator},
	{Err: disbackend.ErrClosed, Code: kerr.NotCoordinator},
	{Err: errClosed, Code: kerr.NotCoordinator},
	{Err: disbackend.ErrUnavailable, Code: kerr.CoordinatorNotAvailable},
	{Err: disbackend.ErrStorageFull, Code: kerr.CoordinatorNotAvailable},
	{Err: context.DeadlineExceeded, Code: kerr.CoordinatorNotAvailable},
	{Err: context.Canceled, Code: kerr.CoordinatorNotAvailable},
	{Err: disbackend.ErrStreamNotFound, Code: kerr.CoordinatorNotAvailable},
	{Err: disbackend.ErrPartitionNotFound, Code: kerr.CoordinatorNotAvailable},
}

// saveErrorCode is the Kafka code for a failed save of a group's state
// (saveRows); any other error (a state over the backend's record size, as
// Kafka's MESSAGE_TOO_LARGE, or an error the backend does not classify)
// is UNKNOWN_SERVER_ERROR, with mapped false (the caller logs it at
// Error).
func saveErrorCode(err error) (code int16, mapped bool) {
	for _, row := range saveRows {
		if errors.Is(err, row.Err) {
			return row.Code.Code, true
		}
	}
	return kerr.UnknownServerError.Code, false
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
