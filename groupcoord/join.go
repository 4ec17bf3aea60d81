package groupcoord

import (
	"context"
	"errors"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"

	"github.com/disgw/disgw/disbackend"
)

// JoinGroup joins a member to a group, waiting (parked) until the join phase
// of the rebalance ends, as Kafka's classic coordinator does. req is answered
// at its own version: MEMBER_ID_REQUIRED from v4 (KIP-394), SkipAssignment
// for a rejoining static leader from v9 (KIP-814). ctx bounds the wait; when
// it ends first the answer is COORDINATOR_NOT_AVAILABLE (the member stays
// and is timed out as Kafka would).
func (c *Coordinator) JoinGroup(ctx context.Context, client Client, req *kmsg.JoinGroupRequest) *kmsg.JoinGroupResponse {
	fail := func(code int16) *kmsg.JoinGroupResponse {
		r := req.ResponseKind().(*kmsg.JoinGroupResponse)
		r.ErrorCode = code
		r.Generation = -1
		r.MemberID = req.MemberID
		return r
	}
	if req.Group == "" {
		return fail(kerr.InvalidGroupID.Code)
	}
	if code := c.notReadyFor(req.Group); code != 0 {
		return fail(code)
	}
	session := time.Duration(req.SessionTimeoutMillis) * time.Millisecond
	if session < c.cfg.MinSessionTimeout || session > c.cfg.MaxSessionTimeout {
		return fail(kerr.InvalidSessionTimeout.Code)
	}
	ch := make(chan *kmsg.JoinGroupResponse, 1)
	reply := func(r *kmsg.JoinGroupResponse) { ch <- r }
	// A known member id needs the group in memory; an unknown one (or a
	// static member's first join) creates it.
	found, err := c.send(req.Group, req.MemberID == "", func(g *group) {
		g.join(client, req, reply)
	}, func() { reply(fail(kerr.NotCoordinator.Code)) })
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

func (g *group) join(client Client, req *kmsg.JoinGroupRequest, reply func(*kmsg.JoinGroupResponse)) {
	if g.isConsumer() {
		// A consumer group (KIP-848) with members: the classic member
		// joins it (docs/consumer-protocol.md §8.3; migration.go).
		g.classicJoinToConsumer(client, req, reply)
		return
	}
	if g.cg != nil {
		// An empty consumer group: a classic member's join turns it
		// into a classic group, its saved state deleted, its offsets
		// kept (Kafka: the consumer group tombstoned, the join
		// served by a new classic group; docs/consumer-protocol.md
		// §8.2). Commits and descriptions then see a classic group.
		g.log.Info("empty consumer group taken over by a classic member's join", zap.Int32("group_epoch", g.cg.Epoch))
		g.forgetConsumer()
	}
	fail := func(code int16, memberID string) {
		r := req.ResponseKind().(*kmsg.JoinGroupResponse)
		r.ErrorCode = code
		r.Generation = -1
		r.MemberID = memberID
		reply(r)
	}
	if !g.supportsProtocols(req.ProtocolType, req.Protocols) {
		fail(kerr.InconsistentGroupProtocol.Code, req.MemberID)
		return
	}
	if req.MemberID == "" {
		id := newMemberID(client.ID, req.InstanceID)
		if req.InstanceID != nil {
			if old, ok := g.static[*req.InstanceID]; ok {
				g.replaceStatic(old, id, client, req, reply)
				return
			}
			// Static members join at once, without MEMBER_ID_REQUIRED.
			g.addMember(id, client, req, reply)
			return
		}
		if req.Version >= 4 {
			// KIP-394: hand out the id and have the client join with it,
			// so a client that times out and retries is not a new member
			// each time.
			g.addPending(id, time.Duration(req.SessionTimeoutMillis)*time.Millisecond)
			fail(kerr.MemberIDRequired.Code, id)
			return
		}
		g.addMember(id, client, req, reply)
		return
	}
	if _, ok := g.pending[req.MemberID]; ok && req.InstanceID == nil {
		g.removePending(req.MemberID)
		g.addMember(req.MemberID, client, req, reply)
		return
	}
	if code := g.validateMember(req.MemberID, req.InstanceID); code != 0 {
		fail(code, req.MemberID)
		return
	}
	m := g.members[req.MemberID]
	switch g.state {
	case PreparingRebalance:
		g.updateMember(m, req, reply)
		g.maybePrepareRebalanceOrCompleteJoin("member rejoins during rebalance")
	case CompletingRebalance:
		if m.matches(req.Protocols) {
			// The member lost our JoinGroup response: send it again.
			reply(g.joinResponse(req.Version, m.id, g.leader == m.id))
			return
		}
		g.updateMember(m, req, reply)
		g.maybePrepareRebalanceOrCompleteJoin("member changed its metadata")
	case Stable:
		if g.leader == m.id || !m.matches(req.Protocols) {
			// A leader's join asks for a new assignment (say, its topics'
			// metadata changed); a changed subscription needs one.
			g.updateMember(m, req, reply)
			g.maybePrepareRebalanceOrCompleteJoin("leader rejoins or member changed its metadata")
			return
		}
		reply(g.joinResponse(req.Version, m.id, false))
	default:
		fail(kerr.UnknownMemberID.Code, req.MemberID)
	}
}

// addMember adds a new member, parked in JoinGroup, and rebalances.
func (g *group) addMember(id string, client Client, req *kmsg.JoinGroupRequest, reply func(*kmsg.JoinGroupResponse)) {
	m := &member{
		id:         id,
		instanceID: req.InstanceID,
		client:     client,
		isNew:      true,
		seq:        g.nextSeq,
	}
	g.nextSeq++
	if len(g.members) == 0 {
		g.protocolType = req.ProtocolType
	}
	g.members[id] = m
	g.hadMembers = true
	if g.leader == "" {
		g.leader = id
	}
	if req.InstanceID != nil {
		g.static[*req.InstanceID] = id
	}
	if g.state == PreparingRebalance && g.initial {
		g.newAdded = true // extends the initial delay
	}
	g.updateMember(m, req, reply)
	// A new member cannot heartbeat yet and its socket is muted while it
	// waits; time it out if the rebalance outlasts NewMemberJoinTimeout.
	g.armHeartbeat(m, g.c.cfg.NewMemberJoinTimeout)
	g.log.Debug("member joins", zap.String("member_id", id), zap.Stringp("instance_id", req.InstanceID))
	g.maybePrepareRebalanceOrCompleteJoin("new member joins")
}

// updateMember takes a JoinGroup's protocols and timeouts and parks it.
func (g *group) updateMember(m *member, req *kmsg.JoinGroupRequest, reply func(*kmsg.JoinGroupResponse)) {
	m.protocolType = req.ProtocolType
	m.protocols = req.Protocols
	m.session = time.Duration(req.SessionTimeoutMillis) * time.Millisecond
	m.rebalance = time.Duration(req.RebalanceTimeoutMillis) * time.Millisecond
	if req.Version == 0 {
		m.rebalance = m.session // v0 has no rebalance timeout: Kafka uses the session timeout
	}
	if m.join != nil {
		// The client gave up on its earlier JoinGroup and sent another (on
		// another connection: ours are answered in order). Answer the old
		// one so its caller does not wait for nothing.
		old := m.join
		m.join = nil
		r := kmsg.NewPtrJoinGroupResponse()
		r.Version = old.version
		r.ErrorCode = kerr.RebalanceInProgress.Code
		r.Generation = -1
		r.MemberID = m.id
		old.reply(r)
	} else {
		g.awaiting++
	}
	m.join = &parkedJoin{version: req.Version, reply: reply}
}

func (g *group) addPending(id string, session time.Duration) {
	p := &pendingMember{}
	p.timer = g.after(session, func() {
		if g.pending[id] != p {
			return
		}
		delete(g.pending, id)
		g.log.Debug("pending member expired", zap.String("member_id", id))
		if g.state == PreparingRebalance && g.allJoined() {
			g.completeJoin()
		}
	})
	g.pending[id] = p
}

func (g *group) removePending(id string) {
	if p := g.pending[id]; p != nil {
		p.timer.Stop()
		delete(g.pending, id)
	}
}

// replaceStatic handles a static member that joins with an unknown member id
// while its group.instance.id is known (KIP-345): the new member id takes the
// old member's place and assignment, and the old one is fenced. In a Stable
// group there is no rebalance unless the protocol the group would select
// changes (Kafka updateStaticMemberThenRebalanceOrCompleteJoin): the
// member's protocols, metadata bytes included, are replaced, but changed
// metadata of the same protocol does not rebalance, as in Kafka. A leader
// gets SkipAssignment and the member list at JoinGroup v9 (KIP-814) and is
// told at older versions that the old id leads, so it does not compute an
// assignment nobody would receive.
func (g *group) replaceStatic(oldID, newID string, client Client, req *kmsg.JoinGroupRequest, reply func(*kmsg.JoinGroupResponse)) {
	old := g.members[oldID]
	currentLeader := g.leader
	g.replyJoinError(old, kerr.FencedInstanceID.Code)
	g.replySyncError(old, kerr.FencedInstanceID.Code)
	if old.hb != nil {
		old.hb.Stop()
	}
	delete(g.members, oldID)
	m := &member{
		id:           newID,
		instanceID:   req.InstanceID,
		client:       client,
		protocolType: old.protocolType,
		protocols:    old.protocols,
		session:      old.session,
		rebalance:    old.rebalance,
		assignment:   old.assignment,
		seq:          old.seq,
	}
	g.members[newID] = m
	g.static[*req.InstanceID] = newID
	if g.leader == oldID {
		g.leader = newID
	}
	if g.pendingSync[oldID] {
		delete(g.pendingSync, oldID)
		g.pendingSync[newID] = true
	}
	g.log.Info("static member replaced", zap.String("instance_id", *req.InstanceID),
		zap.String("member_id", newID), zap.String("old_member_id", oldID))
	g.armHeartbeat(m, time.Duration(req.SessionTimeoutMillis)*time.Millisecond)
	g.updateMember(m, req, reply)
	switch g.state {
	case Stable:
		if g.selectProtocol() == g.protocol {
			m.join = nil
			g.awaiting--
			if err := g.saveState(); err != nil { // the new member id holds the old one's place
				if errors.Is(err, disbackend.ErrNotCoordinator) {
					// This node lost the group: the member looks the
					// coordinator up again (Kafka answers the store's
					// error with no member id).
					r := kmsg.NewPtrJoinGroupResponse()
					r.Version, r.ErrorCode, r.Generation = req.Version, kerr.NotCoordinator.Code, -1
					reply(r)
					return
				}
				g.logSaveFailed(err)
			}
			r := g.joinResponse(req.Version, newID, false)
			r.LeaderID = currentLeader
			if g.leader == newID && req.Version >= 9 {
				r.LeaderID = newID
				r.Members = g.memberList()
				r.SkipAssignment = true
			}
			reply(r)
			return
		}
		// The group's protocol would change: a new assignment is needed.
		g.maybePrepareRebalanceOrCompleteJoin("static member rejoins with a change of protocol")
	case CompletingRebalance:
		// The leader may already be assigning to the old member id.
		g.prepareRebalance("static member rejoins during CompletingRebalance")
	case PreparingRebalance:
		g.maybeCompleteJoinPhase()
	}
}

// maybePrepareRebalanceOrCompleteJoin starts a rebalance if the group can
// (Empty, Stable, CompletingRebalance), else tries to end the join phase.
func (g *group) maybePrepareRebalanceOrCompleteJoin(reason string) {
	switch g.state {
	case Empty, Stable, CompletingRebalance:
		g.prepareRebalance(reason)
	default:
		g.maybeCompleteJoinPhase()
	}
}

// maybeCompleteJoinPhase ends the join phase when every member has
// rejoined, except during a new group's initial delay, which always runs out.
func (g *group) maybeCompleteJoinPhase() {
	if g.state == PreparingRebalance && g.allJoined() && !g.initial {
		g.completeJoin()
	}
}

// allJoined: every member has a parked JoinGroup and no handed-out member id
// is still to join (Kafka hasAllMembersJoined).
func (g *group) allJoined() bool {
	return len(g.members) == g.awaiting && len(g.pending) == 0
}

// prepareRebalance moves the group to PreparingRebalance: parked SyncGroups
// are told REBALANCE_IN_PROGRESS, and the join phase ends when everyone has
// rejoined or at the rebalance timeout. A group coming from Empty waits the
// initial rebalance delay instead, extended while members keep arriving.
func (g *group) prepareRebalance(reason string) {
	if g.state == CompletingRebalance {
		for _, m := range g.members {
			m.assignment = nil
			g.replySyncError(m, kerr.RebalanceInProgress.Code)
		}
	}
	g.cancelSyncTimer()
	clear(g.pendingSync)
	g.initial = g.state == Empty
	g.state = PreparingRebalance
	g.c.cfg.Metrics.Rebalance()
	g.log.Info("preparing to rebalance", zap.String("reason", reason), zap.Int32("generation", g.generation),
		zap.Int("members", len(g.members)))
	if g.initial {
		g.newAdded = false
		delay := g.c.cfg.InitialRebalanceDelay
		remaining := max(g.rebalanceTimeout()-delay, 0)
		g.armJoinTimer(delay, func() { g.initialDelayExpired(delay, remaining) })
		return
	}
	if g.allJoined() {
		g.completeJoin()
		return
	}
	g.armJoinTimer(g.rebalanceTimeout(), g.completeJoin)
}

// initialDelayExpired extends the initial delay while members keep joining,
// up to the rebalance timeout (Kafka tryCompleteInitialRebalanceElseSchedule).
func (g *group) initialDelayExpired(delay, remaining time.Duration) {
	if g.newAdded && remaining > 0 {
		g.newAdded = false
		next := min(g.c.cfg.InitialRebalanceDelay, remaining)
		rest := max(remaining-delay, 0)
		g.armJoinTimer(next, func() { g.initialDelayExpired(next, rest) })
		return
	}
	g.completeJoin()
}

func (g *group) armJoinTimer(d time.Duration, fn func()) {
	g.cancelJoinTimer()
	g.timerSeq++
	seq := g.timerSeq
	g.joinTimer = g.after(d, func() {
		if g.timerSeq != seq {
			return
		}
		g.joinTimer = nil
		fn()
	})
}

func (g *group) cancelJoinTimer() {
	if g.joinTimer != nil {
		g.joinTimer.Stop()
		g.joinTimer = nil
		g.timerSeq++
	}
}

func (g *group) armSyncTimer(d time.Duration, fn func()) {
	g.cancelSyncTimer()
	g.timerSeq++
	seq := g.timerSeq
	g.syncTimer = g.after(d, func() {
		if g.timerSeq != seq {
			return
		}
		g.syncTimer = nil
		fn()
	})
}

func (g *group) cancelSyncTimer() {
	if g.syncTimer != nil {
		g.syncTimer.Stop()
		g.syncTimer = nil
		g.timerSeq++
	}
}

// completeJoin ends the join phase (Kafka completeClassicGroupJoin): dynamic
// members that did not rejoin are removed (static ones stay until their
// session ends), the generation advances, the protocol is chosen, and every
// parked JoinGroup is answered; the leader's answer carries every member's
// metadata for the chosen protocol. Members then have the rebalance timeout
// to send SyncGroup.
func (g *group) completeJoin() {
	if g.state != PreparingRebalance {
		return
	}
	g.cancelJoinTimer()
	g.initial = false
	for _, m := range g.sortedMembers() {
		if m.join == nil && m.instanceID == nil {
			g.log.Info("member did not rejoin in time", zap.String("member_id", m.id))
			g.removeMember(m, kerr.UnknownMemberID.Code)
		}
	}
	if len(g.members) > 0 && !g.electJoinedLeader() {
		// Only static members that have not rejoined are left: wait for
		// them, or for their sessions to end.
		g.armJoinTimer(g.rebalanceTimeout(), g.completeJoin)
		return
	}
	g.generation++
	if len(g.members) == 0 {
		g.becameEmpty()
		return
	}
	g.protocol = g.selectProtocol()
	g.state = CompletingRebalance
	g.log.Info("join phase complete", zap.Int32("generation", g.generation), zap.String("protocol", g.protocol),
		zap.String("leader", g.leader), zap.Int("members", len(g.members)))
	for _, m := range g.sortedMembers() {
		if p := m.join; p != nil {
			m.join = nil
			g.awaiting--
			p.reply(g.joinResponse(p.version, m.id, m.id == g.leader))
		}
		m.isNew = false
		g.armHeartbeat(m, m.session)
		g.pendingSync[m.id] = true
	}
	gen := g.generation
	g.armSyncTimer(g.rebalanceTimeout(), func() { g.syncExpired(gen) })
}

// electJoinedLeader keeps the leader if it rejoined, else makes the earliest
// rejoined member the leader; false if nobody rejoined.
func (g *group) electJoinedLeader() bool {
	if l := g.members[g.leader]; l != nil && l.join != nil {
		return true
	}
	for _, m := range g.sortedMembers() {
		if m.join != nil {
			g.leader = m.id
			return true
		}
	}
	return false
}

// syncExpired removes the members that got their JoinGroup response but sent
// no SyncGroup within the rebalance timeout, and rebalances.
func (g *group) syncExpired(gen int32) {
	if gen != g.generation || (g.state != CompletingRebalance && g.state != Stable) || len(g.pendingSync) == 0 {
		return
	}
	for id := range g.pendingSync {
		if m := g.members[id]; m != nil {
			g.log.Info("member sent no SyncGroup in time", zap.String("member_id", id))
			g.removeMember(m, kerr.UnknownMemberID.Code)
		}
	}
	g.prepareRebalance("members sent no SyncGroup in time")
}

// joinResponse is a successful JoinGroup answer for the current generation.
func (g *group) joinResponse(version int16, memberID string, withMembers bool) *kmsg.JoinGroupResponse {
	r := kmsg.NewPtrJoinGroupResponse()
	r.Version = version
	r.Generation = g.generation
	pt, p := g.protocolType, g.protocol
	r.ProtocolType = &pt
	r.Protocol = &p
	r.LeaderID = g.leader
	r.MemberID = memberID
	if withMembers {
		r.Members = g.memberList()
	}
	return r
}

// memberList is every member's metadata for the chosen protocol, in join
// order, for the leader.
func (g *group) memberList() []kmsg.JoinGroupResponseMember {
	ms := g.sortedMembers()
	out := make([]kmsg.JoinGroupResponseMember, 0, len(ms))
	for _, m := range ms {
		jm := kmsg.NewJoinGroupResponseMember()
		jm.MemberID = m.id
		jm.InstanceID = m.instanceID
		jm.ProtocolMetadata = m.metadata(g.protocol)
		out = append(out, jm)
	}
	return out
}
