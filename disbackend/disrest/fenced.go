package disrest

// The write paths under the fence (fence.go; docs/cluster.md §4): what a
// writer asks before it writes, what it does when a partition arrives
// (takeOver) and when it leaves (viewChanged), and the late writes it
// refuses to acknowledge.

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/disgw/disgw/disbackend"
)

// controllerKey is the fence key of the controller's writes: stream admin
// (create, delete, partitions, configs), ACLs, SCRAM credentials.
const controllerKey = "controller"

// clustered reports whether the Store runs in cluster mode: its fence is
// the membership's, not a single node's.
func (s *Store) clustered() bool {
	_, solo := s.fence.(soloFence)
	return !solo
}

// fenced is fence.mayWrite of key; "" (a write no key owns) is allowed.
func (s *Store) fenced(key string) error {
	if key == "" {
		return nil
	}
	return s.fence.mayWrite(key)
}

// groupWrite is the fence for a write of a consumer group's (its state,
// its app's checkpoints) under key (GroupKey; "" on a single node): the
// fence's takeover, which waits, for a group that moved to this node,
// until its previous coordinator's writes can no longer land (as a
// partition's first write does), so that no commit of the old coordinator
// lands after the new one's; at once otherwise (docs/cluster.md §6).
func (s *Store) groupWrite(ctx context.Context, key string) error {
	if key == "" {
		return nil
	}
	return s.fence.takeover(ctx, key)
}

// controllerWrite asks the fence for the controller's key before a write
// of op only the controller makes (docs/cluster.md §7). Errors: the
// fence's (ErrNotController), wrapped with op.
func (s *Store) controllerWrite(op string) error {
	if err := s.fence.mayWrite(controllerKey); err != nil {
		return fmt.Errorf("disrest: %s: %w", op, err)
	}
	return nil
}

// sharedStream reports whether the gateway's own stream name is written
// by several nodes at once, each for what it owns (a group's state, a
// compacted partition's snapshot): its partitions have no exclusive
// writer, so their writes are fenced by the key of what they are about
// (job.key) and their sequence numbers may interleave.
func sharedStream(name string) bool {
	return name == GroupStream || name == SnapshotStream || name == TxnStream
}

// parsePartitionKey reads a disbackend.PartitionKey back.
func parsePartitionKey(key string) (partKey, bool) {
	rest, ok := strings.CutPrefix(key, "p/")
	if !ok {
		return partKey{}, false
	}
	i := strings.LastIndexByte(rest, '/')
	if i <= 0 {
		return partKey{}, false
	}
	p, err := strconv.ParseInt(rest[i+1:], 10, 32)
	if err != nil || p < 0 {
		return partKey{}, false
	}
	return partKey{rest[:i], int32(p)}, true
}

// viewChanged is the membership's hook (cluster*.go): call it once this
// node's fence answers from a new view, with the placement keys this node
// owned in the view it held before and no longer owns (lost), and those it
// owns now and did not (gained). For each lost partition it stops and
// drops the partition's writer (its queued appends fail with ErrNotLeader;
// a PutRecords in flight ends first, and a later writer of the partition
// waits for it), the partition's idempotence window, batch cut short,
// pacer and putState, and the compactor's key index; the reading caches
// (cursors, read-ahead, ranges) stay, as records never change in DIS. A
// gained partition needs nothing here: its first write goes through
// fence.takeover and resolves the previous leader's intent (takeOver).
// Group and controller keys are not disrest's to drop.
func (s *Store) viewChanged(lost, gained []string) {
	for _, key := range lost {
		if k, ok := parsePartitionKey(key); ok {
			s.dropPartition(k)
		}
	}
	_ = gained
}

// dropPartition forgets what this node keeps to write partition k.
func (s *Store) dropPartition(k partKey) {
	had := false
	if !sharedStream(k.stream) {
		s.closeMu.Lock()
		if w := s.writers[k]; w != nil {
			delete(s.writers, k)
			if s.retired == nil {
				s.retired = map[partKey]chan struct{}{}
			}
			s.retired[k] = w.done
			w.put.dropped.Store(true)
			w.drop()
			had = true
		}
		s.closeMu.Unlock()
		s.idem.dropPart(k)
	}
	s.compact.forgetPart(k)
	if had {
		s.log.Info("partition given up: its writer and write state dropped", zap.String("stream", k.stream), zap.Int32("partition", k.part))
	}
}

