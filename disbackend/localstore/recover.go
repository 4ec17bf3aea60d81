package localstore

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/disgw/disgw/disbackend"
	"go.uber.org/zap"
)

// Open's recovery (docs/architecture.md §4).
//
// Each segment is loaded by the first of these that applies:
//   - its .index reads back whole (trailer and directory): only the
//     directory is read, the entries stay on disk;
//   - a .idx of the first format (a dense record per batch, in one file
//     with a CRC): the store is migrated, not read both ways: the records
//     become chunks, the segment's .index is written and the .idx removed,
//     at the first Open of a store written by an older disgw;
//   - otherwise (the active segment at a crash, or an index missing or
//     torn): its journal's good blocks, then a scan of the .log from the
//     end they cover up to the first torn frame; the frames found are
//     synced, the .index written and the journal removed.
//
// Producer states come from the stream's newest snapshot that reads back
// whole, then, for the segments after it, the journal's deltas and the
// scanned frames, or (a snapshot missing or torn, or a store of the first
// format) the segments' batches. A stream whose states were replayed gets
// a new snapshot, so the next start replays nothing.

// openStats is what Open's recovery did, for the log and for tests.
type openStats struct {
	segments        int   // loaded
	scanned         int   // scanned (from a journal's end, or whole)
	scannedBytes    int64 // of frames scanned
	migrated        int   // from the first format's .idx
	snapshots       int   // producer snapshots loaded
	replayed        int   // segments whose batches were replayed into producer states
	journalBlocks   int   // journal blocks read
	rebuiltIndexes  int   // .index files written
	brokenSnapshots int   // snapshot files that did not read back
}

// recover loads streams, partition ranges, segments, producer states and
// allocators. A partition's next is the end of its last stored batch, or
// its persisted first floor when retention removed every batch; first is
// its persisted floor.
func (s *Store) recover() error {
	if v, ok, err := s.getInt64([]byte{keyAllocator}); err != nil {
		return err
	} else if ok {
		s.pidNext, s.pidLimit = v, v
	}
	if v, ok, err := s.getInt64([]byte{keySidCounter}); err != nil {
		return err
	} else if ok {
		s.nextSid = uint64(v)
	}
	sids, err := s.loadStreams()
	if err != nil {
		return err
	}
	if err := finishSwaps(s.fs, s.segDir); err != nil {
		return fmt.Errorf("finish a log cleaner swap: %w", err)
	}
	if err := removeTmpFiles(s); err != nil {
		return err
	}
	files, snaps, err := listSegments(s.fs, s.segDir)
	if err != nil {
		return fmt.Errorf("list segments: %w", err)
	}
	// Expired producer states are not rebuilt (rebuildProducer), and
	// those a snapshot held are dropped below.
	nowMS := s.now().UnixMilli()
	s.loadCutoffMS = disbackend.ProducerExpiryCutoff(nowMS, s.producerExpiry)
	for sid, list := range files {
		for _, sf := range list {
			s.nextSeg = max(s.nextSeg, sf.n+1)
		}
		st := sids[sid]
		if st == nil {
			// Left behind by a DeleteStream interrupted by a crash.
			for _, sf := range list {
				_ = removeSegmentFiles(s.fs, s.fs.PathJoin(s.segDir, segmentName(sid, sf.n)))
			}
			continue
		}
		if err := s.recoverStream(st, list, snaps[sid]); err != nil {
			return err
		}
	}
	for sid, list := range snaps {
		if sids[sid] == nil {
			for _, n := range list {
				_ = s.fs.Remove(s.fs.PathJoin(s.segDir, segmentName(sid, n)+"."+extSnapshot))
			}
		} else if files[sid] == nil {
			sids[sid].snapshots = list
		}
	}
	for _, st := range s.streams {
		for _, p := range st.parts {
			// first stays the persisted floor: the log cleaner may have
			// removed the partition's first batches, and Kafka's log start
			// offset does not move for compaction.
			if n := len(p.segs); n > 0 {
				p.next = max(p.next, p.segs[n-1].last+1)
			}
			p.assigned = p.next
			if err := s.setFirst(p, p.first); err != nil {
				return fmt.Errorf("stream %q partition %d: %w", st.meta.Name, p.id, err)
			}
		}
	}
	if s.producerExpiry > 0 {
		s.producers.Expire(s.loadCutoffMS)
	}
	s.producersCheckedMS = nowMS
	s.snapshotAll()
	return syncDir(s.fs, s.segDir)
}

