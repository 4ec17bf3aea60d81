package batch

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"unsafe"
)

// Record is one Kafka record of a batch, with its timestamp made absolute.
// Key, Value and header values alias the batch bytes (or their
// decompressed copy) they were decoded from.
type Record struct {
	// OffsetDelta is the record's offset minus the batch's base offset.
	OffsetDelta int32
	// Timestamp is the record's timestamp, ms: the batch's first timestamp
	// plus the record's delta, or the batch's max timestamp when the batch
	// is LogAppendTime (as consumers read it).
	Timestamp int64
	// Key and Value are nil when null (a null value is a tombstone), and
	// empty but not nil when empty.
	Key, Value []byte
	Headers    []RecordHeader
}

// RecordHeader is one record header; a nil Value is a null one.
type RecordHeader struct {
	Key   string
	Value []byte
}

// Offset is the record's offset in a batch whose base offset is base.
func (r *Record) Offset(base int64) int64 { return base + int64(r.OffsetDelta) }

// Checked is what validating a batch's records found.
type Checked struct {
	// MaxTimestamp is the largest record timestamp, ms (the header's max
	// timestamp for a LogAppendTime batch). Kafka's broker writes it into
	// the header of a CreateTime batch rather than trusting the producer's
	// (see SetMaxTimestamp).
	MaxTimestamp int64
	// Keyless counts the records with a null key, which a compacted topic
	// refuses.
	Keyless int
}

// Validate checks the records of a batch that Parse accepted, as Kafka's
// broker does before it appends (LogValidator, DefaultRecord.readFrom): it
// decompresses them (at most MaxDecompressedBytes, in the framings Kafka's
// Java client reads) and decodes every record, which must be exactly
// h.NumRecords records filling the data, with offset deltas 0, 1, 2, ...,
// each record's fields filling its length, and varints no longer than
// Kafka's reader takes. A batch that passes its CRC but holds anything else
// would otherwise be stored and stall every consumer at it. It keeps
// nothing: see ValidateAndDecode. Errors: ErrCorruptMessage (the data does
// not decompress; Kafka CORRUPT_MESSAGE), ErrInvalidRecord (the records do
// not decode or do not match the header; Kafka INVALID_RECORD),
// ErrDecompressedTooLarge. It charges no Budget: see ValidateLimited.
func Validate(raw []byte, h Header) (Checked, error) {
	return ValidateLimited(context.Background(), raw, h, Limits{})
}

// ValidateLimited is Validate within lim: the records may decompress to
// at most lim's MaxBytes (else ErrDecompressedTooLarge, found while
// decompressing), and what is held while they are checked is charged to
// lim.Budget, waiting with ctx (else an error wrapping ErrBudgetWait and
// ctx.Err()). It streams: a compressed batch holds its largest record and
// the decompressor's window, not its whole data. Everything is given back
// before it returns.
func ValidateLimited(ctx context.Context, raw []byte, h Header, lim Limits) (Checked, error) {
	_, c, hold, err := decodeWith(ctx, raw, &h, true, false, lim, nil)
	hold.Release()
	return c, err
}

// ValidateAndDecode is Validate that also returns the records, for
// backends that store records rather than batches (DIS). Their bytes alias
// raw when the batch is not compressed. Memory grows with the records
// decoded, never with the counts the batch declares.
func ValidateAndDecode(raw []byte, h Header) ([]Record, Checked, error) {
	recs, c, _, err := decodeWith(context.Background(), raw, &h, true, true, Limits{}, nil)
	return recs, c, err
}

// ValidateAndDecodeLimited is ValidateAndDecode within lim (see
// ValidateLimited). The records' decompressed bytes and the Record values
// stay charged to lim.Budget in the returned Hold until its Release, which
// the caller calls once it drops the records. On an error nothing stays
// charged.
func ValidateAndDecodeLimited(ctx context.Context, raw []byte, h Header, lim Limits) ([]Record, Checked, Hold, error) {
	return decodeWith(ctx, raw, &h, true, true, lim, nil)
}

