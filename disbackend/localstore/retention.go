package localstore

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"go.uber.org/zap"
)

// retentionLoop runs EnforceRetention every interval until Close.
func (s *Store) retentionLoop(interval time.Duration) {
	s.every(interval, func() {
		if err := s.EnforceRetention(); err != nil {
			s.log.Error("retention pass failed", zap.Error(err))
		}
	})
}

// every runs fn every interval until Close, as one of the store's
// background goroutines (s.bg).
func (s *Store) every(interval time.Duration, fn func()) {
	defer s.bg.Done()
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
			fn()
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
// Options.ProducerStateExpiry or longer, and removes segment files that
// hold only expired batches. Errors: ErrClosed, or a storage
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
		if r := st.meta.Config.Retention; r > 0 && st.meta.Config.Deletes() {
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
	d, err := s.expire(plan, nowMS)
	if d.records > 0 || d.segments > 0 {
		s.log.Info("retention deleted data", zap.Strings("streams", d.streamNames()), zap.Int("partitions", d.partitions),
			zap.Int64("records", d.records), zap.Int("segments", d.segments), zap.Int64("bytes", d.bytes))
	}
	return err
}

// deleted is what one retention step deleted, for its log line.
type deleted struct {
	streams    map[string]bool // of the partitions whose first moved
	partitions int             // whose first moved
	records    int64           // offsets the firsts moved past: records, control records included
	segments   int             // segment files removed
	bytes      int64           // of those segments' frames
}

// streamNames are the streams of d, sorted; past 20, the rest are one
// entry "+N more".
func (d deleted) streamNames() []string {
	names := make([]string, 0, len(d.streams))
	for n := range d.streams {
		names = append(names, n)
	}
	slices.Sort(names)
	if len(names) > 20 {
		names = append(names[:20], "+"+strconv.Itoa(len(names)-20)+" more")
	}
	return names
}

// expiredUpTo returns the offset after the last expired batch of the
// partition's synced front (first when none expired): whole segments
// whose latest append time is before cutoffMS, then, in the next one, the
// chunks whose running latest append time is before it (index.go) and the
// batches of the chunk where it is reached.
func (s *Store) expiredUpTo(p *partition, cutoffMS int64) (int64, error) {
	for {
		p.mu.RLock()
		first := p.first
		v := p.view(first)
		p.mu.RUnlock()
		to, ok, err := s.expiredIn(&v, first, cutoffMS)
		if err != nil || ok {
			return to, err
		}
		p.mu.RLock()
		replaced := p.segsGen != v.gen
		p.mu.RUnlock()
		if !replaced {
			return first, nil
		}
	}
}

func (s *Store) expiredIn(v *partView, first, cutoffMS int64) (int64, bool, error) {
	to := first
	for i := 0; i < v.len(); i++ {
		sv := v.at(i)
		if sv.maxApp < cutoffMS {
			to = max(to, sv.last+1)
			continue
		}
		k1, ok, err := sv.search(func(c *chunk) bool { return c.last >= first })
		if err != nil || !ok {
			return 0, ok, err
		}
		k2, ok, err := sv.search(func(c *chunk) bool { return c.runMaxApp >= cutoffMS })
		if err != nil || !ok {
			return 0, ok, err
		}
		if k2 > k1 { // chunks before k2 expired whole
			cs, ok, err := sv.entries(k2-1, 1)
			if err != nil || !ok {
				return 0, ok, err
			}
			to = max(to, cs[0].last+1)
		}
		reached := false
		ok, err = s.eachFrame(&sv, max(k1, k2), sv.n, func(f *frameInfo, raw []byte) bool {
			if f.last < first {
				return true
			}
			if f.appendMS >= cutoffMS {
				reached = true
				return false
			}
			to = max(to, f.last+1)
			return true
		})
		if err != nil || !ok || reached {
			return to, ok, err
		}
		// Only batches below first were as recent: every later one of the
		// segment expired.
	}
	return to, true, nil
}

// bytesBelow returns the batch bytes of v's batches wholly below off in
// its first segPart (the one holding off): what PartitionBytes leaves out
// of it.
func (s *Store) bytesBelow(v *partView, off int64) (int64, bool, error) {
	if v.len() == 0 || v.segs[0].first >= off {
		return 0, true, nil
	}
	sv := v.at(0)
	k, ok, err := sv.search(func(c *chunk) bool { return c.last >= off })
	if err != nil || !ok {
		return 0, ok, err
	}
	var below int64
	if k > 0 {
		cs, ok, err := sv.entries(k-1, 1)
		if err != nil || !ok {
			return 0, ok, err
		}
		below = cs[0].bytesThru
	}
	cs, ok, err := sv.entries(k, 1)
	if err != nil || !ok {
		return 0, ok, err
	}
	ok, err = s.readChunks(sv.sp, cs, nil, func(f *frameInfo, raw []byte) bool {
		if f.last < off {
			below += int64(f.size)
		}
		return f.last < off
	})
	return below, ok, err
}

// setFirst moves p's first up to off (never down) and recomputes what
// PartitionBytes leaves out below it. Requires wmu (no segment leaves p
// meanwhile).
func (s *Store) setFirst(p *partition, off int64) error {
	p.mu.RLock()
	v := p.view(off)
	p.mu.RUnlock()
	below, _, err := s.bytesBelow(&v, off)
	if err != nil {
		return err
	}
	p.mu.Lock()
	if off >= p.first {
		p.first, p.belowFirst = off, below
	}
	p.mu.Unlock()
	return nil
}

// applyExpiry persists the partitions' new first sequence numbers in one
// synced Pebble batch, then moves first, drops idle producer states, and
// removes the segments whose every batch is now below first.
func (s *Store) applyExpiry(plan []expiry, nowMS int64) error {
	_, err := s.expire(plan, nowMS)
	return err
}

// expire is applyExpiry, returning what it deleted.
func (s *Store) expire(plan []expiry, nowMS int64) (d deleted, err error) {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	b := s.db.NewBatch()
	defer b.Close()
	kept := plan[:0]
	for _, e := range plan {
		if st := s.streams[e.name]; st == nil || st.sid != e.p.sid {
			continue // deleted meanwhile
		}
		// first moves only under wmu: a DeleteRecords that moved it past
		// this retention step must not be persisted backwards.
		if first, _ := e.p.span(); e.to <= first {
			continue
		}
		_ = b.Set(partKey(prefixFloor, e.p.sid, e.p.id), putInt64(e.to), nil)
		kept = append(kept, e)
	}
	if !b.Empty() {
		if err := b.Commit(pebble.Sync); err != nil {
			return d, fmt.Errorf("localstore: retention: %w", metaErr(err))
		}
	}
	s.expireProducers(nowMS)
	d.streams = make(map[string]bool)
	for _, e := range kept {
		if first, _ := e.p.span(); e.to > first {
			d.streams[e.name] = true
			d.partitions++
			d.records += e.to - first
		}
		if err := s.setFirst(e.p, e.to); err != nil {
			s.log.Warn("retention: reading the index failed; the partition's size is off until the next pass",
				zap.String("stream", e.name), zap.Int32("partition", e.p.id), zap.Error(err))
		}
		e.p.mu.Lock()
		bytes, n := e.p.dropCacheBelow(e.to)
		e.p.mu.Unlock()
		s.cache.release(bytes, n)
		s.log.Debug("retention removed batches", zap.String("stream", e.name), zap.Int32("partition", e.p.id),
			zap.Int64("offset", e.from), zap.Int64("new_first", e.to))
	}
	if len(kept) > 0 {
		s.notifyChanged()
	}
	err = s.removeExpiredSegments(&d)
	return d, err
}

// removeExpiredSegments removes, from the front of each stream, the sealed
// segments whose batches are all below their partitions' first, counting
// them in d. Requires wmu.
func (s *Store) removeExpiredSegments(d *deleted) error {
	removed := false
	for _, st := range s.streams {
		segs := s.segs[st.sid]
		i := 0
		for ; i < len(segs) && segs[i].sealed && s.segmentExpired(st, segs[i]); i++ {
		}
		if i == 0 {
			continue
		}
		if !removed {
			s.quiesce()
			removed = true
		}
		gone := make(map[*segment]bool, i)
		for _, sg := range segs[:i] {
			gone[sg] = true
		}
		for _, p := range st.parts {
			p.mu.Lock()
			p.dropSegs(gone)
			p.mu.Unlock()
		}
		for _, sg := range segs[:i] {
			if err := s.removeSegment(sg); err != nil {
				return fmt.Errorf("localstore: retention: %w", err)
			}
			d.segments++
			d.bytes += sg.size
			s.log.Debug("retention removed segment", zap.String("stream", st.meta.Name), zap.String("segment", sg.path))
		}
		clear(segs[:i])
		s.segs[st.sid] = segs[i:]
	}
	if removed {
		if err := syncDir(s.fs, s.segDir); err != nil {
			return fmt.Errorf("localstore: retention: sync segment directory: %w", err)
		}
	}
	return nil
}

func (s *Store) segmentExpired(st *stream, sg *segment) bool {
	for part, sp := range sg.parts {
		if int(part) >= len(st.parts) {
			return false
		}
		if first, _ := st.parts[part].span(); sp.last >= first {
			return false
		}
	}
	return true
}

// removeSegment closes a segment (waiting for its readers) and removes its
// files. The caller has taken its segParts off the partitions.
func (s *Store) removeSegment(sg *segment) error {
	if err := sg.close(); err != nil {
		return fmt.Errorf("segment %s: close: %w", sg.path, err)
	}
	return removeSegmentFiles(s.fs, sg.path)
}

// removeSegmentFiles removes the files of the segment at path (without
// extension), the .log last.
func removeSegmentFiles(fs vfs.FS, path string) error {
	for _, ext := range []string{extIndex, extJournal, extOldIdx, extLog} {
		if err := fs.Remove(path + "." + ext); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("segment %s: remove .%s: %w", path, ext, err)
		}
	}
	return nil
}