// loadStreams reads every stream's metadata, floors and cleaner state.
func (s *Store) loadStreams() (map[uint64]*stream, error) {
	mit, err := s.db.NewIter(&pebble.IterOptions{LowerBound: []byte{prefixMeta}, UpperBound: []byte{prefixMeta + 1}})
	if err != nil {
		return nil, err
	}
	defer mit.Close()
	sids := make(map[uint64]*stream)
	for mit.First(); mit.Valid(); mit.Next() {
		var m streamMeta
		if err := json.Unmarshal(mit.Value(), &m); err != nil {
			return nil, fmt.Errorf("stream %q: %w: %v", mit.Key()[1:], errCorrupt, err)
		}
		m.Stream.Config = m.Stream.Config.WithDefaults()
		st := &stream{meta: m.Stream, sid: m.Sid}
		st.parts = newPartitions(st, 0, m.Stream.PartitionCount)
		if st.meta.Config.Compacted() {
			if st.clean, err = s.loadCleanerState(m.Sid); err != nil {
				return nil, fmt.Errorf("stream %q: %w", m.Stream.Name, err)
			}
		}
		for _, p := range st.parts {
			floor, _, err := s.getInt64(partKey(prefixFloor, p.sid, p.id))
			if err != nil {
				return nil, fmt.Errorf("stream %q partition %d: %w", m.Stream.Name, p.id, err)
			}
			p.first, p.next = floor, floor
		}
		s.streams[m.Stream.Name] = st
		sids[m.Sid] = st
		if m.Sid >= s.nextSid {
			s.nextSid = m.Sid + 1
		}
	}
	return sids, mit.Error()
}

// removeTmpFiles removes the files a crash left half written (index or
// snapshot files are renamed into place only once whole).
func removeTmpFiles(s *Store) error {
	names, err := s.fs.List(s.segDir)
	if err != nil {
		return fmt.Errorf("list segments: %w", err)
	}
	for _, name := range names {
		if strings.HasSuffix(name, extTmp) {
			if err := s.fs.Remove(s.fs.PathJoin(s.segDir, name)); err != nil {
				return fmt.Errorf("remove %s: %w", name, err)
			}
		}
	}
	return nil
}

// recoverStream loads the newest producer snapshot of st that reads back
// whole, then its segments in order, replaying into the producer states
// the batches of those after the snapshot.
func (s *Store) recoverStream(st *stream, list []segFiles, snaps []uint64) error {
	st.snapshots = snaps
	have := false
	var snapN uint64
	for i := len(snaps) - 1; i >= 0 && !have; i-- {
		entries, err := readSnapshot(s.fs, s.segDir, st.sid, snaps[i])
		if err != nil {
			s.stats.brokenSnapshots++
			s.log.Warn("producer snapshot unreadable; replaying the segments after an older one",
				zap.String("stream", st.meta.Name), zap.Uint64("segment", snaps[i]), zap.Error(err))
			continue
		}
		for i := range entries {
			if int(entries[i].key.part) < len(st.parts) {
				s.restoreProducer(&entries[i])
			}
		}
		have, snapN = true, snaps[i]
		s.stats.snapshots++
	}
	for _, sf := range list {
		if err := s.recoverSegment(st, sf, have, snapN); err != nil {
			return err
		}
	}
	return nil
}

// recoverSegment loads one segment of st (see the top of this file) and
// adds what it holds to the partitions. Its batches go into the producer
// states when no snapshot (have, snapN) covers them; a segment without a
// good index is always replayed (what it covers is not known; replaying
// what a snapshot holds changes nothing).
func (s *Store) recoverSegment(st *stream, sf segFiles, have bool, snapN uint64) error {
	path := s.fs.PathJoin(s.segDir, segmentName(st.sid, sf.n))
	if !sf.hasLog {
		return removeSegmentFiles(s.fs, path)
	}
	f, err := s.fs.Open(path + "." + extLog)
	if err != nil {
		return fmt.Errorf("segment %s: open: %w", path, err)
	}
	sg := newSegment(st.sid, sf.n, path, f)
	sg.st = st
	ok, err := s.loadIndex(sg, sf, func() bool { return !have || sg.covers > snapN })
	if err == nil && !ok && sf.hasOldIdx {
		ok, err = s.migrateOldIdx(sg, true)
	}
	if err == nil && !ok {
		ok, err = s.scanActive(sg, true)
	}
	if err != nil {
		_ = sg.close()
		return fmt.Errorf("segment %s: recover: %w", path, err)
	}
	if !ok { // no frame in it
		_ = sg.close()
		return removeSegmentFiles(s.fs, path)
	}
	if len(sg.parts) == 0 { // a cleaner's segment left empty
		_ = sg.close()
		return removeSegmentFiles(s.fs, path)
	}
	s.stats.segments++
	return s.install(sg)
}

