package groupcoord

// Online migration between classic and consumer groups
// (docs/consumer-protocol.md §8): a consumer-protocol member joining a
// classic group with members upgrades it (the classic members become
// consumer group members that speak the classic protocol); classic
// JoinGroup, SyncGroup, Heartbeat and LeaveGroup to a consumer group with
// members are served by the consumer group (consumer/classic.go); when the
// last consumer-protocol member is gone, the classic members left make it a
// classic group again, which rebalances. group.consumer.migration.policy
// (consumer.Config.MigrationPolicy) says which way is allowed.

import (
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"

	"github.com/disgw/disgw/groupcoord/consumer"
)

// noTopics is the topics view of a Client without one: no topic exists.
type noTopics struct{}

func (noTopics) Partitions(string) (int32, bool) { return 0, false }
func (noTopics) Names() []string                 { return nil }
func (noTopics) ID(string) ([16]byte, bool)      { return [16]byte{}, false }
func (noTopics) Name([16]byte) (string, bool)    { return "", false }
func clientTopics(c Client) consumer.Topics {
	if c.Topics == nil {
		return noTopics{}
	}
	return c.Topics
}

func classicProtocols(ps []kmsg.JoinGroupRequestProtocol) []consumer.ClassicProtocol {
	out := make([]consumer.ClassicProtocol, len(ps))
	for i, p := range ps {
		out[i] = consumer.ClassicProtocol{Name: p.Name, Metadata: p.Metadata}
	}
	return out
}

// upgradeCandidate is the consumer group this classic group with members
// becomes (GMM.validateOnlineUpgrade, convertToConsumerGroup); nothing of
// the classic group changes until dropClassicMembers. Errors: *consumer.Error
// GROUP_ID_NOT_FOUND with Kafka's message.
func (g *group) upgradeCandidate(topics consumer.Topics) (*consumer.Group, error) {
	if err := consumer.ValidateUpgrade(g.c.consumerConfig(g.id), g.id, g.protocolType, len(g.members)); err != nil {
		return nil, err
	}
	var ms []consumer.ClassicMember
	for _, m := range g.sortedMembers() {
		cm := consumer.ClassicMember{ID: m.id, ClientID: m.client.ID, ClientHost: m.client.Host, RebalanceTimeout: m.rebalance,
			SessionTimeout: m.session, Protocols: classicProtocols(m.protocols), Assignment: m.assignment}
		if m.instanceID != nil {
			cm.InstanceID = *m.instanceID
		}
		ms = append(ms, cm)
	}
	return consumer.FromClassic(topics, g.id, g.generation, g.protocol, ms)
}

// dropClassicMembers ends the classic group a consumer group took over:
// parked JoinGroup and SyncGroup requests answer REBALANCE_IN_PROGRESS
// (completeAllJoinFutures, completeAllSyncFutures), its timers stop, and
// its members, pending member ids and rebalance state are forgotten.
func (g *group) dropClassicMembers() {
	for _, m := range g.members {
		g.replyJoinError(m, kerr.RebalanceInProgress.Code)
		g.replySyncError(m, kerr.RebalanceInProgress.Code)
		stopTimer(m.hb)
	}
	for id, p := range g.pending {
		p.timer.Stop()
		delete(g.pending, id)
	}
	g.cancelJoinTimer()
	g.cancelSyncTimer()
	clear(g.members)
	clear(g.static)
	clear(g.pendingSync)
	g.awaiting = 0
	g.state, g.protocol, g.leader, g.hadMembers = Empty, "", "", false
}

// downgradeAfter turns the consumer group into a classic group when a
// change that removed members (from n to fewer) left only classic members
// and the policy allows a downgrade (GMM.consumerGroupFenceMembers,
// validateOnlineDowngradeWithFencedMembers); epoch is the group epoch
// before the change, the classic group's generation. It reports whether
// it did.
func (g *group) downgradeAfter(epoch int32, n int) bool {
	if len(g.cg.Members) >= n || !g.cg.CanDowngrade(g.c.consumerConfig(g.id), nil) {
		return false
	}
	g.downgrade(epoch, "downgrade from consumer group for member leaving")
	return true
}

