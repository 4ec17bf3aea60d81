package localstore

import (
	"cmp"
	"errors"
	"fmt"
	"os"
	"slices"
	"sort"
	"sync"

	"github.com/cockroachdb/pebble/v2/vfs"
	"go.uber.org/zap"

	"github.com/disgw/disgw/disbackend"
	"github.com/disgw/disgw/kafkawire/batch"
)

// appendReq is one queued Append.
type appendReq struct {
	stream string
	part   int32
	b      disbackend.Batch
	p      *disbackend.Pending
}

// group is the set of appends committed by one write per segment and one
// sync per segment.
type group struct {
	items []groupItem
	segs  []*segment // segments written, to sync
	seq   uint64     // assembly number (Store.assembled)
	err   error      // write error: the whole group failed
	// For takeBack: each segment's size before the group wrote to it,
	// and the segParts the group made.
	cuts []segCut
	made []*segPart
}

// segCut is a segment's size before a group wrote to it.
type segCut struct {
	seg  *segment
	size int64
	// positional: the group wrote it with WriteAt (no descriptor), so
	// the file cannot be cut back: takeBack overwrites the written bytes
	// with zeros instead (a recovery scan ends at a zero frame header),
	// and the next write goes at size again.
	positional bool
	written    int64 // bytes the positional write put past size
}

// groupItem is an accepted append (new data or a duplicate) in a group.
type groupItem struct {
	pend      *disbackend.Pending
	p         *partition
	base      int64 // assigned base offset (the original's for a duplicate)
	last      int64
	raw       []byte            // nil for a duplicate
	frame     *disbackend.Frame // the request frame raw aliases (Batch.Frame), or nil
	maxTS     int64             // ms, for the index
	logAppend int64             // ms, the LogAppendTime stamped, or -1
	duplicate bool
	sp        *segPart  // where it was written
	fi        frameInfo // its frame
	// the batch's idempotent producer fields, for its frame
	pid   int64
	epoch int16
	seq   int32
}

// Append enqueues b for (stream, partition) and returns at once; the Pending
// completes once the batch is synced. DIS PutRecords. Batches enqueued by one
// goroutine are applied in call order. The store takes ownership of b.Raw and
// rewrites its base offset (and, on a LogAppendTime stream, its attributes,
// max timestamp and CRC). Errors (in the Pending): ErrStreamNotFound,
// ErrPartitionNotFound, ErrOutOfOrderSequence, ErrInvalidProducerEpoch,
// ErrClosed, ErrStorageFull (the disk is full: below
// Options.MinFreeBytes or a write found no room; nothing of the batch is
// stored; Kafka KAFKA_STORAGE_ERROR), ErrUnavailable (an earlier storage
// failure), or a storage error.
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
// offsets, writes the group to the segment files without waiting for the
// sync, and hands it to syncLoop, so the next group is assembled and written
// while earlier ones sync.
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
		if h := s.groupHook.Load(); h != nil {
			(*h)()
		}
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
		if g := s.assemble(reqs); g != nil {
			s.syncq <- g
		}
		clear(reqs)
	}
}

