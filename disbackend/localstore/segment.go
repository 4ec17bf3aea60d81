package localstore

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/disgw/disgw/disbackend"
	"github.com/disgw/disgw/kafkawire/batch"
)

// Segment files. Record batches live in append-only segment files under
// dir/segments, one active segment per stream: a group commit writes each
// stream's new batches with one Write and syncs each stream's file once
// (fdatasync, in parallel across streams), and retention and DeleteStream
// drop whole files. A segment is sealed when it reaches the stream's
// segment.bytes or segment.ms, when the active segments' index in memory
// reaches maxActiveChunks, at Close, and when it is recovered at Open;
// appends always go to a segment created by this process.
//
// Files, each number 16 hex digits; n grows across all streams, so a name
// is never reused:
//
//	<sid>-<n>.log       the frames
//	<sid>-<n>.index     a sealed segment's index (index.go)
//	<sid>-<n>.journal   the active segment's index blocks, for a restart after a crash (journal.go)
//	<sid>-<n>.snapshot  the stream's idempotent producers after segment n (snapshot.go)
//	<sid>-<n>.idx       the dense index of the first format, replaced at the first Open (recover.go)
//
// Each stored batch is one frame: a 56-byte header followed by the raw
// Kafka batch. The header, big-endian:
//
//	 0  magic     uint32  frameMagic
//	 4  crc       uint32  CRC-32C (Castagnoli) of header bytes 8-55, then the batch
//	 8  length    uint32  batch bytes
//	12  partition int32
//	16  sid       uint64  the stream's internal number
//	24  base      int64   offset of the batch's first record
//	32  last      int64   offset of its last record
//	40  appendMS  int64   append time, ms (retention clock)
//	48  maxTS     int64   the batch's max timestamp, ms
//
// Recovery trusts a segment's .index when its trailer and directory check
// (it is written only after every frame it lists was synced, and renamed
// into place whole); an active segment's frames are found from its journal
// and by scanning the .log from the end the journal covers, stopping at
// the first torn or corrupt frame: nothing after it was acknowledged,
// because an Append completes only after its segment's fdatasync, which
// covers every earlier write to the file.
const (
	frameMagic          = 0x44474631 // "DGF1"
	frameHeaderLen      = 56
	idxMagic            = 0x44474931 // "DGI1": the first format's dense index
	idxRecordLen        = 64
	idxHeaderLen        = 8 // magic, record count
	defaultSegmentBytes = 256 << 20
	segmentDirName      = "segments"
	metaDirName         = "meta"
)

// frameInfo describes one stored batch: what the index and recovery need.
type frameInfo struct {
	part            int32
	size            int32 // batch bytes
	pos             int64 // offset of the batch (after its frame header) in the segment
	base, last      int64
	appendMS, maxTS int64 // ms
	// Idempotent producer fields, from the Kafka batch header.
	pid   int64
	epoch int16
	seq   int32
}

// putHeader writes the frame header for f, without the CRC, into dst.
func (f *frameInfo) putHeader(dst []byte, sid uint64) {
	be := binary.BigEndian
	be.PutUint32(dst[0:], frameMagic)
	be.PutUint32(dst[8:], uint32(f.size))
	be.PutUint32(dst[12:], uint32(f.part))
	be.PutUint64(dst[16:], sid)
	be.PutUint64(dst[24:], uint64(f.base))
	be.PutUint64(dst[32:], uint64(f.last))
	be.PutUint64(dst[40:], uint64(f.appendMS))
	be.PutUint64(dst[48:], uint64(f.maxTS))
}

// decodeHeader reads a frame header; ok is false when the magic is wrong.
func decodeHeader(h []byte) (f frameInfo, sid uint64, crc uint32, ok bool) {
	be := binary.BigEndian
	if be.Uint32(h[0:]) != frameMagic {
		return frameInfo{}, 0, 0, false
	}
	f = frameInfo{
		size:     int32(be.Uint32(h[8:])),
		part:     int32(be.Uint32(h[12:])),
		base:     int64(be.Uint64(h[24:])),
		last:     int64(be.Uint64(h[32:])),
		appendMS: int64(be.Uint64(h[40:])),
		maxTS:    int64(be.Uint64(h[48:])),
	}
	return f, be.Uint64(h[16:]), be.Uint32(h[4:]), true
}

