package localstore

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/disgw/disgw/kafkawire/batch"
)

// Segment files. Record batches live in append-only segment files under
// dir/segments, one active segment per stream: a group commit writes each
// stream's new batches with one Write and syncs each stream's file once
// (fdatasync, in parallel across streams), and retention and DeleteStream
// drop whole files. A segment is sealed when it reaches Options.SegmentBytes
// (then its index is written beside it as <name>.idx), at Close, and when it
// is recovered at Open; appends always go to a segment created by this
// process.
//
// Names are <sid>-<n>.log and <sid>-<n>.idx, both numbers 16 hex digits; n
// grows across all streams, so a name is never reused.
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
// Recovery trusts a segment's .idx file when its CRC matches (it is written
// only after every frame it lists was synced) and otherwise scans the .log,
// stopping at the first torn or corrupt frame: nothing after it was
// acknowledged, because an Append completes only after its segment's
// fdatasync, which covers every earlier write to the file.
const (
	frameMagic          = 0x44474631 // "DGF1"
	frameHeaderLen      = 56
	idxMagic            = 0x44474931 // "DGI1"
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

// appendIdxRecord appends f's 64-byte index record:
// pos, size, part, base, last, appendMS, maxTS, pid (8 bytes each but size
// and part 4), seq 4, epoch 2, 2 zero.
func appendIdxRecord(dst []byte, f *frameInfo) []byte {
	be := binary.BigEndian
	dst = be.AppendUint64(dst, uint64(f.pos))
	dst = be.AppendUint32(dst, uint32(f.size))
	dst = be.AppendUint32(dst, uint32(f.part))
	dst = be.AppendUint64(dst, uint64(f.base))
	dst = be.AppendUint64(dst, uint64(f.last))
	dst = be.AppendUint64(dst, uint64(f.appendMS))
	dst = be.AppendUint64(dst, uint64(f.maxTS))
	dst = be.AppendUint64(dst, uint64(f.pid))
	dst = be.AppendUint32(dst, uint32(f.seq))
	dst = be.AppendUint16(dst, uint16(f.epoch))
	return append(dst, 0, 0)
}

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
	n    uint64 // number in the file name
	path string // without extension

	// mu is read-held around every use of f by readers and the syncer, and
	// write-held to close it; f is nil once closed (retention, deletion).
	mu sync.RWMutex
	f  vfs.File

	// The fields below are owned by whoever holds Store.wmu (the writer
	// while it assembles a group, retention, DeleteStream, Close).
	size          int64 // bytes of frames written
	sealed        bool
	firstAppendMS int64 // of its first frame, ms (segment.ms rolls it)
	maxAppendMS   int64
	partLast      map[int32]int64 // last offset stored here, per partition
	idx           []byte          // index records of an unsealed segment
}

func newSegment(sid, n uint64, path string, f vfs.File) *segment {
	return &segment{sid: sid, n: n, path: path, f: f, partLast: make(map[int32]int64), maxAppendMS: -1 << 63}
}

func segmentName(sid, n uint64) string { return fmt.Sprintf("%016x-%016x", sid, n) }

// parseSegmentName parses "<sid>-<n>.log" or ".idx".
func parseSegmentName(name string) (sid, n uint64, ext string, ok bool) {
	base, ext, found := strings.Cut(name, ".")
	if !found || (ext != "log" && ext != "idx") || len(base) != 33 || base[16] != '-' {
		return 0, 0, "", false
	}
	sid, err1 := strconv.ParseUint(base[:16], 16, 64)
	n, err2 := strconv.ParseUint(base[17:], 16, 64)
	return sid, n, ext, err1 == nil && err2 == nil
}

