package disbackend

import (
	"context"
	"fmt"
	"math"
	"time"
)

// Idempotent producers: Kafka's ProducerStateManager rules, in one pure
// type that every store calls under its own lock. A store keys the states
// by (partition, producer id) in whatever K it uses, checks a batch before
// it writes it, remembers it once it has its offsets, and (when it keeps
// the producer fields of its batches, as the embedded store does) rebuilds
// the states at start by replaying its batches.

// MaxProducerBatches is how many batches per producer and partition are
// kept for duplicate detection: 5, as Kafka keeps (with idempotence a
// producer has at most 5 requests in flight per connection,
// max.in.flight.requests.per.connection).
const MaxProducerBatches = 5

// ProducerBatch is one batch a producer appended to a partition (Kafka's
// BatchMetadata): its producer sequence range, the offsets it got and its
// stored max timestamp.
type ProducerBatch struct {
	FirstSeq, LastSeq int32
	BaseOffset        int64 // offset of the batch's first record
	LastOffset        int64 // offset of its last record
	// MaxTimestamp is the stored batch's max timestamp (ms): the append
	// time on a LogAppendTime stream. Kafka answers a retry of the batch
	// with it as the Produce response's LogAppendTime, whatever the
	// stream's timestamp type (UnifiedLog.append, duplicate path).
	MaxTimestamp int64
}

// ProducerState is one producer's state on one partition (Kafka's
// ProducerStateEntry): its epoch, the time of its last append, and its
// last MaxProducerBatches batches, oldest first.
type ProducerState struct {
	Epoch int16
	// LastAppendMS is when the store appended the producer's last batch
	// (ms since the Unix epoch), for expiry (Kafka
	// producer.id.expiration.ms, see Expire).
	LastAppendMS int64
	Batches      []ProducerBatch
}

// DefaultProducerIDExpiration is how long an idle producer's state is
// kept by default: Kafka's producer.id.expiration.ms default, 86400000 ms.
const DefaultProducerIDExpiration = 24 * time.Hour

// ProducerExpiryCutoff is the cutoff to give Expire at nowMS (ms) for an
// expiry of expiry: a state whose last append is at or before it has
// been idle for expiry or longer. expiry <= 0 (never expire) gives
// math.MinInt64, at or before which no append is.
func ProducerExpiryCutoff(nowMS int64, expiry time.Duration) int64 {
	if expiry <= 0 {
		return math.MinInt64
	}
	return nowMS - expiry.Milliseconds()
}

// ProducerStates holds the producer states of a store by key K (a
// partition and a producer id). The zero value is empty and usable. Not
// safe for concurrent use: the store's lock guards it, and a partition's
// check and remember of one batch must not interleave with another batch
// of that partition.
type ProducerStates[K comparable] struct {
	m map[K]*producerNode[K]
	// peak is the most states m has held since it was made: a Go map
	// keeps the room of its peak after deletes, so Expire and DropIf copy
	// it into a new map once it holds less than a quarter of that.
	peak int
	// oldest and newest end the list of the states by last append,
	// oldest first, from whose front Expire takes the expired ones: its
	// cost is that of what expires, not of every state kept.
	oldest, newest *producerNode[K]
}

// producerNode is a state in ProducerStates' map and list.
type producerNode[K comparable] struct {
	ProducerState
	key        K
	prev, next *producerNode[K] // older, newer
}

// shrinkBelow: a map of fewer states than this is never copied to give
// room back (its room is small).
const shrinkBelow = 1024

// IncSequence adds inc to a producer sequence number, wrapping from
// math.MaxInt32 to 0 (Kafka DefaultRecordBatch.incrementSequence).
func IncSequence(seq, inc int32) int32 {
	if seq > math.MaxInt32-inc {
		return inc - (math.MaxInt32 - seq) - 1
	}
	return seq + inc
}

