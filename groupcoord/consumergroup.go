package groupcoord

// Consumer groups (KIP-848, group.protocol=consumer): a group whose cg is
// set is served by ConsumerGroupHeartbeat (groupcoord/consumer holds its
// state and rules; docs/consumer-protocol.md) on the group's goroutine,
// like a classic group's requests; its committed offsets, ownership with
// several nodes and retention are the group's as for a classic group. A
// group id is one kind at a time (an empty one takes the other kind's first
// join); with members, a consumer-protocol join upgrades a classic group and
// a consumer group serves classic members (migration.go, §8).

import (
	"bytes"
	"context"
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"

	"github.com/disgw/disgw/groupcoord/consumer"
)

// cgTimers are a consumer group member's session and rebalance timers;
// seq makes an expiry of a timer since re-armed or stopped a no-op.
// join and sync are a classic member's (migration.go).
type cgTimers struct {
	session, rebalance, join, sync             Timer
	sessionSeq, rebalanceSeq, joinSeq, syncSeq uint64
}

func (ts *cgTimers) stop() {
	stopTimer(ts.session)
	stopTimer(ts.rebalance)
	stopTimer(ts.join)
	stopTimer(ts.sync)
}

// isConsumer reports whether the group is a consumer group with members:
// a classic JoinGroup may not take it, nor DeleteGroups or the offsets
// sweep. An empty consumer group stays in memory (ListGroups and
// ConsumerGroupDescribe show it Empty, as Kafka keeps it) until its
// offsets are deleted (deleteApp) or, without offsets, the sweep forgets
// it (ExpireOffsets).
func (g *group) isConsumer() bool { return g.cg != nil && len(g.cg.Members) > 0 }

// forgetConsumer turns an empty consumer group back into no group: its
// saved state is deleted, and it may leave memory.
func (g *group) forgetConsumer() {
	if g.cg == nil || len(g.cg.Members) > 0 {
		return
	}
	g.cg = nil
	g.saved = true // saved by an earlier heartbeat, maybe of an earlier instance
	g.forgetState()
	g.mu.Lock()
	g.summary = summary{state: g.state, protocolType: g.protocolType}
	g.mu.Unlock()
}

// noteEmpty starts the offsets-retention clock of a consumer group that
// lost its last member (as becameEmpty does for a classic group).
func (g *group) noteEmpty(hadMembers bool) {
	if !hadMembers || len(g.cg.Members) > 0 {
		return
	}
	c := g.c
	c.mu.Lock()
	if c.groups[g.id] == g {
		c.emptySince[g.id] = c.clock.Now()
	}
	c.mu.Unlock()
	g.log.Info("consumer group is empty", zap.Int32("group_epoch", g.cg.Epoch))
}

