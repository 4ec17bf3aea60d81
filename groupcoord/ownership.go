package groupcoord

import (
	"context"
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"
	"go.uber.org/zap"

	"github.com/disgw/disgw/disbackend"
)

// Several gateway nodes (docs/cluster.md §6). Each group has one
// coordinator, the node Config.Owns says owns it; the others answer its
// requests NOT_COORDINATOR, as a Kafka broker answers for a group whose
// __consumer_offsets partition it does not lead (Kafka's CoordinatorRuntime
// answers NOT_COORDINATOR, and COORDINATOR_LOAD_IN_PROGRESS while it loads
// the partition, for every group operation, reads such as OffsetFetch and
// DescribeGroups included), so clients look the coordinator up again.
//
// A group that moves away is dropped from memory at ViewChanged: its
// parked JoinGroup and SyncGroup requests are answered NOT_COORDINATOR, its
// timers stop, what this node remembered of it (offsets cache, emptiness,
// protocol type) is forgotten. A group that moves here is loaded from the
// backend (disbackend.GroupStateReader, the latest state any node saved)
// before this node serves it: at its first request (which, like every
// request until the load ends, answers COORDINATOR_LOAD_IN_PROGRESS) or
// sooner, when ViewChanged loads every gained group that has a saved state.
// Its offsets cache starts empty, and its emptiness (for offset retention)
// counts from the load, never earlier, as after a restart.
//
// Committed offsets need no load: they are in the backend, and every write
// of them, like every save of a group's state, is fenced there (a node
// whose view is stale cannot write).

// errLoading: the group is being loaded after it moved to this node
// (COORDINATOR_LOAD_IN_PROGRESS; the client retries).
var errLoading = errors.New("group is being loaded")

// owns reports whether this node coordinates the group (always, without
// Config.Owns).
func (c *Coordinator) owns(id string) bool {
	return c.cfg.Owns == nil || c.cfg.Owns(id)
}

// notReadyFor is notReady for a request of group id: NOT_COORDINATOR while
// closing or for a group this node does not own, then
// COORDINATOR_LOAD_IN_PROGRESS while the coordinator loads, else 0.
func (c *Coordinator) notReadyFor(id string) int16 {
	code := c.notReady()
	if code == kerr.NotCoordinator.Code {
		return code
	}
	if !c.owns(id) {
		return kerr.NotCoordinator.Code
	}
	return code
}

// sendCode is the Kafka code of a send that failed.
func sendCode(err error) int16 {
	if errors.Is(err, errLoading) {
		return kerr.CoordinatorLoadInProgress.Code
	}
	if errors.Is(err, errReservedGroupID) {
		return kerr.InvalidGroupID.Code
	}
	return kerr.NotCoordinator.Code
}

// admitLocked checks that a request may reach group id: this node owns
// it, and holds its latest state (else its load starts and errLoading is
// returned). Nothing to check without Config.Owns. Called with mu held.
func (c *Coordinator) admitLocked(id string) error {
	if c.cfg.Owns == nil {
		return nil
	}
	if !c.cfg.Owns(id) {
		return disbackend.ErrNotCoordinator
	}
	if c.groups[id] != nil {
		return nil
	}
	if _, ok := c.held[id]; ok {
		return nil
	}
	if c.states == nil {
		c.held[id] = struct{}{} // nothing to load: the backend keeps no group states
		return nil
	}
	if _, ok := c.loading[id]; !ok {
		c.loading[id] = struct{}{}
		c.wg.Add(1)
		go c.loadGroup(id, c.viewSeq)
	}
	return errLoading
}

