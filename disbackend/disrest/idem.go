package disrest

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/disgw/disgw/disbackend"
)

// Idempotent producers: Kafka's rules through disbackend.ProducerStates,
// as localstore applies them, with the state in this process's memory
// only. DIS keeps no producer fields, so after a restart the state is gone
// and a producer's next batch is accepted at any sequence (a retry of a
// batch written before the restart is written again). The README states
// this.

type idemKey struct {
	partKey
	pid int64
}

// idemState is guarded by mu; each partition's writer is its only user for
// that partition, so check and remember of one batch do not interleave with
// another batch of the partition.
type idemState struct {
	mu sync.Mutex
	st disbackend.ProducerStates[idemKey]
}

// check returns the original of a retried batch, or an error for a batch
// that cannot be accepted (ErrInvalidProducerEpoch, ErrOutOfOrderSequence);
// nil, nil means write it and then call remember.
func (s *idemState) check(k partKey, b *disbackend.Batch) (*disbackend.ProducerBatch, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.st.Check(idemKey{k, b.ProducerID}, b)
}

// remember records a written batch at offsets [base, last] with max
// timestamp maxTS (ms).
func (s *idemState) remember(k partKey, b *disbackend.Batch, base, last, maxTS int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.st.Remember(idemKey{k, b.ProducerID}, b, base, last, maxTS, time.Now().UnixMilli())
}

func (s *idemState) dropStream(name string) {
	s.mu.Lock()
	s.st.DropIf(func(k idemKey) bool { return k.stream == name })
	s.mu.Unlock()
}

// ActiveProducers returns the idempotent producer states this process
// keeps for partition part of stream name, by producer id (DescribeProducers;
// the state lives in this process only, see above). A stream or partition
// without state, known to DIS or not, has none. Errors: ErrClosed.
func (s *Store) ActiveProducers(ctx context.Context, name string, part int32) ([]disbackend.ActiveProducer, error) {
	s.closeMu.Lock()
	closed := s.closed
	s.closeMu.Unlock()
	if closed {
		return nil, fmt.Errorf("disrest: active producers: %w", disbackend.ErrClosed)
	}
	k := partKey{stream: name, part: part}
	out := []disbackend.ActiveProducer{}
	s.idem.mu.Lock()
	s.idem.st.Each(func(ik idemKey, ps *disbackend.ProducerState) {
		if ik.partKey == k {
			out = append(out, ps.Active(ik.pid))
		}
	})
	s.idem.mu.Unlock()
	slices.SortFunc(out, func(a, b disbackend.ActiveProducer) int { return cmp.Compare(a.ProducerID, b.ProducerID) })
	return out, nil
}

var _ disbackend.ProducerDescriber = (*Store)(nil)
