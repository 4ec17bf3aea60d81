package backendtest

import (
	"encoding/binary"
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

// MakeBatch returns a syntactically plausible Kafka record batch (magic 2,
// 61-byte header, valid CRC-32C over bytes 21 to the end) with base offset 0
// and filler bytes in place of records, and the disbackend.Batch describing
// it. The records are not decodable; backends store batches whole and never
// look inside, which is all the suite needs.
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
	raw := make([]byte, batchHeaderLen+int(o.NumRecords)*o.RecordBytes)
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
	rng := rand.New(rand.NewPCG(o.Seed, uint64(len(raw))))
	for i := batchHeaderLen; i < len(raw); i += 8 {
		var w [8]byte
		be.PutUint64(w[:], rng.Uint64())
		copy(raw[i:], w[:])
	}
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