// KeylessRecords returns the positions in the batch (from 0, in order) of
// its records whose key is null: the records a compacted topic refuses
// (Kafka's LogValidator.validateKey), for the answer's record errors
// (KIP-467). It walks the records of a batch that Validate accepted once
// more, within lim as ValidateLimited, keeping none: only a refusal pays
// for it. Errors: as ValidateLimited.
func KeylessRecords(ctx context.Context, raw []byte, h Header, lim Limits) ([]int32, error) {
	var keyless []int32
	_, _, hold, err := decodeWith(ctx, raw, &h, true, false, lim, func(r *Record) bool {
		// Strict: the offset delta is the record's position. A walk that
		// starts again (errRestart) sees record 0 again.
		if r.OffsetDelta == 0 {
			keyless = keyless[:0]
		}
		if r.Key == nil {
			keyless = append(keyless, r.OffsetDelta)
		}
		return false
	})
	hold.Release()
	if err != nil {
		return nil, err
	}
	return keyless, nil
}

// DecodeRecords decodes the records of a stored batch (any codec). Offset
// deltas need only increase: a stored batch may have gaps (DIS sequence
// numbers, compaction). Errors: ErrCorruptMessage, ErrInvalidRecord.
func DecodeRecords(raw []byte) ([]Record, error) {
	h, err := storedHeader(raw)
	if err != nil {
		return nil, err
	}
	recs, _, _, err := decodeWith(context.Background(), raw[:int64(h.Length)+logOverhead], &h, false, true, Limits{}, nil)
	return recs, err
}

// FindRecord walks the records of a stored batch, as DecodeRecords reads
// them, until match accepts one (given its timestamp and the batch's max
// timestamp, ms) and returns its offset and timestamp; (-1, -1) when none
// does. It keeps no record: within lim it holds at most one record's bytes
// and the decompressor's window, charged to lim.Budget until it returns.
// Serves ListOffsets by timestamp. Errors: as DecodeRecords, and lim's
// (ErrDecompressedTooLarge, ErrBudgetWait).
func FindRecord(ctx context.Context, raw []byte, lim Limits, match func(ts, batchMax int64) bool) (int64, int64, error) {
	return FindRecordFrom(ctx, raw, lim, -1, match)
}

// FindRecordFrom is FindRecord skipping the records below offset from (a
// log start offset inside the batch: Kafka's ListOffsets never answers
// below it).
func FindRecordFrom(ctx context.Context, raw []byte, lim Limits, from int64, match func(ts, batchMax int64) bool) (int64, int64, error) {
	h, err := storedHeader(raw)
	if err != nil {
		return 0, 0, err
	}
	off, ts := int64(-1), int64(-1)
	_, _, hold, err := decodeWith(ctx, raw[:int64(h.Length)+logOverhead], &h, false, false, lim, func(r *Record) bool {
		if r.Offset(h.BaseOffset) >= from && match(r.Timestamp, h.MaxTimestamp) {
			off, ts = r.Offset(h.BaseOffset), r.Timestamp
			return true
		}
		return false
	})
	hold.Release()
	if err != nil {
		return 0, 0, err
	}
	return off, ts, nil
}

// storedHeader parses the header of a stored batch and checks that its
// length fits raw.
func storedHeader(raw []byte) (Header, error) {
	h, err := ParseHeader(raw)
	if err != nil {
		return h, err
	}
	if end := int64(h.Length) + logOverhead; end < HeaderLen || end > int64(len(raw)) {
		return h, fmt.Errorf("%w: batch length %d does not fit its %d bytes", ErrCorruptMessage, h.Length, len(raw))
	}
	return h, nil
}

// minRecordLen is the shortest encoded record: length, attributes,
// timestamp delta, offset delta, key and value lengths and header count,
// one byte each.
const minRecordLen = 7

