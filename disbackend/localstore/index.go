package localstore

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/disgw/disgw/kafkawire/batch"
)

// The batch index: sparse, on disk, per partition inside each segment
// (docs/architecture.md §4, §5).
//
// Segments stay per stream: every partition of a stream appends to the one
// active segment, so that a group commit writes and fdatasyncs one file per
// stream however many partitions it touches. A partition's frames in a
// segment come in runs (a group commit writes each partition's batches next
// to each other). The index describes each partition's frames as chunks: a
// chunk is a run of the partition's frames stored next to each other, cut
// every indexIntervalBytes (Kafka's index.interval.bytes, 4096) of frames;
// a frame larger than that is a chunk of its own. A lookup finds the chunk
// and reads it whole: it never reads another partition's data, and reads
// at most indexIntervalBytes before the batch it wants. Adjacent chunks are
// read with one read, so a partition written alone reads as contiguously
// as before. A partition whose runs are short (many partitions, each with
// a batch or two per group commit) has one chunk per run: the index then
// costs up to one 72-byte entry per run, on disk only.
//
// Each chunk entry also carries what Kafka keeps in its time index (the
// largest batch max timestamp so far, for ListOffsets by timestamp) and the
// largest append time so far (for retention), so one file serves both.
//
// A sealed segment's index is the file <name>.index, written once when the
// segment is sealed (tmp file, synced, renamed):
//
//	entries      chunk entries (chunkEntryLen each), by partition, each
//	             partition's in offset order
//	transactions reserved for aborted transactions (Kafka's .txnindex:
//	             producer id, first offset, last offset, last stable
//	             offset; txnEntryLen each), none today
//	directory    one dirEntryLen entry per partition holding batches
//	trailer      indexTrailerLen bytes, below
//
// A chunk entry, big-endian, 56 bytes:
//
//	 0 base       int64   offset of its first batch's first record
//	 8 lastDelta  uint32  last offset of its last batch, minus base
//	12 pos        uint48  position of its first frame header in the .log
//	18 size       uint32  bytes of its frames, headers included
//	22 bytesThru  uint48  batch bytes (headers excluded) of the partition in the segment up to its end
//	28 runMaxTS   int64   largest max timestamp (ms) of the partition's batches holding records in
//	                      the segment up to its end (noTimestamp: none yet); Kafka's time index
//	36 runMaxApp  int64   largest append time (ms) of the partition's batches in the segment up to its end
//	44 firstApp   uint32  runMaxApp minus the append time of its first batch (ms, at most 2^32-1)
//	48 flags      uint32  0; reserved (transactional and control batches)
//	52 crc        uint32  CRC-32C of bytes 0-51
//
// A directory entry: part int32, 0 uint32, start int64 (first entry),
// count int64, first, last, bytes, maxTS, minAppend, maxAppend int64
// (the partition's segPart). The trailer: magic uint32, version uint32,
// log size int64 (the .log bytes it describes), entries int64,
// transactions int64, partitions int64, covers uint64 (the highest segment
// number whose batches it holds: its own, or the last one a cleaner's
// pass merged into it; snapshot.go), 0 uint32 ×3, CRC-32C of the
// directory and the trailer before it uint32. Open reads the trailer and
// the directory only; entries are checked by their own CRC when read.
const (
	indexIntervalBytes = 4096 // Kafka's index.interval.bytes
	chunkEntryLen      = 56
	maxChunkDelta      = math.MaxUint32 // of a chunk's last offset from its base
	dirEntryLen        = 72
	txnEntryLen        = 32
	indexTrailerLen    = 64
	indexMagic         = 0x44475832 // "DGX2"
	indexVersion       = 1
	noTimestamp        = math.MinInt64
)

// chunk is one index entry: a run of one partition's frames next to each
// other in a segment.
type chunk struct {
	base, last int64
	pos        int64 // of its first frame header
	size       int64 // bytes of its frames, headers included
	bytesThru  int64 // batch bytes of the partition in the segment up to its end
	runMaxTS   int64 // ms; largest batch max timestamp up to its end, noTimestamp when none
	firstApp   int64 // ms; append time of its first batch
	runMaxApp  int64 // ms; largest append time up to its end
}

func (c *chunk) end() int64 { return c.pos + c.size }

func appendUint48(dst []byte, v int64) []byte {
	return append(dst, byte(v>>40), byte(v>>32), byte(v>>24), byte(v>>16), byte(v>>8), byte(v))
}