// assemble validates reqs, assigns offsets and writes the new batches to
// their streams' active segments. Rejected appends complete at once; it
// returns nil when nothing was accepted.
func (s *Store) assemble(reqs []*appendReq) *group {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if err := s.storageFailure(); err != nil {
		for _, r := range reqs {
			r.p.Complete(disbackend.AppendResult{}, fmt.Errorf("localstore: append stream %q partition %d: %w: %v",
				r.stream, r.part, disbackend.ErrUnavailable, err))
		}
		return nil
	}
	// A full disk refuses every append at once, before it changes
	// anything (diskfull.go).
	if s.refuseFull(reqs) {
		return nil
	}
	g := &group{items: make([]groupItem, 0, len(reqs))}
	nowMS := s.now().UnixMilli()
	s.maybeExpireProducers(nowMS) // before the checks: a retry of an expired producer is a new batch
	if err := s.rollBefore(reqs, nowMS); err != nil {
		if isENOSPC(err) {
			// A seal that found no room changed nothing: it is made
			// again at the next group, once there is space.
			s.space.onENOSPC(err)
			s.refuseFull(reqs)
			return nil
		}
		s.fail(err)
		for _, r := range reqs {
			r.p.Complete(disbackend.AppendResult{}, fmt.Errorf("localstore: append stream %q partition %d: %w: %v",
				r.stream, r.part, disbackend.ErrUnavailable, err))
		}
		return nil
	}
	// A seal whose write found no room but was made in the ballast's
	// room entered the disk-full state: the roll stays, the group is
	// refused like any other while the disk is full.
	if s.refuseFull(reqs) {
		return nil
	}
	// The low-water mark, counted down by what the group writes between
	// two reads of the free space.
	var need int64
	for _, r := range reqs {
		need += frameHeaderLen + int64(len(r.b.Raw))
	}
	if s.space.take(need) {
		s.refuseFull(reqs)
		return nil
	}
	s.undo.reset()
	for _, r := range reqs {
		if r.b.ProducerID >= 0 {
			s.saveProducer(r)
		}
		item, err := s.accept(r, nowMS)
		if err != nil {
			r.p.Complete(disbackend.AppendResult{}, err)
			continue
		}
		g.items = append(g.items, item)
	}
	if len(g.items) == 0 {
		return nil
	}
	if err := s.writeGroup(g, nowMS); err != nil {
		// A write that found no room is taken back whole: files cut back,
		// offsets and producer states restored, nothing acknowledged.
		if isENOSPC(err) && s.takeBack(g) {
			s.space.onENOSPC(err)
			ferr := s.space.fullErr()
			if ferr == nil {
				ferr = fmt.Errorf("%w: %v", disbackend.ErrStorageFull, err)
			}
			for _, it := range g.items {
				it.pend.Complete(disbackend.AppendResult{}, fmt.Errorf("localstore: append stream %q partition %d: %w",
					it.p.st.meta.Name, it.p.id, ferr))
			}
			return nil
		}
		// The in-memory offsets already moved past this group; a segment
		// that failed a write cannot be trusted, so stop accepting appends.
		g.err = err
		s.fail(err)
	}
	s.assembled++
	g.seq = s.assembled
	return g
}

// refuseFull completes every request with ErrStorageFull and reports true
// when the disk is full; else it does nothing and reports false.
func (s *Store) refuseFull(reqs []*appendReq) bool {
	err := s.space.fullErr()
	if err == nil {
		return false
	}
	for _, r := range reqs {
		r.p.Complete(disbackend.AppendResult{}, fmt.Errorf("localstore: append stream %q partition %d: %w", r.stream, r.part, err))
	}
	return true
}

// producerUndo is an idempotent producer's state before a group, kept
// until the group is written (takeBack restores it).
type producerUndo struct {
	k       producerKey
	had     bool
	epoch   int16
	lastMS  int64
	n       int
	batches [disbackend.MaxProducerBatches]disbackend.ProducerBatch
}

// groupUndo is what takeBack needs to undo a group's producer states:
// each key's state before its first batch in the group. Reused.
type groupUndo struct {
	states []producerUndo
	seen   map[producerKey]struct{}
}

func (u *groupUndo) reset() {
	u.states = u.states[:0]
	if len(u.seen) > 0 {
		clear(u.seen)
	}
}

// saveProducer keeps the state r's producer has on its partition before
// the group changes it, once per key and group. Requires wmu.
func (s *Store) saveProducer(r *appendReq) {
	st := s.streams[r.stream]
	if st == nil || r.part < 0 || int(r.part) >= len(st.parts) {
		return
	}
	k := producerKey{sid: st.sid, part: r.part, pid: r.b.ProducerID}
	if s.undo.seen == nil {
		s.undo.seen = make(map[producerKey]struct{})
	}
	if _, ok := s.undo.seen[k]; ok {
		return
	}
	s.undo.seen[k] = struct{}{}
	u := producerUndo{k: k}
	if ps := s.producers.Get(k); ps != nil {
		u.had, u.epoch, u.lastMS = true, ps.Epoch, ps.LastAppendMS
		u.n = copy(u.batches[:], ps.Batches)
	}
	s.undo.states = append(s.undo.states, u)
}

