package localstore

import (
	"context"
	"fmt"
	"sort"

	"github.com/disgw/disgw/disbackend"
	"github.com/disgw/disgw/kafkawire/batch"
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
// read from their segment, adjacent batches with one read. The returned slices must not be modified. Errors:
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
	// Two rounds at most: a read inside a gap the log cleaner left that
	// reaches the tail cache starts again at the cache's first batch.
	for round := 0; ; round++ {
		res, gapTo, err := s.readFrom(ctx, stream, p, offset, maxBytes)
		if err != nil || gapTo < 0 || round > 0 {
			return res, err
		}
		offset = gapTo
	}
}

// readFrom is one round of Read. gapTo >= 0 (and no batches) means no
// stored batch from offset lies before the tail cache, which starts at
// gapTo: offset is in a gap the log cleaner left.
func (s *Store) readFrom(ctx context.Context, stream string, p *partition, offset int64, maxBytes int) (res disbackend.ReadResult, gapTo int64, err error) {
	partition := p.id
	p.mu.RLock()
	res.Range = disbackend.PartitionRange{First: p.first, Next: p.next}
	if offset < p.first || offset > p.next {
		p.mu.RUnlock()
		return res, -1, outOfRange(stream, partition, offset, res.Range)
	}
	if offset == p.next {
		p.mu.RUnlock()
		return res, -1, nil
	}
	var ok bool
	if res.Batches, res.Bytes, ok = p.readCache(offset, maxBytes, nil, 0); ok {
		p.mu.RUnlock()
		return res, -1, nil
	}
	end := p.cacheStart()
	p.mu.RUnlock()
	s.hook("read: cache start taken")

	if err := ctx.Err(); err != nil {
		return disbackend.ReadResult{}, -1, fmt.Errorf("localstore: read stream %q partition %d: %w", stream, partition, err)
	}
	var next int64
	res.Batches, res.Bytes, next, err = s.readSegments(p, offset, end, maxBytes)
	if err != nil {
		return disbackend.ReadResult{}, -1, fmt.Errorf("localstore: read stream %q partition %d offset %d: %w",
			stream, partition, offset, err)
	}
	if res.Bytes == 0 {
		res.Range.First, res.Range.Next = p.span()
		if offset >= res.Range.First && end > offset && end < res.Range.Next {
			// The cleaner removed every batch from offset up to the cache.
			return disbackend.ReadResult{Range: res.Range}, end, nil
		}
		// Retention removed the batch between the range check and the read.
		return disbackend.ReadResult{Range: res.Range}, -1, outOfRange(stream, partition, offset, res.Range)
	}
	if res.Bytes < maxBytes && next == end {
		// Continue into the cache; it may have moved since, then stop here.
		p.mu.RLock()
		res.Batches, res.Bytes, _ = p.readCache(next, maxBytes, res.Batches, res.Bytes)
		p.mu.RUnlock()
	}
	return res, -1, nil
}

func outOfRange(stream string, partition int32, offset int64, r disbackend.PartitionRange) error {
	return fmt.Errorf("localstore: read stream %q partition %d offset %d outside [%d : %d]: %w",
		stream, partition, offset, r.First, r.Next, disbackend.ErrOffsetOutOfRange)
}

// readSegments reads stored batches from the one holding offset (or, in a
// gap the log cleaner left, the next one) up to (not including) offset end,
// which is at most the synced next, up to maxBytes but at least one, from
// their segments: each run of batches stored next to each other in one
// segment with one ReadAt, the batches returned as slices of that read. It
// returns the offset after the last batch returned, and no batches when
// retention removed the one holding offset. A segment the cleaner replaced
// meanwhile is read again from the new index.
func (s *Store) readSegments(p *partition, offset, end int64, maxBytes int) ([][]byte, int, int64, error) {
	if err := s.enter("read"); err != nil {
		return nil, 0, 0, err
	}
	defer s.dbMu.RUnlock()
	for {
		out, n, next, gen, err := s.readSegmentsOnce(p, offset, end, maxBytes)
		if err != nil || out != nil {
			return out, n, next, err
		}
		p.mu.RLock()
		replaced := p.indexGen != gen
		p.mu.RUnlock()
		if !replaced {
			return nil, 0, 0, nil
		}
	}
}

