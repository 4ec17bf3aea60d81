// Package batch is the Kafka record batch (magic 2) codec that every layer
// of disgw shares: the v2 header layout, the CRC-32C, the fields a broker
// rewrites (base offset, partition leader epoch, LogAppendTime), record
// decoding and encoding, and decompression bounded in size.
//
// It follows Kafka's DefaultRecordBatch and DefaultRecord
// (clients/src/main/java/org/apache/kafka/common/record) and the checks of
// the broker's LogValidator. It imports nothing of disgw's and no Kafka
// wire types (kmsg), so the gateway, the stores and their tests can all use
// it: the gateway validates and decodes a produced batch once, and hands
// the raw bytes and the decoded records down to the backend.
//
// It does not frame requests (package kafkawire does) and does not
// compress (batches read back from DIS are built uncompressed).
package batch

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
)

// HeaderLen is the length of a magic 2 batch header, in bytes: base offset
// 8, length 4, partition leader epoch 4, magic 1, CRC 4, attributes 2, last
// offset delta 4, first and max timestamps 8 each, producer id 8, producer
// epoch 2, base sequence 4, record count 4.
const HeaderLen = 61

// Offsets of the header fields in a raw batch.
const (
	offBaseOffset      = 0
	offLength          = 8
	offLeaderEpoch     = 12
	offMagic           = 16
	offCRC             = 17
	offAttributes      = 21 // the CRC covers the batch from here to its end
	offLastOffsetDelta = 23
	offFirstTimestamp  = 27
	offMaxTimestamp    = 35
	offProducerID      = 43
	offProducerEpoch   = 51
	offBaseSequence    = 53
	offRecordCount     = 57
	// logOverhead is base offset + length (12): the bytes Length does not
	// count.
	logOverhead = offLeaderEpoch
)

// Codec is a compression codec: bits 0-2 of the batch attributes.
type Codec int8

// Codecs Kafka defines.
const (
	CodecNone   Codec = 0
	CodecGzip   Codec = 1
	CodecSnappy Codec = 2
	CodecLZ4    Codec = 3
	CodecZstd   Codec = 4
)

func (c Codec) String() string {
	switch c {
	case CodecNone:
		return "none"
	case CodecGzip:
		return "gzip"
	case CodecSnappy:
		return "snappy"
	case CodecLZ4:
		return "lz4"
	case CodecZstd:
		return "zstd"
	}
	return fmt.Sprintf("codec %d", int8(c))
}

// Attribute bits of the batch header.
const (
	// AttrCodecMask selects the compression codec.
	AttrCodecMask int16 = 0x07
	// AttrLogAppendTime marks a batch whose timestamps are the broker's
	// append time (message.timestamp.type=LogAppendTime): consumers give
	// every record the batch's max timestamp.
	AttrLogAppendTime int16 = 0x08
	// AttrTransactional marks a batch of a transactional producer.
	AttrTransactional int16 = 0x10
	// AttrControl marks a control batch (transaction markers).
	AttrControl int16 = 0x20
	// AttrDeleteHorizon marks a batch whose first timestamp field holds its
	// delete horizon (KIP-534): the time, ms, after which the log cleaner
	// removes its tombstones. Its records' timestamp deltas are relative
	// to it.
	AttrDeleteHorizon int16 = 0x40
)

// NoProducerID, NoProducerEpoch and NoSequence are the producer fields of a
// batch that is not idempotent (Kafka RecordBatch.NO_PRODUCER_ID and so
// on); NoPartitionLeaderEpoch is the leader epoch of a batch a producer
// sends.
const (
	NoProducerID           int64 = -1
	NoProducerEpoch        int16 = -1
	NoSequence             int32 = -1
	NoPartitionLeaderEpoch int32 = -1
)

// Validation errors. The gateway answers them per partition with the Kafka
// error code each names.
var (
	// ErrCorruptMessage: a CRC mismatch, a length that does not add up, or
	// records that do not decode. Kafka CORRUPT_MESSAGE (2).
	ErrCorruptMessage = errors.New("corrupt record batch")
	// ErrInvalidRecord: a well-formed batch Kafka refuses (magic other than
	// 2, several batches, no records, offset deltas out of order, a control
	// or transactional batch). Kafka INVALID_RECORD (87).
	ErrInvalidRecord = errors.New("invalid record batch")
	// ErrUnsupportedCompression: a codec Kafka does not define. Kafka
	// UNSUPPORTED_COMPRESSION_TYPE (76).
	ErrUnsupportedCompression = errors.New("unsupported compression type")
	// ErrDecompressedTooLarge: the records decompress to more than the
	// topic's max.decompressed.message.bytes (Limits.MaxBytes), than
	// MaxDecompressedBytes, or than the whole decompression Budget. Found
	// while decompressing: nothing past the limit is inflated. Kafka
	// answers its max.decompressed.message.bytes with INVALID_RECORD (87),
	// and so does the gateway.
	ErrDecompressedTooLarge = fmt.Errorf("%w: decompresses past its limit", ErrInvalidRecord)
	// ErrBudgetWait: the decompression Budget had no room before the
	// request's context ended; it also wraps the context's error (the
	// gateway answers REQUEST_TIMED_OUT).
	ErrBudgetWait = errors.New("decompression budget exhausted")
)

