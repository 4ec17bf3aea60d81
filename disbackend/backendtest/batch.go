package backendtest

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/rand/v2"

	"github.com/disgw/disgw/disbackend"
	"github.com/disgw/disgw/kafkawire/batch"
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

// MakeBatch returns a Kafka record batch (magic 2, uncompressed, valid
// CRC-32C) with base offset 0 and NumRecords real records: no key, a value
// of RecordBytes filler bytes, no headers; the first record has
// FirstTimestamp, the last (when there are two or more) MaxTimestamp, any
// others FirstTimestamp (the batch's max timestamp is the largest of
// them). It returns the disbackend.Batch describing it, as
// the gateway hands it to a store: Raw, its Header, and its decoded
// Records (which stores that keep batches whole ignore).
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
	h := batch.NewHeader(0)
	h.PartitionLeaderEpoch = 0
	if o.Idempotent {
		h.ProducerID, h.ProducerEpoch, h.BaseSequence = o.ProducerID, o.ProducerEpoch, o.BaseSequence
	}
	rng := rand.New(rand.NewPCG(o.Seed, uint64(o.NumRecords)<<32|uint64(o.RecordBytes)))
	recs := make([]disbackend.Record, o.NumRecords)
	values := make([]byte, int(o.NumRecords)*o.RecordBytes)
	for i := range recs {
		value := values[i*o.RecordBytes : (i+1)*o.RecordBytes : (i+1)*o.RecordBytes]
		for j := 0; j < len(value); j += 8 {
			var w [8]byte
			binary.BigEndian.PutUint64(w[:], rng.Uint64())
			copy(value[j:], w[:])
		}
		recs[i] = disbackend.Record{OffsetDelta: int32(i), Timestamp: o.FirstTimestamp, Value: value}
		if i > 0 && i == len(recs)-1 {
			recs[i].Timestamp = o.MaxTimestamp
		}
	}
	return FromRaw(batch.Encode(h, recs))
}

// FromRaw is the batch raw as the gateway hands it to a store: validated
// as a produced batch, with its header and its decoded records. It panics
// when raw is not a valid produced batch.
func FromRaw(raw []byte) disbackend.Batch {
	h, err := batch.Parse(raw)
	if err != nil {
		panic(err)
	}
	recs, _, err := batch.ValidateAndDecode(raw, h)
	if err != nil {
		panic(err)
	}
	return disbackend.Batch{Raw: raw, Header: h, Records: recs}
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
type Header = disbackend.RecordHeader

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

// DecodeRecords decodes the records of a stored batch, offsets absolute.
func DecodeRecords(raw []byte) ([]Record, error) {
	recs, err := batch.DecodeRecords(raw)
	if err != nil {
		return nil, err
	}
	base := batch.BaseOffset(raw)
	out := make([]Record, len(recs))
	for i, r := range recs {
		out[i] = Record{Offset: r.Offset(base), Timestamp: r.Timestamp, Key: r.Key, Value: r.Value, Headers: r.Headers}
	}
	return out, nil
}

// CheckCRC reports whether raw's CRC-32C matches, as a Kafka consumer
// checks it.
func CheckCRC(raw []byte) bool { return batch.CheckCRC(raw) }

// lastOffset returns base offset + last offset delta of a raw batch.
func lastOffset(raw []byte) int64 { return batch.LastOffset(raw) }