// takeOver prepares partition k's first write in a new generation of the
// membership, in cluster mode (a single node, and the shared streams,
// return at once): fence.takeover waits until the previous leader cannot
// write any more, then resolveIdem reads its last intent and the end
// offset from DIS, replacing what this node held in memory unless the
// partition's end offset is still the one this node knew (it led the
// partition all along). ps remembers the generation it was done for.
// A takeover that would still wait past deadline (the earliest Deadline
// of the producers' batches about to be written; zero: none) does not
// wait: ErrNotLeader at once, so that a producer that would give up on
// its batch (REQUEST_TIMED_OUT) retries it instead, and the batch is not
// written behind the retry (a duplicate without idempotence); logged once
// a generation. Errors: that, takeover's (ErrNotLeader; ctx's, as
// ErrUnavailable) and resolveIdem's.
func (s *Store) takeOver(ctx context.Context, k partKey, sid string, ps *putState, deadline time.Time) error {
	if !s.clustered() || sharedStream(k.stream) {
		return nil
	}
	_, gen, _ := s.fence.member()
	if ps.taken && ps.gen == gen {
		return nil
	}
	key := disbackend.PartitionKey(k.stream, k.part)
	if !deadline.IsZero() {
		if wait := s.fence.takeoverWait(key); wait > 0 && time.Now().Add(wait).After(deadline) {
			if ps.refusedGen != gen {
				ps.refusedGen = gen
				s.log.Info("partition taken over: produces refused with NOT_LEADER_OR_FOLLOWER until the previous leader's writes can no longer land",
					zap.String("stream", k.stream), zap.Int32("partition", k.part), zap.Int64("generation", gen),
					zap.Duration("wait", wait.Round(time.Millisecond)))
			}
			return fmt.Errorf("disrest: %s/%d: taking the partition over, first write in %v, after the request's timeout: %w",
				k.stream, k.part, wait.Round(time.Millisecond), disbackend.ErrNotLeader)
		}
	}
	if err := s.fence.takeover(ctx, key); err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("%w: take over %s/%d: %v", disbackend.ErrUnavailable, k.stream, k.part, err)
		}
		return err
	}
	if err := s.resolveIdemMode(ctx, k, sid, ps, true); err != nil {
		return err
	}
	ps.taken, ps.gen = true, gen
	return nil
}

// LateWrites is how many batches, since the Store was opened, DIS wrote
// but this node refused to acknowledge (NOT_LEADER_OR_FOLLOWER) because
// their records are not where one base offset says: their sequence
// numbers are not contiguous, or, in cluster mode, another writer's
// records came between this node's last write and them while this node
// no longer may write the partition (a late write, docs/cluster.md §4).
// Each is also counted in OutOfOrder and in
// disgw_cluster_late_writes_total, and logged as a warning.
func (s *Store) LateWrites() int64 { return s.lateWrites.Load() }

// refuseLate completes a job whose records DIS wrote at sns where its
// producer cannot be told they are: logged, counted, failed with
// ErrNotLeader (the client retries, at the partition's leader).
func (s *Store) refuseLate(k partKey, j *job, sns []int64, why string) {
	s.opts.Metrics.LateWrite()
	s.log.Warn("a batch written where its producer cannot be told: refused with NOT_LEADER_OR_FOLLOWER",
		zap.String("stream", k.stream), zap.Int32("partition", k.part), zap.String("reason", why),
		zap.Int64("producer_id", j.b.ProducerID), zap.Int64("first_sn", sns[0]), zap.Int64("last_sn", sns[len(sns)-1]),
		zap.Int("records", len(sns)), zap.Int64("late_writes_total", s.lateWrites.Add(1)),
		zap.Int64("out_of_order_total", s.outOfOrder.Add(1)))
	s.complete(j, disbackend.AppendResult{}, fmt.Errorf("disrest: append to %s/%d: %w: its records were written at %d-%d, %s",
		k.stream, k.part, disbackend.ErrNotLeader, sns[0], sns[len(sns)-1], why))
}
