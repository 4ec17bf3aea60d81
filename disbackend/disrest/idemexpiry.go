package disrest

// Idle idempotent producers expire (Kafka producer.id.expiration.ms,
// Options.ProducerStateExpiry): a sweep drops, partition by partition, the
// states of producers that have not written for the expiry, and the
// partitions left without state, so that the memory of the dedupe windows
// is that of the producers that wrote within about the expiry, not of
// every producer and partition ever written. The windows kept in DIS
// follow: each checkpoint holds the window in memory when it is committed
// (less the producers expired and not swept yet, idemState.window), and at
// most DIS's 1000 characters of it (encodeIdem), newest batches first.

import (
	"time"

	"go.uber.org/zap"

	"github.com/disgw/disgw/disbackend"
)

// producerExpiryCheck is how often idle producer states are looked for,
// at most (Kafka producer.id.expiration.check.interval.ms, 10 minutes,
// is the same idea).
const producerExpiryCheck = time.Minute

// nowMS is the clock of append times and expiry, in ms.
func (s *idemState) nowMS() int64 {
	if s.now == nil {
		return time.Now().UnixMilli()
	}
	return s.now().UnixMilli()
}

// cutoff is the expiry's cutoff now: a state whose last append is at or
// before it has expired (disbackend.ProducerExpiryCutoff).
func (s *idemState) cutoff() int64 {
	return disbackend.ProducerExpiryCutoff(s.nowMS(), s.expiry)
}

// expire drops the producer states idle for the expiry or longer, and the
// partitions left without any, holding mu for one partition at a time. It
// returns how many states it dropped and how many are left.
func (s *idemState) expire() (dropped, left int) {
	if s.expiry <= 0 {
		return 0, s.count()
	}
	s.mu.Lock()
	keys := make([]partKey, 0, len(s.parts))
	for k := range s.parts {
		keys = append(keys, k)
	}
	s.mu.Unlock()
	cutoff := s.cutoff()
	for _, k := range keys {
		s.mu.Lock()
		if p := s.parts[k]; p != nil {
			dropped += p.Expire(cutoff)
			if p.Len() == 0 {
				delete(s.parts, k)
			}
			left += p.Len()
		}
		s.mu.Unlock()
	}
	return dropped, left
}

// count is how many producer states are kept, over all partitions.
func (s *idemState) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, p := range s.parts {
		n += p.Len()
	}
	return n
}

// expireProducers is one sweep (idemState.expire), logged when it drops
// states.
func (s *Store) expireProducers() {
	if dropped, left := s.idem.expire(); dropped > 0 {
		s.log.Info("producer states expired", zap.Int("count", dropped), zap.Int("producer_states", left),
			zap.Duration("producer_id_expiration", s.idem.expiry))
	}
}

// expireProducersLoop sweeps every interval until Close.
func (s *Store) expireProducersLoop(interval time.Duration) {
	defer s.wg.Done()
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-s.stopPoll:
			return
		case <-t.C:
			s.expireProducers()
		}
	}
}
