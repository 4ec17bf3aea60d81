package localstore

import (
	"bufio"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"go.uber.org/zap"

	"github.com/disgw/disgw/disbackend"
	"github.com/disgw/disgw/kafkawire/batch"
)

// The log cleaner: Kafka's compaction (LogCleaner, MemoryRecords.filterTo)
// for streams with cleanup.policy compact or compact,delete.
//
// Layout. Segments stay per stream, as for every stream (one active
// segment, one write and one fdatasync per stream and group commit, file
// count bounded by streams, not partitions). A pass takes the stream's
// cleanable range, the longest prefix of its sealed segments whose every
// batch is at least min.compaction.lag.ms old (the active segment is never
// touched), and rewrites it into one new segment: for each partition, with
// its own key map, what Kafka's cleaner keeps. Per-topic segment.bytes and
// segment.ms roll the stream's active segment (writer.go), and the cleaner
// loop rolls an idle one once it is that old, so that it can be cleaned.
//
// What a pass keeps of a partition (Kafka's rules):
//   - The key map covers the partition's dirty section (from its first
//     dirty offset, where the last pass stopped, up to what fits in
//     Options.CleanerBufferBytes; the rest waits for the next pass). A record
//     stays if its key's latest offset in the map is not after it, or its
//     key is not in the map (its latest record is in the clean section);
//     records past the map stay.
//   - A record without a key goes (a compacted topic refuses them).
//   - A tombstone (null value) that stays gives its batch a delete horizon,
//     now + delete.retention.ms, the first time a pass keeps it (KIP-534);
//     once the horizon has passed, tombstones of that batch go.
//   - Batches keep their base offset and last offset delta (offsets are
//     never renumbered; reads skip the gaps). A batch left without records
//     goes, unless it is the last batch of an idempotent producer that has
//     state (its sequence numbers must survive) or the partition's last
//     batch in the range (so that the partition's end is known after a
//     restart): then its header stays, with no records.
//   - A batch nothing was removed from, and that needs no new horizon, is
//     copied as it is; others are rewritten with their codec
//     (batch.Rewrite).
//
// The swap is crash-safe. The new segment is written as <sid>-<n>.cleaned
// (n is the first replaced segment's number) and fdatasynced; renaming it
// to <sid>-<n>-<m>.swap (m the last replaced one) and syncing the
// directory commits the pass; then the replaced segments are removed, the
// .swap renamed to <sid>-<n>.log and its index written. Open removes a
// .cleaned file (the pass never committed) and finishes a .swap (removes
// what is left of <sid>-<n..m>, renames it). Segment numbers keep their
// order, so the cleaned segment sits where the replaced ones were.

const (
	defaultCleanerInterval    = 15 * time.Second // Kafka log.cleaner.backoff.ms
	defaultCleanerBufferBytes = 128 << 20        // Kafka log.cleaner.dedupe.buffer.size
	// offsetMapEntryBytes is one key map entry: a 16-byte key hash and an
	// offset (Kafka's SkimpyOffsetMap uses 24 too).
	offsetMapEntryBytes = 24
	cleanedExt          = "cleaned"
	swapExt             = "swap"
)

// cleanerState is what the cleaner keeps of a compacted stream (Pebble
// 'C' sid), so that a restart does not clean everything again.
type cleanerState struct {
	// FirstDirty is, by partition, the offset from which a partition has
	// not been compacted yet.
	FirstDirty []int64 `json:"first_dirty,omitempty"`
	// NextHorizon is the earliest delete horizon (ms) of a batch holding
	// tombstones that a pass kept: a pass is due then, to remove them. 0
	// when there is none.
	NextHorizon int64 `json:"next_horizon,omitempty"`
}

func (c *cleanerState) firstDirty(part int32) int64 {
	if int(part) < len(c.FirstDirty) {
		return c.FirstDirty[part]
	}
	return 0
}

// cleanerLoop runs a cleaning check every interval until Close.
func (s *Store) cleanerLoop(interval time.Duration) { s.every(interval, s.cleanAll) }