// takeBack undoes a group whose write failed: it cuts the segment files
// it wrote back to their sizes before it, forgets the segParts it made,
// moves its partitions' next offsets back and restores its producers'
// states. It reports false when a file cannot be cut back (then the store
// must fail). Requires wmu.
func (s *Store) takeBack(g *group) bool {
	for i := len(g.cuts) - 1; i >= 0; i-- {
		c := g.cuts[i]
		ok, err := cutBack(c.seg.f, c.size)
		if err != nil || !ok && !c.positional {
			return false
		}
		if !ok && c.written > 0 {
			// Left in place, a refused frame would be read as written by
			// the recovery scan after a crash once the next write, of
			// other lengths, leaves its header past that write's end.
			if _, err := c.seg.f.WriteAt(make([]byte, c.written), c.size); err != nil {
				return false
			}
		}
		c.seg.size = c.size
	}
	for i := len(g.made) - 1; i >= 0; i-- {
		sp := g.made[i]
		delete(sp.seg.parts, sp.part)
		p := sp.seg.st.parts[sp.part]
		p.mu.Lock()
		if n := len(p.segs); n > 0 && p.segs[n-1] == sp {
			// A reader may hold the slice: a new one, not one changed
			// in place.
			p.segs = slices.Clone(p.segs[:n-1])
			p.segsGen++
		}
		p.mu.Unlock()
	}
	for i := len(g.items) - 1; i >= 0; i-- {
		if it := &g.items[i]; !it.duplicate {
			it.p.assigned = it.base
		}
	}
	for i := range s.undo.states {
		u := &s.undo.states[i]
		if !u.had {
			s.producers.Restore(u.k, nil)
			continue
		}
		s.producers.Restore(u.k, &disbackend.ProducerState{Epoch: u.epoch, LastAppendMS: u.lastMS, Batches: u.batches[:u.n]})
	}
	if ok, left := s.warnLimit.allow("taken back"); ok {
		s.log.Warn("a write found no space: its batches were taken back and refused", zap.Int("appends", len(g.items)),
			zap.Int("lines_left_out", left))
	}
	return true
}

