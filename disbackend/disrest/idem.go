package disrest

import (
	"fmt"
	"math"
	"sync"

	"github.com/disgw/disgw/disbackend"
)

// Idempotent producers: Kafka's ProducerStateManager rules, as localstore
// applies them, with the state in this process's memory only. DIS keeps no
// producer fields, so after a restart the state is gone and a producer's
// next batch is accepted at any sequence (a retry of a batch written before
// the restart is written again). The README states this.

const maxProducerBatches = 5

type producerBatch struct {
	firstSeq, lastSeq int32
	base, last        int64
}

type producerState struct {
	epoch   int16
	batches []producerBatch
}

type idemKey struct {
	partKey
	pid int64
}

// idemState is guarded by mu; each partition's writer is its only user for
// that partition, so check and remember of one batch do not interleave with
// another batch of the partition.
type idemState struct {
	mu sync.Mutex
	m  map[idemKey]*producerState
}

func (s *idemState) init() { s.m = map[idemKey]*producerState{} }

func incSequence(seq, inc int32) int32 {
	if seq > math.MaxInt32-inc {
		return inc - (math.MaxInt32 - seq) - 1
	}
	return seq + inc
}

// check returns the original of a retried batch, or an error for a batch
// that cannot be accepted (ErrInvalidProducerEpoch, ErrOutOfOrderSequence);
// nil, nil means write it and then call remember.
func (s *idemState) check(k partKey, b disbackend.Batch) (*producerBatch, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ps := s.m[idemKey{k, b.ProducerID}]
	lastSeq := incSequence(b.BaseSequence, b.NumRecords-1)
	switch {
	case ps == nil:
		return nil, nil
	case b.ProducerEpoch < ps.epoch:
		return nil, fmt.Errorf("%w (current epoch %d)", disbackend.ErrInvalidProducerEpoch, ps.epoch)
	case b.ProducerEpoch > ps.epoch:
		if b.BaseSequence != 0 {
			return nil, fmt.Errorf("%w: first batch of new epoch %d must start at sequence 0",
				disbackend.ErrOutOfOrderSequence, b.ProducerEpoch)
		}
		return nil, nil
	}
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
	return nil, nil
}

// remember records a written batch at offsets [base, last].
func (s *idemState) remember(k partKey, b disbackend.Batch, base, last int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	key := idemKey{k, b.ProducerID}
	ps := s.m[key]
	if ps == nil {
		ps = &producerState{epoch: b.ProducerEpoch}
		s.m[key] = ps
	}
	if b.ProducerEpoch > ps.epoch {
		ps.epoch, ps.batches = b.ProducerEpoch, ps.batches[:0]
	}
	if len(ps.batches) == maxProducerBatches {
		copy(ps.batches, ps.batches[1:])
		ps.batches = ps.batches[:maxProducerBatches-1]
	}
	ps.batches = append(ps.batches, producerBatch{
		firstSeq: b.BaseSequence, lastSeq: incSequence(b.BaseSequence, b.NumRecords-1), base: base, last: last,
	})
}

func (s *idemState) dropStream(name string) {
	s.mu.Lock()
	for k := range s.m {
		if k.stream == name {
			delete(s.m, k)
		}
	}
	s.mu.Unlock()
}