// setProducer fills the idempotent producer fields from a raw Kafka batch.
func (f *frameInfo) setProducer(raw []byte) {
	f.pid, f.epoch, f.seq = batch.NoProducerID, batch.NoProducerEpoch, batch.NoSequence
	if h, err := batch.ParseHeader(raw); err == nil {
		f.pid, f.epoch, f.seq = h.ProducerID, h.ProducerEpoch, h.BaseSequence
	}
}

// putFrameCRC writes the frame's CRC into its header.
func putFrameCRC(hdr, raw []byte) { binary.BigEndian.PutUint32(hdr[4:], frameCRC(hdr, raw)) }

// frameCRC is the CRC-32C of header bytes 8-55 followed by the batch.
func frameCRC(hdr, raw []byte) uint32 {
	return crc32.Update(crc32.Update(0, batch.CRCTable, hdr[8:frameHeaderLen]), batch.CRCTable, raw)
}

// decodeIdxRecord decodes a record of the first format's .idx file:
// pos, size, part, base, last, appendMS, maxTS, pid (8 bytes each but size
// and part 4), seq 4, epoch 2, 2 zero.
func decodeIdxRecord(r []byte) frameInfo {
	be := binary.BigEndian
	return frameInfo{
		pos:      int64(be.Uint64(r[0:])),
		size:     int32(be.Uint32(r[8:])),
		part:     int32(be.Uint32(r[12:])),
		base:     int64(be.Uint64(r[16:])),
		last:     int64(be.Uint64(r[24:])),
		appendMS: int64(be.Uint64(r[32:])),
		maxTS:    int64(be.Uint64(r[40:])),
		pid:      int64(be.Uint64(r[48:])),
		seq:      int32(be.Uint32(r[56:])),
		epoch:    int16(be.Uint16(r[60:])),
	}
}

// segment is one segment file.
type segment struct {
	sid  uint64
	n    uint64  // number in the file name
	path string  // without extension
	st   *stream // its stream
	// covers is the highest segment number whose batches it holds: n, or,
	// for a log cleaner's segment, the last one it replaced.
	covers uint64

	// mu is read-held around every use of f and ixf by readers and the
	// syncer, and write-held to close them; f is nil once closed
	// (retention, deletion, a cleaner's swap).
	mu  sync.RWMutex
	f   vfs.File
	ixf vfs.File // the .index of a sealed segment

	// The fields below are owned by whoever holds Store.wmu (the writer
	// while it assembles a group, retention, DeleteStream, Close).
	size          int64 // bytes of frames written
	sealed        bool
	firstAppendMS int64 // of its first frame, ms (segment.ms rolls it)
	maxAppendMS   int64
	parts         map[int32]*segPart // what it holds of each partition

	// chunks counts its parts' chunks while it is active (added by the
	// syncer, read by the writer to pick a segment to roll).
	chunks atomic.Int64

	// The syncer's, while the segment is active (journal.go); the writer
	// takes them over at seal, after quiesce.
	published int64    // end of the frames published
	journaled int64    // end of the frames the journal covers
	jf        vfs.File // the journal, once written
	jfailed   bool     // a journal write failed: no more blocks
	jparts    []*segPart
	delta     disbackend.ProducerStates[producerKey] // idempotent batches published since the last block
}

func newSegment(sid, n uint64, path string, f vfs.File) *segment {
	return &segment{sid: sid, n: n, covers: n, path: path, f: f, parts: make(map[int32]*segPart), maxAppendMS: -1 << 63}
}

func segmentName(sid, n uint64) string { return fmt.Sprintf("%016x-%016x", sid, n) }

// Extensions of the files of a segment (and of a stream's snapshots).
const (
	extLog      = "log"
	extIndex    = "index"
	extJournal  = "journal"
	extSnapshot = "snapshot"
	extOldIdx   = "idx"
	extTmp      = ".tmp" // appended to a file being written, renamed when whole
)

// parseSegmentName parses "<sid>-<n>.<ext>" for the extensions above.
func parseSegmentName(name string) (sid, n uint64, ext string, ok bool) {
	base, ext, found := strings.Cut(name, ".")
	switch ext {
	case extLog, extIndex, extJournal, extSnapshot, extOldIdx:
	default:
		return 0, 0, "", false
	}
	if !found || len(base) != 33 || base[16] != '-' {
		return 0, 0, "", false
	}
	sid, err1 := strconv.ParseUint(base[:16], 16, 64)
	n, err2 := strconv.ParseUint(base[17:], 16, 64)
	return sid, n, ext, err1 == nil && err2 == nil
}

