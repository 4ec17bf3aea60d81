package localstore

import (
	"context"
	"fmt"
	"slices"

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
// their segments, through the partition's index (index.go): the chunks
// from the one holding offset, each run of chunks stored next to each
// other with one read, the batches returned as slices of that read. It
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
		replaced := p.segsGen != gen
		p.mu.RUnlock()
		if !replaced {
			return nil, 0, 0, nil
		}
	}
}

// readPage is how many index entries a lookup takes at a time (20 KiB);
// a read takes enough for maxBytes (readPageFor).
const readPage = 256

// readPageFor is how many index entries a read of maxBytes from sv takes
// at a time: enough for maxBytes at the segPart's bytes a chunk, so that
// one read of adjacent chunks serves it, from 4 to 4096 (320 KiB).
func readPageFor(maxBytes int, sv *spView) int64 {
	perChunk := max(1, sv.bytes/max(1, sv.n))
	return min(4096, max(4, int64(maxBytes)/perChunk+2))
}

// readSegmentsOnce is readSegments from one view of the partition's
// segments (of generation gen); no batches when a segment it needed was
// gone.
func (s *Store) readSegmentsOnce(p *partition, offset, end int64, maxBytes int) ([][]byte, int, int64, uint64, error) {
	p.mu.RLock()
	removed := offset < p.first
	v := p.view(offset)
	p.mu.RUnlock()
	if removed {
		return nil, 0, 0, v.gen, nil
	}
	var out [][]byte
	n := 0
	done := false
	take := func(f *frameInfo, raw []byte) bool {
		switch {
		case f.last < offset:
			return true
		case f.base >= end, n > 0 && n+len(raw) > maxBytes:
			done = true
			return false
		}
		out = append(out, raw)
		n += len(raw)
		return true
	}
	for i := 0; i < v.len() && !done; i++ {
		sv := v.at(i)
		if sv.sp.first >= end {
			break
		}
		page := readPageFor(maxBytes, &sv)
		k, cs, ok, err := sv.seekOffset(offset, page)
		if err != nil || !ok {
			return nil, 0, 0, v.gen, err
		}
		for k < sv.n && !done {
			if len(cs) == 0 {
				if cs, ok, err = sv.entries(k, page); err != nil || !ok {
					return nil, 0, 0, v.gen, err
				}
			}
			k += int64(len(cs))
			for j := 0; j < len(cs) && !done; {
				if cs[j].base >= end || n > 0 && cs[j].size > indexIntervalBytes && n+int(cs[j].size-frameHeaderLen) > maxBytes {
					done = true // the next batch does not fit (a chunk that large holds one)
					break
				}
				// A run: the chunks stored next to each other whose
				// batches fit in maxBytes whole (counting the first
				// chunk's as at most its size); a chunk that only partly
				// fits starts the next read.
				r := j + 1
				for r < len(cs) && cs[r].pos == cs[r-1].end() && cs[r].base < end &&
					n+int(cs[j].size-frameHeaderLen+cs[r].bytesThru-cs[j].bytesThru) <= maxBytes {
					r++
				}
				ok, err := s.readChunks(sv.sp, cs[j:r], func(buf []byte) { out = slices.Grow(out, countFrames(buf)) }, take)
				if err != nil {
					return nil, 0, 0, v.gen, err
				}
				if !ok {
					done = true // segment removed (retention, or replaced by the cleaner) meanwhile
					break
				}
				j = r
			}
			cs = nil
		}
	}
	if len(out) == 0 {
		return nil, 0, 0, v.gen, nil
	}
	return out, n, batch.LastOffset(out[len(out)-1]) + 1, v.gen, nil
}

// BatchAtTimestamp returns the first synced batch whose max timestamp is >=
// ts (ms), nil when there is none. Kafka ListOffsets by timestamp. It skips
// the segments whose largest timestamp is below ts, finds in the first
// other one the first chunk whose running largest timestamp reaches ts
// (index.go) and reads from there. Errors: ErrStreamNotFound,
// ErrPartitionNotFound, ErrClosed, or a storage error.
func (s *Store) BatchAtTimestamp(ctx context.Context, stream string, partition int32, ts int64) ([]byte, error) {
	return s.findBatch(ctx, "batch at timestamp", stream, partition, func(v *partView, first int64) ([]byte, bool, error) {
		return s.firstAtTimestamp(v, first, ts)
	})
}

// BatchWithMaxTimestamp returns the first synced batch holding the
// partition's largest timestamp, nil when the partition is empty. Kafka
// ListOffsets timestamp -3 (KIP-734). It takes the largest timestamp of
// each segment from the index (and of the first one's batches from first
// on), then finds the first batch holding it. Errors as BatchAtTimestamp.
func (s *Store) BatchWithMaxTimestamp(ctx context.Context, stream string, partition int32) ([]byte, error) {
	return s.findBatch(ctx, "batch with max timestamp", stream, partition, func(v *partView, first int64) ([]byte, bool, error) {
		best, ok, err := s.maxTimestamp(v, first)
		if err != nil || !ok || best == noTimestamp {
			return nil, ok, err
		}
		return s.firstAtTimestamp(v, first, best)
	})
}