// Check applies Kafka's rules to the idempotent batch b (ProducerID >= 0)
// about to be appended under key k, and changes nothing:
//   - no state for k (a new producer, or one whose state expired or is
//     gone): any epoch and sequence is accepted, so a retry from a
//     producer whose state expired is written again as a new batch
//     (Kafka ProducerAppendInfo.checkSequence: with no entry the current
//     epoch is RecordBatch.NO_PRODUCER_EPOCH, and "if there is no current
//     producer epoch ... accept writes with any sequence number"; since
//     KIP-360, Kafka 2.5, no UNKNOWN_PRODUCER_ID);
//   - an older epoch than the state's: ErrInvalidProducerEpoch;
//   - a newer epoch: accepted when it starts at sequence 0, else
//     ErrOutOfOrderSequence;
//   - the same epoch: a retry of one of the remembered batches (the same
//     first and last sequence) returns that batch, whose offsets answer
//     the retry; otherwise the batch must start right after the last one
//     (sequences wrap from math.MaxInt32 to 0), else ErrOutOfOrderSequence.
//
// (nil, nil) means: write b, then Remember it.
func (s *ProducerStates[K]) Check(k K, b *Batch) (*ProducerBatch, error) {
	ps := s.Get(k)
	switch {
	case ps == nil:
		return nil, nil
	case b.ProducerEpoch < ps.Epoch:
		return nil, fmt.Errorf("%w (current epoch %d)", ErrInvalidProducerEpoch, ps.Epoch)
	case b.ProducerEpoch > ps.Epoch:
		if b.BaseSequence != 0 {
			return nil, fmt.Errorf("%w: first batch of new epoch %d must start at sequence 0",
				ErrOutOfOrderSequence, b.ProducerEpoch)
		}
		return nil, nil
	}
	lastSeq := IncSequence(b.BaseSequence, b.NumRecords-1)
	for i := range ps.Batches {
		if ps.Batches[i].FirstSeq == b.BaseSequence && ps.Batches[i].LastSeq == lastSeq {
			dup := ps.Batches[i]
			return &dup, nil
		}
	}
	if n := len(ps.Batches); n > 0 {
		if want := IncSequence(ps.Batches[n-1].LastSeq, 1); b.BaseSequence != want {
			return nil, fmt.Errorf("%w: expected sequence %d", ErrOutOfOrderSequence, want)
		}
	}
	return nil, nil
}

// Remember records the idempotent batch b, which Check accepted, as
// written at offsets [base, last] with max timestamp maxTS (ms, as
// stored) at nowMS (ms): a newer epoch starts the state over, and only
// the last MaxProducerBatches batches are kept.
func (s *ProducerStates[K]) Remember(k K, b *Batch, base, last, maxTS, nowMS int64) {
	s.put(k, b.ProducerEpoch, ProducerBatch{
		FirstSeq: b.BaseSequence, LastSeq: IncSequence(b.BaseSequence, b.NumRecords-1),
		BaseOffset: base, LastOffset: last, MaxTimestamp: maxTS,
	}, nowMS)
}

// Rebuild replays a stored batch of producer epoch epoch, first sequence
// baseSeq, at offsets [base, last] with max timestamp maxTS (ms) appended
// at appendMS (ms), as Check accepted
// it when it was written: a newer epoch starts the state over, an older
// one (which Check would have refused) is ignored. The state's last
// append becomes appendMS unless it is already later. The store replays
// a partition's batches in offset order.
func (s *ProducerStates[K]) Rebuild(k K, epoch int16, baseSeq int32, base, last, maxTS, appendMS int64) {
	ps := s.Get(k)
	if ps != nil && epoch < ps.Epoch {
		return
	}
	if ps != nil && epoch == ps.Epoch {
		appendMS = max(appendMS, ps.LastAppendMS)
	}
	s.put(k, epoch, ProducerBatch{
		FirstSeq: baseSeq, LastSeq: IncSequence(baseSeq, int32(last-base)),
		BaseOffset: base, LastOffset: last, MaxTimestamp: maxTS,
	}, appendMS)
}

func (s *ProducerStates[K]) put(k K, epoch int16, b ProducerBatch, nowMS int64) {
	if s.m == nil {
		s.m = make(map[K]*producerNode[K])
	}
	n := s.m[k]
	switch {
	case n == nil:
		n = &producerNode[K]{ProducerState: ProducerState{Epoch: epoch}, key: k}
		s.m[k] = n
		s.peak = max(s.peak, len(s.m))
	default:
		s.unlink(n)
		if epoch > n.Epoch {
			n.Epoch, n.Batches = epoch, n.Batches[:0]
		}
	}
	ps := &n.ProducerState
	if len(ps.Batches) == MaxProducerBatches {
		copy(ps.Batches, ps.Batches[1:])
		ps.Batches = ps.Batches[:MaxProducerBatches-1]
	}
	ps.Batches = append(ps.Batches, b)
	ps.LastAppendMS = nowMS
	s.link(n)
}

// link puts n, not in the list, at its place by last append: after the
// newest state not later than it (the newest, but for a clock that went
// back).
func (s *ProducerStates[K]) link(n *producerNode[K]) {
	after := s.newest
	for after != nil && after.LastAppendMS > n.LastAppendMS {
		after = after.prev
	}
	n.prev = after
	if after == nil {
		n.next, s.oldest = s.oldest, n
	} else {
		n.next, after.next = after.next, n
	}
	if n.next == nil {
		s.newest = n
	} else {
		n.next.prev = n
	}
}

// unlink takes n out of the list.
func (s *ProducerStates[K]) unlink(n *producerNode[K]) {
	if n.prev == nil {
		s.oldest = n.next
	} else {
		n.prev.next = n.next
	}
	if n.next == nil {
		s.newest = n.prev
	} else {
		n.next.prev = n.prev
	}
	n.prev, n.next = nil, nil
}