// cleanAll rolls idle active segments of compacted streams that are old
// enough, then cleans every compacted stream that is due, repeating a
// stream while its passes leave dirty records (a key map too small for
// its dirty section).
func (s *Store) cleanAll() {
	s.mu.RLock()
	var streams []*stream
	for _, st := range s.streams {
		if st.meta.Config.Compacted() {
			streams = append(streams, st)
		}
	}
	s.mu.RUnlock()
	for _, st := range streams {
		s.rollIdle(st)
		for range 100 {
			more, err := s.cleanStream(st)
			if err != nil {
				s.mu.RLock()
				gone := s.streams[st.meta.Name] != st // deleted during the pass
				s.mu.RUnlock()
				if !gone && !errors.Is(err, disbackend.ErrClosed) {
					s.log.Error("log cleaner pass failed", zap.String("stream", st.meta.Name), zap.Error(err))
				}
				break
			}
			if !more {
				break
			}
		}
	}
}

// rollIdle seals a compacted stream's active segment once it is older than
// segment.ms (or max.compaction.lag.ms, when shorter), so that the cleaner
// can take its records even if nothing more is appended.
func (s *Store) rollIdle(st *stream) {
	if err := s.enter("roll segment"); err != nil {
		return
	}
	defer s.dbMu.RUnlock()
	s.wmu.Lock()
	defer s.wmu.Unlock()
	seg := s.active[st.sid]
	if seg == nil || seg.size == 0 || s.streams[st.meta.Name] != st || s.storageFailure() != nil {
		return
	}
	if s.now().UnixMilli()-seg.firstAppendMS < rollAge(&st.meta.Config).Milliseconds() {
		return
	}
	s.quiesce() // its batches synced and published first
	if err := s.seal(seg); err != nil {
		s.log.Error("rolling an idle segment failed", zap.String("segment", seg.path), zap.Error(err))
		s.fail(err)
	}
}

// rollAge is how old a stream's active segment may get before it is
// rolled: segment.ms, or max.compaction.lag.ms when that is shorter.
func rollAge(cfg *disbackend.StreamConfig) time.Duration {
	age := cfg.SegmentTime
	if age <= 0 {
		age = disbackend.DefaultSegmentTime
	}
	if cfg.Compacted() && cfg.MaxCompactionLag > 0 {
		age = min(age, cfg.MaxCompactionLag)
	}
	return age
}

// cleanPlan is one pass over a stream, as snapshotted under wmu.
type cleanPlan struct {
	st    *stream
	segs  []*segment   // the cleanable range, in order
	locs  [][]batchLoc // by partition: its batches in the range
	state cleanerState
	// lastOfProducer holds, by partition, the last offsets of the last
	// batches of producers with state: those batches stay.
	lastOfProducer []map[int64]bool
	nowMS          int64
}

// cleanStream runs one pass over st if one is due and reports whether
// another may be (the key map did not cover every dirty record). Errors:
// ErrClosed, or a storage error (the pass is abandoned; the data is
// untouched).
func (s *Store) cleanStream(st *stream) (bool, error) {
	plan, err := s.planClean(st)
	if err != nil || plan == nil {
		return false, err
	}
	start := time.Now()
	out, err := s.writeCleaned(plan)
	if err != nil {
		if out != nil {
			_ = s.fs.Remove(out.path)
		}
		return false, err
	}
	ok, err := s.swapCleaned(plan, out)
	if err != nil || !ok {
		_ = s.fs.Remove(out.path)
		return false, err
	}
	if err := s.saveCleanerState(st, out.state); err != nil {
		return false, err
	}
	st.clean = out.state
	s.hook("state saved")
	s.log.Info("log cleaner pass", zap.String("stream", st.meta.Name), zap.Int("segments", len(plan.segs)),
		zap.Int("batches_read", out.read), zap.Int("batches_written", len(out.frames)),
		zap.Int64("bytes_read", out.bytesRead), zap.Int64("bytes_written", out.size),
		zap.Int("records_removed", out.removed), zap.Duration("took", time.Since(start)))
	return out.more, nil
}