// recordSize is what one kept Record value costs besides its bytes.
var recordSize = int64(unsafe.Sizeof(Record{}))

// headerSize is what one kept RecordHeader value costs besides its bytes.
var headerSize = int64(unsafe.Sizeof(RecordHeader{}))

// decodeWith decompresses raw's records within lim and walks h.NumRecords
// of them. strict applies the produce checks (offset deltas 0, 1, 2, ...;
// nothing after the last record); keep returns the records; visit, when
// set, sees each record and stops the walk by returning true. What is
// still held (kept records) is returned as a Hold; on an error nothing is.
func decodeWith(ctx context.Context, raw []byte, h *Header, strict, keep bool, lim Limits, visit func(*Record) bool) ([]Record, Checked, Hold, error) {
	for {
		recs, c, hold, err := decodeOnce(ctx, raw, h, strict, keep, lim, visit)
		if !errors.Is(err, errRestart) {
			return recs, c, hold, err
		}
		// Everything was given back: wait, holding nothing, for the
		// decoding that has priority, then start again.
		if err := lim.Budget.waitNoPriority(ctx); err != nil {
			return nil, c, Hold{}, err
		}
	}
}

// decodeOnce is one attempt of decodeWith.
func decodeOnce(ctx context.Context, raw []byte, h *Header, strict, keep bool, lim Limits, visit func(*Record) bool) (recs []Record, c Checked, hold Hold, err error) {
	ch := &charger{ctx: ctx, b: lim.Budget}
	defer func() {
		if err != nil {
			ch.releaseAll()
			recs = nil
		} else {
			hold = ch.hold()
		}
	}()
	src, err := openRecords(raw[HeaderLen:], h.Codec(), lim.maxBytes(), ch, keep)
	if err != nil {
		return nil, c, hold, err
	}
	defer src.close()
	if h.NumRecords < 0 || int64(h.NumRecords)*minRecordLen > src.maxLen() {
		return nil, c, hold, fmt.Errorf("%w: %d records cannot fit in %d bytes", ErrInvalidRecord, h.NumRecords, src.maxLen())
	}
	if keep {
		// Grown as records decode: the declared count sizes nothing.
		recs = make([]Record, 0, min(h.NumRecords, 1024))
		if err := ch.charge(int64(cap(recs)) * recordSize); err != nil {
			return nil, c, hold, err
		}
	}
	var r Record
	prev := int32(-1)
	c.MaxTimestamp = h.MaxTimestamp
	if !h.LogAppendTime() && h.NumRecords > 0 {
		c.MaxTimestamp = math.MinInt64
	}
	for i := int32(0); i < h.NumRecords; i++ {
		if err := src.next(&r, keep); err != nil {
			return nil, c, hold, fmt.Errorf("record %d of %d: %w", i, h.NumRecords, err)
		}
		switch {
		case strict && r.OffsetDelta != i:
			return nil, c, hold, fmt.Errorf("%w: record %d has offset delta %d", ErrInvalidRecord, i, r.OffsetDelta)
		case !strict && r.OffsetDelta <= prev:
			return nil, c, hold, fmt.Errorf("%w: record %d has offset delta %d after %d", ErrInvalidRecord, i, r.OffsetDelta, prev)
		}
		prev = r.OffsetDelta
		if h.LogAppendTime() {
			r.Timestamp = h.MaxTimestamp
		} else {
			r.Timestamp += h.FirstTimestamp
			c.MaxTimestamp = max(c.MaxTimestamp, r.Timestamp)
		}
		if r.Key == nil {
			c.Keyless++
		}
		if visit != nil && visit(&r) {
			return recs, c, hold, nil
		}
		if keep {
			if len(recs) == cap(recs) {
				old := cap(recs)
				recs = append(recs, r)
				err = ch.charge(int64(cap(recs)-old) * recordSize)
			} else {
				recs = append(recs, r)
			}
			if err == nil {
				err = ch.charge(int64(len(r.Headers)) * headerSize)
			}
			if err != nil {
				return nil, c, hold, err
			}
		}
	}
	if strict {
		if err := src.end(h.NumRecords); err != nil {
			return nil, c, hold, err
		}
	}
	return recs, c, hold, nil
}