func getUint48(b []byte) int64 {
	return int64(b[0])<<40 | int64(b[1])<<32 | int64(b[2])<<24 | int64(b[3])<<16 | int64(b[4])<<8 | int64(b[5])
}

func appendChunkEntry(dst []byte, c *chunk) []byte {
	be := binary.BigEndian
	start := len(dst)
	dst = be.AppendUint64(dst, uint64(c.base))
	dst = be.AppendUint32(dst, uint32(c.last-c.base))
	dst = appendUint48(dst, c.pos)
	dst = be.AppendUint32(dst, uint32(c.size))
	dst = appendUint48(dst, c.bytesThru)
	dst = be.AppendUint64(dst, uint64(c.runMaxTS))
	dst = be.AppendUint64(dst, uint64(c.runMaxApp))
	dst = be.AppendUint32(dst, uint32(min(max(c.runMaxApp-c.firstApp, 0), math.MaxUint32)))
	dst = be.AppendUint32(dst, 0)
	return be.AppendUint32(dst, batch.Checksum(dst[start:]))
}

var errBadIndex = errors.New("index entry corrupt")

func decodeChunkEntry(b []byte) (chunk, error) {
	be := binary.BigEndian
	if be.Uint32(b[52:]) != batch.Checksum(b[:52]) {
		return chunk{}, errBadIndex
	}
	c := chunk{
		base:      int64(be.Uint64(b[0:])),
		pos:       getUint48(b[12:]),
		size:      int64(be.Uint32(b[18:])),
		bytesThru: getUint48(b[22:]),
		runMaxTS:  int64(be.Uint64(b[28:])),
		runMaxApp: int64(be.Uint64(b[36:])),
	}
	c.last = c.base + int64(be.Uint32(b[8:]))
	c.firstApp = c.runMaxApp - int64(be.Uint32(b[44:]))
	if c.size < frameHeaderLen {
		return chunk{}, errBadIndex
	}
	return c, nil
}

// segPart is what a segment holds of one partition.
type segPart struct {
	seg   *segment
	part  int32
	first int64 // offset of its first batch; set when it is made, never changed

	// Guarded by the partition's mu while the segment is active (the
	// syncer adds published frames); fixed once the segment is sealed.
	last                 int64
	bytes                int64 // batch bytes (frame headers excluded)
	maxTS                int64 // largest max timestamp of its batches with records (ms); noTimestamp when none
	minAppend, maxAppend int64 // ms
	// chunks are its index entries while the segment is active (in memory,
	// in offset order); nil once sealed, when they are entries
	// [ixStart, ixStart+ixCount) of the segment's index file.
	chunks           []chunk
	nchunks          int64 // chunks in all (in memory or in the file)
	ixStart, ixCount int64
	// sealed is set (under the partition's mu) once the segment is sealed:
	// from then on nothing above changes.
	sealed bool
	// jFrom is the first chunk changed since the last journal block, and
	// jTouched whether the part is in its segment's jparts (the syncer's).
	jFrom    int
	jTouched bool
}

func newSegPart(sg *segment, part int32, first int64) *segPart {
	return &segPart{seg: sg, part: part, first: first, last: first - 1, maxTS: noTimestamp,
		minAppend: math.MaxInt64, maxAppend: math.MinInt64}
}

// add appends a frame (the partition's next one in the segment) to the
// part's chunks: to the last chunk when it is stored right after it and
// the chunk stays within indexIntervalBytes, else as a new chunk. It
// reports whether it made a new chunk. Requires the partition's mu (or
// the segment not yet visible).
func (sp *segPart) add(f *frameInfo) bool {
	frameLen := frameHeaderLen + int64(f.size)
	hdrPos := f.pos - frameHeaderLen
	ts := int64(noTimestamp)
	if f.size > batch.HeaderLen { // a batch the log cleaner emptied holds no timestamp
		ts = f.maxTS
	}
	sp.last = f.last
	sp.maxTS = max(sp.maxTS, ts)
	sp.minAppend = min(sp.minAppend, f.appendMS)
	sp.maxAppend = max(sp.maxAppend, f.appendMS)
	sp.bytes += int64(f.size)
	if n := len(sp.chunks); n > 0 {
		c := &sp.chunks[n-1]
		if c.end() == hdrPos && c.size+frameLen <= indexIntervalBytes && f.last-c.base <= maxChunkDelta {
			c.last, c.size, c.bytesThru = f.last, c.size+frameLen, sp.bytes
			c.runMaxTS, c.runMaxApp = max(c.runMaxTS, ts), max(c.runMaxApp, f.appendMS)
			sp.jFrom = min(sp.jFrom, n-1)
			return false
		}
	}
	c := chunk{base: f.base, last: f.last, pos: hdrPos, size: frameLen, bytesThru: sp.bytes,
		runMaxTS: ts, firstApp: f.appendMS, runMaxApp: f.appendMS}
	if n := len(sp.chunks); n > 0 {
		prev := &sp.chunks[n-1]
		c.runMaxTS, c.runMaxApp = max(c.runMaxTS, prev.runMaxTS), max(c.runMaxApp, prev.runMaxApp)
	}
	sp.chunks = append(sp.chunks, c)
	sp.nchunks++
	return true
}