// remove drops n from the map and the list.
func (s *ProducerStates[K]) remove(n *producerNode[K]) {
	s.unlink(n)
	delete(s.m, n.key)
}

// Get returns the state under k, nil when there is none. The caller must
// not keep it past the store's lock.
func (s *ProducerStates[K]) Get(k K) *ProducerState {
	if n := s.m[k]; n != nil {
		return &n.ProducerState
	}
	return nil
}

// Restore puts back under k a state saved before changes that are undone
// (a store taking back a write that failed): ps is a copy of what Get
// returned then (its Batches not shared with the state), nil when there
// was none, which drops the state k has now.
func (s *ProducerStates[K]) Restore(k K, ps *ProducerState) {
	n := s.m[k]
	if ps == nil {
		if n != nil {
			s.remove(n)
		}
		return
	}
	if n == nil {
		if s.m == nil {
			s.m = make(map[K]*producerNode[K])
		}
		n = &producerNode[K]{key: k}
		s.m[k] = n
		s.peak = max(s.peak, len(s.m))
	} else {
		s.unlink(n)
	}
	n.Epoch, n.LastAppendMS = ps.Epoch, ps.LastAppendMS
	n.Batches = append(n.Batches[:0], ps.Batches...)
	s.link(n)
}

// Each calls f with every state, in no order. f must not change s.
func (s *ProducerStates[K]) Each(f func(k K, ps *ProducerState)) {
	for k, n := range s.m {
		f(k, &n.ProducerState)
	}
}

// Len is the number of states.
func (s *ProducerStates[K]) Len() int { return len(s.m) }

// Expire drops the states whose last append is at or before cutoffMS
// (ms; ProducerExpiryCutoff) and returns how many it dropped: Kafka's
// ProducerStateManager.removeExpiredProducers, which drops a producer
// when currentTimeMs - lastTimestamp >= producer.id.expiration.ms
// (isProducerExpired). Kafka's lastTimestamp is the max timestamp of the
// producer's last batch, which a producer's CreateTime sets; a store here
// counts from when it appended the batch (LastAppendMS), so a producer
// that writes old timestamps (a replay of history) keeps its state while
// it writes, and one with a clock ahead is not kept longer. On a
// LogAppendTime topic the two are the same. A producer with an open
// transaction, which Kafka never expires, does not arise: the gateway
// offers no transactions.
// It takes them from the front of the list by last append, so its cost
// is that of the states it drops.
func (s *ProducerStates[K]) Expire(cutoffMS int64) int {
	n := 0
	for s.oldest != nil && s.oldest.LastAppendMS <= cutoffMS {
		s.remove(s.oldest)
		n++
	}
	if n > 0 {
		s.shrink()
	}
	return n
}

// DropIf drops the states whose key drop reports true (a deleted stream's).
func (s *ProducerStates[K]) DropIf(drop func(K) bool) {
	for k, n := range s.m {
		if drop(k) {
			s.remove(n)
		}
	}
	s.shrink()
}

// shrink copies the states into a map of their size when they are less
// than a quarter of the peak, so that the memory of the states is that
// of the live producers, not of the most there ever were.
func (s *ProducerStates[K]) shrink() {
	if s.peak < shrinkBelow || len(s.m) >= s.peak/4 {
		return
	}
	m := make(map[K]*producerNode[K], len(s.m))
	for k, n := range s.m {
		m[k] = n
	}
	s.m, s.peak = m, len(m)
}

// ActiveProducer is one idempotent producer's state on one partition, as
// DescribeProducers (Kafka API 61) shows it.
type ActiveProducer struct {
	ProducerID   int64
	Epoch        int16
	LastSequence int32 // the last sequence number of its last batch
	// LastAppendMS is when its last batch was appended, in ms since the
	// Unix epoch (Kafka shows the batch's max timestamp, which is this
	// time for LogAppendTime topics and the producer's clock otherwise).
	LastAppendMS int64
}

// ProducerDescriber is implemented by the backends that keep idempotent
// producer states (both do), for DescribeProducers.
type ProducerDescriber interface {
	// ActiveProducers returns the producer states kept for partition of
	// stream, by producer id ascending; none is an empty list. Errors:
	// ErrClosed; ErrStreamNotFound or ErrPartitionNotFound where the
	// backend knows the stream without asking DIS (localstore; disrest
	// answers an empty list, the gateway checks the topic first).
	ActiveProducers(ctx context.Context, stream string, partition int32) ([]ActiveProducer, error)
}

// Active returns the state as an ActiveProducer of producer id pid.
func (ps *ProducerState) Active(pid int64) ActiveProducer {
	a := ActiveProducer{ProducerID: pid, Epoch: ps.Epoch, LastSequence: -1, LastAppendMS: ps.LastAppendMS}
	if n := len(ps.Batches); n > 0 {
		a.LastSequence = ps.Batches[n-1].LastSeq
	}
	return a
}