// ConsumerGroupHeartbeat serves ConsumerGroupHeartbeat (API key 68,
// v0-1): the checks before the group (consumer.ValidateHeartbeat), then,
// on the group's goroutine, consumer.Group.Heartbeat against topics, the
// group's state saved (GroupStateStore) before the answer when it changed,
// and the member's timers armed. Errors are the response's ErrorCode and
// ErrorMessage: Kafka's (docs/consumer-protocol.md §2), GROUP_ID_NOT_FOUND
// for a join-less heartbeat to a group not in memory or to a classic group
// with members, COORDINATOR_NOT_AVAILABLE when the save failed (the change
// is undone), NOT_COORDINATOR and COORDINATOR_LOAD_IN_PROGRESS with
// several nodes.
func (c *Coordinator) ConsumerGroupHeartbeat(ctx context.Context, client Client, topics consumer.Topics, req *kmsg.ConsumerGroupHeartbeatRequest) *kmsg.ConsumerGroupHeartbeatResponse {
	fail := func(code int16, msg string) *kmsg.ConsumerGroupHeartbeatResponse {
		r := req.ResponseKind().(*kmsg.ConsumerGroupHeartbeatResponse)
		r.ErrorCode = code
		if msg != "" {
			r.ErrorMessage = &msg
		}
		return r
	}
	failErr := func(err error) *kmsg.ConsumerGroupHeartbeatResponse {
		var ce *consumer.Error
		if errors.As(err, &ce) {
			return fail(ce.Code.Code, ce.Message)
		}
		return fail(kerr.UnknownServerError.Code, "")
	}
	if err := consumer.ValidateHeartbeat(c.cfg.Consumer, req); err != nil {
		return failErr(err)
	}
	if code := c.notReadyFor(req.Group); code != 0 {
		return fail(code, "")
	}
	ch := make(chan *kmsg.ConsumerGroupHeartbeatResponse, 1)
	found, err := c.send(req.Group, req.MemberEpoch == consumer.JoinEpoch, func(g *group) {
		ch <- g.consumerHeartbeat(client, topics, req, fail, failErr)
	}, func() { ch <- fail(kerr.NotCoordinator.Code, "") })
	switch {
	case err != nil:
		return fail(sendCode(err), "")
	case !found:
		return fail(kerr.GroupIDNotFound.Code, "Consumer group "+req.Group+" not found.")
	}
	select {
	case r := <-ch:
		return r
	case <-ctx.Done():
		return fail(kerr.CoordinatorNotAvailable.Code, "")
	}
}

func (g *group) consumerHeartbeat(client Client, topics consumer.Topics, req *kmsg.ConsumerGroupHeartbeatRequest,
	fail func(int16, string) *kmsg.ConsumerGroupHeartbeatResponse, failErr func(error) *kmsg.ConsumerGroupHeartbeatResponse) *kmsg.ConsumerGroupHeartbeatResponse {
	upgrading := false
	if g.cg == nil {
		switch {
		case len(g.members) > 0 && req.MemberEpoch == consumer.JoinEpoch:
			// A classic group with members: upgraded online when the
			// policy allows (§8.1); nothing of the classic group
			// changes unless the heartbeat succeeds and is saved.
			cg, err := g.upgradeCandidate(topics)
			if err != nil {
				g.log.Info("classic group not upgraded for a consumer-protocol member", zap.String("member_id", req.MemberID),
					zap.String("client_id", client.ID), zap.Error(err))
				return failErr(err)
			}
			g.cg, upgrading = cg, true
		case len(g.members) > 0 || g.state != Empty:
			return fail(kerr.GroupIDNotFound.Code, "Group "+g.id+" is not a consumer group.")
		case req.MemberEpoch != consumer.JoinEpoch:
			return fail(kerr.GroupIDNotFound.Code, "Consumer group "+g.id+" not found.")
		default:
			g.cg = consumer.NewGroup(g.id)
		}
	}
	var before []byte // nil for an upgrade: the consumer group's state replaces the classic group's
	if !upgrading {
		var err error
		if before, err = g.cg.MarshalState(); err != nil {
			return failErr(err)
		}
	}
	hadMembers := len(g.cg.Members) > 0
	epoch, n := g.cg.Epoch, len(g.cg.Members)
	resp, timers, err := g.cg.Heartbeat(g.c.consumerConfig(g.id), topics, req, client.ID, client.Host)
	if err != nil {
		if upgrading {
			g.cg = nil
		}
		return failErr(err)
	}
	if !upgrading && g.downgradeAfter(epoch, n) {
		return resp // the last consumer-protocol member left (§8.2)
	}
	if err := g.saveConsumer(before); err != nil {
		g.log.Warn("saving the consumer group failed; the heartbeat is refused and undone", zap.Error(err))
		if upgrading {
			g.cg = nil
		} else if restored, lerr := consumer.LoadGroup(before); lerr == nil {
			g.cg = restored
		}
		return fail(g.c.backendCode(err), "")
	}
	if upgrading {
		g.log.Info("classic group upgraded to a consumer group: a consumer-protocol member joined",
			zap.Int32("generation", epoch), zap.Int("classic_members", n))
		g.dropClassicMembers()
		for id := range g.cg.Members {
			timers.Session = append(timers.Session, id)
		}
	}
	g.applyConsumerTimers(timers)
	g.noteEmpty(hadMembers)
	g.consumerSummary()
	return resp
}

