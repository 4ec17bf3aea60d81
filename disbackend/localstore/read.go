package localstore

import (
	"context"
	"encoding/binary"
	"fmt"

	"github.com/cockroachdb/pebble/v2"

	"github.com/disgw/disgw/disbackend"
)

// Range returns the partition's synced [first : next] range (DIS
// sequence_number_range; Kafka log start offset and high watermark). Errors:
// ErrStreamNotFound, ErrPartitionNotFound, ErrClosed.
func (s *Store) Range(stream string, partition int32) (disbackend.PartitionRange, error) {
	if s.closed.Load() {
		return disbackend.PartitionRange{}, fmt.Errorf("localstore: range stream %q partition %d: %w",
			stream, partition, disbackend.ErrClosed)
	}
	p, err := s.lookup("range", stream, partition)
	if err != nil {
		return disbackend.PartitionRange{}, err
	}
	first, next := p.span()
	return disbackend.PartitionRange{First: first, Next: next}, nil
}

// Read returns synced batches starting with the one holding offset, in offset
// order, up to maxBytes in total but at least one whole batch when offset <
// next (KIP-74); offset == next returns none. DIS GetRecords, Kafka Fetch.
// Recent batches come from the tail cache without copying; older ones are
// copied out of Pebble. The returned slices must not be modified. Errors:
// ErrStreamNotFound, ErrPartitionNotFound, ErrOffsetOutOfRange (offset <
// first or > next; the result's Range is set), ErrClosed, or a storage error.
func (s *Store) Read(ctx context.Context, stream string, partition int32, offset int64, maxBytes int) (disbackend.ReadResult, error) {
	if s.closed.Load() {
		return disbackend.ReadResult{}, fmt.Errorf("localstore: read stream %q partition %d: %w",
			stream, partition, disbackend.ErrClosed)
	}
	p, err := s.lookup("read", stream, partition)
	if err != nil {
		return disbackend.ReadResult{}, err
	}
	var res disbackend.ReadResult
	p.mu.RLock()
	res.Range = disbackend.PartitionRange{First: p.first, Next: p.next}
	if offset < p.first || offset > p.next {
		p.mu.RUnlock()
		return res, outOfRange(stream, partition, offset, res.Range)
	}
	if offset == p.next {
		p.mu.RUnlock()
		return res, nil
	}
	var ok bool
	if res.Batches, res.Bytes, ok = p.readCache(offset, maxBytes, nil, 0); ok {
		p.mu.RUnlock()
		return res, nil
	}
	end := p.cacheStart()
	p.mu.RUnlock()

	if err := ctx.Err(); err != nil {
		return disbackend.ReadResult{}, fmt.Errorf("localstore: read stream %q partition %d: %w", stream, partition, err)
	}
	var next int64
	res.Batches, res.Bytes, next, err = s.readPebble(p, offset, end, maxBytes)
	if err != nil {
		return disbackend.ReadResult{}, fmt.Errorf("localstore: read stream %q partition %d offset %d: %w",
			stream, partition, offset, err)
	}
	if res.Bytes == 0 {
		// Retention removed the batch between the range check and the read.
		res.Range.First, res.Range.Next = p.span()
		return disbackend.ReadResult{Range: res.Range}, outOfRange(stream, partition, offset, res.Range)
	}
	if res.Bytes < maxBytes && next == end {
		// Continue into the cache; it may have moved since, then stop here.
		p.mu.RLock()
		res.Batches, res.Bytes, _ = p.readCache(next, maxBytes, res.Batches, res.Bytes)
		p.mu.RUnlock()
	}
	return res, nil
}

func outOfRange(stream string, partition int32, offset int64, r disbackend.PartitionRange) error {
	return fmt.Errorf("localstore: read stream %q partition %d offset %d outside [%d : %d]: %w",
		stream, partition, offset, r.First, r.Next, disbackend.ErrOffsetOutOfRange)
}

