package groupcoord

import (
	"context"
	"errors"
	"maps"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"go.uber.org/zap"

	"github.com/disgw/disgw/disbackend"
)

// ExpireOffsets deletes the apps (all committed offsets) of groups that have
// been empty for Config.OffsetsRetention, as Kafka expires an empty group's
// offsets after offsets.retention.minutes. A group's emptiness counts from
// the latest of: when it last became empty in memory, the coordinator's
// start (membership before a restart is unknown, so never earlier), its
// app's creation and its last commit. Only apps the gateway created (with a
// GroupID) expire; apps of other DIS clients are left alone. It runs every
// RetentionCheckInterval; it returns the groups deleted. It also forgets
// Empty groups that have no offsets (their protocol type), as Kafka's
// cleanup removes such groups. With Config.Owns, only the groups this node
// coordinates (and has loaded: one gained since the last sweep is loaded
// now and looked at by the next). A consumer group's offsets expire by
// Kafka's rule for them instead (expireConsumerOffsets).
func (c *Coordinator) ExpireOffsets(ctx context.Context) ([]string, error) {
	if c.apps == nil {
		return nil, nil
	}
	apps, err := c.apps.ListApps(ctx)
	if err != nil {
		return nil, err
	}
	var deleted []string
	withApp := make(map[string]bool, len(apps))
	for _, a := range apps {
		withApp[groupOfApp(a)] = true
	}
	// Kafka's cleanup removes an Empty group that has no offsets: forget
	// its protocol type (and saved state).
	c.mu.Lock()
	var bare []string
	for id := range c.emptyTypes {
		if !withApp[id] && c.owns(id) {
			bare = append(bare, id)
		}
	}
	for id, g := range c.groups {
		g.mu.Lock()
		empty := g.summary.consumerState == "Empty"
		g.mu.Unlock()
		if empty && !withApp[id] && c.owns(id) && !slices.Contains(bare, id) {
			bare = append(bare, id) // an empty consumer group without offsets
		}
	}
	c.mu.Unlock()
	for _, id := range bare {
		if _, err := c.send(id, true, func(g *group) {
			if len(g.members) == 0 && len(g.pending) == 0 && g.inflight == 0 {
				g.forgetEmpty()
				g.forgetConsumer()
			}
		}, nil); err != nil {
			if elsewhere(err) {
				continue
			}
			return deleted, err
		}
	}
	if c.cfg.OffsetsRetention < 0 {
		return nil, nil // offsets are kept forever
	}
	for _, a := range apps {
		if a.GroupID == "" || !c.owns(a.GroupID) {
			continue
		}
		if c.isConsumerGroup(a.GroupID) {
			expired, err := c.expireConsumerOffsets(ctx, a)
			if err != nil {
				if elsewhere(err) {
					continue
				}
				return deleted, err
			}
			if expired {
				deleted = append(deleted, a.GroupID)
			}
			continue
		}
		now := c.clock.Now()
		c.mu.Lock()
		since := c.emptySince[a.GroupID]
		c.mu.Unlock()
		since = later(since, c.start, a.CreatedAt)
		if now.Sub(since) < c.cfg.OffsetsRetention {
			continue
		}
		cps, err := c.apps.Checkpoints(ctx, a.Name, "")
		if errors.Is(err, disbackend.ErrAppNotFound) {
			continue
		}
		if err != nil {
			return deleted, err
		}
		for _, cp := range cps {
			since = later(since, cp.CommittedAt)
		}
		if now.Sub(since) < c.cfg.OffsetsRetention {
			continue
		}
		ch := make(chan int16, 1)
		id := a.GroupID
		if _, err := c.send(id, true, func(g *group) {
			if len(g.members) > 0 || len(g.pending) > 0 || g.inflight > 0 || g.isConsumer() {
				ch <- kerr.NonEmptyGroup.Code
				return
			}
			ch <- g.deleteApp(ctx, "offsets expired")
		}, func() { ch <- kerr.NotCoordinator.Code }); err != nil {
			if elsewhere(err) {
				continue
			}
			return deleted, err
		}
		if <-ch == 0 {
			deleted = append(deleted, id)
		}
	}
	return deleted, nil
}

