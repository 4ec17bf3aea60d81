package localstore

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"

	"github.com/cockroachdb/pebble/v2"
	"go.uber.org/zap"

	"github.com/disgw/disgw/disbackend"
)

// appendReq is one queued Append.
type appendReq struct {
	stream string
	part   int32
	b      disbackend.Batch
	p      *disbackend.Pending
}

// group is the set of appends committed by one synced Pebble batch.
type group struct {
	b     *pebble.Batch
	items []groupItem
	err   error // apply error: the whole group failed
}

// groupItem is an accepted append (new data or a duplicate) in a group.
type groupItem struct {
	pend      *disbackend.Pending
	p         *partition
	base      int64 // assigned base offset (the original's for a duplicate)
	last      int64
	raw       []byte // nil for a duplicate
	maxTS     int64  // ms, for the index
	logAppend int64  // ms, the LogAppendTime stamped, or -1
	duplicate bool
}

var crc32c = crc32.MakeTable(crc32.Castagnoli)

// Append enqueues b for (stream, partition) and returns at once; the Pending
// completes once the batch is synced. DIS PutRecords. Batches enqueued by one
// goroutine are applied in call order. The store takes ownership of b.Raw and
// rewrites its base offset (and, on a LogAppendTime stream, its attributes,
// max timestamp and CRC). Errors (in the Pending): ErrStreamNotFound,
// ErrPartitionNotFound, ErrOutOfOrderSequence, ErrInvalidProducerEpoch,
// ErrClosed, ErrUnavailable (an earlier storage failure), or a storage
// error.
func (s *Store) Append(stream string, partition int32, b disbackend.Batch) *disbackend.Pending {
	pend := disbackend.NewPending()
	req := &appendReq{stream: stream, part: partition, b: b, p: pend}
	s.reqMu.RLock()
	if s.reqClosed {
		s.reqMu.RUnlock()
		pend.Complete(disbackend.AppendResult{}, fmt.Errorf("localstore: append stream %q partition %d: %w",
			stream, partition, disbackend.ErrClosed))
		return pend
	}
	s.reqs <- req
	s.reqMu.RUnlock()
	return pend
}

// writeLoop is the writer goroutine: it takes every queued append, assigns
// offsets, applies the group as one Pebble batch without waiting for the
// sync, and hands it to syncLoop, so the next group is assembled while the
// previous one syncs.
func (s *Store) writeLoop() {
	defer s.writers.Done()
	defer close(s.syncq)
	reqs := make([]*appendReq, 0, 256)
	for {
		req, ok := <-s.reqs
		if !ok {
			return
		}
		reqs = append(reqs[:0], req)
		size := len(req.b.Raw)
	drain:
		for size < maxGroupBytes && len(reqs) < maxGroupItems {
			select {
			case req, ok := <-s.reqs:
				if !ok {
					break drain
				}
				reqs = append(reqs, req)
				size += len(req.b.Raw)
			default:
				break drain
			}
		}
		if g := s.assemble(reqs, size); g != nil {
			s.syncq <- g
		}
		clear(reqs)
	}
}

// assemble validates reqs, assigns offsets and applies them as one batch.
// Rejected appends complete at once; it returns nil when nothing was
// accepted.
func (s *Store) assemble(reqs []*appendReq, size int) *group {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if err := s.storageFailure(); err != nil {
		for _, r := range reqs {
			r.p.Complete(disbackend.AppendResult{}, fmt.Errorf("localstore: append stream %q partition %d: %w: %v",
				r.stream, r.part, disbackend.ErrUnavailable, err))
		}
		return nil
	}
	g := &group{items: make([]groupItem, 0, len(reqs))}
	b := s.db.NewBatchWithSize(size + len(reqs)*(2*offsetKeyLen+indexEntryLen+32))
	nowMS := s.now().UnixMilli()
	touched := make(map[producerKey]*producerState)
	var key [offsetKeyLen]byte
	var idx [indexEntryLen]byte
	for _, r := range reqs {
		item, ps, err := s.accept(r, nowMS)
		if err != nil {
			r.p.Complete(disbackend.AppendResult{}, err)
			continue
		}
		if ps != nil {
			touched[producerKey{sid: item.p.sid, part: item.p.id, pid: r.b.ProducerID}] = ps
		}
		if !item.duplicate {
			putOffsetKey(key[:], prefixBatch, item.p.sid, item.p.id, item.base)
			_ = b.Set(key[:], item.raw, nil)
			indexEntry{last: item.last, maxTS: item.maxTS, appendMS: nowMS}.put(idx[:])
			key[0] = prefixIndex
			_ = b.Set(key[:], idx[:], nil)
		}
		g.items = append(g.items, item)
	}
	for k, ps := range touched {
		putOffsetKey(key[:], prefixProducer, k.sid, k.part, k.pid)
		_ = b.Set(key[:], ps.encode(), nil)
	}
	if len(g.items) == 0 {
		_ = b.Close()
		return nil
	}
	g.b = b
	if b.Empty() {
		// Only duplicates: nothing to write, but they still complete after
		// the groups before them synced.
		_ = b.Close()
		g.b = nil
		return g
	}
	if err := s.db.ApplyNoSyncWait(b, pebble.Sync); err != nil {
		g.err = err
	}
	return g
}