// indexWriter writes a sealed segment's index file: the partitions'
// entries as they are added, then the directory and the trailer.
type indexWriter struct {
	f       vfs.File
	path    string
	buf     []byte
	written int64 // entries written
	dir     []byte
	parts   int64
	err     error
}

func newIndexWriter(fs vfs.FS, path string) (*indexWriter, error) {
	f, err := fs.Create(path, vfs.WriteCategoryUnspecified)
	if err != nil {
		return nil, err
	}
	return &indexWriter{f: f, path: path}, nil
}

// addPart writes sp's chunks (in memory) as its entries and records its
// directory entry; sp.ixStart and sp.ixCount are set by the caller from
// the returned start.
func (w *indexWriter) addPart(sp *segPart) (start int64) {
	start = w.written
	for i := range sp.chunks {
		w.buf = appendChunkEntry(w.buf, &sp.chunks[i])
		if len(w.buf) >= 1<<20 {
			w.flush()
		}
	}
	w.written += int64(len(sp.chunks))
	be := binary.BigEndian
	w.dir = be.AppendUint32(w.dir, uint32(sp.part))
	w.dir = be.AppendUint32(w.dir, 0)
	for _, v := range []int64{start, int64(len(sp.chunks)), sp.first, sp.last, sp.bytes, sp.maxTS, sp.minAppend, sp.maxAppend} {
		w.dir = be.AppendUint64(w.dir, uint64(v))
	}
	w.parts++
	return start
}

func (w *indexWriter) flush() {
	if w.err == nil && len(w.buf) > 0 {
		_, w.err = w.f.Write(w.buf)
	}
	w.buf = w.buf[:0]
}

// finish writes the directory and trailer for a .log of logSize bytes
// holding the batches of segments up to number covers, syncs and closes
// the file.
func (w *indexWriter) finish(logSize int64, covers uint64) error {
	w.flush()
	be := binary.BigEndian
	tr := w.dir
	tr = be.AppendUint32(tr, indexMagic)
	tr = be.AppendUint32(tr, indexVersion)
	tr = be.AppendUint64(tr, uint64(logSize))
	tr = be.AppendUint64(tr, uint64(w.written))
	tr = be.AppendUint64(tr, 0) // transactions
	tr = be.AppendUint64(tr, uint64(w.parts))
	tr = be.AppendUint64(tr, covers)
	tr = append(tr, make([]byte, 12)...)
	tr = be.AppendUint32(tr, batch.Checksum(tr))
	w.buf = tr
	w.flush()
	if w.err == nil {
		w.err = w.f.Sync()
	}
	if cerr := w.f.Close(); w.err == nil {
		w.err = cerr
	}
	if w.err != nil {
		return fmt.Errorf("index %s: %w", w.path, w.err)
	}
	return nil
}

// abort closes and removes an unfinished index file.
func (w *indexWriter) abort(fs vfs.FS) {
	_ = w.f.Close()
	_ = fs.Remove(w.path)
}

