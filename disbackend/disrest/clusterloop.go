package disrest

// The member loop of cluster mode (docs/cluster.md §2): JoinGroup,
// SyncGroup, then a Heartbeat and a read of the view pointer every
// ClusterHeartbeat, back to JoinGroup (or SyncGroup) when DIS says the
// generation ended.

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/disgw/disgw/disbackend"
)

// memberStep is where the member loop is in DIS's group cycle.
type memberStep int

const (
	stepJoin memberStep = iota // send JoinGroup
	stepSync                   // send SyncGroup
	stepBeat                   // heartbeat and read the view, every ClusterHeartbeat
)

func (s memberStep) String() string {
	switch s {
	case stepJoin:
		return "join"
	case stepSync:
		return "sync"
	case stepBeat:
		return "heartbeat"
	}
	return "unknown"
}

// run is the member loop, from start until close (or fail). A step that
// fails is tried again after ClusterHeartbeat; meanwhile the lease runs
// out by itself, so a node cut off from DIS stops writing.
func (m *membership) run() {
	defer m.wg.Done()
	defer m.endGeneration()
	ctx := m.ctx
	step, failing := stepJoin, false
	for m.pause.wait(ctx) {
		var next memberStep
		var err error
		switch step {
		case stepJoin:
			next, err = m.join(ctx)
		case stepSync:
			next, err = m.sync(ctx)
		default:
			next, err = m.beat(ctx)
		}
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			if !failing {
				m.log.Warn("cluster membership: DIS call failed: retrying", zap.Stringer("step", step), zap.Error(err))
			} else {
				m.log.Debug("cluster membership: DIS call failed: retrying", zap.Stringer("step", step), zap.Error(err))
			}
			failing = true
			if !sleep(ctx, m.heartbeat) {
				return
			}
		} else if failing {
			failing = false
			m.log.Info("cluster membership: DIS answers again", zap.Stringer("step", next))
		}
		step = next
	}
}

// join ends the generation this node was in (if any) and sends
// JoinGroup, first reading ClusterStream's next sequence number (the
// floor of the coming generation's records). On OK it waits the
// syncDelayedTimeMs DIS answered. A missing app or stream is created.
func (m *membership) join(ctx context.Context) (memberStep, error) {
	m.endGeneration()
	r, err := m.s.describeRange(ctx, ClusterStream, 0)
	if errors.Is(err, disbackend.ErrStreamNotFound) || errors.Is(err, disbackend.ErrPartitionNotFound) {
		if cerr := m.ensureClusterStream(ctx, true); cerr != nil {
			return stepJoin, cerr
		}
		r, err = m.s.describeRange(ctx, ClusterStream, 0)
	}
	if err != nil {
		return stepJoin, err
	}
	resp, err := m.s.joinGroup(ctx, nodesApp, m.clientID, ClusterStream, m.joinWindow.Milliseconds())
	if err != nil {
		return stepJoin, err
	}
	switch resp.State {
	case groupOK:
	case groupNotExist:
		if err := m.s.ensureApp(ctx, nodesApp); err != nil {
			return stepJoin, err
		}
		return stepJoin, fmt.Errorf("join group: app %s did not exist: created", nodesApp)
	case groupErrSub:
		if err := m.ensureClusterStream(ctx, true); err != nil {
			return stepJoin, err
		}
		return stepJoin, fmt.Errorf("join group: stream %s did not exist: created", ClusterStream)
	default:
		return stepJoin, fmt.Errorf("join group: DIS answered state %q", resp.State)
	}
	m.mu.Lock()
	m.floor, m.joinedAt = r.Next, m.mono()
	m.mu.Unlock()
	var delay time.Duration
	if resp.SyncDelayedTimeMs != nil && *resp.SyncDelayedTimeMs > 0 {
		delay = time.Duration(*resp.SyncDelayedTimeMs) * time.Millisecond
	}
	m.log.Debug("joined the nodes' group", zap.Duration("sync_delay", delay))
	if !sleep(ctx, delay) {
		return stepJoin, ctx.Err()
	}
	return stepSync, nil
}

// sync sends SyncGroup until the rebalance is done (WAITING: again after
// 500 ms). On OK the node is a member of the answered generation: it
// renews its lease, appends its registry record, and, holding partition 0
// of ClusterStream, starts the controller's task.
func (m *membership) sync(ctx context.Context) (memberStep, error) {
	resp, err := m.s.syncGroup(ctx, nodesApp, m.clientID, m.generation())
	if err != nil {
		return stepSync, err
	}
	switch resp.State {
	case groupOK:
	case groupWaiting:
		if !sleep(ctx, groupSyncRetryDelay*time.Millisecond) {
			return stepSync, ctx.Err()
		}
		return stepSync, nil
	case groupRejoin, groupNotExist:
		return stepJoin, nil
	default:
		return stepJoin, fmt.Errorf("sync group: DIS answered state %q", resp.State)
	}
	if resp.Generation == nil {
		return stepJoin, errors.New("sync group: DIS answered no generation")
	}
	gen := *resp.Generation
	controller := false
	for _, p := range resp.Assignment[ClusterStream] {
		controller = controller || p == 0
	}
	m.mu.Lock()
	m.gen, m.genJoinedAt = gen, m.joinedAt
	m.syncs++
	floor := m.floor
	m.mu.Unlock()
	m.log.Info("member of the nodes' group", zap.Int64("generation", gen), zap.Bool("controller", controller))
	m.kickLease()
	if err := m.register(ctx, gen); err != nil {
		// The controller will leave this node out of the view, and it
		// will join again.
		m.log.Warn("cluster: registry record not written", zap.Int64("generation", gen), zap.Error(err))
	}
	if controller && !m.controlling(gen) {
		m.startControl(gen, floor)
	}
	return stepBeat, nil
}