// note records a frame written to the segment and returns the segPart of
// its partition, made (and added to p.segs) at its first frame. Requires
// Store.wmu.
func (sg *segment) note(p *partition, f *frameInfo) *segPart {
	if len(sg.parts) == 0 {
		sg.firstAppendMS = f.appendMS
	}
	sg.maxAppendMS = max(sg.maxAppendMS, f.appendMS)
	sp := sg.parts[f.part]
	if sp == nil {
		sp = newSegPart(sg, f.part, f.base)
		sg.parts[f.part] = sp
		p.mu.Lock()
		p.segs = append(p.segs, sp)
		p.mu.Unlock()
	}
	return sp
}

// readAt reads len(p) bytes at off. ok is false when the segment was closed
// (removed by retention or deletion).
func (sg *segment) readAt(p []byte, off int64) (ok bool, err error) {
	sg.mu.RLock()
	defer sg.mu.RUnlock()
	if sg.f == nil {
		return false, nil
	}
	n, err := sg.f.ReadAt(p, off)
	if n == len(p) {
		return true, nil
	}
	if err == nil || err == io.EOF {
		err = io.ErrUnexpectedEOF
	}
	return true, fmt.Errorf("segment %s: read %d bytes at %d: %w", sg.path, len(p), off, err)
}

// syncData fdatasyncs the segment's file (a closed segment has nothing left
// to sync).
func (sg *segment) syncData() error {
	sg.mu.RLock()
	defer sg.mu.RUnlock()
	if sg.f == nil {
		return nil
	}
	if err := sg.f.SyncData(); err != nil {
		return fmt.Errorf("segment %s: sync: %w", sg.path, err)
	}
	return nil
}

// close closes the files once no reader uses them.
func (sg *segment) close() error {
	sg.mu.Lock()
	defer sg.mu.Unlock()
	if sg.ixf != nil {
		_ = sg.ixf.Close()
		sg.ixf = nil
	}
	if sg.jf != nil {
		_ = sg.jf.Close()
		sg.jf = nil
	}
	if sg.f == nil {
		return nil
	}
	err := sg.f.Close()
	sg.f = nil
	return err
}

// setIndex makes f, open for reading, the segment's index file (closing
// the one it replaces).
func (sg *segment) setIndex(f vfs.File) {
	sg.mu.Lock()
	old := sg.ixf
	sg.ixf = f
	sg.mu.Unlock()
	if old != nil {
		_ = old.Close()
	}
}

var errBadIdx = errors.New("index file incomplete or corrupt")

// readOldIdx reads a .idx file of the first format, calling fn with each
// record in order, and checks its CRC at the end: errBadIdx when it does
// not match (fn may have been called; the caller discards what it built).
func readOldIdx(fs vfs.FS, path string, fn func(f *frameInfo)) error {
	f, err := fs.Open(path + "." + extOldIdx)
	if err != nil {
		return err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return err
	}
	size := st.Size()
	var hdr [idxHeaderLen]byte
	if size < idxHeaderLen+4 {
		return errBadIdx
	}
	if _, err := f.ReadAt(hdr[:], 0); err != nil {
		return err
	}
	be := binary.BigEndian
	n := int64(be.Uint32(hdr[4:]))
	if be.Uint32(hdr[:]) != idxMagic || size != idxHeaderLen+n*idxRecordLen+4 {
		return errBadIdx
	}
	crc := crc32.Update(0, batch.CRCTable, hdr[:])
	buf := make([]byte, 0, 1<<20)
	fi := new(frameInfo) // one for every record: fn must not keep it
	for off := int64(idxHeaderLen); off < size-4; {
		k := min(int64(cap(buf)/idxRecordLen)*idxRecordLen, size-4-off)
		buf = buf[:k]
		if _, err := f.ReadAt(buf, off); err != nil {
			return err
		}
		crc = crc32.Update(crc, batch.CRCTable, buf)
		for r := 0; r < len(buf); r += idxRecordLen {
			*fi = decodeIdxRecord(buf[r:])
			fn(fi)
		}
		off += k
	}
	var tail [4]byte
	if _, err := f.ReadAt(tail[:], size-4); err != nil {
		return err
	}
	if be.Uint32(tail[:]) != crc {
		return errBadIdx
	}
	return nil
}

