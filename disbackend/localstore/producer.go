package localstore

import (
	"context"
	"fmt"
	"math"

	"github.com/cockroachdb/pebble/v2"

	"github.com/disgw/disgw/disbackend"
)

// producerKey names one idempotent producer's state on one partition.
type producerKey struct {
	sid  uint64
	part int32
	pid  int64
}

// producerBatch is one of the last batches a producer appended to a
// partition: its sequence range and the offsets it got.
type producerBatch struct {
	firstSeq, lastSeq int32
	base, last        int64
}

// producerState is Kafka's ProducerStateEntry for one producer-partition: the
// epoch and the last maxProducerBatches batches, oldest first. Guarded by
// Store.wmu. It is not persisted on its own: Open rebuilds it from the
// headers of the stored batches (rebuildProducers), which hold the producer
// id, epoch and base sequence, so it is exactly what the synced log implies.
type producerState struct {
	epoch        int16
	lastAppendMS int64 // ms, for expiry (producer.id.expiration.ms)
	batches      []producerBatch
}

// maxProducerBatches is how many batches per producer-partition are kept for
// duplicate detection; Kafka keeps 5 (max.in.flight.requests.per.connection
// may be at most 5 with idempotence).
const maxProducerBatches = 5

// remember appends a batch to the state, keeping the last five.
func (ps *producerState) remember(b producerBatch, nowMS int64) {
	if len(ps.batches) == maxProducerBatches {
		copy(ps.batches, ps.batches[1:])
		ps.batches = ps.batches[:maxProducerBatches-1]
	}
	ps.batches = append(ps.batches, b)
	ps.lastAppendMS = nowMS
}

// rebuildProducer replays one stored batch into the producer states, as
// checkProducer accepted it: a newer epoch starts over. Frames come in
// offset order per partition.
func (s *Store) rebuildProducer(p *partition, f *frameInfo) {
	if f.pid < 0 {
		return
	}
	k := producerKey{sid: p.sid, part: p.id, pid: f.pid}
	ps := s.producers[k]
	switch {
	case ps == nil:
		ps = &producerState{epoch: f.epoch}
		s.producers[k] = ps
	case f.epoch > ps.epoch:
		ps.epoch, ps.batches = f.epoch, ps.batches[:0]
	case f.epoch < ps.epoch:
		return // cannot be accepted; ignore
	}
	lastSeq := incSequence(f.seq, int32(f.last-f.base))
	ps.remember(producerBatch{firstSeq: f.seq, lastSeq: lastSeq, base: f.base, last: f.last}, f.appendMS)
}

// incSequence adds inc to a producer sequence number, wrapping from
// math.MaxInt32 to 0 (Kafka DefaultRecordBatch.incrementSequence).
func incSequence(seq, inc int32) int32 {
	if seq > math.MaxInt32-inc {
		return inc - (math.MaxInt32 - seq) - 1
	}
	return seq + inc
}

// checkProducer applies Kafka's ProducerStateManager rules to an idempotent
// batch that would get offsets [base, last] and records it, or returns the
// original batch when b is a retry of one of the last five (then nothing
// changes), or ErrInvalidProducerEpoch / ErrOutOfOrderSequence (then nothing
// changes). A producer without state (new, or expired) may start at
// any sequence. Requires wmu.
func (s *Store) checkProducer(p *partition, b disbackend.Batch, base, last, nowMS int64) (*producerBatch, error) {
	k := producerKey{sid: p.sid, part: p.id, pid: b.ProducerID}
	lastSeq := incSequence(b.BaseSequence, b.NumRecords-1)
	ps := s.producers[k]
	switch {
	case ps == nil:
		ps = &producerState{epoch: b.ProducerEpoch}
	case b.ProducerEpoch < ps.epoch:
		return nil, fmt.Errorf("%w (current epoch %d)", disbackend.ErrInvalidProducerEpoch, ps.epoch)
	case b.ProducerEpoch > ps.epoch:
		if b.BaseSequence != 0 {
			return nil, fmt.Errorf("%w: first batch of new epoch %d must start at sequence 0",
				disbackend.ErrOutOfOrderSequence, b.ProducerEpoch)
		}
		ps.epoch, ps.batches = b.ProducerEpoch, ps.batches[:0]
	default:
		for i := range ps.batches {
			if ps.batches[i].firstSeq == b.BaseSequence && ps.batches[i].lastSeq == lastSeq {
				dup := ps.batches[i]
				return &dup, nil
			}
		}
		if n := len(ps.batches); n > 0 && b.BaseSequence != incSequence(ps.batches[n-1].lastSeq, 1) {
			return nil, fmt.Errorf("%w: expected sequence %d", disbackend.ErrOutOfOrderSequence,
				incSequence(ps.batches[n-1].lastSeq, 1))
		}
	}
	s.producers[k] = ps
	ps.remember(producerBatch{firstSeq: b.BaseSequence, lastSeq: lastSeq, base: base, last: last}, nowMS)
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
			return 0, 0, fmt.Errorf("localstore: init producer id: reserve block: %w", err)
		}
		s.pidLimit = limit
	}
	id := s.pidNext
	s.pidNext++
	return id, 0, nil
}