// readRecord decodes the record at the start of data into r (Timestamp
// holds the delta) and returns its encoded length. Headers are kept only
// with keep. The layout (Kafka DefaultRecord): length varint, attributes
// int8, timestamp delta varlong, offset delta varint, key and value as
// varint length (-1 null) and bytes, header count varint, then per header
// a key (varint length, never null) and a value (varint length, -1 null).
// The record's fields must fill its length exactly.
func readRecord(data []byte, r *Record, keep bool) (int, error) {
	d := decoder{b: data}
	length := d.varint()
	if d.bad || length <= 0 || length > int64(len(d.b)) {
		return 0, fmt.Errorf("bad length")
	}
	n := len(data) - len(d.b) + int(length)
	d.b = d.b[1:length] // attributes: unused in magic 2
	ts := d.varlong()
	off := d.varint()
	key := d.bytes()
	value := d.bytes()
	count := d.varint()
	// Every header takes at least two bytes (key and value lengths).
	if d.bad || off < 0 || count < 0 || count > int64(len(d.b)/2) {
		return 0, fmt.Errorf("bad fields")
	}
	*r = Record{OffsetDelta: int32(off), Timestamp: ts, Key: key, Value: value}
	if keep && count > 0 {
		r.Headers = make([]RecordHeader, 0, min(count, 16))
	}
	for i := int64(0); i < count; i++ {
		hk := d.bytes()
		hv := d.bytes()
		if d.bad || hk == nil {
			return 0, fmt.Errorf("bad header %d", i)
		}
		if keep {
			r.Headers = append(r.Headers, RecordHeader{Key: string(hk), Value: hv})
		}
	}
	if d.bad || len(d.b) != 0 {
		return 0, fmt.Errorf("%d bytes left in the record", len(d.b))
	}
	return n, nil
}

// decoder reads Kafka's zig-zag varints and varint-prefixed bytes; bad is
// set at the first failure and every later read returns zero.
type decoder struct {
	b   []byte
	bad bool
}

// varint reads a 32-bit varint of at most 5 bytes, as Kafka's
// ByteUtils.readVarint (a longer one is "Varint is too long").
func (d *decoder) varint() int64 {
	v, ok := d.uvarint(5)
	if !ok || v > math.MaxUint32 {
		d.bad = true
		return 0
	}
	u := uint32(v)
	return int64(int32(u>>1) ^ -int32(u&1))
}

// varlong reads a 64-bit varint of at most 10 bytes (ByteUtils.readVarlong).
func (d *decoder) varlong() int64 {
	v, ok := d.uvarint(10)
	if !ok {
		d.bad = true
		return 0
	}
	return int64(v>>1) ^ -int64(v&1)
}

// uvarint reads an unsigned varint of at most maxLen bytes.
func (d *decoder) uvarint(maxLen int) (uint64, bool) {
	if d.bad {
		return 0, false
	}
	var v uint64
	for i := 0; i < maxLen && i < len(d.b); i++ {
		b := d.b[i]
		if i == 9 && b > 1 {
			return 0, false // more than 64 bits
		}
		v |= uint64(b&0x7f) << (7 * i)
		if b < 0x80 {
			d.b = d.b[i+1:]
			return v, true
		}
	}
	return 0, false
}

// bytes reads nullable bytes: nil for length -1.
func (d *decoder) bytes() []byte {
	l := d.varint()
	switch {
	case d.bad:
		return nil
	case l == -1:
		return nil
	case l < -1 || l > int64(len(d.b)):
		d.bad = true
		return nil
	}
	v := d.b[:l:l]
	d.b = d.b[l:]
	return v
}