// planClean snapshots the cleanable range of st and decides whether a pass
// is due: a partition whose dirty share of the range exceeds
// min.cleanable.dirty.ratio, a dirty batch older than
// max.compaction.lag.ms, or a delete horizon that has passed. nil when
// none is.
func (s *Store) planClean(st *stream) (*cleanPlan, error) {
	if err := s.enter("clean"); err != nil {
		return nil, err
	}
	defer s.dbMu.RUnlock()
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if s.streams[st.meta.Name] != st || s.storageFailure() != nil {
		return nil, nil
	}
	cfg := st.meta.Config
	nowMS := s.now().UnixMilli()
	segs := s.segs[st.sid]
	n := 0
	for n < len(segs) && segs[n].sealed && segs[n].maxAppendMS <= nowMS-cfg.MinCompactionLag.Milliseconds() {
		n++
	}
	if n == 0 {
		return nil, nil
	}
	plan := &cleanPlan{st: st, segs: slices.Clone(segs[:n]), state: st.clean, nowMS: nowMS,
		locs: make([][]batchLoc, len(st.parts)), lastOfProducer: make([]map[int64]bool, len(st.parts))}
	plan.state.FirstDirty = slices.Clone(st.clean.FirstDirty)
	inRange := make(map[*segment]bool, n)
	for _, sg := range plan.segs {
		inRange[sg] = true
	}
	due := plan.state.NextHorizon > 0 && nowMS >= plan.state.NextHorizon
	for i, p := range st.parts {
		p.mu.RLock()
		for _, l := range p.index {
			if !inRange[l.seg] {
				break
			}
			plan.locs[i] = append(plan.locs[i], l)
		}
		p.mu.RUnlock()
		var dirty, total int64
		fd := plan.state.firstDirty(p.id)
		for _, l := range plan.locs[i] {
			total += int64(l.size)
			if l.last >= fd {
				dirty += int64(l.size)
				if cfg.MaxCompactionLag > 0 && l.appendMS <= nowMS-cfg.MaxCompactionLag.Milliseconds() {
					due = true
				}
			}
		}
		if dirty > 0 && float64(dirty)/float64(total) > cfg.MinCleanableDirtyRatio {
			due = true
		}
	}
	if !due {
		return nil, nil
	}
	s.producers.Each(func(k producerKey, ps *disbackend.ProducerState) {
		if k.sid != st.sid || int(k.part) >= len(st.parts) || len(ps.Batches) == 0 {
			return
		}
		m := plan.lastOfProducer[k.part]
		if m == nil {
			m = map[int64]bool{}
			plan.lastOfProducer[k.part] = m
		}
		m[ps.Batches[len(ps.Batches)-1].LastOffset] = true
	})
	return plan, nil
}

// cleaned is a pass's new segment, written but not yet swapped in.
type cleaned struct {
	path      string // of the .cleaned file
	frames    []frameInfo
	size      int64
	state     cleanerState // the stream's, once swapped
	more      bool         // some dirty records were past the key map
	read      int
	bytesRead int64
	removed   int
}

// writeCleaned writes plan's partitions, cleaned, to a new .cleaned file
// and fdatasyncs it. It reads the range's sealed segments, which only a
// swap, retention or DeleteStream removes: a batch that cannot be read
// abandons the pass.
func (s *Store) writeCleaned(plan *cleanPlan) (*cleaned, error) {
	st := plan.st
	out := &cleaned{path: s.fs.PathJoin(s.segDir, segmentName(st.sid, plan.segs[0].n)+"."+cleanedExt)}
	out.state.FirstDirty = make([]int64, len(st.parts))
	copy(out.state.FirstDirty, plan.state.FirstDirty)
	f, err := s.fs.Create(out.path, vfs.WriteCategoryUnspecified)
	if err != nil {
		return nil, fmt.Errorf("segment %s: create: %w", out.path, err)
	}
	w := bufio.NewWriterSize(f, 1<<20)
	m := newOffsetMap(s.cleanerBuffer)
	for i, locs := range plan.locs {
		if len(locs) == 0 {
			continue
		}
		part := int32(i)
		mapEnd, err := s.mapDirty(plan, part, m)
		if err != nil {
			_ = f.Close()
			return out, err
		}
		if mapEnd <= locs[len(locs)-1].last {
			out.more = true
		}
		if mapEnd > out.state.FirstDirty[part] {
			out.state.FirstDirty[part] = mapEnd
		}
		if err := s.cleanPartition(plan, part, m, mapEnd, w, out); err != nil {
			_ = f.Close()
			return out, err
		}
	}
	err = w.Flush()
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return out, fmt.Errorf("segment %s: write: %w", out.path, err)
	}
	s.hook("cleaned written")
	return out, nil
}

