package kafkawire

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Record batch (magic 2) layout, from Kafka's DefaultRecordBatch.
const (
	// BatchHeaderLen is the length of a magic 2 batch header: 61 bytes.
	BatchHeaderLen = 61
	// offsets of header fields
	offLength          = 8
	offLeaderEpoch     = 12
	offMagic           = 16
	offCRC             = 17
	offAttributes      = 21
	offLastOffsetDelta = 23
	offFirstTimestamp  = 27
	offMaxTimestamp    = 35
	offRecordCount     = 57
	// batchLogOverhead is base offset + length: the bytes not counted in Length.
	batchLogOverhead = 12
)

// Compression codecs, bits 0-2 of the batch attributes.
const (
	CodecNone   = 0
	CodecGzip   = 1
	CodecSnappy = 2
	CodecLZ4    = 3
	CodecZstd   = 4
)

const attrTimestampType = 0x08 // bit 3: LogAppendTime

// Batch validation errors; the gateway answers them per partition.
var (
	// ErrCorruptMessage: CRC mismatch or a length that does not add up.
	// Kafka CORRUPT_MESSAGE (2).
	ErrCorruptMessage = errors.New("corrupt record batch")
	// ErrInvalidRecord: a well-formed batch Kafka refuses (wrong magic, more
	// than one batch, zero records, control or transactional batch).
	// Kafka INVALID_RECORD (87).
	ErrInvalidRecord = errors.New("invalid record batch")
	// ErrUnsupportedCompression: an unknown codec. Kafka
	// UNSUPPORTED_COMPRESSION_TYPE (76).
	ErrUnsupportedCompression = errors.New("unsupported compression type")
)

var crc32c = crc32.MakeTable(crc32.Castagnoli)

// Codec returns the compression codec of a raw batch (bits 0-2 of its
// attributes). raw must be at least BatchHeaderLen bytes.
func Codec(raw []byte) int8 { return int8(raw[offAttributes+1] & 0x07) }

// ParseBatch checks that records holds exactly one magic 2 record batch with
// a valid length and CRC-32C, at least one record, and a known codec, and
// returns its decoded header (Records aliases records). It does not
// decompress.
//
// Errors: ErrCorruptMessage (truncated, length mismatch, bad CRC),
// ErrInvalidRecord (magic other than 2, several batches, no records,
// control or transactional batch), ErrUnsupportedCompression.
func ParseBatch(records []byte) (kmsg.RecordBatch, error) {
	var b kmsg.RecordBatch
	if len(records) < BatchHeaderLen {
		if len(records) > offMagic && records[offMagic] != 2 {
			return b, fmt.Errorf("%w: magic %d; only magic 2 batches are accepted", ErrInvalidRecord, int8(records[offMagic]))
		}
		return b, fmt.Errorf("%w: %d bytes is shorter than a batch header", ErrCorruptMessage, len(records))
	}
	if magic := int8(records[offMagic]); magic != 2 {
		return b, fmt.Errorf("%w: magic %d; only magic 2 batches are accepted", ErrInvalidRecord, magic)
	}
	length := int64(int32(binary.BigEndian.Uint32(records[offLength:])))
	total := length + batchLogOverhead
	switch {
	case total < BatchHeaderLen || total > int64(len(records)):
		return b, fmt.Errorf("%w: batch length %d does not fit the %d bytes sent", ErrCorruptMessage, length, len(records))
	case total < int64(len(records)):
		return b, fmt.Errorf("%w: a produce request may carry exactly one record batch per partition", ErrInvalidRecord)
	}
	if want, got := binary.BigEndian.Uint32(records[offCRC:]), crc32.Checksum(records[offAttributes:], crc32c); want != got {
		return b, fmt.Errorf("%w: CRC-32C is %08x, the batch says %08x", ErrCorruptMessage, got, want)
	}
	if err := b.ReadFrom(records); err != nil {
		return b, fmt.Errorf("%w: %v", ErrCorruptMessage, err)
	}
	switch {
	case b.NumRecords <= 0:
		return b, fmt.Errorf("%w: batch has %d records", ErrInvalidRecord, b.NumRecords)
	case b.LastOffsetDelta != b.NumRecords-1:
		return b, fmt.Errorf("%w: last offset delta %d with %d records", ErrInvalidRecord, b.LastOffsetDelta, b.NumRecords)
	case b.Attributes&0x30 != 0:
		return b, fmt.Errorf("%w: transactional and control batches are not supported", ErrInvalidRecord)
	case b.Attributes&0x07 > CodecZstd:
		return b, fmt.Errorf("%w: codec %d", ErrUnsupportedCompression, b.Attributes&0x07)
	}
	return b, nil
}

// SetBatchLeaderEpoch writes the partition leader epoch field of a raw batch
// (not covered by the CRC).
func SetBatchLeaderEpoch(raw []byte, epoch int32) {
	binary.BigEndian.PutUint32(raw[offLeaderEpoch:], uint32(epoch))
}

var decompressor = kgo.DefaultDecompressor()