// Encode encodes recs as one uncompressed magic 2 record batch with h's
// base offset, partition leader epoch, attributes (the codec bits
// cleared) and producer fields, its length and CRC-32C set; the first and
// max timestamps, the last offset delta and the record count come from
// recs, whose Timestamps are absolute (ms) and whose OffsetDeltas must
// increase. It is DecodeRecords' inverse. recs must not be empty.
func Encode(h Header, recs []Record) []byte {
	maxTS := recs[0].Timestamp
	for i := range recs {
		maxTS = max(maxTS, recs[i].Timestamp)
	}
	h.Attributes &^= AttrCodecMask
	h.FirstTimestamp, h.MaxTimestamp = recs[0].Timestamp, maxTS
	h.LastOffsetDelta = recs[len(recs)-1].OffsetDelta
	raw, _ := encode(h, recs, 0)
	return raw
}

// Rewrite encodes the records kept of the stored batch orig, as Kafka's log
// cleaner writes a batch it filtered (MemoryRecords.filterTo): the same
// base offset and last offset delta (so that the producer's last sequence
// number stays), partition leader epoch, producer fields, timestamp type
// and codec (the records are compressed again with it); the record count
// and, for CreateTime, the max timestamp of what is kept. With
// deleteHorizon >= 0 (ms) the batch carries it (KIP-534): its first
// timestamp field holds it, AttrDeleteHorizon is set, and the records'
// timestamp deltas are relative to it. An empty keep gives the header
// alone (DefaultRecordBatch.writeEmptyHeader: no records, first and max
// timestamps the original max, no codec), which Kafka keeps to hold a
// producer's last sequence. Errors: the compressor's.
func Rewrite(orig Header, keep []Record, deleteHorizon int64) ([]byte, error) {
	h := orig
	h.Attributes &^= AttrDeleteHorizon
	if len(keep) == 0 {
		h.Attributes &^= AttrCodecMask // as writeEmptyHeader: nothing to compress
		h.FirstTimestamp = orig.MaxTimestamp
		return encode(h, nil, 0)
	}
	if !orig.LogAppendTime() {
		h.MaxTimestamp = keep[0].Timestamp
		for i := range keep {
			h.MaxTimestamp = max(h.MaxTimestamp, keep[i].Timestamp)
		}
	}
	h.FirstTimestamp = keep[0].Timestamp
	if deleteHorizon >= 0 {
		h.FirstTimestamp = deleteHorizon
		h.Attributes |= AttrDeleteHorizon
	}
	return encode(h, keep, 0)
}

// Recompress returns the batch raw (h its parsed header) with its records
// compressed with codec at level (see compress), as Kafka's broker
// rewrites a produced batch whose codec is not its topic's
// compression.type (LogValidator): the same base offset, offset deltas,
// timestamps, producer fields and timestamp type; the new length and
// CRC. The records are decompressed within lim (charged to lim.Budget
// until the new batch is built), as ValidateLimited does. Errors: as
// ValidateLimited (ErrCorruptMessage, ErrInvalidRecord,
// ErrDecompressedTooLarge, ErrBudgetWait), the compressor's.
func Recompress(ctx context.Context, raw []byte, h Header, lim Limits, codec Codec, level int) ([]byte, error) {
	recs, _, hold, err := decodeWith(ctx, raw, &h, false, true, lim, nil)
	if err != nil {
		return nil, err
	}
	defer hold.Release()
	h.Attributes = h.Attributes&^AttrCodecMask | int16(codec)
	return encode(h, recs, level)
}