// downgrade makes the consumer group, whose members all speak the classic
// protocol, a classic group (GMM.convertToClassicGroup,
// ClassicGroup.fromConsumerGroup): generation epoch, protocol type
// "consumer", the protocol chosen by vote, each member's assignment its
// target assignment in the ConsumerProtocol version of its subscription;
// it is saved in place of the consumer group's state, then rebalances so
// the members join it.
func (g *group) downgrade(epoch int32, reason string) {
	ms := g.cg.DowngradeMembers(nil)
	g.stopConsumerTimers()
	g.cg = nil
	g.generation, g.protocolType, g.state, g.leader = epoch, "consumer", Stable, ""
	targets := map[string]map[string][]int32{}
	for _, cm := range ms {
		m := &member{id: cm.ID, client: Client{ID: cm.ClientID, Host: cm.ClientHost}, protocolType: "consumer",
			session: cm.SessionTimeout, rebalance: cm.RebalanceTimeout, seq: g.nextSeq}
		g.nextSeq++
		if cm.InstanceID != "" {
			id := cm.InstanceID
			m.instanceID = &id
			g.static[id] = m.id
		}
		for _, p := range cm.Protocols {
			m.protocols = append(m.protocols, kmsg.JoinGroupRequestProtocol{Name: p.Name, Metadata: p.Metadata})
		}
		g.members[m.id] = m
		targets[m.id] = cm.Target
		if g.leader == "" {
			g.leader = m.id
		}
	}
	g.protocol = g.selectProtocol()
	for _, m := range g.members {
		m.assignment = consumer.EncodeAssignment(targets[m.id], m.metadata(g.protocol))
	}
	g.hadMembers = true
	if err := g.saveState(); err != nil {
		g.logSaveFailed(err)
	}
	for _, m := range g.members {
		g.armHeartbeat(m, m.session)
	}
	g.log.Info("consumer group downgraded to a classic group: only classic members are left",
		zap.Int32("generation", epoch), zap.Int("members", len(g.members)), zap.String("protocol", g.protocol))
	g.prepareRebalance(reason)
}

// classicJoinToConsumer serves a classic JoinGroup to a consumer group
// with members (GMM.classicGroupJoinToConsumerGroup): answered at once,
// without the member list (every classic member is a follower), the
// generation the member's epoch; its session timer runs with its own
// session timeout, and a sync timer of its rebalance timeout fences it if
// no SyncGroup follows. A refused join answers without a member id (Kafka
// throws, and GroupCoordinatorService.joinGroup's exceptionally answers
// only the error code), MEMBER_ID_REQUIRED with the new one.
func (g *group) classicJoinToConsumer(client Client, req *kmsg.JoinGroupRequest, reply func(*kmsg.JoinGroupResponse)) {
	fail := func(code int16, memberID string) {
		r := req.ResponseKind().(*kmsg.JoinGroupResponse)
		r.ErrorCode, r.Generation, r.MemberID = code, -1, memberID
		reply(r)
	}
	cfg := g.c.consumerConfig(g.id)
	session := time.Duration(req.SessionTimeoutMillis) * time.Millisecond
	rebalance := time.Duration(req.RebalanceTimeoutMillis) * time.Millisecond
	if req.Version == 0 || rebalance <= 0 {
		rebalance = session
	}
	jr := consumer.ClassicJoinRequest{MemberID: req.MemberID, ProtocolType: req.ProtocolType, Protocols: classicProtocols(req.Protocols),
		SessionTimeout: session, RebalanceTimeout: rebalance, ClientID: client.ID, ClientHost: client.Host,
		RequireKnownMemberID: req.Version >= 4 && req.MemberID == "" && req.InstanceID == nil}
	if req.InstanceID != nil {
		jr.InstanceID = *req.InstanceID
	}
	before, err := g.cg.MarshalState()
	if err != nil {
		fail(kerr.UnknownServerError.Code, "")
		return
	}
	res, timers, err := g.cg.ClassicJoin(cfg, clientTopics(client), jr)
	if err != nil {
		g.log.Info("classic member refused by the consumer group", zap.String("member_id", req.MemberID),
			zap.String("client_id", client.ID), zap.String("migration_policy", cfg.MigrationPolicy), zap.Error(err))
		fail(consumerCode(err), "")
		return
	}
	if res.MemberIDRequired {
		fail(kerr.MemberIDRequired.Code, res.MemberID)
		return
	}
	if err := g.saveConsumer(before); err != nil {
		g.log.Warn("saving the consumer group failed; the classic join is refused and undone", zap.Error(err))
		if restored, lerr := consumer.LoadGroup(before); lerr == nil {
			g.cg = restored
		}
		fail(g.c.backendCode(err), "")
		return
	}
	g.applyConsumerTimers(timers)
	ts := g.cgTimer(res.MemberID)
	stopTimer(ts.join)
	ts.join = nil
	ts.joinSeq++
	g.armClassicSync(res.MemberID, rebalance)
	r := req.ResponseKind().(*kmsg.JoinGroupResponse)
	r.MemberID, r.Generation = res.MemberID, res.Generation
	protocolType, protocol := "consumer", res.Protocol
	r.ProtocolType, r.Protocol = &protocolType, &protocol
	r.Members = []kmsg.JoinGroupResponseMember{}
	g.log.Info("classic member joined the consumer group", zap.String("member_id", res.MemberID), zap.Int32("member_epoch", res.Generation))
	reply(r)
	if res.Replaced && g.cg.CanDowngrade(cfg, nil) {
		// A classic static member took the last consumer-protocol
		// member's place (GMM.validateOnlineDowngradeWithReplacedMember):
		// a classic group again, which the joiner's SyncGroup finds
		// rebalancing, so it joins it.
		g.downgrade(g.cg.Epoch, "downgrade from consumer group: a classic static member replaced the last consumer-protocol member")
	}
}