// note records a frame written to the segment. Requires Store.wmu.
func (sg *segment) note(f *frameInfo) {
	if len(sg.partLast) == 0 {
		sg.firstAppendMS = f.appendMS
	}
	sg.partLast[f.part] = f.last
	sg.maxAppendMS = max(sg.maxAppendMS, f.appendMS)
	if !sg.sealed {
		sg.idx = appendIdxRecord(sg.idx, f)
	}
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

// close closes the file once no reader uses it.
func (sg *segment) close() error {
	sg.mu.Lock()
	defer sg.mu.Unlock()
	if sg.f == nil {
		return nil
	}
	err := sg.f.Close()
	sg.f = nil
	return err
}

// writeIdx writes the segment's index file: magic, record count, the
// records, and a CRC-32C of everything before it, then syncs it. The caller
// must have synced every frame the records list. The directory entry is not
// synced: a lost index only means the segment is scanned at the next Open.
func writeIdx(fs vfs.FS, path string, records []byte) error {
	buf := make([]byte, 0, idxHeaderLen+len(records)+4)
	buf = binary.BigEndian.AppendUint32(buf, idxMagic)
	buf = binary.BigEndian.AppendUint32(buf, uint32(len(records)/idxRecordLen))
	buf = append(buf, records...)
	buf = binary.BigEndian.AppendUint32(buf, batch.Checksum(buf))
	f, err := fs.Create(path+".idx", vfs.WriteCategoryUnspecified)
	if err != nil {
		return err
	}
	if _, err := f.Write(buf); err != nil {
		_ = f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}

var errBadIdx = errors.New("index file incomplete or corrupt")

// readIdx loads a segment's index file.
func readIdx(fs vfs.FS, path string) ([]frameInfo, error) {
	f, err := fs.Open(path + ".idx")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	buf, err := io.ReadAll(f)
	if err != nil {
		return nil, err
	}
	be := binary.BigEndian
	if len(buf) < idxHeaderLen+4 || be.Uint32(buf) != idxMagic {
		return nil, errBadIdx
	}
	n := int(be.Uint32(buf[4:]))
	body := buf[:len(buf)-4]
	if len(body) != idxHeaderLen+n*idxRecordLen || be.Uint32(buf[len(buf)-4:]) != batch.Checksum(body) {
		return nil, errBadIdx
	}
	out := make([]frameInfo, n)
	for i := range out {
		out[i] = decodeIdxRecord(body[idxHeaderLen+i*idxRecordLen:])
	}
	return out, nil
}

// scanSegment reads frames from the start of f, checking each CRC, and
// stops at the first torn or corrupt one. It returns the valid frames and
// the end of the last one.
func scanSegment(f vfs.File, sid uint64) ([]frameInfo, int64, error) {
	st, err := f.Stat()
	if err != nil {
		return nil, 0, err
	}
	size := st.Size()
	var out []frameInfo
	var hdr [frameHeaderLen]byte
	var data []byte
	pos := int64(0)
	for pos+frameHeaderLen <= size {
		if _, err := f.ReadAt(hdr[:], pos); err != nil {
			return nil, 0, err
		}
		fi, fsid, crc, ok := decodeHeader(hdr[:])
		if !ok || fsid != sid || fi.size < batch.HeaderLen || int64(fi.size) > size-pos-frameHeaderLen || fi.last < fi.base {
			break
		}
		if cap(data) < int(fi.size) {
			data = make([]byte, fi.size)
		}
		data = data[:fi.size]
		if _, err := f.ReadAt(data, pos+frameHeaderLen); err != nil {
			return nil, 0, err
		}
		if frameCRC(hdr[:], data) != crc {
			break
		}
		fi.pos = pos + frameHeaderLen
		fi.setProducer(data)
		out = append(out, fi)
		pos += frameHeaderLen + int64(fi.size)
	}
	return out, pos, nil
}

// segFiles lists what the segment directory holds for one stream.
type segFiles struct {
	n              uint64
	hasLog, hasIdx bool
}

// listSegments returns the segment files by stream, each stream's in order.
func listSegments(fs vfs.FS, dir string) (map[uint64][]segFiles, error) {
	names, err := fs.List(dir)
	if err != nil {
		return nil, err
	}
	bySid := make(map[uint64]map[uint64]*segFiles)
	for _, name := range names {
		sid, n, ext, ok := parseSegmentName(name)
		if !ok {
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
		if ext == "log" {
			sf.hasLog = true
		} else {
			sf.hasIdx = true
		}
	}
	out := make(map[uint64][]segFiles, len(bySid))
	for sid, m := range bySid {
		for _, sf := range m {
			out[sid] = append(out[sid], *sf)
		}
		sort.Slice(out[sid], func(i, j int) bool { return out[sid][i].n < out[sid][j].n })
	}
	return out, nil
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