// encode writes h (but its length, CRC and record count) and recs, whose
// timestamps are encoded relative to h.FirstTimestamp, compressed with
// h's codec.
func encode(h Header, recs []Record, level int) ([]byte, error) {
	size := HeaderLen
	for i := range recs {
		size += RecordLen(&recs[i], recs[i].Timestamp-h.FirstTimestamp, int64(recs[i].OffsetDelta))
	}
	raw := make([]byte, HeaderLen, size)
	be := binary.BigEndian
	be.PutUint64(raw[offBaseOffset:], uint64(h.BaseOffset))
	be.PutUint32(raw[offLeaderEpoch:], uint32(h.PartitionLeaderEpoch))
	raw[offMagic] = 2
	be.PutUint16(raw[offAttributes:], uint16(h.Attributes))
	be.PutUint32(raw[offLastOffsetDelta:], uint32(h.LastOffsetDelta))
	be.PutUint64(raw[offFirstTimestamp:], uint64(h.FirstTimestamp))
	be.PutUint64(raw[offMaxTimestamp:], uint64(h.MaxTimestamp))
	be.PutUint64(raw[offProducerID:], uint64(h.ProducerID))
	be.PutUint16(raw[offProducerEpoch:], uint16(h.ProducerEpoch))
	be.PutUint32(raw[offBaseSequence:], uint32(h.BaseSequence))
	be.PutUint32(raw[offRecordCount:], uint32(len(recs)))
	for i := range recs {
		raw = appendRecord(raw, &recs[i], recs[i].Timestamp-h.FirstTimestamp)
	}
	if codec := h.Codec(); codec != CodecNone && len(recs) > 0 {
		data, err := compress(raw[HeaderLen:], codec, level)
		if err != nil {
			return nil, fmt.Errorf("compress %s: %w", codec, err)
		}
		raw = append(raw[:HeaderLen:HeaderLen], data...)
	}
	be.PutUint32(raw[offLength:], uint32(len(raw)-logOverhead))
	SetCRC(raw)
	return raw, nil
}

// appendRecord appends r's encoding with timestamp delta tsDelta.
func appendRecord(dst []byte, r *Record, tsDelta int64) []byte {
	dst = binary.AppendVarint(dst, int64(bodyLen(r, tsDelta, int64(r.OffsetDelta))))
	dst = append(dst, 0) // attributes
	dst = binary.AppendVarint(dst, tsDelta)
	dst = binary.AppendVarint(dst, int64(r.OffsetDelta))
	dst = appendBytes(dst, r.Key)
	dst = appendBytes(dst, r.Value)
	dst = binary.AppendVarint(dst, int64(len(r.Headers)))
	for i := range r.Headers {
		dst = binary.AppendVarint(dst, int64(len(r.Headers[i].Key)))
		dst = append(dst, r.Headers[i].Key...)
		dst = appendBytes(dst, r.Headers[i].Value)
	}
	return dst
}

func appendBytes(dst, b []byte) []byte {
	if b == nil {
		return binary.AppendVarint(dst, -1)
	}
	dst = binary.AppendVarint(dst, int64(len(b)))
	return append(dst, b...)
}

// RecordLen is the encoded length of r in a batch, its length prefix
// included, at the given timestamp and offset deltas.
func RecordLen(r *Record, tsDelta, offDelta int64) int {
	n := bodyLen(r, tsDelta, offDelta)
	return varintLen(int64(n)) + n
}

// bodyLen is the encoded length of r without its length prefix.
func bodyLen(r *Record, tsDelta, offDelta int64) int {
	n := 1 + varintLen(tsDelta) + varintLen(offDelta) + bytesLen(r.Key) + bytesLen(r.Value) + varintLen(int64(len(r.Headers)))
	for i := range r.Headers {
		h := &r.Headers[i]
		n += varintLen(int64(len(h.Key))) + len(h.Key) + bytesLen(h.Value)
	}
	return n
}

// bytesLen is the encoded length of nullable varint-prefixed bytes.
func bytesLen(b []byte) int {
	if b == nil {
		return 1 // -1
	}
	return varintLen(int64(len(b))) + len(b)
}

// varintLen is the length of v as a zig-zag varint.
func varintLen(v int64) int {
	u := uint64(v<<1) ^ uint64(v>>63)
	n := 1
	for u >= 0x80 {
		u >>= 7
		n++
	}
	return n
}
