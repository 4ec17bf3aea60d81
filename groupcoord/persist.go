package groupcoord

import (
	"context"
	"encoding/json"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"

	"github.com/disgw/disgw/disbackend"
	"github.com/disgw/disgw/groupcoord/consumer"
)

// Membership across gateway restarts. Kafka's coordinator writes a group's
// metadata (generation, protocol, leader, members with their metadata and
// assignments) to __consumer_offsets when a rebalance completes and loads
// it when it takes the group over, so a broker restart does not make a
// stable group rebalance: its members go on heartbeating and committing
// with the generation they have. With a backend that keeps such state
// (disbackend.GroupStateStore: the embedded store, and on DIS the gateway
// stream __disgw_groups), the coordinator does
// the same: it saves a group when it becomes Stable (and when a static
// member is replaced without a rebalance), saves it with no members and
// its protocol type when the group becomes empty (deleted with the group
// or when an empty group has no offsets left), and restores the Stable
// groups at start, each member's session counted from then, and the
// protocol types of the Empty ones. Without one, members rejoin after a
// restart. Another gateway node learns an Empty group's protocol type only
// at its start. With several nodes a rebalance whose save fails fails
// (sync.go, failRebalance): the next coordinator restores what was saved.

// savedGroup is a Stable group's membership as it is saved.
type savedGroup struct {
	Generation   int32         `json:"generation"`
	ProtocolType string        `json:"protocol_type"`
	Protocol     string        `json:"protocol"`
	Leader       string        `json:"leader"`
	Members      []savedMember `json:"members"`
}

type savedMember struct {
	ID           string          `json:"id"`
	InstanceID   *string         `json:"instance_id,omitempty"`
	ClientID     string          `json:"client_id"`
	ClientHost   string          `json:"client_host"`
	ProtocolType string          `json:"protocol_type"`
	Protocols    []savedProtocol `json:"protocols"`
	SessionMs    int64           `json:"session_ms"`
	RebalanceMs  int64           `json:"rebalance_ms"`
	Assignment   []byte          `json:"assignment"`
	Seq          uint64          `json:"seq"`
}

type savedProtocol struct {
	Name     string `json:"name"`
	Metadata []byte `json:"metadata"`
}

// saveState saves the group's membership when the backend keeps it
// (before the rebalance's SyncGroup answers go out, as Kafka answers after
// its write); nil too when it keeps none. Errors: the backend's
// (SaveGroupState), which the caller handles: a rebalance with several
// nodes fails (sync.go, failRebalance); otherwise the failure is logged
// (logSaveFailed) and the group works on.
func (g *group) saveState() error {
	store := g.c.states
	if store == nil {
		return nil
	}
	sg := savedGroup{Generation: g.generation, ProtocolType: g.protocolType, Protocol: g.protocol, Leader: g.leader}
	for _, m := range g.sortedMembers() {
		sm := savedMember{ID: m.id, InstanceID: m.instanceID, ClientID: m.client.ID, ClientHost: m.client.Host,
			ProtocolType: m.protocolType, SessionMs: m.session.Milliseconds(), RebalanceMs: m.rebalance.Milliseconds(),
			Assignment: m.assignment, Seq: m.seq}
		for _, p := range m.protocols {
			sm.Protocols = append(sm.Protocols, savedProtocol{Name: p.Name, Metadata: p.Metadata})
		}
		sg.Members = append(sg.Members, sm)
	}
	b, err := json.Marshal(sg)
	if err == nil {
		ctx, cancel := g.c.saveContext()
		err = store.SaveGroupState(ctx, g.id, b)
		cancel()
	}
	if err != nil {
		return err
	}
	g.saved = true
	return nil
}

// logSaveFailed logs a failed saveState that the group survives.
func (g *group) logSaveFailed(err error) {
	g.log.Warn("saving the group's membership failed; a restart makes its members rejoin", zap.Error(err))
}

// saveEmpty records that the group is Empty with its protocol type, in
// memory and, when the backend keeps group states, saved with no members
// in place of its membership (Kafka writes the like record when a group
// becomes empty), so ListGroups and DescribeGroups show the type after a
// restart too.
func (g *group) saveEmpty() {
	if g.protocolType == "" {
		g.forgetState()
		return
	}
	c := g.c
	c.mu.Lock()
	if c.groups[g.id] == g { // not moved away meanwhile (ViewChanged)
		c.emptyTypes[g.id] = g.protocolType
	}
	c.mu.Unlock()
	if c.states == nil {
		return
	}
	b, err := json.Marshal(savedGroup{Generation: g.generation, ProtocolType: g.protocolType})
	if err == nil {
		ctx, cancel := c.saveContext()
		err = c.states.SaveGroupState(ctx, g.id, b)
		cancel()
	}
	if err != nil {
		g.log.Warn("saving the empty group failed; after a restart it shows no protocol type", zap.Error(err))
		return
	}
	g.saved = true
}