// readLoc reads one batch of the range. The segments of a plan are sealed
// and only removed under wmu by a swap, retention or DeleteStream; a read
// of a removed one fails the pass.
func (s *Store) readLoc(l batchLoc) ([]byte, error) {
	if s.closed.Load() {
		return nil, fmt.Errorf("localstore: clean: %w", disbackend.ErrClosed)
	}
	buf := make([]byte, l.size)
	ok, err := l.seg.readAt(buf, l.pos)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, fmt.Errorf("segment %s: removed during the pass", l.seg.path)
	}
	return buf, nil
}

// mapDirty fills m with the latest offset of every key of part's dirty
// section, from its first dirty offset on, batch by batch while the map
// has room; it returns the offset after the last batch mapped (the first
// dirty offset of the next pass). A batch with more keys than the whole
// map grows it: the map holds at least one batch.
func (s *Store) mapDirty(plan *cleanPlan, part int32, m *offsetMap) (int64, error) {
	m.reset()
	fd := plan.state.firstDirty(part)
	end := fd
	for _, l := range plan.locs[part] {
		if l.last < fd {
			continue
		}
		raw, err := s.readLoc(l)
		if err != nil {
			return 0, err
		}
		recs, err := batch.DecodeRecords(raw)
		if err != nil {
			return 0, fmt.Errorf("segment %s: batch at %d: %w", l.seg.path, l.base, err)
		}
		if !m.fits(len(recs)) {
			if m.len() > 0 {
				break
			}
			m.grow(len(recs))
		}
		for i := range recs {
			if recs[i].Key != nil {
				m.put(recs[i].Key, recs[i].Offset(l.base))
			}
		}
		end = l.last + 1
	}
	return end, nil
}

// cleanPartition writes part's batches of the range to w as frames: those
// before mapEnd (the clean section and what m covers) filtered by m, the
// rest as they are.
func (s *Store) cleanPartition(plan *cleanPlan, part int32, m *offsetMap, mapEnd int64, w *bufio.Writer, out *cleaned) error {
	locs := plan.locs[part]
	for li, l := range locs {
		raw, err := s.readLoc(l)
		if err != nil {
			return err
		}
		out.read++
		out.bytesRead += int64(l.size)
		if l.base >= mapEnd {
			if err := s.writeFrame(plan, part, l, raw, w, out); err != nil {
				return err
			}
			continue
		}
		raw, err = s.filterBatch(plan, part, m, l, raw, li == len(locs)-1, out)
		if err != nil {
			return err
		}
		if raw == nil {
			continue // nothing of it stays
		}
		if err := s.writeFrame(plan, part, l, raw, w, out); err != nil {
			return err
		}
	}
	return nil
}

// filterBatch is what a pass keeps of one batch before the map's end (nil:
// nothing, not even its header). last is the partition's last batch of the
// range.
func (s *Store) filterBatch(plan *cleanPlan, part int32, m *offsetMap, l batchLoc, raw []byte, last bool, out *cleaned) ([]byte, error) {
	h, err := batch.ParseHeader(raw)
	if err != nil {
		return nil, fmt.Errorf("segment %s: batch at %d: %w", l.seg.path, l.base, err)
	}
	recs, err := batch.DecodeRecords(raw)
	if err != nil {
		return nil, fmt.Errorf("segment %s: batch at %d: %w", l.seg.path, l.base, err)
	}
	horizon, hasHorizon := h.DeleteHorizon()
	keep := recs[:0:0]
	tombstones := false
	for _, r := range recs {
		switch {
		case r.Key == nil:
			continue // a compacted topic has no use for it (Kafka drops it too)
		case m.get(r.Key) > r.Offset(l.base):
			continue // superseded
		case r.Value == nil && hasHorizon && plan.nowMS >= horizon:
			continue // a tombstone whose delete horizon passed
		}
		keep = append(keep, r)
		tombstones = tombstones || r.Value == nil
	}
	out.removed += len(recs) - len(keep)
	newHorizon := int64(-1)
	switch {
	case tombstones && !hasHorizon:
		newHorizon = plan.nowMS + plan.st.meta.Config.DeleteRetention.Milliseconds()
	case hasHorizon && len(keep) > 0:
		newHorizon = horizon
	}
	if tombstones && (out.state.NextHorizon == 0 || newHorizon < out.state.NextHorizon) {
		out.state.NextHorizon = max(newHorizon, 1)
	}
	switch {
	case len(keep) == len(recs) && (!tombstones || hasHorizon):
		return raw, nil // unchanged: copied as it is
	case len(keep) == 0 && !plan.lastOfProducer[part][l.last] && !last:
		return nil, nil // nothing left, and no reason to keep the header
	}
	rewritten, err := batch.Rewrite(h, keep, newHorizon)
	if err != nil {
		return nil, fmt.Errorf("segment %s: rewrite batch at %d: %w", l.seg.path, l.base, err)
	}
	return rewritten, nil
}

