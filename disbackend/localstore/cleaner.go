package localstore

import (
	"bufio"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

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
// A pass reads each partition's batches of the range through the index
// (chunk by chunk, adjacent chunks together) and writes the partitions one
// after the other, so the new segment's chunks are long runs; its index is
// written as the partitions are, holding nothing per batch in memory.
//
// The swap is crash-safe. The new segment is written as <sid>-<n>.cleaned
// (n is the first replaced segment's number) and its index as
// <sid>-<n>.cleaned-index, both synced; renaming the first to
// <sid>-<n>-<m>.swap (m the last replaced one) and syncing the directory
// commits the pass; then the replaced segments are removed, the index
// renamed to <sid>-<n>.index and the .swap to <sid>-<n>.log. Open removes
// a .cleaned file or a .cleaned-index without a .swap (the pass never
// committed) and finishes a .swap (cleaner_swap.go). Segment numbers keep
// their order, so the cleaned segment sits where the replaced ones were.

const (
	defaultCleanerInterval    = 15 * time.Second // Kafka log.cleaner.backoff.ms
	defaultCleanerBufferBytes = 128 << 20        // Kafka log.cleaner.dedupe.buffer.size
	// offsetMapEntryBytes is one key map entry: a 16-byte key hash and an
	// offset (Kafka's SkimpyOffsetMap uses 24 too).
	offsetMapEntryBytes = 24
	cleanedExt          = "cleaned"
	cleanedIndexExt     = "cleaned-index"
	swapExt             = "swap"
	// cleanerReadBytes is how much of a partition's adjacent chunks the
	// cleaner reads at once.
	cleanerReadBytes = 1 << 20
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
	if s.space.full.Load() {
		return // a pass writes a copy first: it waits for space
	}
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
				switch {
				case isENOSPC(err):
					s.space.onENOSPC(err) // the state's line says it; the cleaner waits
					return
				case !gone && !errors.Is(err, disbackend.ErrClosed):
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
	if err := s.seal(seg, true); err != nil { // seal waits for its batches to be published
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
	st   *stream
	segs []*segment // the cleanable range, in order
	// by partition: its segParts in the range (sealed: they never change)
	// and its first offset when the pass was planned
	sps   [][]*segPart
	first []int64
	state cleanerState
	// lastOfProducer holds, by partition, the last offsets of the last
	// batches of producers with state: those batches stay.
	lastOfProducer []map[int64]bool
	nowMS          int64
	// by partition: its aborted transactions and last stable offset
	// (TxnView; none and math.MaxInt64 without one)
	aborted    [][]disbackend.AbortedRange
	lastStable []int64
}

var _ disbackend.TxnCleaner = (*Store)(nil)

// SetTxnView gives the log cleaner the transactions (the gateway's
// transaction coordinator): from the next pass on it maps no key at or
// past a partition's last stable offset and drops the records of aborted
// transactions (Kafka's cleaner: firstUncleanableOffset at most the last
// stable offset, and MemoryRecords.filterTo's aborted batches).
func (s *Store) SetTxnView(v disbackend.TxnView) { s.txnView.Store(&v) }

// isAborted reports whether the batch raw at f is a transactional batch of
// an aborted transaction in l.
func isAborted(raw []byte, f *frameInfo, l []disbackend.AbortedRange) bool {
	if len(l) == 0 || f.pid < 0 {
		return false
	}
	h, err := batch.ParseHeader(raw)
	if err != nil || h.Attributes&batch.AttrTransactional == 0 || h.Attributes&batch.AttrControl != 0 {
		return false
	}
	for _, a := range l {
		if a.ProducerID == h.ProducerID && a.FirstOffset <= f.base && f.base <= a.LastOffset {
			return true
		}
	}
	return false
}

// partLast is the last offset of part's batches in the range (-1: none).
func (plan *cleanPlan) partLast(part int32) int64 {
	if sps := plan.sps[part]; len(sps) > 0 {
		return sps[len(sps)-1].last
	}
	return -1
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
	if due, err := s.cleaningDue(plan); err != nil || !due {
		return false, err
	}
	start := time.Now()
	out, err := s.writeCleaned(plan)
	if err != nil {
		if out != nil {
			out.remove(s.fs)
		}
		return false, err
	}
	ok, err := s.swapCleaned(plan, out)
	if err != nil {
		return false, err // the files are left for Open to finish or remove
	}
	if !ok {
		out.remove(s.fs)
		return false, nil
	}
	if err := s.saveCleanerState(st, out.state); err != nil {
		return false, err
	}
	st.clean = out.state
	s.hook("state saved")
	s.log.Info("log cleaner pass", zap.String("stream", st.meta.Name), zap.Int("segments", len(plan.segs)),
		zap.Int("batches_read", out.read), zap.Int("batches_written", out.written),
		zap.Int64("bytes_read", out.bytesRead), zap.Int64("bytes_written", out.size),
		zap.Int("records_removed", out.removed), zap.Duration("took", time.Since(start)))
	return out.more, nil
}

// planClean snapshots the cleanable range of st, the longest prefix of its
// sealed segments whose every batch is at least min.compaction.lag.ms old;
// nil when there is none.
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
		sps: make([][]*segPart, len(st.parts)), first: make([]int64, len(st.parts)),
		lastOfProducer: make([]map[int64]bool, len(st.parts))}
	plan.state.FirstDirty = slices.Clone(st.clean.FirstDirty)
	plan.aborted, plan.lastStable = make([][]disbackend.AbortedRange, len(st.parts)), make([]int64, len(st.parts))
	view := s.txnView.Load()
	for i := range st.parts {
		plan.lastStable[i] = math.MaxInt64
		if view != nil {
			plan.aborted[i], plan.lastStable[i] = (*view)(st.meta.Name, int32(i))
		}
	}
	inRange := make(map[*segment]bool, n)
	for _, sg := range plan.segs {
		inRange[sg] = true
	}
	for i, p := range st.parts {
		p.mu.RLock()
		plan.first[i] = p.first
		for _, sp := range p.segs {
			if !inRange[sp.seg] {
				break
			}
			if sp.last >= p.first {
				plan.sps[i] = append(plan.sps[i], sp)
			}
		}
		p.mu.RUnlock()
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

// cleaningDue decides whether a pass over plan is due: a partition whose
// dirty share of the range (its bytes from its first dirty offset on)
// exceeds min.cleanable.dirty.ratio, a dirty batch older than
// max.compaction.lag.ms (the first dirty batch of each segment, and the
// oldest of each segment wholly dirty, are checked: append times only
// grow), or a delete horizon that has passed.
func (s *Store) cleaningDue(plan *cleanPlan) (bool, error) {
	cfg := plan.st.meta.Config
	due := plan.state.NextHorizon > 0 && plan.nowMS >= plan.state.NextHorizon
	lagCutoff := plan.nowMS - cfg.MaxCompactionLag.Milliseconds()
	for i, sps := range plan.sps {
		fd := max(plan.state.firstDirty(int32(i)), plan.first[i])
		var dirty, total int64
		for _, sp := range sps {
			all, err := s.bytesFrom(sp, plan.first[i])
			if err != nil {
				return false, err
			}
			total += all
			if sp.last < fd {
				continue
			}
			d, firstApp, err := s.dirtyOf(sp, fd)
			if err != nil {
				return false, err
			}
			dirty += d
			if cfg.MaxCompactionLag > 0 && firstApp <= lagCutoff {
				due = true
			}
		}
		if dirty > 0 && float64(dirty)/float64(total) > cfg.MinCleanableDirtyRatio {
			due = true
		}
		if due {
			return true, nil
		}
	}
	return due, nil
}

// bytesFrom returns the batch bytes of a sealed segPart's batches that end
// at or after off.
func (s *Store) bytesFrom(sp *segPart, off int64) (int64, error) {
	if sp.first >= off {
		return sp.bytes, nil
	}
	below, ok, err := s.bytesBelow(&partView{segs: []*segPart{sp}}, off)
	if err == nil && !ok {
		err = fmt.Errorf("segment %s: removed during the pass", sp.seg.path)
	}
	return sp.bytes - below, err
}

// dirtyOf returns the batch bytes of a sealed segPart's batches that end at
// or after fd, and the append time of the first of them (the oldest of
// the segment's when they are all dirty).
func (s *Store) dirtyOf(sp *segPart, fd int64) (int64, int64, error) {
	if sp.first >= fd {
		return sp.bytes, sp.minAppend, nil
	}
	d, err := s.bytesFrom(sp, fd)
	if err != nil {
		return 0, 0, err
	}
	firstApp := int64(math.MaxInt64)
	err = s.eachBatch([]*segPart{sp}, fd, 0, func(f *frameInfo, raw []byte) (bool, error) {
		firstApp = f.appendMS
		return false, nil
	})
	return d, firstApp, err
}

// eachBatch calls fn with each batch of sps (sealed segParts of one
// partition, in order) that ends at or after from, in offset order, until
// fn returns false or an error. Adjacent chunks are read together, up to
// readBytes at once (0: a chunk at a time).
func (s *Store) eachBatch(sps []*segPart, from int64, readBytes int64, fn func(f *frameInfo, raw []byte) (bool, error)) error {
	var ferr error
	stop := false
	wrapped := func(f *frameInfo, raw []byte) bool {
		if f.last < from {
			return true
		}
		more, err := fn(f, raw)
		if err != nil || !more {
			ferr, stop = err, true
			return false
		}
		return true
	}
	for _, sp := range sps {
		if sp.last < from {
			continue
		}
		if s.closed.Load() {
			return fmt.Errorf("localstore: clean: %w", disbackend.ErrClosed)
		}
		sv := sealedView(sp)
		k, ok, err := sv.search(func(c *chunk) bool { return c.last >= from })
		for err == nil && ok && k < sv.n && !stop {
			var cs []chunk
			cs, ok, err = sv.entries(k, readPage)
			for j := 0; err == nil && ok && j < len(cs) && !stop; {
				r := j + 1
				for r < len(cs) && cs[r].pos == cs[r-1].end() && cs[r].end()-cs[j].pos <= readBytes {
					r++
				}
				ok, err = s.readChunks(sp, cs[j:r], nil, wrapped)
				j = r
			}
			k += int64(len(cs))
		}
		if err == nil && !ok {
			err = fmt.Errorf("segment %s: removed during the pass", sp.seg.path)
		}
		if err != nil {
			return err
		}
		if ferr != nil || stop {
			return ferr
		}
	}
	return nil
}

// cleaned is a pass's new segment, written but not yet swapped in.
type cleaned struct {
	path, ixPath string // of the .cleaned file and its index
	parts        map[int32]*segPart
	cur          *segPart // the partition being written
	size         int64
	state        cleanerState // the stream's, once swapped
	more         bool         // some dirty records were past the key map
	read         int
	written      int
	bytesRead    int64
	removed      int
}

// remove removes an uncommitted pass's files, the index first (Open
// renames an index whose .cleaned is gone into place).
func (out *cleaned) remove(fs vfs.FS) {
	_ = fs.Remove(out.ixPath)
	_ = fs.Remove(out.path)
}

// writeCleaned writes plan's partitions, cleaned, one after the other, to
// a new .cleaned file and their index to its .cleaned-index, and syncs
// both. It reads the range's sealed segments, which only a swap,
// retention or DeleteStream removes: a batch that cannot be read abandons
// the pass.
func (s *Store) writeCleaned(plan *cleanPlan) (*cleaned, error) {
	st := plan.st
	base := s.fs.PathJoin(s.segDir, segmentName(st.sid, plan.segs[0].n))
	out := &cleaned{path: base + "." + cleanedExt, ixPath: base + "." + cleanedIndexExt, parts: make(map[int32]*segPart)}
	out.state.FirstDirty = make([]int64, len(st.parts))
	copy(out.state.FirstDirty, plan.state.FirstDirty)
	// The copy is data, like a segment: it does not take the ballast's
	// room (segFS), a pass that finds no room is abandoned.
	f, err := s.segFS.Create(out.path, vfs.WriteCategoryUnspecified)
	if err != nil {
		return nil, fmt.Errorf("segment %s: create: %w", out.path, err)
	}
	ixw, err := newIndexWriter(s.fs, out.ixPath)
	if err != nil {
		_ = f.Close()
		return out, fmt.Errorf("segment %s: create: %w", out.ixPath, err)
	}
	fail := func(err error) (*cleaned, error) {
		_ = f.Close()
		ixw.abort(s.fs)
		return out, err
	}
	w := bufio.NewWriterSize(f, 1<<20)
	m := newOffsetMap(s.cleanerBuffer)
	for i, sps := range plan.sps {
		if len(sps) == 0 {
			continue
		}
		part := int32(i)
		mapEnd, err := s.mapDirty(plan, part, m)
		if err != nil {
			return fail(err)
		}
		if mapEnd <= plan.partLast(part) && mapEnd < plan.lastStable[part] {
			out.more = true // not when an open transaction stopped it: the next pass would stop there too
		}
		if mapEnd > out.state.FirstDirty[part] {
			out.state.FirstDirty[part] = mapEnd
		}
		if err := s.cleanPartition(plan, part, m, mapEnd, w, out); err != nil {
			return fail(err)
		}
		if sp := out.cur; sp != nil {
			sp.ixStart, sp.ixCount = ixw.addPart(sp), int64(len(sp.chunks))
			sp.chunks, sp.sealed, out.cur = nil, true, nil
			if ixw.err != nil {
				return fail(fmt.Errorf("segment %s: write: %w", out.ixPath, ixw.err))
			}
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
		ixw.abort(s.fs)
		return out, fmt.Errorf("segment %s: write: %w", out.path, err)
	}
	if err := ixw.finish(out.size, plan.segs[len(plan.segs)-1].covers); err != nil {
		return out, err
	}
	s.hook("cleaned written")
	return out, nil
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
	err := s.eachBatch(plan.sps[part], max(fd, plan.first[part]), cleanerReadBytes, func(f *frameInfo, raw []byte) (bool, error) {
		if f.base >= plan.lastStable[part] {
			return false, nil // an open transaction's records may yet be aborted: nothing from here on supersedes
		}
		if isControl(raw) || isAborted(raw, f, plan.aborted[part]) {
			end = f.last + 1
			return true, nil // a marker's key is its type, an aborted record supersedes nothing
		}
		recs, err := batch.DecodeRecords(raw)
		if err != nil {
			return false, fmt.Errorf("segment stream %d: batch at %d: %w", plan.st.sid, f.base, err)
		}
		if !m.fits(len(recs)) {
			if m.len() > 0 {
				return false, nil
			}
			m.grow(len(recs))
		}
		for i := range recs {
			if recs[i].Key != nil {
				m.put(recs[i].Key, recs[i].Offset(f.base))
			}
		}
		end = f.last + 1
		return true, nil
	})
	return end, err
}

// cleanPartition writes part's batches of the range to w as frames: those
// before mapEnd (the clean section and what m covers) filtered by m, the
// rest as they are.
func (s *Store) cleanPartition(plan *cleanPlan, part int32, m *offsetMap, mapEnd int64, w *bufio.Writer, out *cleaned) error {
	partLast := plan.partLast(part)
	committed := map[int64]bool{}
	return s.eachBatch(plan.sps[part], plan.first[part], cleanerReadBytes, func(f *frameInfo, raw []byte) (bool, error) {
		out.read++
		out.bytesRead += int64(f.size)
		if f.base >= mapEnd {
			return true, s.writeFrame(plan, part, f, raw, w, out)
		}
		raw, err := s.filterBatch(plan, part, m, f, raw, f.last == partLast, committed, out)
		if err != nil || raw == nil {
			return err == nil, err // nil: nothing of it stays
		}
		return true, s.writeFrame(plan, part, f, raw, w, out)
	})
}

// filterBatch is what a pass keeps of one batch before the map's end (nil:
// nothing, not even its header). last is the partition's last batch of the
// range. committed holds the producers with a committed transactional
// batch read since their last marker (filterMarker).
func (s *Store) filterBatch(plan *cleanPlan, part int32, m *offsetMap, f *frameInfo, raw []byte, last bool, committed map[int64]bool, out *cleaned) ([]byte, error) {
	h, err := batch.ParseHeader(raw)
	if err != nil {
		return nil, fmt.Errorf("stream %d partition %d: batch at %d: %w", plan.st.sid, part, f.base, err)
	}
	if h.Attributes&batch.AttrControl != 0 {
		return s.filterMarker(plan, part, f, h, raw, last, committed, out)
	}
	aborted := isAborted(raw, f, plan.aborted[part])
	if h.Attributes&batch.AttrTransactional != 0 && !aborted {
		committed[h.ProducerID] = true
	}
	if aborted {
		// An aborted transaction's records go (Kafka's cleaner); the
		// header stays where a batch must (below).
		out.removed += int(h.NumRecords)
		if !plan.lastOfProducer[part][f.last] && !last {
			return nil, nil
		}
		return batch.Rewrite(h, nil, -1)
	}
	recs, err := batch.DecodeRecords(raw)
	if err != nil {
		return nil, fmt.Errorf("stream %d partition %d: batch at %d: %w", plan.st.sid, part, f.base, err)
	}
	horizon, hasHorizon := h.DeleteHorizon()
	keep := recs[:0:0]
	tombstones := false
	for _, r := range recs {
		switch {
		case r.Key == nil:
			continue // a compacted topic has no use for it (Kafka drops it too)
		case m.get(r.Key) > r.Offset(f.base):
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
	case len(keep) == 0 && !plan.lastOfProducer[part][f.last] && !last:
		return nil, nil // nothing left, and no reason to keep the header
	}
	rewritten, err := batch.Rewrite(h, keep, newHorizon)
	if err != nil {
		return nil, fmt.Errorf("stream %d partition %d: rewrite batch at %d: %w", plan.st.sid, part, f.base, err)
	}
	return rewritten, nil
}

// filterMarker is what a pass keeps of a transaction marker (a control
// batch) before the map's end, as Kafka's cleaner does for a COMMIT
// (LogCleaner, CleanedTransactionMetadata): a marker whose transaction has
// no batch left before it in the partition (committed holds the producers
// with one read since their last marker) gets a delete horizon of
// delete.retention.ms (KIP-534, as a tombstone), and a pass after the
// horizon removes it (its header stays where a batch must); a marker with
// a batch of its transaction still there stays as it is. An ABORT marker
// always stays: with its aborted range (kept by the transaction
// coordinator and answered in read_committed Fetches) it ends the
// producer's aborted transaction for a reader, and Kafka removes the two
// together (not done here).
func (s *Store) filterMarker(plan *cleanPlan, part int32, f *frameInfo, h batch.Header, raw []byte, last bool, committed map[int64]bool, out *cleaned) ([]byte, error) {
	recs, err := batch.DecodeRecords(raw)
	if err != nil {
		return nil, fmt.Errorf("stream %d partition %d: marker at %d: %w", plan.st.sid, part, f.base, err)
	}
	if len(recs) == 0 {
		return raw, nil // already emptied: a header kept for its producer
	}
	if len(recs[0].Key) < 4 || binary.BigEndian.Uint16(recs[0].Key[2:]) != controlCommit {
		return raw, nil // ABORT (or unknown): stays
	}
	if committed[h.ProducerID] {
		delete(committed, h.ProducerID)
		return raw, nil // a batch of its transaction is still there
	}
	horizon, hasHorizon := h.DeleteHorizon()
	if hasHorizon && plan.nowMS >= horizon {
		out.removed += len(recs)
		if !plan.lastOfProducer[part][f.last] && !last {
			return nil, nil
		}
		return batch.Rewrite(h, nil, -1)
	}
	if !hasHorizon {
		horizon = plan.nowMS + plan.st.meta.Config.DeleteRetention.Milliseconds()
	}
	if out.state.NextHorizon == 0 || horizon < out.state.NextHorizon {
		out.state.NextHorizon = max(horizon, 1)
	}
	if hasHorizon {
		return raw, nil
	}
	rewritten, err := batch.Rewrite(h, recs, horizon)
	if err != nil {
		return nil, fmt.Errorf("stream %d partition %d: rewrite marker at %d: %w", plan.st.sid, part, f.base, err)
	}
	return rewritten, nil
}

// controlCommit is the type of a COMMIT marker's control record key
// (version int16, type int16; ControlRecordType: 0 ABORT, 1 COMMIT).
const controlCommit = 1

// writeFrame appends raw, the batch of f as the pass keeps it, to w as a
// frame of the cleaned segment, and adds it to the partition's chunks.
func (s *Store) writeFrame(plan *cleanPlan, part int32, f *frameInfo, raw []byte, w *bufio.Writer, out *cleaned) error {
	fi := frameInfo{part: part, size: int32(len(raw)), pos: out.size + frameHeaderLen,
		base: f.base, last: f.last, appendMS: f.appendMS, maxTS: f.maxTS}
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
	out.written++
	if out.cur == nil {
		out.cur = newSegPart(nil, part, fi.base)
		out.parts[part] = out.cur
	}
	out.cur.add(&fi)
	return nil
}

// isControl reports whether raw is a control batch (a transaction marker).
func isControl(raw []byte) bool {
	h, err := batch.ParseHeader(raw)
	return err == nil && h.Attributes&batch.AttrControl != 0
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