// ValidateRecords checks the records inside a batch that ParseBatch
// accepted, as Kafka's broker does (LogValidator) before it appends: it
// decompresses the batch (gzip, snappy, lz4, zstd; at most
// MaxDecompressedBatchBytes) and decodes every record, which must be exactly
// NumRecords records filling the data, with offset deltas 0, 1, 2, ... A
// batch that passes its CRC but holds garbage (a wrong codec bit, broken
// record framing) would otherwise be stored and stall every consumer at it.
// Errors: ErrCorruptMessage (Kafka CORRUPT_MESSAGE), ErrInvalidRecord for
// offset deltas out of sequence (Kafka INVALID_RECORD).
func ValidateRecords(b *kmsg.RecordBatch) error {
	data, err := decompress(b.Records, int8(b.Attributes&0x07))
	if err != nil {
		return fmt.Errorf("%w: decompress: %v", ErrCorruptMessage, err)
	}
	var r kmsg.Record
	for i := int32(0); i < b.NumRecords; i++ {
		length, n := binary.Varint(data)
		if n <= 0 || length <= 0 || int64(n)+length > int64(len(data)) {
			return fmt.Errorf("%w: record %d of %d: bad length", ErrCorruptMessage, i, b.NumRecords)
		}
		rec := data[:int64(n)+length]
		if err := r.UnsafeReadFrom(rec); err != nil {
			return fmt.Errorf("%w: record %d of %d: %v", ErrCorruptMessage, i, b.NumRecords, err)
		}
		if r.OffsetDelta != i {
			return fmt.Errorf("%w: record %d has offset delta %d", ErrInvalidRecord, i, r.OffsetDelta)
		}
		data = data[len(rec):]
	}
	if len(data) != 0 {
		return fmt.Errorf("%w: %d bytes after the last of %d records", ErrCorruptMessage, len(data), b.NumRecords)
	}
	return nil
}

// DecodeRecords decompresses a raw batch (gzip, snappy, lz4 or zstd, at most
// MaxDecompressedBatchBytes) and decodes its records, with offsets and timestamps
// made absolute (LogAppendTime batches give every record the batch's max
// timestamp, as Kafka consumers read them). Errors: ErrCorruptMessage.
func DecodeRecords(raw []byte) ([]kmsg.Record, error) {
	var b kmsg.RecordBatch
	if err := b.ReadFrom(raw); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrCorruptMessage, err)
	}
	data, err := decompress(b.Records, int8(b.Attributes&0x07))
	if err != nil {
		return nil, fmt.Errorf("%w: decompress: %v", ErrCorruptMessage, err)
	}
	if b.NumRecords < 0 || int64(b.NumRecords) > int64(len(data)) {
		return nil, fmt.Errorf("%w: %d records in %d bytes", ErrCorruptMessage, b.NumRecords, len(data))
	}
	logAppend := b.Attributes&attrTimestampType != 0
	recs := make([]kmsg.Record, b.NumRecords)
	for i := range recs {
		r := &recs[i]
		length, n := binary.Varint(data)
		if n <= 0 || length < 0 || int64(n)+length > int64(len(data)) {
			return nil, fmt.Errorf("%w: record %d length", ErrCorruptMessage, i)
		}
		if err := r.ReadFrom(data[:int64(n)+length]); err != nil {
			return nil, fmt.Errorf("%w: record %d: %v", ErrCorruptMessage, i, err)
		}
		data = data[int64(n)+length:]
		r.TimestampDelta64 += b.FirstTimestamp
		if logAppend {
			r.TimestampDelta64 = b.MaxTimestamp
		}
	}
	return recs, nil
}

// AbsoluteOffset returns the offset of record r of a batch whose base offset
// is base.
func AbsoluteOffset(base int64, r *kmsg.Record) int64 { return base + int64(r.OffsetDelta) }

// EncodeBatch encodes records as one uncompressed magic 2 record batch
// with base offset base and the given attributes (for example the
// LogAppendTime bit), not idempotent, with its length and CRC-32C set. It
// is DecodeRecords' inverse: each record's TimestampDelta64 holds its
// absolute timestamp (ms) and OffsetDelta its offset minus base, in
// increasing order. recs must not be empty; their Length fields are
// ignored.
func EncodeBatch(base int64, attrs int16, recs []kmsg.Record) []byte {
	first, maxTS := recs[0].TimestampDelta64, recs[0].TimestampDelta64
	var body []byte
	for i := range recs {
		r := recs[i]
		maxTS = max(maxTS, r.TimestampDelta64)
		r.TimestampDelta64 -= first
		r.TimestampDelta = 0
		r.Length = 0
		enc := r.AppendTo(nil) // Length 0 encodes as one byte, replaced here
		body = binary.AppendVarint(body, int64(len(enc)-1))
		body = append(body, enc[1:]...)
	}
	b := kmsg.RecordBatch{
		FirstOffset:     base,
		Magic:           2,
		Attributes:      attrs &^ 0x07,
		LastOffsetDelta: recs[len(recs)-1].OffsetDelta,
		FirstTimestamp:  first,
		MaxTimestamp:    maxTS,
		ProducerID:      -1,
		ProducerEpoch:   -1,
		FirstSequence:   -1,
		NumRecords:      int32(len(recs)),
		Records:         body,
	}
	raw := b.AppendTo(nil)
	binary.BigEndian.PutUint32(raw[offLength:], uint32(len(raw)-batchLogOverhead))
	binary.BigEndian.PutUint32(raw[offCRC:], crc32.Checksum(raw[offAttributes:], crc32c))
	return raw
}