// readIndexDir reads a sealed index file's trailer and directory: the
// segParts of sg (chunks on disk), and the .log size it describes; it sets
// sg.covers. errBadIndex when the file is incomplete or corrupt.
func readIndexDir(f vfs.File, sg *segment) (map[int32]*segPart, int64, error) {
	st, err := f.Stat()
	if err != nil {
		return nil, 0, err
	}
	size := st.Size()
	if size < indexTrailerLen {
		return nil, 0, errBadIndex
	}
	var tr [indexTrailerLen]byte
	if _, err := f.ReadAt(tr[:], size-indexTrailerLen); err != nil {
		return nil, 0, err
	}
	be := binary.BigEndian
	if be.Uint32(tr[0:]) != indexMagic || be.Uint32(tr[4:]) != indexVersion {
		return nil, 0, errBadIndex
	}
	logSize := int64(be.Uint64(tr[8:]))
	entries, txns, parts := int64(be.Uint64(tr[16:])), int64(be.Uint64(tr[24:])), int64(be.Uint64(tr[32:]))
	covers := be.Uint64(tr[40:])
	if entries < 0 || txns < 0 || parts < 0 || parts > MaxPartitions ||
		entries*chunkEntryLen+txns*txnEntryLen+parts*dirEntryLen+indexTrailerLen != size {
		return nil, 0, errBadIndex
	}
	dir := make([]byte, parts*dirEntryLen+indexTrailerLen)
	if _, err := f.ReadAt(dir, size-int64(len(dir))); err != nil {
		return nil, 0, err
	}
	if be.Uint32(dir[len(dir)-4:]) != batch.Checksum(dir[:len(dir)-4]) {
		return nil, 0, errBadIndex
	}
	out := make(map[int32]*segPart, parts)
	for i := int64(0); i < parts; i++ {
		e := dir[i*dirEntryLen:]
		v := func(k int) int64 { return int64(be.Uint64(e[8+8*k:])) }
		sp := &segPart{seg: sg, part: int32(be.Uint32(e)), ixStart: v(0), ixCount: v(1), first: v(2), last: v(3),
			bytes: v(4), maxTS: v(5), minAppend: v(6), maxAppend: v(7), sealed: true}
		sp.nchunks = sp.ixCount
		if sp.part < 0 || sp.ixStart < 0 || sp.ixCount <= 0 || sp.ixStart+sp.ixCount > entries || sp.last < sp.first || out[sp.part] != nil {
			return nil, 0, errBadIndex
		}
		out[sp.part] = sp
	}
	if covers < sg.n {
		return nil, 0, errBadIndex
	}
	sg.covers = covers
	return out, logSize, nil
}

// readEntries reads n entries of the segment's index file from entry i.
// ok is false when the segment was closed (removed meanwhile).
func (sg *segment) readEntries(i, n int64) ([]chunk, bool, error) {
	buf := make([]byte, n*chunkEntryLen)
	sg.mu.RLock()
	if sg.f == nil {
		sg.mu.RUnlock()
		return nil, false, nil
	}
	if sg.ixf == nil {
		sg.mu.RUnlock()
		return nil, true, fmt.Errorf("segment %s: sealed without an index: %w", sg.path, errCorrupt)
	}
	got, err := sg.ixf.ReadAt(buf, i*chunkEntryLen)
	sg.mu.RUnlock()
	if got == len(buf) {
		err = nil
	} else if err == nil || err == io.EOF {
		err = io.ErrUnexpectedEOF
	}
	if err != nil {
		return nil, true, fmt.Errorf("segment %s: read index: %w", sg.path, err)
	}
	out := make([]chunk, n)
	for k := range out {
		c, err := decodeChunkEntry(buf[k*chunkEntryLen:])
		if err != nil {
			return nil, true, fmt.Errorf("segment %s: index entry %d: %w", sg.path, i+int64(k), err)
		}
		out[k] = c
	}
	return out, true, nil
}

// partView is a consistent view of a partition's segParts for one
// operation. The segParts of sealed segments never change, so they are
// shared; of the active segment's (the partition's last segPart, if any)
// what the syncer may still change is copied under the partition's lock.
type partView struct {
	segs    []*segPart // shared: p.segs is never changed in place
	tail    spView     // the last segPart's, when its segment is active
	hasTail bool
	gen     uint64
}

type spView struct {
	sp *segPart
	// For a segPart of the active segment: its chunks but the last, shared
	// (the syncer never changes a chunk once another follows it), and a
	// copy of the last one (which it may still grow); nil when sealed.
	chunks    []chunk
	lastChunk chunk
	inMem     bool
	n         int64 // its chunks
	last      int64
	bytes     int64
	maxTS     int64
	maxApp    int64
}