// writeFrame appends raw, the batch of l as the pass keeps it, to w as a
// frame of the cleaned segment.
func (s *Store) writeFrame(plan *cleanPlan, part int32, l batchLoc, raw []byte, w *bufio.Writer, out *cleaned) error {
	fi := frameInfo{part: part, size: int32(len(raw)), pos: out.size + frameHeaderLen,
		base: l.base, last: l.last, appendMS: l.appendMS, maxTS: l.maxTS}
	if h, err := batch.ParseHeader(raw); err == nil {
		fi.maxTS = h.MaxTimestamp
		fi.pid, fi.epoch, fi.seq = h.ProducerID, h.ProducerEpoch, h.BaseSequence
	}
	var hdr [frameHeaderLen]byte
	fi.putHeader(hdr[:], plan.st.sid)
	putFrameCRC(hdr[:], raw)
	if _, err := w.Write(hdr[:]); err != nil {
		return err
	}
	if _, err := w.Write(raw); err != nil {
		return err
	}
	out.size += frameHeaderLen + int64(len(raw))
	out.frames = append(out.frames, fi)
	return nil
}

// swapCleaned puts the cleaned segment in place of the range, under wmu:
// the commit (rename to .swap, directory synced), the partitions' indexes
// pointed at it, the replaced segments removed, the rename to .log and its
// index. It reports false, changing nothing, when the range changed
// meanwhile (retention or DeleteStream removed some of it).
func (s *Store) swapCleaned(plan *cleanPlan, out *cleaned) (bool, error) {
	if err := s.enter("clean"); err != nil {
		return false, err
	}
	defer s.dbMu.RUnlock()
	s.wmu.Lock()
	defer s.wmu.Unlock()
	st := plan.st
	segs := s.segs[st.sid]
	if s.streams[st.meta.Name] != st || s.storageFailure() != nil || len(segs) < len(plan.segs) {
		return false, nil
	}
	for i, sg := range plan.segs {
		if segs[i] != sg {
			return false, nil
		}
	}
	first, last := plan.segs[0], plan.segs[len(plan.segs)-1]
	final := s.fs.PathJoin(s.segDir, segmentName(st.sid, first.n))
	swap := s.fs.PathJoin(s.segDir, fmt.Sprintf("%016x-%016x-%016x.%s", st.sid, first.n, last.n, swapExt))
	if err := s.fs.Rename(out.path, swap); err != nil {
		return false, fmt.Errorf("segment %s: rename: %w", out.path, err)
	}
	if err := syncDir(s.fs, s.segDir); err != nil {
		return false, s.failSwap(fmt.Errorf("segment %s: sync directory: %w", swap, err))
	}
	s.hook("swap committed")
	f, err := s.fs.Open(swap)
	if err != nil {
		return false, s.failSwap(fmt.Errorf("segment %s: open: %w", swap, err))
	}
	ns := newSegment(st.sid, first.n, final, f)
	ns.sealed = true
	idx := make([]byte, 0, len(out.frames)*idxRecordLen)
	newLocs := make([][]batchLoc, len(st.parts))
	for i := range out.frames {
		fi := &out.frames[i]
		ns.note(fi)
		idx = appendIdxRecord(idx, fi)
		newLocs[fi.part] = append(newLocs[fi.part], batchLoc{seg: ns, pos: fi.pos, base: fi.base, last: fi.last,
			maxTS: fi.maxTS, appendMS: fi.appendMS, size: fi.size})
	}
	ns.size = out.size
	inRange := make(map[*segment]bool, len(plan.segs))
	for _, sg := range plan.segs {
		inRange[sg] = true
	}
	for i, p := range st.parts {
		if i >= len(newLocs) {
			break
		}
		p.mu.Lock()
		k := 0
		for k < len(p.index) && inRange[p.index[k].seg] {
			k++
		}
		kept := newLocs[i][:0]
		for _, l := range newLocs[i] {
			if l.last >= p.first {
				kept = append(kept, l)
			}
		}
		p.index = append(kept, p.index[k:]...)
		p.indexGen++
		var bytes, n int64
		if len(plan.locs[i]) > 0 {
			bytes, n = p.dropCacheBelow(plan.locs[i][len(plan.locs[i])-1].last + 1)
		}
		p.mu.Unlock()
		s.cache.release(bytes, n)
	}
	s.segs[st.sid] = append([]*segment{ns}, segs[len(plan.segs):]...)
	for _, sg := range plan.segs {
		if err := s.removeSegment(sg); err != nil {
			return true, s.failSwap(err)
		}
	}
	if err := syncDir(s.fs, s.segDir); err != nil {
		return true, s.failSwap(fmt.Errorf("segment %s: sync directory: %w", swap, err))
	}
	s.hook("replaced removed")
	if err := s.fs.Rename(swap, final+".log"); err != nil {
		return true, s.failSwap(fmt.Errorf("segment %s: rename: %w", swap, err))
	}
	if err := syncDir(s.fs, s.segDir); err != nil {
		return true, s.failSwap(fmt.Errorf("segment %s: sync directory: %w", final, err))
	}
	s.hook("swap renamed")
	if err := writeIdx(s.fs, final, idx); err != nil {
		s.log.Warn("writing a cleaned segment's index failed; the next Open scans it", zap.String("segment", final), zap.Error(err))
	}
	s.hook("index written")
	return true, nil
}

