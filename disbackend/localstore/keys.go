package localstore

import "encoding/binary"

// Pebble key layout. Every key starts with a one-byte prefix naming its kind.
// Per-stream keys carry the stream's internal number (sid, 8 bytes big-endian,
// never reused, so a re-created stream can never see an old stream's keys)
// rather than its name; partitions are uint32 big-endian and offsets uint64
// big-endian so that byte order is numeric order.
//
//	'm' name                          stream metadata (JSON streamMeta)
//	'b' sid part base                 raw Kafka batch, base offset rewritten
//	'i' sid part base                 batch index entry (indexEntry, 24 bytes)
//	'f' sid part                      partition first-offset floor (8 bytes)
//	'p' sid part pid                  idempotent producer state (producerState)
//	'a'                               producer-id allocator: next id not yet reserved
//	'c'                               next stream number (sid) to hand out
const (
	prefixMeta     = 'm'
	prefixBatch    = 'b'
	prefixIndex    = 'i'
	prefixFloor    = 'f'
	prefixProducer = 'p'
	keyAllocator   = 'a'
	keySidCounter  = 'c'
)

const (
	partKeyLen   = 1 + 8 + 4      // prefix, sid, partition
	offsetKeyLen = partKeyLen + 8 // + base offset or producer id
)

func metaKey(name string) []byte {
	k := make([]byte, 1+len(name))
	k[0] = prefixMeta
	copy(k[1:], name)
	return k
}

// partKey returns prefix|sid|part.
func partKey(prefix byte, sid uint64, part int32) []byte {
	k := make([]byte, partKeyLen, offsetKeyLen)
	k[0] = prefix
	binary.BigEndian.PutUint64(k[1:], sid)
	binary.BigEndian.PutUint32(k[9:], uint32(part))
	return k
}

// offsetKey returns prefix|sid|part|off (off is an offset or a producer id).
func offsetKey(prefix byte, sid uint64, part int32, off int64) []byte {
	return binary.BigEndian.AppendUint64(partKey(prefix, sid, part), uint64(off))
}

// appendOffsetKey writes prefix|sid|part|off into dst[:offsetKeyLen].
func putOffsetKey(dst []byte, prefix byte, sid uint64, part int32, off int64) {
	dst[0] = prefix
	binary.BigEndian.PutUint64(dst[1:], sid)
	binary.BigEndian.PutUint32(dst[9:], uint32(part))
	binary.BigEndian.PutUint64(dst[13:], uint64(off))
}

// keyOffset decodes the trailing 8 bytes of an offsetKey.
func keyOffset(k []byte) int64 { return int64(binary.BigEndian.Uint64(k[partKeyLen:])) }

// streamSpan returns [start, end) covering every key of prefix for sid.
func streamSpan(prefix byte, sid uint64) (start, end []byte) {
	start = make([]byte, 9)
	start[0] = prefix
	binary.BigEndian.PutUint64(start[1:], sid)
	end = make([]byte, 9)
	end[0] = prefix
	binary.BigEndian.PutUint64(end[1:], sid+1)
	return start, end
}

// indexEntry is the small per-batch record kept beside each batch so that
// timestamp lookups, retention and recovery never read batch values.
type indexEntry struct {
	last     int64 // offset of the batch's last record
	maxTS    int64 // ms, the batch's max timestamp (append time on LogAppendTime)
	appendMS int64 // ms, when the store appended it (retention clock)
}

const indexEntryLen = 24

func (e indexEntry) put(dst []byte) {
	binary.BigEndian.PutUint64(dst[0:], uint64(e.last))
	binary.BigEndian.PutUint64(dst[8:], uint64(e.maxTS))
	binary.BigEndian.PutUint64(dst[16:], uint64(e.appendMS))
}

func decodeIndexEntry(v []byte) (indexEntry, bool) {
	if len(v) != indexEntryLen {
		return indexEntry{}, false
	}
	return indexEntry{
		last:     int64(binary.BigEndian.Uint64(v[0:])),
		maxTS:    int64(binary.BigEndian.Uint64(v[8:])),
		appendMS: int64(binary.BigEndian.Uint64(v[16:])),
	}, true
}

func putInt64(v int64) []byte { return binary.BigEndian.AppendUint64(nil, uint64(v)) }

func getInt64(v []byte) (int64, bool) {
	if len(v) != 8 {
		return 0, false
	}
	return int64(binary.BigEndian.Uint64(v)), true
}