// writeGroup writes the group's new batches, each stream's with one Write to
// its active segment, a partition's batches adjacent so that reads of them
// are contiguous. The batch bytes are copied once, into the group buffer
// (vfs.File.Write may modify what it is given). Requires wmu.
func (s *Store) writeGroup(g *group, nowMS int64) error {
	order := make([]int, 0, len(g.items))
	for i := range g.items {
		if !g.items[i].duplicate {
			order = append(order, i)
		}
	}
	sort.SliceStable(order, func(a, b int) bool {
		pa, pb := g.items[order[a]].p, g.items[order[b]].p
		return pa.sid < pb.sid || pa.sid == pb.sid && pa.id < pb.id
	})
	for len(order) > 0 {
		sid := g.items[order[0]].p.sid
		n, total := 0, int64(0)
		for n < len(order) && g.items[order[n]].p.sid == sid {
			total += frameHeaderLen + int64(len(g.items[order[n]].raw))
			n++
		}
		seg, err := s.activeSegment(g.items[order[0]].p.st, total, nowMS)
		if err != nil {
			return err
		}
		// Frame headers go in one buffer; on a real file the batches are
		// written from where they are (writev), so their bytes are copied
		// only into the page cache. Other filesystems (in-memory ones in
		// tests, which may modify what Write is given) get one contiguous
		// copy.
		fd := seg.f.Fd()
		direct := fd != vfs.InvalidFd && canWritev
		g.cuts = append(g.cuts, segCut{seg: seg, size: seg.size, positional: !direct})
		hdrs := s.hbuf[:0]
		buf := s.wbuf[:0]
		if !direct && int64(cap(buf)) < total {
			buf = make([]byte, 0, total)
		}
		pos, off := seg.size, int64(0)
		for _, i := range order[:n] {
			it := &g.items[i]
			fi := frameInfo{part: it.p.id, size: int32(len(it.raw)), pos: pos + off + frameHeaderLen,
				base: it.base, last: it.last, appendMS: nowMS, maxTS: it.maxTS, pid: it.pid, epoch: it.epoch, seq: it.seq}
			var hdr [frameHeaderLen]byte
			fi.putHeader(hdr[:], sid)
			putFrameCRC(hdr[:], it.raw)
			if direct {
				hdrs = append(hdrs, hdr[:]...)
			} else {
				buf = append(buf, hdr[:]...)
				buf = append(buf, it.raw...)
			}
			off += frameHeaderLen + int64(len(it.raw))
			made := seg.parts[it.p.id] == nil
			it.sp, it.fi = seg.note(it.p, &fi), fi
			if made {
				g.made = append(g.made, it.sp)
			}
		}
		if direct {
			iovs := s.iovs[:0]
			for k, i := range order[:n] {
				iovs = append(iovs, hdrs[k*frameHeaderLen:(k+1)*frameHeaderLen], g.items[i].raw)
			}
			_, err := writevAll(int(fd), iovs)
			clear(iovs)
			s.iovs, s.hbuf = iovs[:0], hdrs[:0]
			if err != nil {
				return fmt.Errorf("segment %s: write: %w", seg.path, err)
			}
		} else {
			if int64(cap(buf)) <= 2*maxGroupBytes {
				s.wbuf = buf[:0]
			}
			// At the segment's size, not the file's offset: after a
			// write taken back (takeBack) the next one goes there again.
			n, err := seg.f.WriteAt(buf, seg.size)
			g.cuts[len(g.cuts)-1].written = int64(n)
			if err != nil {
				return fmt.Errorf("segment %s: write: %w", seg.path, err)
			}
		}
		startWriteback(seg.f, seg.size, off)
		seg.size += off
		g.segs = append(g.segs, seg)
		order = order[n:]
	}
	return nil
}

// activeSegment returns the segment the next write of n bytes to st goes
// to: the active one, or a new one when there is none or it would grow
// past the stream's segment.bytes (Options.SegmentBytes when the stream
// sets none) or is older than its segment.ms (a full or old one is sealed
// first). Requires wmu.
func (s *Store) activeSegment(st *stream, n, nowMS int64) (*segment, error) {
	sid := st.sid
	seg := s.active[sid]
	if seg != nil && s.mustRoll(st, seg, n, nowMS) {
		// rollBefore rolls it before the group is accepted, so that its
		// producer snapshot holds no batch of the group; here (not
		// expected) the snapshot is left out.
		if err := s.seal(seg, false); err != nil {
			return nil, err
		}
		seg = nil
	}
	if seg != nil {
		return seg, nil
	}
	name := segmentName(sid, s.nextSeg)
	path := s.fs.PathJoin(s.segDir, name)
	f, err := s.segFS.Create(path+".log", vfs.WriteCategoryUnspecified)
	if err != nil {
		return nil, fmt.Errorf("segment %s: create: %w", path, err)
	}
	// The file's directory entry must be durable before any sync of its
	// data acknowledges an append.
	if err := syncDir(s.fs, s.segDir); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("segment %s: sync directory: %w", path, err)
	}
	s.nextSeg++
	seg = newSegment(sid, s.nextSeg-1, path, f)
	seg.st = st
	s.active[sid] = seg
	s.segs[sid] = append(s.segs[sid], seg)
	return seg, nil
}

// mustRoll reports whether st's active segment seg must be sealed before
// n more bytes are written to it: it would grow past the stream's
// segment.bytes (Options.SegmentBytes when the stream sets none) or it is
// older than its segment.ms. Requires wmu.
func (s *Store) mustRoll(st *stream, seg *segment, n, nowMS int64) bool {
	segBytes := st.meta.Config.SegmentBytes
	if segBytes <= 0 {
		segBytes = s.segBytes
	}
	return seg.size > 0 && (seg.size+n > segBytes || nowMS-seg.firstAppendMS >= rollAge(&st.meta.Config).Milliseconds())
}