// view takes p's segParts holding offsets at or above from. Requires p.mu
// (read).
func (p *partition) view(from int64) partView {
	i, _ := slices.BinarySearchFunc(p.segs, from, func(sp *segPart, off int64) int {
		if sp.last < off {
			return -1
		}
		return 1
	})
	v := partView{segs: p.segs[i:len(p.segs):len(p.segs)], gen: p.segsGen}
	if n := len(v.segs); n > 0 && !v.segs[n-1].sealed {
		sp := v.segs[n-1]
		c := len(sp.chunks)
		v.tail = spView{sp: sp, inMem: c > 0, n: sp.nchunks, last: sp.last, bytes: sp.bytes, maxTS: sp.maxTS, maxApp: sp.maxAppend}
		if c > 0 {
			v.tail.chunks, v.tail.lastChunk = sp.chunks[:c-1:c-1], sp.chunks[c-1]
		}
		v.hasTail = true
	}
	return v
}

// len is the number of segParts in the view.
func (v *partView) len() int { return len(v.segs) }

// at returns the view of segPart i.
func (v *partView) at(i int) spView {
	if v.hasTail && i == len(v.segs)-1 {
		return v.tail
	}
	return sealedView(v.segs[i])
}

// sealedView is the view of a sealed segPart, read without a lock: its
// fields no longer change.
func sealedView(sp *segPart) spView {
	return spView{sp: sp, n: sp.nchunks, last: sp.last, bytes: sp.bytes, maxTS: sp.maxTS, maxApp: sp.maxAppend}
}

// entries returns chunks [i, i+n) of the view (n clipped to what there
// is). ok is false when the segment was removed meanwhile.
func (sv *spView) entries(i, n int64) ([]chunk, bool, error) {
	n = min(n, sv.n-i)
	if n <= 0 {
		return nil, true, nil
	}
	if sv.inMem {
		if i+n <= int64(len(sv.chunks)) {
			return sv.chunks[i : i+n : i+n], true, nil
		}
		out := make([]chunk, 0, n)
		out = append(out, sv.chunks[min(i, int64(len(sv.chunks))):]...)
		return append(out, sv.lastChunk), true, nil
	}
	return sv.sp.seg.readEntries(sv.sp.ixStart+i, n)
}

// search returns the first chunk index in [0, n) for which pred is true
// (pred false then true along the chunks), n when none. ok is false when
// the segment was removed meanwhile.
func (sv *spView) search(pred func(*chunk) bool) (int64, bool, error) {
	k, _, ok, err := sv.searchFrom(pred, 0)
	return k, ok, err
}

