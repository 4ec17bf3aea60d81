package groupcoord

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

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
// now and looked at by the next).
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