// Header is the decoded header of a magic 2 record batch.
type Header struct {
	BaseOffset           int64
	Length               int32 // bytes after the length field
	PartitionLeaderEpoch int32
	Magic                int8
	CRC                  uint32 // CRC-32C of the bytes from the attributes to the end
	Attributes           int16
	LastOffsetDelta      int32
	FirstTimestamp       int64 // ms
	MaxTimestamp         int64 // ms
	ProducerID           int64 // NoProducerID when not idempotent
	ProducerEpoch        int16
	BaseSequence         int32 // producer sequence of the first record, NoSequence when not idempotent
	NumRecords           int32
}

// NewHeader returns the header of a batch at base offset base with no
// producer (not idempotent) and no leader epoch, for Encode.
func NewHeader(base int64) Header {
	return Header{
		BaseOffset:           base,
		PartitionLeaderEpoch: NoPartitionLeaderEpoch,
		Magic:                2,
		ProducerID:           NoProducerID,
		ProducerEpoch:        NoProducerEpoch,
		BaseSequence:         NoSequence,
	}
}

// Codec returns the header's compression codec.
func (h *Header) Codec() Codec { return Codec(h.Attributes & AttrCodecMask) }

// LogAppendTime reports whether the batch carries the broker's append time.
func (h *Header) LogAppendTime() bool { return h.Attributes&AttrLogAppendTime != 0 }

// LastOffset is the offset of the batch's last record: base offset plus
// last offset delta.
func (h *Header) LastOffset() int64 { return h.BaseOffset + int64(h.LastOffsetDelta) }

// DeleteHorizon returns the batch's delete horizon (ms) when it has one
// (AttrDeleteHorizon).
func (h *Header) DeleteHorizon() (int64, bool) {
	return h.FirstTimestamp, h.Attributes&AttrDeleteHorizon != 0
}

// Idempotent reports whether the batch has a producer id.
func (h *Header) Idempotent() bool { return h.ProducerID >= 0 }

// ParseHeader decodes the header fields of raw, which must be at least
// HeaderLen bytes with magic 2. It checks nothing else (see Parse).
// Errors: ErrInvalidRecord (magic other than 2), ErrCorruptMessage (too
// short).
func ParseHeader(raw []byte) (Header, error) {
	if len(raw) > offMagic && raw[offMagic] != 2 {
		return Header{}, fmt.Errorf("%w: magic %d; only magic 2 batches are accepted", ErrInvalidRecord, int8(raw[offMagic]))
	}
	if len(raw) < HeaderLen {
		return Header{}, fmt.Errorf("%w: %d bytes is shorter than a batch header", ErrCorruptMessage, len(raw))
	}
	be := binary.BigEndian
	return Header{
		BaseOffset:           int64(be.Uint64(raw[offBaseOffset:])),
		Length:               int32(be.Uint32(raw[offLength:])),
		PartitionLeaderEpoch: int32(be.Uint32(raw[offLeaderEpoch:])),
		Magic:                int8(raw[offMagic]),
		CRC:                  be.Uint32(raw[offCRC:]),
		Attributes:           int16(be.Uint16(raw[offAttributes:])),
		LastOffsetDelta:      int32(be.Uint32(raw[offLastOffsetDelta:])),
		FirstTimestamp:       int64(be.Uint64(raw[offFirstTimestamp:])),
		MaxTimestamp:         int64(be.Uint64(raw[offMaxTimestamp:])),
		ProducerID:           int64(be.Uint64(raw[offProducerID:])),
		ProducerEpoch:        int16(be.Uint16(raw[offProducerEpoch:])),
		BaseSequence:         int32(be.Uint32(raw[offBaseSequence:])),
		NumRecords:           int32(be.Uint32(raw[offRecordCount:])),
	}, nil
}