// ViewChanged tells the coordinator that Config.Owns may answer otherwise
// than before (the gateway's view of the cluster changed). Groups this
// node no longer owns are dropped at once: their parked JoinGroup and
// SyncGroup requests are answered NOT_COORDINATOR, and whatever it kept of
// them is forgotten. Groups it gained are loaded from the backend in the
// background (and at their first request in any case). Call it after
// every change of the view; a group lost and gained again between two
// calls is not seen to have moved, so a node that may have missed views
// (paused) should pass through a view that owns nothing. It does not
// block on the backend. Without Config.Owns it does nothing.
func (c *Coordinator) ViewChanged() {
	if c.cfg.Owns == nil {
		return
	}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return
	}
	c.viewSeq++
	var lost []*group
	for id, g := range c.groups {
		if !c.cfg.Owns(id) {
			delete(c.groups, id)
			lost = append(lost, g)
		}
	}
	forget := func(id string) bool { return !c.cfg.Owns(id) }
	deleteKeys(c.held, forget)
	deleteKeys(c.offsets, forget)
	deleteKeys(c.emptySince, forget)
	deleteKeys(c.emptyTypes, forget)
	c.mu.Unlock()
	for _, g := range lost {
		g.gone.Store(true)
		select {
		case g.wake <- struct{}{}:
		default:
		}
	}
	if len(lost) > 0 {
		c.log.Info("groups moved to other nodes: dropped", zap.Int("groups", len(lost)))
	}
	select {
	case c.reload <- struct{}{}:
	default:
	}
}

func deleteKeys[V any](m map[string]V, del func(string) bool) {
	for k := range m {
		if del(k) {
			delete(m, k)
		}
	}
}

// loadGroup reads group id's latest state from the backend and installs
// it, unless the view changed meanwhile (a later request loads it again).
func (c *Coordinator) loadGroup(id string, seq uint64) {
	defer c.wg.Done()
	ctx, cancel := c.opContext()
	state, err := c.readState(ctx, id)
	cancel()
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.loading, id)
	if err != nil {
		c.log.Warn("loading a group that moved here failed; its next request tries again", zap.String("group", id), zap.Error(err))
		return
	}
	c.installLocked(id, state, seq)
}

// readState is the latest saved state of group id, nil if none.
func (c *Coordinator) readState(ctx context.Context, id string) ([]byte, error) {
	if r, ok := c.states.(disbackend.GroupStateReader); ok {
		return r.GroupState(ctx, id)
	}
	states, err := c.states.GroupStates(ctx)
	if err != nil {
		return nil, err
	}
	return states[id], nil
}

// loadGained loads, after ViewChanged, every group with a saved state
// that this node owns and does not hold yet, so that its members' sessions
// run and ListGroups shows it before its first request. Groups without a
// saved state are loaded at their first request (there is nothing to
// read for them).
func (c *Coordinator) loadGained() {
	if c.states == nil || c.cfg.Owns == nil {
		return
	}
	c.mu.Lock()
	seq := c.viewSeq
	c.mu.Unlock()
	ctx, cancel := c.opContext()
	states, err := c.states.GroupStates(ctx)
	cancel()
	if err != nil {
		c.log.Warn("loading the groups that moved here failed; each is loaded at its first request", zap.Error(err))
		return
	}
	c.takeConfigs(states)
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for id, b := range states {
		if c.installLocked(id, b, seq) {
			n++
		}
	}
	if n > 0 {
		c.log.Info("groups moved here: loaded", zap.Int("groups", n))
	}
}

// installLocked makes state (nil: none saved) the state of group id, which
// this node now holds, if the view is still the one the state was read
// under, this node owns the group and does not hold it yet. Called with mu
// held; reports whether it installed.
func (c *Coordinator) installLocked(id string, state []byte, seq uint64) bool {
	if c.closed || seq != c.viewSeq || !c.owns(id) || c.groups[id] != nil {
		return false
	}
	if _, ok := c.held[id]; ok {
		return false
	}
	c.held[id] = struct{}{}
	delete(c.offsets, id) // its offsets cache starts empty
	delete(c.emptyTypes, id)
	c.emptySince[id] = c.clock.Now() // emptiness counts from the load, never earlier
	if state != nil {
		c.restoreLocked(id, state)
	}
	return true
}