// beat waits ClusterHeartbeat (less when poked), heartbeats, and on
// STABLE reads the view pointer. SYNCING: the generation ended and a new
// assignment waits (SyncGroup); anything else: join again.
func (m *membership) beat(ctx context.Context) (memberStep, error) {
	t := time.NewTimer(m.heartbeat)
	select {
	case <-ctx.Done():
		t.Stop()
		return stepBeat, ctx.Err()
	case <-m.rejoin:
		t.Stop()
		m.log.Info("cluster: the controller starts a new generation to rebalance keys created since the view")
		if err := m.s.leaveGroup(ctx, nodesApp, m.clientID); err != nil {
			m.log.Warn("cluster: leave group failed", zap.Error(err))
		}
		return stepJoin, nil
	case <-m.poke:
		t.Stop()
	case <-t.C:
	}
	if !m.pause.wait(ctx) {
		return stepBeat, ctx.Err()
	}
	gen := m.generation()
	resp, err := m.s.heartbeat(ctx, nodesApp, m.clientID, gen)
	if err != nil {
		return stepBeat, err
	}
	switch resp.State {
	case groupStateStable:
		return m.readPointer(ctx)
	case groupStateSyncing:
		m.log.Info("cluster: generation ended", zap.Int64("generation", gen), zap.String("state", resp.State))
		m.endGeneration()
		return stepSync, nil
	}
	m.log.Info("cluster: generation ended", zap.Int64("generation", gen), zap.String("state", resp.State))
	return stepJoin, nil
}

// readPointer reads nodesApp's checkpoint on ClusterStream, the pointer
// to the current view, and adopts the view when it is of this node's
// generation and newer than the one held. Not in it (this node synced
// after the controller read the registry): leave and join again. Its node
// id held by another member: fail.
func (m *membership) readPointer(ctx context.Context) (memberStep, error) {
	sn, meta, err := m.pointer(ctx)
	if err != nil {
		return stepBeat, err
	}
	p, ok := parsePointer(meta)
	m.mu.Lock()
	gen, floor, joinedAt := m.gen, m.floor, m.genJoinedAt
	m.mu.Unlock()
	// A pointer below the floor is of an earlier life of the group (DIS
	// numbers generations from 1 again when a group empties).
	if !ok || sn < floor || p.gen != gen {
		return stepBeat, nil
	}
	if v := m.cur.Load().view; v.Ready && v.Generation == gen && v.Epoch == p.epoch {
		return stepBeat, nil
	}
	doc, err := m.readDoc(ctx, sn, p)
	if err != nil {
		return stepBeat, err
	}
	if doc.member(m.clientID) == nil {
		m.log.Info("cluster: this node is not in the view of its generation: leaving and joining again",
			zap.Int64("generation", gen), zap.Int32("epoch", doc.Epoch))
		if err := m.s.leaveGroup(ctx, nodesApp, m.clientID); err != nil {
			m.log.Warn("cluster: leave group failed", zap.Error(err))
		}
		return stepJoin, nil
	}
	if h := doc.holders()[m.nodeID]; h.ClientID != m.clientID {
		m.fail(fmt.Errorf("node id %d is held by another live node, client %s (started %s, listeners %v); this node is client %s (listeners %v): give each node its own node_id",
			m.nodeID, h.ClientID, time.UnixMilli(h.Started).UTC().Format(time.RFC3339), h.Listeners, m.clientID, m.listeners))
		return stepJoin, nil
	}
	m.setView(m.viewOf(doc), doc, joinedAt+m.lease+m.s.opts.RequestTimeout)
	return stepBeat, nil
}

// endGeneration stops the controller's task of the generation that ended
// (if this node ran one) and makes View answer the view of that
// generation not Ready. Called by the member loop only.
func (m *membership) endGeneration() {
	m.viewEnded()
	m.mu.Lock()
	stop := m.stopControl
	m.stopControl, m.controlGen = nil, groupNoGeneration
	m.mu.Unlock()
	if stop != nil {
		stop()
		m.s.opts.Metrics.ClusterController(false)
	}
}

// startControl starts the controller's task of gen (clusterview.go).
func (m *membership) startControl(gen, floor int64) {
	ctx, cancel := context.WithCancel(m.ctx)
	m.mu.Lock()
	m.stopControl, m.controlGen = cancel, gen
	m.mu.Unlock()
	m.s.opts.Metrics.ClusterController(true)
	m.wg.Add(1)
	go m.control(ctx, gen, floor)
}

// controlling reports whether the controller's task of gen runs (a
// SyncGroup that answers the generation this node already controls
// starts no second one: one view per generation).
func (m *membership) controlling(gen int64) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.stopControl != nil && m.controlGen == gen
}

// signal sends on a channel of one without blocking.
func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}
