package backendtest

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math/rand/v2"

	"github.com/disgw/disgw/disbackend"
)

// BatchOptions describe a test batch for MakeBatch. The zero value (plus
// NumRecords) is a non-idempotent batch of 16-byte filler records.
type BatchOptions struct {
	NumRecords     int32 // records, > 0; default 1
	RecordBytes    int   // filler bytes per record; default 16
	FirstTimestamp int64 // ms
	MaxTimestamp   int64 // ms; default FirstTimestamp
	// Idempotent producer fields; ProducerID 0 with Idempotent false means
	// "none" (-1 in the batch).
	Idempotent    bool
	ProducerID    int64
	ProducerEpoch int16
	BaseSequence  int32
	// Seed varies the filler bytes; batches with different seeds differ.
	Seed uint64
}

const batchHeaderLen = 61

var crc32c = crc32.MakeTable(crc32.Castagnoli)

// MakeBatch returns a Kafka record batch (magic 2, 61-byte header, valid
// CRC-32C over bytes 21 to the end, uncompressed) with base offset 0 and
// NumRecords real records: no key, a value of RecordBytes filler bytes, no
// headers; the first record has FirstTimestamp, the last (when there are
// two or more) MaxTimestamp, any others FirstTimestamp. It also returns the
// disbackend.Batch describing it. Stores that keep batches whole never look
// inside; record-level stores (DIS) decode the records.
func MakeBatch(o BatchOptions) disbackend.Batch {
	if o.NumRecords <= 0 {
		o.NumRecords = 1
	}
	if o.RecordBytes <= 0 {
		o.RecordBytes = 16
	}
	if o.MaxTimestamp == 0 {
		o.MaxTimestamp = o.FirstTimestamp
	}
	pid, epoch, seq := int64(-1), int16(-1), int32(-1)
	if o.Idempotent {
		pid, epoch, seq = o.ProducerID, o.ProducerEpoch, o.BaseSequence
	}
	rng := rand.New(rand.NewPCG(o.Seed, uint64(o.NumRecords)<<32|uint64(o.RecordBytes)))
	raw := make([]byte, batchHeaderLen, batchHeaderLen+int(o.NumRecords)*(o.RecordBytes+16))
	value := make([]byte, o.RecordBytes)
	for i := int32(0); i < o.NumRecords; i++ {
		for j := 0; j < len(value); j += 8 {
			var w [8]byte
			binary.BigEndian.PutUint64(w[:], rng.Uint64())
			copy(value[j:], w[:])
		}
		var tsDelta int64
		if i > 0 && i == o.NumRecords-1 {
			tsDelta = o.MaxTimestamp - o.FirstTimestamp
		}
		var rec []byte
		rec = append(rec, 0) // attributes
		rec = binary.AppendVarint(rec, tsDelta)
		rec = binary.AppendVarint(rec, int64(i)) // offset delta
		rec = binary.AppendVarint(rec, -1)       // null key
		rec = binary.AppendVarint(rec, int64(len(value)))
		rec = append(rec, value...)
		rec = binary.AppendVarint(rec, 0) // no headers
		raw = binary.AppendVarint(raw, int64(len(rec)))
		raw = append(raw, rec...)
	}
	be := binary.BigEndian
	be.PutUint64(raw[0:], 0)                         // base offset
	be.PutUint32(raw[8:], uint32(len(raw)-12))       // batch length
	be.PutUint32(raw[12:], 0)                        // partition leader epoch
	raw[16] = 2                                      // magic
	be.PutUint16(raw[21:], 0)                        // attributes: no compression, CreateTime
	be.PutUint32(raw[23:], uint32(o.NumRecords-1))   // last offset delta
	be.PutUint64(raw[27:], uint64(o.FirstTimestamp)) // first timestamp
	be.PutUint64(raw[35:], uint64(o.MaxTimestamp))   // max timestamp
	be.PutUint64(raw[43:], uint64(pid))              // producer id
	be.PutUint16(raw[51:], uint16(epoch))            // producer epoch
	be.PutUint32(raw[53:], uint32(seq))              // base sequence
	be.PutUint32(raw[57:], uint32(o.NumRecords))     // record count
	be.PutUint32(raw[17:], crc32.Checksum(raw[21:], crc32c))
	return disbackend.Batch{
		Raw:            raw,
		NumRecords:     o.NumRecords,
		FirstTimestamp: o.FirstTimestamp,
		MaxTimestamp:   o.MaxTimestamp,
		ProducerID:     pid,
		ProducerEpoch:  epoch,
		BaseSequence:   seq,
		Attributes:     0,
	}
}