// searchFrom is search that also returns up to want chunks from the one
// found, read with the last step of the search.
func (sv *spView) searchFrom(pred func(*chunk) bool, want int64) (int64, []chunk, bool, error) {
	if sv.inMem {
		i, _ := slices.BinarySearchFunc(sv.chunks, true, func(c chunk, _ bool) int {
			if pred(&c) {
				return 1
			}
			return -1
		})
		if i == len(sv.chunks) && sv.n > 0 && !pred(&sv.lastChunk) {
			i++
		}
		k := min(int64(i), sv.n)
		cs, ok, err := sv.entries(k, want)
		return k, cs, ok, err
	}
	lo, hi := int64(0), sv.n
	for hi-lo > 128 { // then the rest is read at once (10 KiB)
		mid := lo + (hi-lo)/2
		cs, ok, err := sv.entries(mid, 1)
		if err != nil || !ok {
			return 0, nil, ok, err
		}
		if pred(&cs[0]) {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	return sv.scanRange(pred, lo, hi, want)
}

// scanRange reads entries [lo, hi) and want more, and returns the first
// of them for which pred holds (hi when none does) with up to want entries
// from it: the last step of searchFrom and seekOffset, once the range is
// small.
func (sv *spView) scanRange(pred func(*chunk) bool, lo, hi, want int64) (int64, []chunk, bool, error) {
	cs, ok, err := sv.entries(lo, hi-lo+want)
	if err != nil || !ok {
		return 0, nil, ok, err
	}
	k := hi
	for i := range cs[:min(int64(len(cs)), hi-lo)] {
		if pred(&cs[i]) {
			k = lo + int64(i)
			break
		}
	}
	cs = cs[k-lo:]
	return k, cs[:min(int64(len(cs)), want)], true, nil
}

// seekOffset is searchFrom for the first chunk ending at or after offset,
// in fewer reads: offsets grow about evenly along a segment's chunks, so
// it reads a window of entries where offset should be (interpolation),
// and narrows the range with each window that misses (every other one
// halves it, whatever the offsets' spread). The window holds want entries
// past its middle, which come back with the chunk found.
func (sv *spView) seekOffset(offset, want int64) (int64, []chunk, bool, error) {
	pred := func(c *chunk) bool { return c.last >= offset }
	if sv.inMem || sv.n <= seekWindow {
		return sv.searchFrom(pred, want)
	}
	lo, hi := int64(0), sv.n // the chunk is in [lo, hi]
	loOff, hiOff := sv.sp.first, sv.last+1
	for round := 0; hi-lo > seekWindow; round++ {
		mid := lo + (hi-lo)/2
		if round%2 == 0 && hiOff > loOff {
			f := float64(offset-loOff) / float64(hiOff-loOff)
			mid = lo + int64(f*float64(hi-lo))
		}
		start := min(max(mid-seekWindow/2, lo), hi-seekWindow)
		cs, ok, err := sv.entries(start, seekWindow+want)
		if err != nil || !ok {
			return 0, nil, ok, err
		}
		switch w := cs[:seekWindow]; {
		case pred(&w[0]):
			hi, hiOff = start, w[0].base
		case !pred(&w[len(w)-1]):
			lo, loOff = start+seekWindow, w[len(w)-1].last+1
		default:
			i, _ := slices.BinarySearchFunc(w, true, func(c chunk, _ bool) int {
				if pred(&c) {
					return 1
				}
				return -1
			})
			cs = cs[i:]
			return start + int64(i), cs[:min(int64(len(cs)), want)], true, nil
		}
	}
	return sv.scanRange(pred, lo, hi, want)
}

// seekWindow is how many index entries seekOffset reads around where it
// expects the offset (7 KiB).
const seekWindow = 128

// readChunks reads cs, which are stored one after another in the
// segment, with one read, and calls fn with each of their frames in
// order until fn returns false. ok is false when the segment was removed
// meanwhile.
// before, when set, sees the bytes read first.
func (s *Store) readChunks(sp *segPart, cs []chunk, before func(buf []byte), fn func(f *frameInfo, raw []byte) bool) (bool, error) {
	if len(cs) == 0 {
		return true, nil
	}
	start, end := cs[0].pos, cs[len(cs)-1].end()
	buf := make([]byte, end-start)
	ok, err := sp.seg.readAt(buf, start)
	if err != nil || !ok {
		return ok, err
	}
	if before != nil {
		before(buf)
	}
	return true, parseFrames(buf, start, sp, fn)
}

// countFrames counts the frames of buf (whole frames, as chunks hold).
func countFrames(buf []byte) int {
	n := 0
	for off := 0; off+frameHeaderLen <= len(buf); n++ {
		off += frameHeaderLen + int(binary.BigEndian.Uint32(buf[off+8:]))
	}
	return n
}

// parseFrames walks the frames of buf (read at position at of sp's
// segment, all of them sp's partition's), checking each header against
// the index, and calls fn until it returns false. The raw slices alias
// buf (capacity clipped); fn must not keep f.
func parseFrames(buf []byte, at int64, sp *segPart, fn func(f *frameInfo, raw []byte) bool) error {
	f := new(frameInfo) // one for every frame: fn must not keep it
	for off := int64(0); off < int64(len(buf)); {
		if int64(len(buf))-off < frameHeaderLen {
			return fmt.Errorf("segment %s at %d: frame header cut short: %w", sp.seg.path, at+off, errCorrupt)
		}
		var sid uint64
		var ok bool
		*f, sid, _, ok = decodeHeader(buf[off:])
		if !ok || sid != sp.seg.sid || f.part != sp.part || f.size < batch.HeaderLen ||
			int64(f.size) > int64(len(buf))-off-frameHeaderLen || f.last < f.base {
			return fmt.Errorf("segment %s at %d: frame header does not match the index: %w", sp.seg.path, at+off, errCorrupt)
		}
		f.pos = at + off + frameHeaderLen
		data := off + frameHeaderLen
		raw := buf[data : data+int64(f.size) : data+int64(f.size)]
		if !fn(f, raw) {
			return nil
		}
		off = data + int64(f.size)
	}
	return nil
}