// failSwap stops the store after a failure past the swap's commit: the
// files are in a state only Open finishes.
func (s *Store) failSwap(err error) error {
	s.fail(err)
	return err
}

// saveCleanerState persists a stream's cleaner state (synced).
func (s *Store) saveCleanerState(st *stream, cs cleanerState) error {
	if err := s.enter("clean"); err != nil {
		return err
	}
	defer s.dbMu.RUnlock()
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if s.streams[st.meta.Name] != st {
		return nil
	}
	if err := s.db.Set(cleanerKey(st.sid), mustJSON(cs), pebble.Sync); err != nil {
		return fmt.Errorf("localstore: clean stream %q: save state: %w", st.meta.Name, err)
	}
	return nil
}

func cleanerKey(sid uint64) []byte {
	k := make([]byte, 9)
	k[0] = prefixCleaner
	for i := 0; i < 8; i++ {
		k[1+i] = byte(sid >> (56 - 8*i))
	}
	return k
}

// loadCleanerState reads a stream's cleaner state; none is the zero state.
func (s *Store) loadCleanerState(sid uint64) (cleanerState, error) {
	var cs cleanerState
	v, closer, err := s.db.Get(cleanerKey(sid))
	if err == pebble.ErrNotFound {
		return cs, nil
	}
	if err != nil {
		return cs, err
	}
	defer closer.Close()
	if err := json.Unmarshal(v, &cs); err != nil {
		return cs, fmt.Errorf("cleaner state of stream %d: %w: %v", sid, errCorrupt, err)
	}
	return cs, nil
}

// finishSwaps is Open's part of the swap: a .cleaned file is removed (its
// pass never committed); a .swap file replaces what is left of the
// segments it names, then takes the first one's name.
func finishSwaps(fs vfs.FS, dir string) error {
	names, err := fs.List(dir)
	if err != nil {
		return err
	}
	changed := false
	for _, name := range names {
		switch {
		case strings.HasSuffix(name, "."+cleanedExt):
			if err := fs.Remove(fs.PathJoin(dir, name)); err != nil {
				return err
			}
			changed = true
		case strings.HasSuffix(name, "."+swapExt):
			sid, from, to, ok := parseSwapName(name)
			if !ok {
				continue
			}
			for _, other := range names {
				osid, n, _, ok := parseSegmentName(other)
				if ok && osid == sid && n >= from && n <= to {
					if err := fs.Remove(fs.PathJoin(dir, other)); err != nil {
						return err
					}
				}
			}
			if err := syncDir(fs, dir); err != nil {
				return err
			}
			if err := fs.Rename(fs.PathJoin(dir, name), fs.PathJoin(dir, segmentName(sid, from)+".log")); err != nil {
				return err
			}
			changed = true
		}
	}
	if changed {
		return syncDir(fs, dir)
	}
	return nil
}