// rollBefore seals, before a group is accepted, the active segments the
// group's appends would take past their size or age, and, while the
// active segments' chunks in memory pass maxActiveChunks, the one with the
// most: each with a producer snapshot, which holds exactly the batches of
// the sealed segment and those before it, since none of the group is
// accepted yet. Requires wmu.
func (s *Store) rollBefore(reqs []*appendReq, nowMS int64) error {
	if s.rollNeed == nil {
		s.rollNeed = make(map[*stream]int64)
	}
	need := s.rollNeed
	defer clear(need)
	for _, r := range reqs {
		if st := s.streams[r.stream]; st != nil {
			need[st] += frameHeaderLen + int64(len(r.b.Raw))
		}
	}
	for st, n := range need {
		if seg := s.active[st.sid]; seg != nil && s.mustRoll(st, seg, n, nowMS) {
			if err := s.seal(seg, true); err != nil {
				return err
			}
		}
	}
	for s.activeChunks.Load() > maxActiveChunks {
		var big *segment
		for _, seg := range s.active {
			if big == nil || seg.chunks.Load() > big.chunks.Load() {
				big = seg
			}
		}
		if big == nil {
			break
		}
		if err := s.seal(big, true); err != nil {
			return err
		}
	}
	return nil
}

// seal stops appending to a segment: once every group written to it is
// published (quiesce), it syncs it, writes its index file from its
// segParts' chunks (tmp, synced, renamed, directory synced), hands the
// chunks over to the file (freeing them), removes its journal, and, with
// snapshot, writes the stream's producer snapshot after it (a failure of
// the snapshot is logged: Open then replays the segment). Requires wmu.
func (s *Store) seal(seg *segment, snapshot bool) error {
	s.quiesce()
	if err := seg.syncData(); err != nil {
		return err
	}
	parts := make([]*segPart, 0, len(seg.parts))
	for _, sp := range seg.parts {
		parts = append(parts, sp)
	}
	slices.SortFunc(parts, func(a, b *segPart) int { return cmp.Compare(a.part, b.part) })
	if err := s.writeIndex(seg, parts); err != nil {
		return fmt.Errorf("segment %s: write index: %w", seg.path, err)
	}
	for _, sp := range parts {
		p := seg.st.parts[sp.part]
		p.mu.Lock()
		sp.chunks, sp.sealed = nil, true
		p.mu.Unlock()
	}
	s.activeChunks.Add(-seg.chunks.Load())
	seg.chunks.Store(0)
	seg.sealed = true
	if s.active[seg.sid] == seg {
		delete(s.active, seg.sid)
	}
	s.dropJournal(seg)
	if snapshot && s.streams[seg.st.meta.Name] == seg.st {
		if err := s.writeSnapshot(seg.st, seg.n); err != nil {
			if ok, left := s.warnLimit.allow("snapshot"); ok {
				s.log.Warn("writing a producer snapshot failed; the next start replays the segment",
					zap.String("segment", seg.path), zap.Error(err), zap.Int("lines_left_out", left))
			}
		}
	}
	return nil
}

// writeIndex writes the sealed index of seg from parts (sorted by
// partition), puts it in place and opens it for reads, and points the
// parts at their entries. Requires wmu, seg quiesced.
func (s *Store) writeIndex(seg *segment, parts []*segPart) error {
	path := seg.path + "." + extIndex
	w, err := newIndexWriter(s.fs, path+extTmp)
	if err != nil {
		return err
	}
	starts := make([]int64, len(parts))
	for i, sp := range parts {
		starts[i] = w.addPart(sp)
	}
	if err := w.finish(seg.size, seg.covers); err != nil {
		_ = s.fs.Remove(path + extTmp)
		return err
	}
	s.hook("index: tmp written")
	if err := s.fs.Rename(path+extTmp, path); err != nil {
		return err
	}
	s.hook("index: renamed")
	if err := syncDir(s.fs, s.segDir); err != nil {
		return err
	}
	s.hook("index: directory synced")
	f, err := s.fs.Open(path)
	if err != nil {
		return err
	}
	seg.setIndex(f)
	for i, sp := range parts {
		p := seg.st.parts[sp.part]
		p.mu.Lock()
		sp.ixStart, sp.ixCount = starts[i], int64(len(sp.chunks))
		p.mu.Unlock()
	}
	return nil
}

