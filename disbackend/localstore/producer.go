package localstore

import (
	"cmp"
	"context"
	"fmt"
	"slices"

	"github.com/cockroachdb/pebble/v2"
	"go.uber.org/zap"

	"github.com/disgw/disgw/disbackend"
)

// producerKey names one idempotent producer's state on one partition.
type producerKey struct {
	sid  uint64
	part int32
	pid  int64
}

// The producer states (Store.producers, guarded by Store.wmu) follow
// Kafka's ProducerStateManager rules through disbackend.ProducerStates.
// Open loads them from the stream's producer snapshot and replays the
// batches stored after it (snapshot.go): their headers hold the producer
// id, epoch and base sequence, so the states are exactly what the synced
// log implies, less the states that expired (ProducerStateExpiry): a
// batch appended longer ago than that rebuilds nothing, and Open drops
// the loaded states idle that long, so the memory they take at start is
// that of the producers that wrote within the expiry.

// rebuildProducer replays one stored batch into the producer states, as
// checkProducer accepted it, unless it was appended at or before
// loadCutoffMS (its producer's state from it has expired). Frames come in
// offset order per partition; a batch the state already holds (at or
// below its last batch's offsets: a snapshot taken after it) is skipped,
// so that replaying a segment twice changes nothing.
func (s *Store) rebuildProducer(p *partition, f *frameInfo) {
	if f.pid < 0 || f.seq < 0 || f.appendMS <= s.loadCutoffMS { // seq < 0: a control batch (writer.accept)
		return
	}
	k := producerKey{sid: p.sid, part: p.id, pid: f.pid}
	if s.holdsBatch(k, f.base) {
		return
	}
	s.producers.Rebuild(k, f.epoch, f.seq, f.base, f.last, f.maxTS, f.appendMS)
}

// holdsBatch reports whether k's state already holds the batch at base:
// its last batch ends at or after it. Requires wmu (or Open).
func (s *Store) holdsBatch(k producerKey, base int64) bool {
	ps := s.producers.Get(k)
	return ps != nil && len(ps.Batches) > 0 && base <= ps.Batches[len(ps.Batches)-1].LastOffset
}

// maybeExpireProducers is expireProducers when the last look for idle
// states was producerExpiryCheck ago or more (ProducerStateExpiry ago
// when shorter): the writer calls it for each group, so that the states
// kept are those of the producers that appended within about the expiry,
// whatever the retention loop does. Requires wmu.
func (s *Store) maybeExpireProducers(nowMS int64) {
	if s.producerExpiry > 0 && nowMS-s.producersCheckedMS >= min(producerExpiryCheck, s.producerExpiry).Milliseconds() {
		s.expireProducers(nowMS)
	}
}

// expireProducers drops the producer states idle for ProducerStateExpiry
// or longer at nowMS (ms), and logs how many it dropped. Requires wmu.
func (s *Store) expireProducers(nowMS int64) {
	if s.producerExpiry <= 0 {
		return
	}
	s.producersCheckedMS = nowMS
	if n := s.producers.Expire(disbackend.ProducerExpiryCutoff(nowMS, s.producerExpiry)); n > 0 {
		s.log.Info("producer states expired", zap.Int("count", n), zap.Int("producer_states", s.producers.Len()),
			zap.Duration("producer_id_expiration", s.producerExpiry))
	}
}

// checkProducer applies Kafka's rules to an idempotent batch that would get
// offsets [base, last] and be stored with max timestamp maxTS (ms), and
// records it, or returns the original batch when b
// is a retry of one of the last five (then nothing changes), or
// ErrInvalidProducerEpoch / ErrOutOfOrderSequence (then nothing changes).
// A producer without state (new, or expired) may start at any sequence.
// Requires wmu.
func (s *Store) checkProducer(p *partition, b *disbackend.Batch, base, last, maxTS, nowMS int64) (*disbackend.ProducerBatch, error) {
	k := producerKey{sid: p.sid, part: p.id, pid: b.ProducerID}
	dup, err := s.producers.Check(k, b)
	if dup != nil || err != nil {
		return dup, err
	}
	s.producers.Remember(k, b, base, last, maxTS, nowMS)
	return nil, nil
}

// InitProducerID returns a producer id never handed out before, with epoch 0
// (Kafka InitProducerId without a transactional id). Ids are reserved in
// synced blocks of 1000, so a restart skips at most the rest of a block and
// never reuses one. Errors: ErrClosed, or a storage error.
func (s *Store) InitProducerID(ctx context.Context) (int64, int16, error) {
	if err := ctx.Err(); err != nil {
		return 0, 0, fmt.Errorf("localstore: init producer id: %w", err)
	}
	s.pidMu.Lock()
	defer s.pidMu.Unlock()
	if s.pidNext >= s.pidLimit {
		if err := s.enter("init producer id"); err != nil {
			return 0, 0, err
		}
		limit := s.pidLimit + producerIDBlock
		err := s.db.Set([]byte{keyAllocator}, putInt64(limit), pebble.Sync)
		s.dbMu.RUnlock()
		if err != nil {
			return 0, 0, fmt.Errorf("localstore: init producer id: reserve block: %w", metaErr(err))
		}
		s.pidLimit = limit
	}
	id := s.pidNext
	s.pidNext++
	return id, 0, nil
}

// ActiveProducers returns the idempotent producer states of partition part
// of stream name, by producer id (DescribeProducers). Errors:
// ErrStreamNotFound, ErrPartitionNotFound, ErrClosed.
func (s *Store) ActiveProducers(ctx context.Context, name string, part int32) ([]disbackend.ActiveProducer, error) {
	if s.closed.Load() {
		return nil, fmt.Errorf("localstore: active producers: %w", disbackend.ErrClosed)
	}
	p, err := s.lookup("active producers", name, part)
	if err != nil {
		return nil, err
	}
	out := []disbackend.ActiveProducer{}
	s.wmu.Lock()
	s.producers.Each(func(k producerKey, ps *disbackend.ProducerState) {
		if k.sid == p.sid && k.part == p.id {
			out = append(out, ps.Active(k.pid))
		}
	})
	s.wmu.Unlock()
	slices.SortFunc(out, func(a, b disbackend.ActiveProducer) int { return cmp.Compare(a.ProducerID, b.ProducerID) })
	return out, nil
}

var _ disbackend.ProducerDescriber = (*Store)(nil)