// elsewhere: a send failed because the group moved to another node or is
// being loaded after it moved here; the sweep leaves it for now.
func elsewhere(err error) bool {
	return errors.Is(err, disbackend.ErrNotCoordinator) || errors.Is(err, errLoading)
}

func later(t time.Time, ts ...time.Time) time.Time {
	for _, u := range ts {
		if u.After(t) {
			t = u
		}
	}
	return t
}

// isConsumerGroup reports whether the group is a consumer group in memory
// (its summary has a consumer group state).
func (c *Coordinator) isConsumerGroup(id string) bool {
	c.mu.Lock()
	g := c.groups[id]
	c.mu.Unlock()
	if g == nil {
		return false
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.summary.consumerState != ""
}

// expireConsumerOffsets applies Kafka's offset expiry to a consumer group
// (OffsetMetadataManager.cleanupExpiredOffsets with
// ConsumerGroup.offsetExpirationCondition; docs/consumer-protocol.md
// §9.3): each committed offset of a topic no member subscribes to (by name
// or regular expression) expires on its own once it is
// Config.OffsetsRetention old (from its commit, not from when the group
// became empty), and is deleted (DeleteCheckpoints); when every offset of
// the group expired and it has no members, the group is deleted with its
// app (true). Offsets of a group with a commit being written are left for
// the next sweep. Errors: the backend's (Checkpoints, DeleteCheckpoints,
// DeleteApp) and the send's.
func (c *Coordinator) expireConsumerOffsets(ctx context.Context, a disbackend.App) (bool, error) {
	cps, err := c.apps.Checkpoints(ctx, a.Name, "")
	if errors.Is(err, disbackend.ErrAppNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	now := c.clock.Now()
	topicOf := map[string]string{} // stream → topic; "" for a stream that is gone
	var old []disbackend.Checkpoint
	for _, cp := range cps {
		if now.Sub(cp.CommittedAt) < c.cfg.OffsetsRetention {
			continue
		}
		old = append(old, cp)
		if _, ok := topicOf[cp.Stream]; !ok {
			info, _ := c.topics.Stream(ctx, cp.Stream)
			topicOf[cp.Stream] = info.Topic
		}
	}
	if len(old) == 0 {
		return false, nil
	}
	type result struct {
		deleted bool
		err     error
	}
	ch := make(chan result, 1)
	found, err := c.send(a.GroupID, false, func(g *group) {
		if g.cg == nil || g.inflight > 0 {
			ch <- result{}
			return
		}
		subscribed := g.cg.SubscribedTopics()
		byStream := map[string][]int32{}
		n := 0
		for _, cp := range old {
			if t := topicOf[cp.Stream]; t != "" && subscribed[t] {
				continue
			}
			byStream[cp.Stream] = append(byStream[cp.Stream], cp.Partition)
			n++
		}
		if n == len(cps) && len(g.cg.Members) == 0 {
			if code := g.deleteApp(ctx, "offsets expired"); code != 0 {
				ch <- result{err: kerr.ErrorForCode(code)}
				return
			}
			ch <- result{deleted: true}
			return
		}
		for _, stream := range slices.Sorted(maps.Keys(byStream)) {
			ps := byStream[stream]
			if err := c.apps.DeleteCheckpoints(ctx, g.app, stream, ps); err != nil && !errors.Is(err, disbackend.ErrAppNotFound) {
				ch <- result{err: err}
				return
			}
			for _, p := range ps {
				delete(g.cache, tp{stream, p})
			}
			g.log.Info("consumer group offsets expired", zap.String("stream", stream), zap.Int32s("partitions", ps))
		}
		ch <- result{}
	}, func() { ch <- result{err: disbackend.ErrNotCoordinator} })
	if err != nil || !found {
		return false, err // not in memory any more: the next sweep sees what it became
	}
	r := <-ch
	return r.deleted, r.err
}