// dropJournal removes a sealed segment's journal (its index covers
// everything now) and takes the segment off the syncer's list. Requires
// wmu, seg quiesced.
func (s *Store) dropJournal(seg *segment) {
	delete(s.jsegs, seg)
	if !seg.jfailed {
		s.unindexed.Add(-seg.unjournaled())
	}
	seg.journaled, seg.jparts, seg.delta = seg.published, nil, disbackend.ProducerStates[producerKey]{}
	seg.mu.Lock()
	jf := seg.jf
	seg.jf = nil
	seg.mu.Unlock()
	if jf != nil {
		_ = jf.Close()
		if err := s.fs.Remove(seg.path + "." + extJournal); err != nil && !errors.Is(err, os.ErrNotExist) {
			s.log.Warn("removing a sealed segment's journal failed", zap.String("segment", seg.path), zap.Error(err))
		}
		s.hook("journal: removed")
	}
}

// accept checks one append against its partition and producer state and, if
// it is accepted, assigns its offsets and rewrites its header. Requires wmu.
func (s *Store) accept(r *appendReq, nowMS int64) (groupItem, error) {
	st := s.streams[r.stream]
	if st == nil {
		return groupItem{}, fmt.Errorf("localstore: append stream %q partition %d: %w",
			r.stream, r.part, disbackend.ErrStreamNotFound)
	}
	if r.part < 0 || int(r.part) >= len(st.parts) {
		return groupItem{}, fmt.Errorf("localstore: append stream %q partition %d: %w",
			r.stream, r.part, disbackend.ErrPartitionNotFound)
	}
	p := st.parts[r.part]
	if len(r.b.Raw) < batch.HeaderLen || r.b.NumRecords <= 0 {
		return groupItem{}, fmt.Errorf("localstore: append stream %q partition %d: malformed batch (%d bytes, %d records)",
			r.stream, r.part, len(r.b.Raw), r.b.NumRecords)
	}
	base := p.assigned
	last := base + int64(r.b.NumRecords) - 1
	raw, maxTS, logAppend := r.b.Raw, r.b.MaxTimestamp, int64(-1)
	if st.meta.Config.TimestampType == disbackend.LogAppendTime {
		maxTS, logAppend = nowMS, nowMS
	}
	// A control batch (a transaction marker, written by the transaction
	// coordinator with sequence -1) changes no producer state: the
	// producer's sequences go on across its transactions.
	if r.b.ProducerID >= 0 && r.b.Attributes&batch.AttrControl == 0 {
		dup, err := s.checkProducer(p, &r.b, base, last, maxTS, nowMS)
		if err != nil {
			return groupItem{}, fmt.Errorf("localstore: append stream %q partition %d producer %d epoch %d sequence %d: %w",
				r.stream, r.part, r.b.ProducerID, r.b.ProducerEpoch, r.b.BaseSequence, err)
		}
		if dup != nil {
			// As Kafka: a retry is answered with the stored batch's max
			// timestamp as its LogAppendTime.
			return groupItem{pend: r.p, p: p, base: dup.BaseOffset, last: dup.LastOffset, logAppend: dup.MaxTimestamp, duplicate: true}, nil
		}
	}
	p.assigned = last + 1
	batch.SetBaseOffset(raw, base)
	if logAppend >= 0 {
		batch.SetLogAppendTime(raw, nowMS)
	}
	return groupItem{pend: r.p, p: p, base: base, last: last, raw: raw, frame: r.b.Frame, maxTS: maxTS, logAppend: logAppend,
		pid: r.b.ProducerID, epoch: r.b.ProducerEpoch, seq: r.b.BaseSequence}, nil
}