// accept checks one append against its partition and producer state and, if
// it is accepted, assigns its offsets and rewrites its header. It returns the
// producer state to persist (nil for non-idempotent batches). Requires wmu.
func (s *Store) accept(r *appendReq, nowMS int64) (groupItem, *producerState, error) {
	st := s.streams[r.stream]
	if st == nil {
		return groupItem{}, nil, fmt.Errorf("localstore: append stream %q partition %d: %w",
			r.stream, r.part, disbackend.ErrStreamNotFound)
	}
	if r.part < 0 || int(r.part) >= len(st.parts) {
		return groupItem{}, nil, fmt.Errorf("localstore: append stream %q partition %d: %w",
			r.stream, r.part, disbackend.ErrPartitionNotFound)
	}
	p := st.parts[r.part]
	if len(r.b.Raw) < batchHeaderLen || r.b.NumRecords <= 0 {
		return groupItem{}, nil, fmt.Errorf("localstore: append stream %q partition %d: malformed batch (%d bytes, %d records)",
			r.stream, r.part, len(r.b.Raw), r.b.NumRecords)
	}
	base := p.assigned
	last := base + int64(r.b.NumRecords) - 1
	var ps *producerState
	if r.b.ProducerID >= 0 {
		var dup *producerBatch
		var err error
		ps, dup, err = s.checkProducer(p, r.b, base, last, nowMS)
		if err != nil {
			return groupItem{}, nil, fmt.Errorf("localstore: append stream %q partition %d producer %d epoch %d sequence %d: %w",
				r.stream, r.part, r.b.ProducerID, r.b.ProducerEpoch, r.b.BaseSequence, err)
		}
		if dup != nil {
			return groupItem{pend: r.p, p: p, base: dup.base, last: dup.last, logAppend: -1, duplicate: true}, nil, nil
		}
	}
	p.assigned = last + 1
	raw, maxTS, logAppend := r.b.Raw, r.b.MaxTimestamp, int64(-1)
	disbackend.SetBaseOffset(raw, base)
	if st.meta.Config.TimestampType == disbackend.LogAppendTime {
		setLogAppendTime(raw, nowMS)
		maxTS, logAppend = nowMS, nowMS
	}
	return groupItem{pend: r.p, p: p, base: base, last: last, raw: raw, maxTS: maxTS, logAppend: logAppend}, ps, nil
}

// setLogAppendTime marks a raw batch as LogAppendTime with max timestamp ts
// (ms) and recomputes its CRC-32C, as Kafka's broker does for
// message.timestamp.type=LogAppendTime.
func setLogAppendTime(raw []byte, ts int64) {
	attrs := binary.BigEndian.Uint16(raw[21:])
	binary.BigEndian.PutUint16(raw[21:], attrs|logAppendTimeAttribute)
	binary.BigEndian.PutUint64(raw[35:], uint64(ts))
	binary.BigEndian.PutUint32(raw[17:], crc32.Checksum(raw[21:], crc32c))
}

// syncLoop waits for each group's sync, in order, then publishes it: it
// advances the partitions' synced next, fills the tail cache, wakes long
// polls and completes the Pendings.
func (s *Store) syncLoop() {
	defer s.writers.Done()
	for g := range s.syncq {
		err := g.err
		if g.b != nil && err == nil {
			err = g.b.SyncWait()
		}
		if err != nil {
			// The in-memory offsets already moved past this group; a WAL
			// that failed cannot be trusted, so stop accepting appends.
			s.fail(err)
			for _, it := range g.items {
				it.pend.Complete(disbackend.AppendResult{}, fmt.Errorf("localstore: append partition %d: %w: %v",
					it.p.id, disbackend.ErrUnavailable, err))
			}
			if g.b != nil {
				_ = g.b.Close()
			}
			continue
		}
		advanced := false
		for _, it := range g.items {
			if it.duplicate {
				continue
			}
			it.p.mu.Lock()
			it.p.next = it.last + 1
			if s.cache.enabled() {
				s.cache.add(it.p, it.base, it.last, it.raw)
			}
			it.p.mu.Unlock()
			advanced = true
		}
		if s.cache.enabled() {
			s.cache.balance()
		}
		if advanced {
			s.notifyChanged()
		}
		for _, it := range g.items {
			first, _ := it.p.span()
			it.pend.Complete(disbackend.AppendResult{BaseOffset: it.base, LogStartOffset: first, LogAppendTime: it.logAppend, Duplicate: it.duplicate}, nil)
		}
		if g.b != nil {
			_ = g.b.Close()
		}
		if ce := s.log.Check(zap.DebugLevel, "group synced"); ce != nil {
			ce.Write(zap.Int("appends", len(g.items)))
		}
	}
}