// forgetEmpty forgets an Empty group (deleted, or no offsets left): its
// protocol type and its saved state.
func (g *group) forgetEmpty() {
	c := g.c
	c.mu.Lock()
	_, known := c.emptyTypes[g.id]
	delete(c.emptyTypes, g.id)
	c.mu.Unlock()
	if known {
		g.saved = true // saved by saveEmpty, maybe by an earlier instance of the group
	}
	g.forgetState()
}

// emptyType is the protocol type of an Empty group that had members; ok is
// false when there is none.
func (c *Coordinator) emptyType(id string) (string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	pt, ok := c.emptyTypes[id]
	return pt, ok
}

// forgetState deletes the saved state of a group.
func (g *group) forgetState() {
	if g.c.states == nil || !g.saved {
		return
	}
	ctx, cancel := g.c.saveContext()
	err := g.c.states.SaveGroupState(ctx, g.id, nil)
	cancel()
	if err != nil {
		g.log.Warn("deleting the group's saved membership failed", zap.Error(err))
		return
	}
	g.saved = false
}

// restoreGroups brings the saved Stable groups back into memory, before the
// coordinator answers requests. Each member's session starts now. With
// Config.Owns, only the groups this node owns (ownership.go).
func (c *Coordinator) restoreGroups(ctx context.Context) error {
	if c.states == nil {
		return nil
	}
	c.mu.Lock()
	seq := c.viewSeq
	c.mu.Unlock()
	states, err := c.states.GroupStates(ctx)
	if err != nil {
		return err
	}
	c.takeConfigs(states)
	c.mu.Lock()
	defer c.mu.Unlock()
	for id, b := range states {
		if c.cfg.Owns != nil {
			c.installLocked(id, b, seq)
			continue
		}
		c.restoreLocked(id, b)
	}
	return nil
}

// restoreLocked brings one saved group back: a Stable group into memory,
// its members' sessions starting now, or an Empty group's protocol type.
// Called with mu held.
func (c *Coordinator) restoreLocked(id string, b []byte) {
	if consumer.IsConsumerGroupState(b) {
		c.restoreConsumerLocked(id, b)
		return
	}
	var sg savedGroup
	if err := json.Unmarshal(b, &sg); err != nil || id == "" {
		c.log.Warn("ignoring a saved group that does not decode", zap.String("group", id), zap.Error(err))
		return
	}
	if len(sg.Members) == 0 {
		if sg.ProtocolType != "" {
			c.emptyTypes[id] = sg.ProtocolType // an Empty group (saveEmpty)
		}
		return
	}
	g := newGroup(c, id)
	g.state, g.generation, g.protocolType, g.protocol, g.leader = Stable, sg.Generation, sg.ProtocolType, sg.Protocol, sg.Leader
	g.hadMembers, g.saved = true, true
	g.summary = summary{state: Stable, protocolType: sg.ProtocolType} // for ListGroups before its first message
	for _, sm := range sg.Members {
		m := &member{id: sm.ID, instanceID: sm.InstanceID, client: Client{ID: sm.ClientID, Host: sm.ClientHost},
			protocolType: sm.ProtocolType, session: time.Duration(sm.SessionMs) * time.Millisecond,
			rebalance: time.Duration(sm.RebalanceMs) * time.Millisecond, assignment: sm.Assignment, seq: sm.Seq}
		if m.assignment == nil {
			m.assignment = []byte{}
		}
		for _, p := range sm.Protocols {
			m.protocols = append(m.protocols, kmsg.JoinGroupRequestProtocol{Name: p.Name, Metadata: p.Metadata})
		}
		g.members[m.id] = m
		if m.instanceID != nil {
			g.static[*m.instanceID] = m.id
		}
		g.nextSeq = max(g.nextSeq, m.seq+1)
		g.armHeartbeat(m, m.session)
	}
	c.groups[id] = g
	c.wg.Add(1)
	go g.run()
	g.log.Info("group restored", zap.Int32("generation", g.generation), zap.Int("members", len(g.members)))
}

// groupStates is the backend's GroupStateStore, nil when it has none.
func groupStates(apps disbackend.Apps) disbackend.GroupStateStore {
	s, _ := apps.(disbackend.GroupStateStore)
	return s
}