// saveConsumer saves the consumer group's state when it differs from
// before (Kafka writes nothing for a heartbeat that changes nothing) and
// the backend keeps group states.
func (g *group) saveConsumer(before []byte) error {
	after, err := g.cg.MarshalState()
	if err != nil {
		return err
	}
	if bytes.Equal(before, after) || g.c.states == nil {
		return nil
	}
	ctx, cancel := g.c.saveContext()
	defer cancel()
	if err := g.c.states.SaveGroupState(ctx, g.id, after); err != nil {
		return err
	}
	g.saved = true
	return nil
}

// applyConsumerTimers arms and stops the consumer group's member timers as
// consumer.Group asked: a session that expires fences the member, a
// rebalance timer that expires fences it if it is still at that epoch.
func (g *group) applyConsumerTimers(t consumer.Timers) {
	if g.cgTimers == nil {
		g.cgTimers = map[string]*cgTimers{}
	}
	for _, id := range t.Cancel {
		if ts := g.cgTimers[id]; ts != nil {
			ts.stop()
			delete(g.cgTimers, id)
		}
	}
	timers := func(id string) *cgTimers {
		ts := g.cgTimers[id]
		if ts == nil {
			ts = &cgTimers{}
			g.cgTimers[id] = ts
		}
		return ts
	}
	for _, id := range t.EndRebalance {
		if ts := g.cgTimers[id]; ts != nil {
			stopTimer(ts.rebalance)
			ts.rebalanceSeq++
		}
	}
	for _, r := range t.Rebalance {
		ts := timers(r.MemberID)
		stopTimer(ts.rebalance)
		ts.rebalanceSeq++
		seq, id, epoch := ts.rebalanceSeq, r.MemberID, r.Epoch
		ts.rebalance = g.after(r.Timeout, func() {
			if cur := g.cgTimers[id]; cur == nil || cur.rebalanceSeq != seq || g.cg == nil {
				return
			}
			g.log.Info("consumer group member fenced: it did not revoke its partitions within its rebalance timeout",
				zap.String("member_id", id), zap.Int32("member_epoch", epoch))
			g.consumerChange(func() consumer.Timers { return g.cg.RebalanceExpired(id, epoch) })
		})
	}
	for _, id := range t.Session {
		ts := timers(id)
		stopTimer(ts.session)
		ts.sessionSeq++
		seq := ts.sessionSeq
		ts.session = g.after(g.cg.SessionTimeout(g.c.consumerConfig(g.id), id), func() {
			if cur := g.cgTimers[id]; cur == nil || cur.sessionSeq != seq || g.cg == nil {
				return
			}
			g.log.Info("consumer group member session expired", zap.String("member_id", id))
			g.consumerChange(func() consumer.Timers { return g.cg.Fence(id) })
		})
	}
}

// consumerChange runs a change of the consumer group that no request
// waits for (a timer's), saves it and applies its timers; a failed save is
// logged and the change kept (Kafka retries a timer's write; here the next
// saved change carries it).
func (g *group) consumerChange(change func() consumer.Timers) {
	before, err := g.cg.MarshalState()
	if err != nil {
		return
	}
	hadMembers := len(g.cg.Members) > 0
	epoch, n := g.cg.Epoch, len(g.cg.Members)
	t := change()
	if g.downgradeAfter(epoch, n) {
		return
	}
	if err := g.saveConsumer(before); err != nil {
		g.log.Warn("saving the consumer group failed", zap.Error(err))
	}
	g.applyConsumerTimers(t)
	g.noteEmpty(hadMembers)
	g.consumerSummary()
}

func stopTimer(t Timer) {
	if t != nil {
		t.Stop()
	}
}