// loadIndex loads sg from its .index, replaying its batches into the
// producer states when replay says so; false when it has none or it does
// not read back.
func (s *Store) loadIndex(sg *segment, sf segFiles, replay func() bool) (bool, error) {
	if !sf.hasIndex {
		return false, nil
	}
	ixf, err := s.fs.Open(sg.path + "." + extIndex)
	if err != nil {
		return false, fmt.Errorf("open index: %w", err)
	}
	parts, logSize, err := readIndexDir(ixf, sg)
	if err == nil {
		var st os.FileInfo
		if st, err = sg.f.Stat(); err == nil && logSize > st.Size() {
			err = fmt.Errorf("%w: it describes %d bytes of a %d-byte segment", errBadIndex, logSize, st.Size())
		}
	}
	if err != nil {
		_ = ixf.Close()
		s.log.Warn("segment index unreadable; rebuilding it from the segment", zap.String("segment", sg.path), zap.Error(err))
		return false, nil
	}
	sg.setIndex(ixf)
	sg.parts, sg.size, sg.sealed = parts, logSize, true
	if sf.hasOldIdx || sf.hasJournal { // a migration or a seal cut short after the index was in place
		_ = s.fs.Remove(sg.path + "." + extOldIdx)
		_ = s.fs.Remove(sg.path + "." + extJournal)
	}
	if replay() {
		s.stats.replayed++
		for _, sp := range sortedParts(parts) {
			sv := sealedView(sp)
			if _, err := s.eachFrame(&sv, 0, sv.n, func(f *frameInfo, raw []byte) bool {
				f.setProducer(raw)
				s.rebuildFrame(sg.st, f)
				return true
			}); err != nil {
				return false, err
			}
		}
	}
	return true, nil
}

// migrateOldIdx loads sg from a .idx of the first format, writes its
// .index and removes the .idx; false (and nothing changed) when the .idx
// does not read back. Its CRC is checked first, then it is read again to
// build the chunks, so that a torn one replays nothing.
func (s *Store) migrateOldIdx(sg *segment, replay bool) (bool, error) {
	if err := readOldIdx(s.fs, sg.path, func(*frameInfo) {}); err != nil {
		s.log.Warn("segment index of the first format unreadable; scanning the segment", zap.String("segment", sg.path), zap.Error(err))
		return false, nil
	}
	parts := make(map[int32]*segPart)
	var bad error
	err := readOldIdx(s.fs, sg.path, func(f *frameInfo) {
		if bad == nil {
			bad = s.addRecovered(sg, parts, f, replay)
		}
	})
	if err == nil {
		err = bad
	}
	if err != nil {
		return false, err
	}
	if len(parts) == 0 {
		return false, nil
	}
	if err := s.sealRecovered(sg, parts); err != nil {
		return false, err
	}
	if err := s.fs.Remove(sg.path + "." + extOldIdx); err != nil && !errors.Is(err, os.ErrNotExist) {
		return false, err
	}
	s.stats.migrated++
	if replay {
		s.stats.replayed++
	}
	return true, nil
}

// scanActive loads sg from its journal's good blocks and a scan of its
// frames from the end they cover, syncs the frames, writes its .index and
// removes the journal; false when it holds no frame.
func (s *Store) scanActive(sg *segment, replay bool) (bool, error) {
	fst, err := sg.f.Stat()
	if err != nil {
		return false, err
	}
	js, err := readJournal(s.fs, sg, fst.Size())
	if err != nil {
		return false, fmt.Errorf("read journal: %w", err)
	}
	parts := js.parts
	for part := range parts {
		if int(part) >= len(sg.st.parts) {
			delete(parts, part)
		}
	}
	if replay {
		for _, delta := range js.deltas {
			for i := range delta {
				if int(delta[i].key.part) < len(sg.st.parts) {
					s.restoreProducer(&delta[i])
				}
			}
		}
	}
	s.stats.journalBlocks += js.blocks
	var bad error
	end, err := scanSegment(sg.f, sg.sid, js.covered, func(f *frameInfo, raw []byte) {
		if bad == nil {
			bad = s.addRecovered(sg, parts, f, replay)
		}
	})
	if err == nil {
		err = bad
	}
	if err != nil {
		return false, err
	}
	s.stats.scanned++
	s.stats.scannedBytes += end - js.covered
	if replay {
		s.stats.replayed++
	}
	s.log.Info("segment recovered", zap.String("segment", sg.path), zap.Int("journal_blocks", js.blocks),
		zap.Int64("bytes_indexed", js.covered), zap.Int64("bytes_scanned", end-js.covered))
	if len(parts) == 0 {
		return false, nil
	}
	// Frames that survived a crash unsynced are about to become
	// readable: make them durable first.
	if err := sg.f.Sync(); err != nil {
		return false, err
	}
	sg.size = end
	if err := s.sealRecovered(sg, parts); err != nil {
		return false, err
	}
	if err := s.fs.Remove(sg.path + "." + extJournal); err != nil && !errors.Is(err, os.ErrNotExist) {
		return false, err
	}
	_ = s.fs.Remove(sg.path + "." + extOldIdx)
	return true, nil
}

