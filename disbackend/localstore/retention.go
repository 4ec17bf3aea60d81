package localstore

import (
	"fmt"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"go.uber.org/zap"
)

// retentionLoop runs EnforceRetention every interval until Close.
func (s *Store) retentionLoop(interval time.Duration) {
	defer s.bg.Done()
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
			if err := s.EnforceRetention(); err != nil {
				s.log.Error("retention pass failed", zap.Error(err))
			}
		}
	}
}

// expiry is one partition's planned retention step: batches in
// [from, to) expire.
type expiry struct {
	name     string
	p        *partition
	from, to int64
}

// EnforceRetention runs one retention pass now (the background loop calls it
// every Options.RetentionCheckInterval). In each stream with a finite
// Retention (DIS data_duration, Kafka retention.ms) it removes, from the front
// of each partition and in offset order, the whole synced batches appended
// longer than Retention ago, and persists the partition's new first sequence
// number; next never moves. It also drops idempotent producer states idle for
// longer than Options.ProducerStateExpiry. Errors: ErrClosed, or a storage
// error.
func (s *Store) EnforceRetention() error {
	if err := s.enter("retention"); err != nil {
		return err
	}
	defer s.dbMu.RUnlock()
	nowMS := s.now().UnixMilli()
	type target struct {
		name     string
		cutoffMS int64
		parts    []*partition
	}
	var targets []target
	s.mu.RLock()
	for name, st := range s.streams {
		if r := st.meta.Config.Retention; r > 0 {
			targets = append(targets, target{name: name, cutoffMS: nowMS - r.Milliseconds(), parts: st.parts})
		}
	}
	s.mu.RUnlock()

	var plan []expiry
	for _, t := range targets {
		for _, p := range t.parts {
			to, err := s.expiredUpTo(p, t.cutoffMS)
			if err != nil {
				return fmt.Errorf("localstore: retention stream %q partition %d: %w", t.name, p.id, err)
			}
			if first, _ := p.span(); to > first {
				plan = append(plan, expiry{name: t.name, p: p, from: first, to: to})
			}
		}
	}
	return s.applyExpiry(plan, nowMS)
}

// expiredUpTo returns the offset after the last expired batch of the
// partition's synced front (first when none expired).
func (s *Store) expiredUpTo(p *partition, cutoffMS int64) (int64, error) {
	first, next := p.span()
	it, err := s.db.NewIter(&pebble.IterOptions{
		LowerBound: offsetKey(prefixIndex, p.sid, p.id, first),
		UpperBound: offsetKey(prefixIndex, p.sid, p.id, next),
	})
	if err != nil {
		return 0, err
	}
	defer it.Close()
	to := first
	for ok := it.First(); ok; ok = it.Next() {
		e, valid := decodeIndexEntry(it.Value())
		if !valid {
			return 0, fmt.Errorf("index %x: %w", it.Key(), errCorrupt)
		}
		if e.appendMS >= cutoffMS {
			break
		}
		to = e.last + 1
	}
	return to, it.Error()
}

// applyExpiry removes the planned batches and idle producer states in one
// synced Pebble batch, then moves the partitions' first.
func (s *Store) applyExpiry(plan []expiry, nowMS int64) error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	b := s.db.NewBatch()
	defer b.Close()
	kept := plan[:0]
	for _, e := range plan {
		if st := s.streams[e.name]; st == nil || st.sid != e.p.sid {
			continue // deleted meanwhile
		}
		_ = b.DeleteRange(offsetKey(prefixBatch, e.p.sid, e.p.id, e.from), offsetKey(prefixBatch, e.p.sid, e.p.id, e.to), nil)
		_ = b.DeleteRange(offsetKey(prefixIndex, e.p.sid, e.p.id, e.from), offsetKey(prefixIndex, e.p.sid, e.p.id, e.to), nil)
		_ = b.Set(partKey(prefixFloor, e.p.sid, e.p.id), putInt64(e.to), nil)
		kept = append(kept, e)
	}
	var expired []producerKey
	if s.producerExpiry > 0 {
		cutoff := nowMS - s.producerExpiry.Milliseconds()
		for k, ps := range s.producers {
			if ps.lastAppendMS < cutoff {
				_ = b.Delete(offsetKey(prefixProducer, k.sid, k.part, k.pid), nil)
				expired = append(expired, k)
			}
		}
	}
	if b.Empty() {
		return nil
	}
	if err := b.Commit(pebble.Sync); err != nil {
		return fmt.Errorf("localstore: retention: %w", err)
	}
	for _, k := range expired {
		delete(s.producers, k)
	}
	for _, e := range kept {
		e.p.mu.Lock()
		e.p.first = max(e.p.first, e.to)
		bytes, n := e.p.dropCacheBelow(e.to)
		e.p.mu.Unlock()
		s.cache.release(bytes, n)
		s.log.Debug("retention removed batches", zap.String("stream", e.name), zap.Int32("partition", e.p.id),
			zap.Int64("offset", e.from), zap.Int64("new_first", e.to))
	}
	if len(kept) > 0 {
		s.notifyChanged()
	}
	if len(expired) > 0 {
		s.log.Info("producer states expired", zap.Int("count", len(expired)))
	}
	return nil
}