// parseSwapName parses "<sid>-<from>-<to>.swap".
func parseSwapName(name string) (sid, from, to uint64, ok bool) {
	base, _ := strings.CutSuffix(name, "."+swapExt)
	parts := strings.Split(base, "-")
	if len(parts) != 3 {
		return 0, 0, 0, false
	}
	var v [3]uint64
	for i, p := range parts {
		n, err := strconv.ParseUint(p, 16, 64)
		if err != nil || len(p) != 16 {
			return 0, 0, 0, false
		}
		v[i] = n
	}
	return v[0], v[1], v[2], v[1] <= v[2]
}

// hook calls Options' test hook at a step of a cleaning pass.
func (s *Store) hook(step string) {
	if s.cleanerHook != nil {
		s.cleanerHook(step)
	}
}

// offsetMap is the cleaner's key map: key hash to latest offset, in an
// open-addressing table of at most slotsMax slots (the largest power of two
// the configured buffer holds at offsetMapEntryBytes each) filled to 90% at
// most, allocated as the keys need it.
type offsetMap struct {
	slots    []mapSlot
	n        int
	slotsMax int
}

type mapSlot struct {
	hash [16]byte
	off  int64 // offset + 1; 0 is an empty slot
}

func newOffsetMap(bufferBytes int64) *offsetMap {
	slots := 16
	for int64(slots)*2*offsetMapEntryBytes <= bufferBytes {
		slots *= 2
	}
	return &offsetMap{slotsMax: slots}
}

func (m *offsetMap) reset() {
	clear(m.slots)
	m.n = 0
}

func (m *offsetMap) len() int { return m.n }

// fits reports whether k more keys fit the buffer.
func (m *offsetMap) fits(k int) bool { return (m.n+k)*10 <= m.slotsMax*9 }

// grow lets the map hold k more keys than the buffer allows (one batch with
// more keys than the whole map).
func (m *offsetMap) grow(k int) {
	for !m.fits(k) {
		m.slotsMax *= 2
	}
}

func (m *offsetMap) put(key []byte, off int64) {
	if (m.n+1)*10 > len(m.slots)*9 {
		m.resize()
	}
	h := keyHash(key)
	mask := len(m.slots) - 1
	for i := slotOf(h); ; i++ {
		sl := &m.slots[i&mask]
		if sl.off == 0 {
			sl.hash, sl.off = h, off+1
			m.n++
			return
		}
		if sl.hash == h {
			sl.off = max(sl.off, off+1)
			return
		}
	}
}

// get returns the latest offset of key, -1 when it is not in the map.
func (m *offsetMap) get(key []byte) int64 {
	if m.n == 0 {
		return -1
	}
	h := keyHash(key)
	mask := len(m.slots) - 1
	for i := slotOf(h); ; i++ {
		sl := &m.slots[i&mask]
		if sl.off == 0 {
			return -1
		}
		if sl.hash == h {
			return sl.off - 1
		}
	}
}

// resize doubles the table, at least 16 slots and at most slotsMax, and
// reinserts what it holds.
func (m *offsetMap) resize() {
	size := min(max(16, 2*len(m.slots)), m.slotsMax)
	if size <= len(m.slots) {
		size = 2 * len(m.slots) // only after grow; fits keeps the load below 90%
	}
	old := m.slots
	m.slots = make([]mapSlot, size)
	mask := size - 1
	for _, sl := range old {
		if sl.off == 0 {
			continue
		}
		for i := slotOf(sl.hash); ; i++ {
			if m.slots[i&mask].off == 0 {
				m.slots[i&mask] = sl
				break
			}
		}
	}
}

func slotOf(h [16]byte) int {
	return int(h[0]) | int(h[1])<<8 | int(h[2])<<16 | int(h[3])<<24
}

// keyHash is the first 16 bytes of the key's SHA-256: collisions, which
// would let one key's record remove another's, are not practical to make
// (Kafka uses MD5).
func keyHash(key []byte) [16]byte {
	sum := sha256.Sum256(key)
	var h [16]byte
	copy(h[:], sum[:16])
	return h
}