// readSegmentsOnce is readSegments from one snapshot of the index (of
// generation gen); no batches when a segment it needed was gone.
func (s *Store) readSegmentsOnce(p *partition, offset, end int64, maxBytes int) ([][]byte, int, int64, uint64, error) {
	p.mu.RLock()
	idx, gen := p.index, p.indexGen
	i := sort.Search(len(idx), func(i int) bool { return idx[i].last >= offset })
	var locs []batchLoc
	n := 0
	for ; i < len(idx) && idx[i].base < end; i++ {
		if len(locs) > 0 && n+int(idx[i].size) > maxBytes {
			break
		}
		locs = append(locs, idx[i])
		n += int(idx[i].size)
	}
	removed := offset < p.first
	p.mu.RUnlock()
	if len(locs) == 0 || removed {
		return nil, 0, 0, gen, nil
	}
	out := make([][]byte, 0, len(locs))
	n = 0
	for len(locs) > 0 {
		run := 1
		for run < len(locs) && locs[run].seg == locs[0].seg &&
			locs[run].pos == locs[run-1].pos+int64(locs[run-1].size)+frameHeaderLen {
			run++
		}
		start := locs[0].pos - frameHeaderLen
		endPos := locs[run-1].pos + int64(locs[run-1].size)
		buf := make([]byte, endPos-start)
		ok, err := locs[0].seg.readAt(buf, start)
		if err != nil {
			return nil, 0, 0, gen, err
		}
		if !ok {
			break // segment removed (retention, or replaced by the cleaner) meanwhile
		}
		for _, l := range locs[:run] {
			h := buf[l.pos-frameHeaderLen-start:]
			fi, _, _, valid := decodeHeader(h)
			if !valid || fi.base != l.base || fi.size != l.size || fi.part != p.id {
				return nil, 0, 0, gen, fmt.Errorf("segment %s at %d: frame header does not match the index: %w",
					l.seg.path, l.pos-frameHeaderLen, errCorrupt)
			}
			raw := buf[l.pos-start : l.pos-start+int64(l.size) : l.pos-start+int64(l.size)]
			out = append(out, raw)
			n += len(raw)
		}
		locs = locs[run:]
	}
	if len(out) == 0 {
		return nil, 0, 0, gen, nil
	}
	return out, n, batch.LastOffset(out[len(out)-1]) + 1, gen, nil
}

// BatchAtTimestamp returns the first synced batch whose max timestamp is >=
// ts (ms), nil when there is none. Kafka ListOffsets by timestamp. It scans
// the in-memory index from first, then reads one batch. Errors:
// ErrStreamNotFound, ErrPartitionNotFound, ErrClosed, or a storage error.
func (s *Store) BatchAtTimestamp(ctx context.Context, stream string, partition int32, ts int64) ([]byte, error) {
	return s.findBatch(ctx, "batch at timestamp", stream, partition, func(l *batchLoc) bool { return l.maxTS >= ts }, true)
}

// BatchWithMaxTimestamp returns the first synced batch holding the
// partition's largest timestamp, nil when the partition is empty. Kafka
// ListOffsets timestamp -3 (KIP-734). It scans the partition's whole
// in-memory index. Errors as BatchAtTimestamp.
func (s *Store) BatchWithMaxTimestamp(ctx context.Context, stream string, partition int32) ([]byte, error) {
	best := int64(-1 << 63)
	return s.findBatch(ctx, "batch with max timestamp", stream, partition, func(l *batchLoc) bool {
		if l.maxTS > best {
			best = l.maxTS
			return true
		}
		return false
	}, false)
}

// findBatch scans the partition's synced index in offset order and returns
// the batch of the last entry match accepted (of the first one when
// stopAtFirst).
func (s *Store) findBatch(ctx context.Context, op, stream string, partition int32, match func(*batchLoc) bool, stopAtFirst bool) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("localstore: %s stream %q partition %d: %w", op, stream, partition, err)
	}
	if s.closed.Load() {
		return nil, fmt.Errorf("localstore: %s: %w", op, disbackend.ErrClosed)
	}
	p, err := s.lookup(op, stream, partition)
	if err != nil {
		return nil, err
	}
	found := int64(-1)
	p.mu.RLock()
	for i := range p.index {
		// A header without records (left by the log cleaner) holds nothing
		// to find.
		// A batch holding the first offset (a DeleteRecords log start
		// offset inside it) counts: the caller skips its records below it.
		if l := &p.index[i]; l.last >= p.first && l.size > batch.HeaderLen && match(l) {
			found = max(l.base, p.first)
			if stopAtFirst {
				break
			}
		}
	}
	if found < 0 {
		p.mu.RUnlock()
		return nil, nil
	}
	out, _, ok := p.readCache(found, 0, nil, 0)
	p.mu.RUnlock()
	if ok {
		return out[0], nil
	}
	out, _, _, err = s.readSegments(p, found, found+1, 0)
	if err != nil {
		return nil, fmt.Errorf("localstore: %s stream %q partition %d offset %d: %w", op, stream, partition, found, err)
	}
	if len(out) == 0 {
		return nil, nil // removed by retention meanwhile
	}
	return out[0], nil
}
