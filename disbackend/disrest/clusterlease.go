package disrest

// The lease of cluster mode (docs/cluster.md §4): every ClusterLease/3 a
// node commits nodesApp's checkpoint on MetaStream's partition 0 with its
// client id and generation. DIS accepts that only from a member of the
// group's current generation while the group is stable, so a renewal it
// accepted was sent before any rebalance that could move what the node
// owns began. The lease holds for ClusterLease from the moment the
// accepted renewal was sent, on the node's monotonic clock; a refused one
// ends it at once. The fence (mayWrite) lets writes go only while it
// holds, for the generation of the node's view.

import (
	"context"
	"strconv"
	"time"

	"go.uber.org/zap"

	"github.com/disgw/disgw/disbackend/disapi"
)

// renewLease is the lease loop, from start until close. Once DIS refused
// a renewal for the group's sake, that generation is over: the loop waits
// for the next SyncGroup before it renews again.
func (m *membership) renewLease() {
	defer m.wg.Done()
	ctx := m.ctx
	t := time.NewTicker(m.lease / 3)
	defer t.Stop()
	held := false
	refused := int64(-1) // the sync whose generation DIS refused
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-m.kick:
		}
		if !m.pause.wait(ctx) {
			return
		}
		gen, syncs := m.synced()
		if gen < 0 || syncs == refused {
			continue
		}
		var ended bool
		held, ended = m.renewOnce(ctx, gen, held)
		if ended {
			refused = syncs
		}
	}
}

// kickLease has the lease loop renew now (a new generation).
func (m *membership) kickLease() { signal(m.kick) }

// renewOnce sends one renewal for gen and reports whether the lease holds
// after it, and whether DIS refused it for the group's sake (gen is over);
// held is whether it held before (a loss is logged once).
func (m *membership) renewOnce(ctx context.Context, gen int64, held bool) (holds, ended bool) {
	sent := m.mono()
	rctx, cancel := context.WithTimeout(ctx, m.lease)
	err := m.s.commitFenced(rctx, nodesApp, MetaStream, 0, m.leaseSN, "lease node="+strconv.Itoa(int(m.nodeID)), m.clientID, gen)
	cancel()
	switch {
	case err == nil:
		if m.failure.Load() == nil && ctx.Err() == nil {
			m.held.Store(&leaseState{gen: gen, until: sent + m.lease})
		}
		if !held {
			m.log.Debug("cluster lease held", zap.Int64("generation", gen))
		}
		return true, false
	case fenceRefused(err):
		m.held.Store(nil)
		m.refused.Store(&leaseRefusal{code: codeOf(err), at: m.mono()})
		m.s.opts.Metrics.ClusterLeaseRefused()
		switch {
		case held && codeOf(err) == disapi.CodeGroupRebalancing:
			// Every rebalance of the nodes does this: expected.
			m.log.Info("cluster lease lost: the nodes rebalance", zap.Int64("generation", gen), zap.Error(err))
		case held:
			m.log.Warn("cluster lease lost: DIS refused its renewal", zap.Int64("generation", gen), zap.Error(err))
		default:
			m.log.Debug("cluster lease refused", zap.Int64("generation", gen), zap.Error(err))
		}
		signal(m.poke) // heartbeat now: the generation has ended
		return false, true
	case codeOf(err) == disapi.CodeSequenceNumberOutOfRange:
		// MetaStream's first sequence number moved (records expired).
		if r, rerr := m.s.describeRange(ctx, MetaStream, 0); rerr == nil {
			m.leaseSN = r.First
		}
	}
	l := m.held.Load()
	if l != nil && l.gen == gen && m.mono() < l.until {
		return true, false
	}
	if held {
		m.log.Warn("cluster lease lapsed: its renewals failed", zap.Int64("generation", gen), zap.Duration("lease", m.lease), zap.Error(err))
	}
	return false, false
}