// classicSyncToConsumer serves a classic SyncGroup to a consumer group
// with members (GMM.classicGroupSyncToConsumerGroup).
func (g *group) classicSyncToConsumer(req *kmsg.SyncGroupRequest, reply func(*kmsg.SyncGroupResponse)) {
	r := req.ResponseKind().(*kmsg.SyncGroupResponse)
	instance := ""
	if req.InstanceID != nil {
		instance = *req.InstanceID
	}
	assignment, err := g.cg.ClassicSync(req.MemberID, instance, req.Generation, req.ProtocolType, req.Protocol)
	if err != nil {
		if consumer.IsRebalanceInProgress(err) {
			g.armClassicJoin(req.MemberID)
		}
		r.ErrorCode = consumerCode(err)
		reply(r)
		return
	}
	ts := g.cgTimer(req.MemberID)
	stopTimer(ts.sync)
	ts.sync = nil
	ts.syncSeq++
	g.applyConsumerTimers(consumer.Timers{Session: []string{req.MemberID}})
	r.ProtocolType, r.Protocol, r.MemberAssignment = req.ProtocolType, req.Protocol, assignment
	reply(r)
}

// classicHeartbeatToConsumer serves a classic Heartbeat to a consumer
// group with members (GMM.classicGroupHeartbeatToConsumerGroup).
func (g *group) classicHeartbeatToConsumer(req *kmsg.HeartbeatRequest) int16 {
	instance := ""
	if req.InstanceID != nil {
		instance = *req.InstanceID
	}
	rebalance, err := g.cg.ClassicHeartbeat(req.MemberID, instance, req.Generation)
	if err != nil {
		return consumerCode(err)
	}
	g.applyConsumerTimers(consumer.Timers{Session: []string{req.MemberID}})
	if rebalance {
		g.armClassicJoin(req.MemberID)
		return kerr.RebalanceInProgress.Code
	}
	return 0
}

// classicLeaveToConsumer serves a classic LeaveGroup to a consumer group
// with members (GMM.classicGroupLeaveToConsumerGroup): the members named
// are fenced together, which may downgrade the group.
func (g *group) classicLeaveToConsumer(members []kmsg.LeaveGroupRequestMember) []kmsg.LeaveGroupResponseMember {
	out, ids := g.cg.ClassicLeave(members)
	if len(ids) > 0 {
		g.log.Info("members left the consumer group through LeaveGroup", zap.Strings("member_ids", ids))
		g.consumerChange(func() consumer.Timers { return g.cg.FenceMembers(ids) })
	}
	return out
}

func (g *group) cgTimer(id string) *cgTimers {
	if g.cgTimers == nil {
		g.cgTimers = map[string]*cgTimers{}
	}
	ts := g.cgTimers[id]
	if ts == nil {
		ts = &cgTimers{}
		g.cgTimers[id] = ts
	}
	return ts
}

// armClassicJoin arms a classic member's join timer unless one runs
// (scheduleConsumerGroupJoinTimeoutIfAbsent): told to rebalance, the
// member is fenced if it does not join within its rebalance timeout.
func (g *group) armClassicJoin(id string) {
	m := g.cg.Members[id]
	if m == nil {
		return
	}
	ts := g.cgTimer(id)
	if ts.join != nil {
		return
	}
	ts.joinSeq++
	seq := ts.joinSeq
	ts.join = g.after(m.RebalanceTimeout, func() {
		if cur := g.cgTimers[id]; cur == nil || cur.joinSeq != seq || g.cg == nil {
			return
		}
		g.cgTimers[id].join = nil
		g.log.Info("consumer group member fenced: the classic member failed to join within the rebalance timeout", zap.String("member_id", id))
		g.consumerChange(func() consumer.Timers { return g.cg.Fence(id) })
	})
}

// armClassicSync (re)arms a classic member's sync timer
// (scheduleConsumerGroupSyncTimeout): fenced if no SyncGroup follows its
// JoinGroup within d.
func (g *group) armClassicSync(id string, d time.Duration) {
	ts := g.cgTimer(id)
	stopTimer(ts.sync)
	ts.syncSeq++
	seq := ts.syncSeq
	ts.sync = g.after(d, func() {
		if cur := g.cgTimers[id]; cur == nil || cur.syncSeq != seq || g.cg == nil {
			return
		}
		g.cgTimers[id].sync = nil
		g.log.Info("consumer group member fenced: the member failed to sync within timeout", zap.String("member_id", id))
		g.consumerChange(func() consumer.Timers { return g.cg.Fence(id) })
	})
}