// scanSegment reads frames of f from position from, checking each CRC,
// calls fn with each valid one, and stops at the first torn or corrupt
// one. It returns the end of the last valid frame.
func scanSegment(f vfs.File, sid uint64, from int64, fn func(f *frameInfo, raw []byte)) (int64, error) {
	st, err := f.Stat()
	if err != nil {
		return 0, err
	}
	size := st.Size()
	// Frames are read in windows of at least 1 MiB: one read for many small
	// frames.
	const window = 1 << 20
	var buf []byte
	bufAt := int64(0)
	get := func(pos, n int64) ([]byte, error) {
		if pos < bufAt || pos+n > bufAt+int64(len(buf)) {
			k := min(max(n, window), size-pos)
			if int64(cap(buf)) < k {
				buf = make([]byte, k)
			}
			buf = buf[:k]
			if _, err := f.ReadAt(buf, pos); err != nil {
				return nil, err
			}
			bufAt = pos
		}
		return buf[pos-bufAt : pos-bufAt+n], nil
	}
	fi := new(frameInfo) // one for every frame: fn must not keep it
	pos := from
	for pos+frameHeaderLen <= size {
		hdr, err := get(pos, frameHeaderLen)
		if err != nil {
			return 0, err
		}
		var fsid uint64
		var crc uint32
		var ok bool
		*fi, fsid, crc, ok = decodeHeader(hdr)
		if !ok || fsid != sid || fi.size < batch.HeaderLen || int64(fi.size) > size-pos-frameHeaderLen || fi.last < fi.base {
			break
		}
		frame, err := get(pos, frameHeaderLen+int64(fi.size))
		if err != nil {
			return 0, err
		}
		data := frame[frameHeaderLen:]
		if frameCRC(frame, data) != crc {
			break
		}
		fi.pos = pos + frameHeaderLen
		fi.setProducer(data)
		fn(fi, data)
		pos += frameHeaderLen + int64(fi.size)
	}
	return pos, nil
}

// segFiles lists what the segment directory holds of one segment.
type segFiles struct {
	n                                       uint64
	hasLog, hasIndex, hasJournal, hasOldIdx bool
}

// listSegments returns the segment files by stream, each stream's in
// order, and the numbers of each stream's snapshots, in order.
func listSegments(fs vfs.FS, dir string) (map[uint64][]segFiles, map[uint64][]uint64, error) {
	names, err := fs.List(dir)
	if err != nil {
		return nil, nil, err
	}
	bySid := make(map[uint64]map[uint64]*segFiles)
	snaps := make(map[uint64][]uint64)
	for _, name := range names {
		sid, n, ext, ok := parseSegmentName(name)
		if !ok {
			continue
		}
		if ext == extSnapshot {
			snaps[sid] = append(snaps[sid], n)
			continue
		}
		if bySid[sid] == nil {
			bySid[sid] = make(map[uint64]*segFiles)
		}
		sf := bySid[sid][n]
		if sf == nil {
			sf = &segFiles{n: n}
			bySid[sid][n] = sf
		}
		switch ext {
		case extLog:
			sf.hasLog = true
		case extIndex:
			sf.hasIndex = true
		case extJournal:
			sf.hasJournal = true
		case extOldIdx:
			sf.hasOldIdx = true
		}
	}
	out := make(map[uint64][]segFiles, len(bySid))
	for sid, m := range bySid {
		for _, sf := range m {
			out[sid] = append(out[sid], *sf)
		}
		sort.Slice(out[sid], func(i, j int) bool { return out[sid][i].n < out[sid][j].n })
	}
	for _, l := range snaps {
		slices.Sort(l)
	}
	return out, snaps, nil
}

// writeFileAtomic writes data to path through path+".tmp": written,
// synced, renamed, and the directory synced, so that a crash leaves either
// the old file (or none) or the whole new one. hook names the steps for
// tests (what + ": tmp written", ": renamed").
func writeFileAtomic(fs vfs.FS, dir, path string, data []byte, hook func(string), what string) error {
	f, err := fs.Create(path+extTmp, vfs.WriteCategoryUnspecified)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = fs.Remove(path + extTmp)
		return err
	}
	hook(what + ": tmp written")
	if err := fs.Rename(path+extTmp, path); err != nil {
		return err
	}
	hook(what + ": renamed")
	return syncDir(fs, dir)
}

// syncDir syncs a directory so that file creations and removals in it are
// durable.
func syncDir(fs vfs.FS, dir string) error {
	d, err := fs.OpenDir(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}