// addRecovered adds a frame found at Open to parts (made for its
// partition at its first frame) and, with replay, to the producer states.
// Frames of a partition the stream does not have are left out.
func (s *Store) addRecovered(sg *segment, parts map[int32]*segPart, f *frameInfo, replay bool) error {
	if f.part < 0 || int(f.part) >= len(sg.st.parts) {
		return nil
	}
	sp := parts[f.part]
	if sp == nil {
		sp = newSegPart(sg, f.part, f.base)
		parts[f.part] = sp
	} else if f.base <= sp.last {
		return fmt.Errorf("stream %q partition %d: batch at %d does not follow %d: %w",
			sg.st.meta.Name, f.part, f.base, sp.last, errCorrupt)
	}
	sp.add(f)
	sg.size = max(sg.size, f.pos+int64(f.size))
	if replay {
		s.rebuildFrame(sg.st, f)
	}
	return nil
}

// rebuildFrame replays one stored batch of st into the producer states.
func (s *Store) rebuildFrame(st *stream, f *frameInfo) {
	if f.part >= 0 && int(f.part) < len(st.parts) {
		s.rebuildProducer(st.parts[f.part], f)
	}
}

// sealRecovered writes the .index of a segment recovered at Open from
// parts and makes it sealed.
func (s *Store) sealRecovered(sg *segment, parts map[int32]*segPart) error {
	sg.parts = parts
	if err := s.writeIndex(sg, sortedParts(parts)); err != nil {
		return fmt.Errorf("write index: %w", err)
	}
	for _, sp := range parts {
		sp.chunks, sp.sealed = nil, true
	}
	sg.sealed = true
	s.stats.rebuiltIndexes++
	return nil
}

// install adds a segment loaded at Open to its stream and partitions.
func (s *Store) install(sg *segment) error {
	st := sg.st
	for _, sp := range sortedParts(sg.parts) {
		if int(sp.part) >= len(st.parts) {
			delete(sg.parts, sp.part)
			continue
		}
		p := st.parts[sp.part]
		// Batches follow each other, with gaps where the log cleaner
		// removed whole batches.
		if n := len(p.segs); n > 0 && sp.first <= p.segs[n-1].last {
			return fmt.Errorf("segment %s: stream %q partition %d: batch at %d does not follow %d: %w",
				sg.path, st.meta.Name, sp.part, sp.first, p.segs[n-1].last, errCorrupt)
		}
		p.segs = append(p.segs, sp)
		sg.maxAppendMS = max(sg.maxAppendMS, sp.maxAppend)
	}
	s.segs[st.sid] = append(s.segs[st.sid], sg)
	return nil
}

func sortedParts(parts map[int32]*segPart) []*segPart {
	out := make([]*segPart, 0, len(parts))
	for _, sp := range parts {
		out = append(out, sp)
	}
	slices.SortFunc(out, func(a, b *segPart) int { return cmp.Compare(a.part, b.part) })
	return out
}

func (s *Store) getInt64(key []byte) (int64, bool, error) {
	v, closer, err := s.db.Get(key)
	if err == pebble.ErrNotFound {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, err
	}
	defer closer.Close()
	n, ok := getInt64(v)
	if !ok {
		return 0, false, fmt.Errorf("key %x: %w", key, errCorrupt)
	}
	return n, true, nil
}

// logOpened logs what Open's recovery did.
func (s *Store) logOpened(dir string, took time.Duration) {
	s.log.Info("opened", zap.String("dir", dir), zap.Int("streams", len(s.streams)),
		zap.Int("segments", s.stats.segments), zap.Int("segments_scanned", s.stats.scanned),
		zap.Int64("bytes_scanned", s.stats.scannedBytes), zap.Int("segments_migrated", s.stats.migrated),
		zap.Int("producer_snapshots", s.stats.snapshots), zap.Int("segments_replayed", s.stats.replayed),
		zap.Int("producer_states", s.producers.Len()), zap.Duration("took", took))
}