// stopConsumerTimers stops every consumer group member timer (the group
// leaves memory).
func (g *group) stopConsumerTimers() {
	for id, ts := range g.cgTimers {
		ts.stop()
		delete(g.cgTimers, id)
	}
}

// consumerSummary is the summary ListGroups reads for a consumer group.
func (g *group) consumerSummary() {
	l := g.cg.Listed()
	g.mu.Lock()
	g.summary = summary{state: g.state, protocolType: "consumer", consumerState: l.GroupState}
	g.mu.Unlock()
}

// ConsumerGroupDescribe serves ConsumerGroupDescribe (API key 69, v0-1):
// each group as consumer.Group.Describe shows it; an empty group id is
// INVALID_GROUP_ID, a group that is not a consumer group in memory
// GROUP_ID_NOT_FOUND ("Group X is not a consumer group."). With
// IncludeAuthorizedOperations, a group found has every group operation
// (groupOps, as DescribeGroups); the caller checks DESCRIBE on each group
// and, with an authorizer, narrows AuthorizedOperations to the principal's.
func (c *Coordinator) ConsumerGroupDescribe(ctx context.Context, topics consumer.Topics, req *kmsg.ConsumerGroupDescribeRequest) *kmsg.ConsumerGroupDescribeResponse {
	resp := req.ResponseKind().(*kmsg.ConsumerGroupDescribeResponse)
	for _, id := range req.Groups {
		d := c.describeConsumer(ctx, topics, id)
		if req.IncludeAuthorizedOperations && d.ErrorCode == 0 {
			d.AuthorizedOperations = groupOps
		}
		resp.Groups = append(resp.Groups, d)
	}
	return resp
}

func (c *Coordinator) describeConsumer(ctx context.Context, topics consumer.Topics, id string) kmsg.ConsumerGroupDescribeResponseGroup {
	fail := func(code int16, msg string) kmsg.ConsumerGroupDescribeResponseGroup {
		d := kmsg.NewConsumerGroupDescribeResponseGroup()
		d.Group, d.ErrorCode = id, code
		if msg != "" {
			d.ErrorMessage = &msg
		}
		return d
	}
	if id == "" {
		return fail(kerr.InvalidGroupID.Code, "")
	}
	if code := c.notReadyFor(id); code != 0 {
		return fail(code, "")
	}
	notFound := fail(kerr.GroupIDNotFound.Code, "Group "+id+" is not a consumer group.")
	ch := make(chan kmsg.ConsumerGroupDescribeResponseGroup, 1)
	found, err := c.send(id, false, func(g *group) {
		if g.cg == nil {
			ch <- notFound
			return
		}
		ch <- g.cg.Describe(c.consumerConfig(id), topics)
	}, func() { ch <- fail(kerr.NotCoordinator.Code, "") })
	switch {
	case err != nil:
		return fail(sendCode(err), "")
	case !found:
		return notFound
	}
	select {
	case d := <-ch:
		return d
	case <-ctx.Done():
		return fail(kerr.CoordinatorNotAvailable.Code, "")
	}
}

// restoreConsumerLocked brings a saved consumer group back into memory
// (restoreLocked, installLocked), its members' timers armed from now as
// Kafka arms them at load. Called with c.mu held.
func (c *Coordinator) restoreConsumerLocked(id string, b []byte) bool {
	cg, err := consumer.LoadGroup(b)
	if err != nil || cg.ID != id {
		c.log.Warn("ignoring a saved consumer group that does not decode", zap.String("group", id), zap.Error(err))
		return false
	}
	g := newGroup(c, id)
	g.cg, g.saved = cg, true
	l := cg.Listed()
	g.summary = summary{state: Empty, protocolType: "consumer", consumerState: l.GroupState}
	c.groups[id] = g
	c.wg.Add(1)
	go g.run()
	g.post(message{run: func(g *group) { g.applyConsumerTimers(g.cg.Loaded()) }})
	g.log.Info("consumer group restored", zap.Int32("group_epoch", cg.Epoch), zap.Int("members", len(cg.Members)))
	return true
}