// Record is one decoded record, offsets and timestamps absolute.
type Record struct {
	Offset    int64
	Timestamp int64 // ms; a LogAppendTime batch's max timestamp
	Key       []byte
	Value     []byte
	Headers   []Header
}

// Header is a record header; a nil Value is a null one.
type Header struct {
	Key   string
	Value []byte
}

// Equal compares records, null and empty apart.
func (r Record) Equal(o Record) bool {
	eq := func(a, b []byte) bool { return (a == nil) == (b == nil) && bytes.Equal(a, b) }
	if r.Offset != o.Offset || r.Timestamp != o.Timestamp || !eq(r.Key, o.Key) || !eq(r.Value, o.Value) || len(r.Headers) != len(o.Headers) {
		return false
	}
	for i := range r.Headers {
		if r.Headers[i].Key != o.Headers[i].Key || !eq(r.Headers[i].Value, o.Headers[i].Value) {
			return false
		}
	}
	return true
}

func (r Record) String() string {
	return fmt.Sprintf("{offset %d, timestamp %d, key %d bytes, value %d bytes, %d headers}",
		r.Offset, r.Timestamp, len(r.Key), len(r.Value), len(r.Headers))
}

// DecodeRecords decodes the records of an uncompressed magic 2 batch.
func DecodeRecords(raw []byte) ([]Record, error) {
	if len(raw) < batchHeaderLen || raw[16] != 2 {
		return nil, errors.New("not a magic 2 record batch")
	}
	be := binary.BigEndian
	attrs := be.Uint16(raw[21:])
	if attrs&0x07 != 0 {
		return nil, fmt.Errorf("compressed batch (codec %d)", attrs&0x07)
	}
	base := int64(be.Uint64(raw[0:]))
	firstTS, maxTS := int64(be.Uint64(raw[27:])), int64(be.Uint64(raw[35:]))
	n := int(int32(be.Uint32(raw[57:])))
	b := raw[batchHeaderLen:]
	bad := func(what string, i int) ([]Record, error) {
		return nil, fmt.Errorf("record %d: bad %s", i, what)
	}
	varint := func() (int64, bool) {
		v, w := binary.Varint(b)
		if w <= 0 {
			return 0, false
		}
		b = b[w:]
		return v, true
	}
	bytesOf := func() ([]byte, bool) {
		l, ok := varint()
		if !ok || l < -1 || l > int64(len(b)) {
			return nil, false
		}
		if l == -1 {
			return nil, true
		}
		v := b[:l:l]
		b = b[l:]
		return v, true
	}
	out := make([]Record, 0, n)
	for i := 0; i < n; i++ {
		if _, ok := varint(); !ok { // length
			return bad("length", i)
		}
		if len(b) < 1 {
			return bad("attributes", i)
		}
		b = b[1:]
		tsDelta, ok1 := varint()
		offDelta, ok2 := varint()
		if !ok1 || !ok2 {
			return bad("deltas", i)
		}
		r := Record{Offset: base + offDelta, Timestamp: firstTS + tsDelta}
		if attrs&0x08 != 0 {
			r.Timestamp = maxTS
		}
		var ok bool
		if r.Key, ok = bytesOf(); !ok {
			return bad("key", i)
		}
		if r.Value, ok = bytesOf(); !ok {
			return bad("value", i)
		}
		nh, ok := varint()
		if !ok || nh < 0 || nh > int64(len(b)) {
			return bad("header count", i)
		}
		for j := int64(0); j < nh; j++ {
			k, ok1 := bytesOf()
			v, ok2 := bytesOf()
			if !ok1 || !ok2 {
				return bad("header", i)
			}
			r.Headers = append(r.Headers, Header{Key: string(k), Value: v})
		}
		out = append(out, r)
	}
	if len(b) != 0 {
		return nil, fmt.Errorf("%d bytes after %d records", len(b), n)
	}
	return out, nil
}

// CheckCRC reports whether raw's CRC-32C (bytes 17-20) matches bytes 21 to
// the end, as a Kafka consumer checks it.
func CheckCRC(raw []byte) bool {
	return len(raw) >= batchHeaderLen &&
		binary.BigEndian.Uint32(raw[17:]) == crc32.Checksum(raw[21:], crc32c)
}

// lastOffset returns base offset + last offset delta of a raw batch.
func lastOffset(raw []byte) int64 {
	return disbackend.BaseOffset(raw) + int64(int32(binary.BigEndian.Uint32(raw[23:])))
}