// Parse checks that raw holds exactly one magic 2 record batch as a
// producer sends it, with a length that matches, a valid CRC-32C, at least
// one record, last offset delta = record count - 1, a codec Kafka defines,
// and no control bit (markers are the transaction coordinator's, never a
// producer's, as Kafka refuses them from clients), and returns its header.
// The transactional bit is allowed: whether the producer may write it is
// the transaction coordinator's to check. It does not look at the records
// (see Validate). Errors: ErrCorruptMessage (truncated, length mismatch,
// bad CRC), ErrInvalidRecord (magic, several batches, record counts,
// control), ErrUnsupportedCompression.
func Parse(raw []byte) (Header, error) {
	h, err := ParseHeader(raw)
	if err != nil {
		return h, err
	}
	total := int64(h.Length) + logOverhead
	switch {
	case total < HeaderLen || total > int64(len(raw)):
		return h, fmt.Errorf("%w: batch length %d does not fit the %d bytes sent", ErrCorruptMessage, h.Length, len(raw))
	case total < int64(len(raw)):
		return h, fmt.Errorf("%w: a produce request may carry exactly one record batch per partition", ErrInvalidRecord)
	}
	if got := Checksum(raw[offAttributes:]); got != h.CRC {
		return h, fmt.Errorf("%w: CRC-32C is %08x, the batch says %08x", ErrCorruptMessage, got, h.CRC)
	}
	switch {
	case h.NumRecords <= 0:
		return h, fmt.Errorf("%w: batch has %d records", ErrInvalidRecord, h.NumRecords)
	case h.LastOffsetDelta != h.NumRecords-1:
		return h, fmt.Errorf("%w: last offset delta %d with %d records", ErrInvalidRecord, h.LastOffsetDelta, h.NumRecords)
	case h.Attributes&AttrControl != 0:
		return h, fmt.Errorf("%w: a producer may not send a control batch", ErrInvalidRecord)
	case h.Attributes&AttrTransactional != 0 && h.ProducerID < 0:
		return h, fmt.Errorf("%w: a transactional batch without a producer id", ErrInvalidRecord)
	case h.Codec() > CodecZstd:
		return h, fmt.Errorf("%w: codec %d", ErrUnsupportedCompression, h.Codec())
	}
	return h, nil
}

// CRCTable is the CRC-32C (Castagnoli) table: the checksum of Kafka
// batches, and of disgw's own frames and envelopes.
var CRCTable = crc32.MakeTable(crc32.Castagnoli)

// Checksum is the CRC-32C of b.
func Checksum(b []byte) uint32 { return crc32.Checksum(b, CRCTable) }

// CheckCRC reports whether raw is at least a header long and its CRC field
// matches the CRC-32C of its bytes from the attributes to the end, as a
// Kafka consumer checks it.
func CheckCRC(raw []byte) bool {
	return len(raw) >= HeaderLen && binary.BigEndian.Uint32(raw[offCRC:]) == Checksum(raw[offAttributes:])
}

// SetCRC recomputes raw's CRC field after a change to the bytes it covers.
func SetCRC(raw []byte) { binary.BigEndian.PutUint32(raw[offCRC:], Checksum(raw[offAttributes:])) }

// BaseOffset returns the base offset field of a raw batch (bytes 0-7).
func BaseOffset(raw []byte) int64 { return int64(binary.BigEndian.Uint64(raw[offBaseOffset:])) }

// SetBaseOffset rewrites the base offset field of a raw batch, as a broker
// assigns offsets. The CRC does not cover it.
func SetBaseOffset(raw []byte, off int64) {
	binary.BigEndian.PutUint64(raw[offBaseOffset:], uint64(off))
}

// LastOffset returns base offset + last offset delta of a raw batch.
func LastOffset(raw []byte) int64 {
	return BaseOffset(raw) + int64(int32(binary.BigEndian.Uint32(raw[offLastOffsetDelta:])))
}

// SetPartitionLeaderEpoch writes the partition leader epoch field of a raw
// batch, as a broker stamps it. The CRC does not cover it.
func SetPartitionLeaderEpoch(raw []byte, epoch int32) {
	binary.BigEndian.PutUint32(raw[offLeaderEpoch:], uint32(epoch))
}

// SetMaxTimestamp writes the max timestamp field of a raw batch (ms) and
// recomputes its CRC, as Kafka's broker does with the largest record
// timestamp it found while validating a CreateTime batch.
func SetMaxTimestamp(raw []byte, ts int64) {
	binary.BigEndian.PutUint64(raw[offMaxTimestamp:], uint64(ts))
	SetCRC(raw)
}

// SetLogAppendTime marks a raw batch as LogAppendTime with max timestamp
// ts (ms) and recomputes its CRC, as Kafka's broker does for a topic with
// message.timestamp.type=LogAppendTime.
func SetLogAppendTime(raw []byte, ts int64) {
	be := binary.BigEndian
	be.PutUint16(raw[offAttributes:], be.Uint16(raw[offAttributes:])|uint16(AttrLogAppendTime))
	be.PutUint64(raw[offMaxTimestamp:], uint64(ts))
	SetCRC(raw)
}

// CodecOf returns the compression codec of a raw batch; raw must be at
// least HeaderLen bytes.
func CodecOf(raw []byte) Codec {
	return Codec(int16(binary.BigEndian.Uint16(raw[offAttributes:])) & AttrCodecMask)
}