// findBatch runs find on a view of the partition's segments from its
// first offset, again when a segment it needed was replaced meanwhile.
func (s *Store) findBatch(ctx context.Context, op, stream string, partition int32, find func(v *partView, first int64) ([]byte, bool, error)) ([]byte, error) {
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
	if err := s.enter(op); err != nil {
		return nil, err
	}
	defer s.dbMu.RUnlock()
	for {
		p.mu.RLock()
		first := p.first
		v := p.view(first)
		p.mu.RUnlock()
		raw, ok, err := find(&v, first)
		if err != nil {
			return nil, fmt.Errorf("localstore: %s stream %q partition %d: %w", op, stream, partition, err)
		}
		if ok {
			return raw, nil
		}
		p.mu.RLock()
		replaced := p.segsGen != v.gen
		p.mu.RUnlock()
		if !replaced {
			return nil, nil // removed by retention meanwhile
		}
	}
}

// firstAtTimestamp returns the first batch of v holding records, ending
// at or after first, whose max timestamp is >= ts; nil when none. ok is
// false when a segment was removed meanwhile.
func (s *Store) firstAtTimestamp(v *partView, first, ts int64) ([]byte, bool, error) {
	for i := 0; i < v.len(); i++ {
		sv := v.at(i)
		if sv.maxTS < ts {
			continue
		}
		k1, ok, err := sv.search(func(c *chunk) bool { return c.last >= first })
		if err != nil || !ok {
			return nil, ok, err
		}
		k2, ok, err := sv.search(func(c *chunk) bool { return c.runMaxTS >= ts })
		if err != nil || !ok {
			return nil, ok, err
		}
		// Usually the batch is in chunk k2; batches below first may have
		// raised the running timestamp earlier, then it is read on from
		// first.
		var found []byte
		ok, err = s.eachFrame(&sv, max(k1, k2), sv.n, func(f *frameInfo, raw []byte) bool {
			if f.last >= first && f.size > batch.HeaderLen && f.maxTS >= ts {
				found = raw
				return false
			}
			return true
		})
		if err != nil || !ok || found != nil {
			return found, ok, err
		}
	}
	return nil, true, nil
}

// maxTimestamp returns the largest timestamp of v's batches that hold
// records and end at or after first (noTimestamp when none): each
// segment's from the index, but for the segment holding first, whose
// batches below first do not count: its chunk holding first is read, and
// the chunks after it count by their running largest timestamp when it
// grew past that chunk's (else they are read too: rare).
func (s *Store) maxTimestamp(v *partView, first int64) (int64, bool, error) {
	best := int64(noTimestamp)
	for i := 0; i < v.len(); i++ {
		sv := v.at(i)
		if sv.sp.first >= first || sv.maxTS <= best {
			best = max(best, sv.maxTS)
			continue
		}
		k, ok, err := sv.search(func(c *chunk) bool { return c.last >= first })
		if err != nil || !ok || k == sv.n {
			return 0, ok, err
		}
		cs, ok, err := sv.entries(k, 1)
		if err != nil || !ok {
			return 0, ok, err
		}
		upTo := sv.n // the chunks to read
		if sv.maxTS > cs[0].runMaxTS {
			best = max(best, sv.maxTS) // reached after chunk k
			upTo = k + 1
		}
		ok, err = s.eachFrame(&sv, k, upTo, func(f *frameInfo, raw []byte) bool {
			if f.last >= first && f.size > batch.HeaderLen {
				best = max(best, f.maxTS)
			}
			return true
		})
		if err != nil || !ok {
			return 0, ok, err
		}
	}
	return best, true, nil
}

// eachFrame calls fn with the frames of sv's chunks [k, end), in order,
// until fn returns false. ok is false when the segment was removed
// meanwhile.
func (s *Store) eachFrame(sv *spView, k, end int64, fn func(f *frameInfo, raw []byte) bool) (bool, error) {
	end = min(end, sv.n)
	stop := false
	wrapped := func(f *frameInfo, raw []byte) bool {
		if !fn(f, raw) {
			stop = true
			return false
		}
		return true
	}
	for ; k < end && !stop; k += readPage {
		cs, ok, err := sv.entries(k, min(readPage, end-k))
		if err != nil || !ok {
			return ok, err
		}
		for j := 0; j < len(cs) && !stop; j++ {
			ok, err := s.readChunks(sv.sp, cs[j:j+1], nil, wrapped)
			if err != nil || !ok {
				return ok, err
			}
		}
	}
	return true, nil
}