// syncLoop syncs groups in order, then publishes them: it advances the
// partitions' synced next, indexes and caches the batches, wakes long polls
// and completes the Pendings. The groups waiting when it becomes free are
// synced together: one fdatasync per segment touched, in parallel.
func (s *Store) syncLoop() {
	defer s.writers.Done()
	defer func() {
		s.syncedMu.Lock()
		s.syncerDone = true
		s.syncedCond.Broadcast()
		s.syncedMu.Unlock()
	}()
	var batch []*group
	for g := range s.syncq {
		batch = append(batch[:0], g)
	drain:
		for len(batch) < maxSyncGroups {
			select {
			case g, ok := <-s.syncq:
				if !ok {
					break drain
				}
				batch = append(batch, g)
			default:
				break drain
			}
		}
		err := syncSegments(batch)
		for _, g := range batch {
			s.publish(g, err)
		}
		s.markSynced(batch[len(batch)-1].seq)
		clear(batch)
	}
}

// syncSegments fdatasyncs every segment the groups wrote, in parallel when
// there are several, and returns the first error.
func syncSegments(groups []*group) error {
	var segs []*segment
	seen := make(map[*segment]bool)
	for _, g := range groups {
		for _, sg := range g.segs {
			if !seen[sg] {
				seen[sg] = true
				segs = append(segs, sg)
			}
		}
	}
	if len(segs) == 1 {
		return segs[0].syncData()
	}
	errs := make([]error, len(segs))
	var wg sync.WaitGroup
	for i, sg := range segs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = sg.syncData()
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// publish makes a synced group visible and completes its appends; with a
// write or sync error it fails them all and the store.
func (s *Store) publish(g *group, syncErr error) {
	err := g.err
	if err == nil {
		err = syncErr
	}
	if err != nil {
		s.fail(err)
		for _, it := range g.items {
			it.pend.Complete(disbackend.AppendResult{}, fmt.Errorf("localstore: append partition %d: %w: %v",
				it.p.id, disbackend.ErrUnavailable, err))
		}
		return
	}
	advanced := false
	for i := range g.items {
		it := &g.items[i]
		if it.duplicate {
			continue
		}
		sg := it.sp.seg
		it.p.mu.Lock()
		it.p.next = it.last + 1
		if it.sp.add(&it.fi) {
			s.activeChunks.Add(1)
			sg.chunks.Add(1)
		}
		if s.cache.enabled() {
			s.cache.add(it.p, it.base, it.last, it.raw, it.frame)
		}
		it.p.mu.Unlock()
		sg.noteJournal(it.sp, &it.fi, it.fi.pos+int64(it.fi.size))
		if !sg.jfailed {
			s.unindexed.Add(frameHeaderLen + int64(it.fi.size))
			s.jsegs[sg] = struct{}{}
		}
		advanced = true
	}
	if s.unindexed.Load() > s.maxUnindexed {
		s.flushJournals()
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
	if ce := s.log.Check(zap.DebugLevel, "group synced"); ce != nil {
		ce.Write(zap.Int("appends", len(g.items)))
	}
}

// flushJournals writes a journal block for every active segment with
// published bytes no block covers yet, in parallel. On the syncer.
func (s *Store) flushJournals() {
	var wg sync.WaitGroup
	for sg := range s.jsegs {
		if len(s.jsegs) == 1 {
			s.writeJournalBlock(sg)
			break
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.writeJournalBlock(sg)
		}()
	}
	wg.Wait()
	clear(s.jsegs)
}

// markSynced records that every group up to seq is published.
func (s *Store) markSynced(seq uint64) {
	s.syncedMu.Lock()
	s.synced = seq
	s.syncedCond.Broadcast()
	s.syncedMu.Unlock()
}

// quiesce waits until every group assembled so far is published, so that
// no group in flight still uses a segment about to be closed. Requires wmu
// (which keeps new groups from being assembled); the syncer needs no lock
// that wmu holders take while waiting here.
func (s *Store) quiesce() {
	target := s.assembled
	s.syncedMu.Lock()
	for s.synced < target && !s.syncerDone {
		s.syncedCond.Wait()
	}
	s.syncedMu.Unlock()
}