// readPebble copies stored batches from the one holding offset up to (not
// including) offset end, which is at most the synced next, up to maxBytes but
// at least one. It returns the offset after the last batch returned.
func (s *Store) readPebble(p *partition, offset, end int64, maxBytes int) ([][]byte, int, int64, error) {
	if err := s.enter("read"); err != nil {
		return nil, 0, 0, err
	}
	defer s.dbMu.RUnlock()
	it, err := s.db.NewIter(&pebble.IterOptions{
		LowerBound: offsetKey(prefixBatch, p.sid, p.id, 0),
		UpperBound: offsetKey(prefixBatch, p.sid, p.id, end),
	})
	if err != nil {
		return nil, 0, 0, err
	}
	defer it.Close()
	var out [][]byte
	n := 0
	next := offset
	for ok := it.SeekLT(offsetKey(prefixBatch, p.sid, p.id, offset+1)); ok; ok = it.Next() {
		v, err := it.ValueAndErr()
		if err != nil {
			return nil, 0, 0, err
		}
		if len(v) < batchHeaderLen {
			return nil, 0, 0, fmt.Errorf("batch %x: %w", it.Key(), errCorrupt)
		}
		if n > 0 && n+len(v) > maxBytes {
			break
		}
		if n == 0 && batchLast(v) < offset {
			return nil, 0, 0, nil // removed by retention; offset is in no stored batch
		}
		out = append(out, append([]byte(nil), v...))
		n += len(v)
		next = batchLast(v) + 1
	}
	return out, n, next, it.Error()
}

// batchLast returns the offset of the last record of a raw batch: base
// offset plus last offset delta (bytes 23-26).
func batchLast(raw []byte) int64 {
	return disbackend.BaseOffset(raw) + int64(int32(binary.BigEndian.Uint32(raw[23:])))
}

// BatchAtTimestamp returns the first synced batch whose max timestamp is >=
// ts (ms), nil when there is none. Kafka ListOffsets by timestamp. It scans
// the small index entries from first, then reads one batch. Errors:
// ErrStreamNotFound, ErrPartitionNotFound, ErrClosed, or a storage error.
func (s *Store) BatchAtTimestamp(ctx context.Context, stream string, partition int32, ts int64) ([]byte, error) {
	return s.findBatch(ctx, "batch at timestamp", stream, partition, func(e indexEntry) bool { return e.maxTS >= ts }, true)
}

// BatchWithMaxTimestamp returns the first synced batch holding the
// partition's largest timestamp, nil when the partition is empty. Kafka
// ListOffsets timestamp -3 (KIP-734). It scans every index entry of the
// partition. Errors as BatchAtTimestamp.
func (s *Store) BatchWithMaxTimestamp(ctx context.Context, stream string, partition int32) ([]byte, error) {
	best := int64(-1 << 63)
	return s.findBatch(ctx, "batch with max timestamp", stream, partition, func(e indexEntry) bool {
		if e.maxTS > best {
			best = e.maxTS
			return true
		}
		return false
	}, false)
}

// findBatch scans the partition's synced index entries in offset order and
// returns the batch of the last entry match accepted (of the first one when
// stopAtFirst).
func (s *Store) findBatch(ctx context.Context, op, stream string, partition int32, match func(indexEntry) bool, stopAtFirst bool) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("localstore: %s stream %q partition %d: %w", op, stream, partition, err)
	}
	if err := s.enter(op); err != nil {
		return nil, err
	}
	defer s.dbMu.RUnlock()
	p, err := s.lookup(op, stream, partition)
	if err != nil {
		return nil, err
	}
	first, next := p.span()
	snap := s.db.NewSnapshot()
	defer snap.Close()
	it, err := snap.NewIter(&pebble.IterOptions{
		LowerBound: offsetKey(prefixIndex, p.sid, p.id, first),
		UpperBound: offsetKey(prefixIndex, p.sid, p.id, next),
	})
	if err != nil {
		return nil, fmt.Errorf("localstore: %s stream %q partition %d: %w", op, stream, partition, err)
	}
	defer it.Close()
	found := int64(-1)
	for ok := it.First(); ok; ok = it.Next() {
		e, valid := decodeIndexEntry(it.Value())
		if !valid {
			return nil, fmt.Errorf("localstore: %s stream %q partition %d: index %x: %w", op, stream, partition, it.Key(), errCorrupt)
		}
		if match(e) {
			found = keyOffset(it.Key())
			if stopAtFirst {
				break
			}
		}
	}
	if err := it.Error(); err != nil {
		return nil, fmt.Errorf("localstore: %s stream %q partition %d: %w", op, stream, partition, err)
	}
	if found < 0 {
		return nil, nil
	}
	p.mu.RLock()
	out, _, ok := p.readCache(found, 0, nil, 0)
	p.mu.RUnlock()
	if ok {
		return out[0], nil
	}
	v, closer, err := snap.Get(offsetKey(prefixBatch, p.sid, p.id, found))
	if err != nil {
		return nil, fmt.Errorf("localstore: %s stream %q partition %d offset %d: %w", op, stream, partition, found, err)
	}
	defer closer.Close()
	return append([]byte(nil), v...), nil
}
