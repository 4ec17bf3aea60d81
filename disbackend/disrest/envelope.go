package disrest

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"unicode/utf8"

	"github.com/disgw/disgw/disbackend"
	"github.com/disgw/disgw/kafkawire/batch"
)

// The envelope (docs/dis-backend.md) carries what a plain DIS record cannot:
// headers, binary, empty or long keys, null and empty values, and values that
// start with the magic. Layout, all integers big-endian or Kafka varints:
//
//	magic     8 bytes  0xFF "disgw" 0xFE 0x00 (0xFF is never valid UTF-8)
//	version   1 byte   1
//	crc       4 bytes  CRC-32C (Castagnoli) of everything after it
//	timestamp 8 bytes  the Kafka record's timestamp, ms
//	key       varint length (-1 = null) and bytes
//	value     varint length (-1 = null) and bytes
//	headers   uvarint count, then per header: varint key length and key,
//	          varint value length (-1 = null) and value
//
// Version 2 carries a transactional producer's record or a transaction
// marker (docs/transactions.md, "On DIS"): after the timestamp come
//
//	flags     1 byte   bit 0 transactional, bit 1 control (a COMMIT or
//	          ABORT marker: key ControlRecordKey, value EndTxnMarker)
//	producer  8 bytes  producer id
//	epoch     2 bytes  producer epoch
//
// so that a read rebuilds the batch boundaries a read_committed consumer
// needs (the producer id of a transaction's records, its markers).
// Such records are always envelopes, whatever the record format.
//
// Version 3 is a compactor's copy (docs/compaction.md): after the
// timestamp comes
//
//	source    8 bytes  the sequence number of the record it copies
//
// A Kafka read leaves a copy out while the record it copies is still in
// the partition (at or past its log start offset), so that a consumer
// reads each value once; formats auto and envelope write every copy so,
// format native only a record that needs an envelope anyway.
//
// A record whose first bytes are the magic but whose CRC, version or layout
// do not check out reads as plain data: a plain value can be mistaken for
// an envelope only if it also carries a matching CRC-32C over a valid
// layout. In auto format, values starting with the magic are always
// wrapped, so anything disgw wrote reads back exactly.
var envelopeMagic = []byte{0xFF, 'd', 'i', 's', 'g', 'w', 0xFE, 0x00}

const (
	envelopeVersion     = 1
	envelopeVersionTxn  = 2
	envelopeVersionCopy = 3
	envelopeHeader      = 8 + 1 + 4
	// txnMetaBytes is what version 2 adds: flags, producer id, epoch.
	txnMetaBytes = 1 + 8 + 2
	// maxPlainKeyBytes is the longest key stored as a plain partition_key.
	maxPlainKeyBytes = 256
)

// MaxMessageBytes is the largest max.message.bytes a topic on DIS may
// have: 1,048,622 bytes, the largest Kafka record batch whose every record
// fits DIS's per-record limit (maxRecordBytes, 1 MiB of data) even as an
// envelope. The worst case is a batch of one record: its key, value and
// headers take the same bytes in the batch as in the envelope (the same
// varint lengths; the envelope's uvarint header count is never longer),
// and besides them the batch has its 61-byte header and the record's
// length varint (3 bytes at this size), attributes (1 byte), timestamp
// delta and offset delta (1 byte each at the least), where the envelope
// has its magic, version and CRC (envelopeHeader, 13 bytes) and an 8-byte
// timestamp. So a batch of B bytes holds no record whose envelope is over
// B-46 bytes, and a plain record (the value alone) is smaller still.
// CreateStream, UpdateStreamConfig and ValidateStreamConfig refuse a
// larger max.message.bytes with ErrInvalidConfig (Kafka INVALID_CONFIG).
const MaxMessageBytes = maxRecordBytes + batchOverhead1 - envelopeHeader - 8

// batchOverhead1 is what a one-record batch of about 1 MiB has besides
// the record's key, value and headers: the batch header (61), the record
// length varint (3), attributes (1), timestamp and offset deltas (1 each).
const batchOverhead1 = 61 + 3 + 1 + 1 + 1

// errNeedsEnvelope is why a record cannot be plain (format native refuses it).
var errNeedsEnvelope = fmt.Errorf("%w: record needs an envelope", disbackend.ErrInvalidRecord)

// nativeRefusal begins the record error (KIP-467) of a record that record
// format native refuses; the reason (plainReason) follows.
const nativeRefusal = "dis.record.format native cannot store the record without an envelope: "

// plainReason returns "" when the record can be a plain DIS record (value
// as data, key as partition_key), else why not.
func plainReason(r *disbackend.Record) string {
	switch {
	case len(r.Headers) > 0:
		return "it has headers"
	case r.Value == nil:
		return "its value is null (a tombstone)"
	case len(r.Value) == 0:
		return "its value is empty"
	case bytes.HasPrefix(r.Value, envelopeMagic):
		return "its value starts with the envelope magic"
	case r.Key != nil && len(r.Key) == 0:
		return "its key is empty (not null)"
	case len(r.Key) > maxPlainKeyBytes:
		return fmt.Sprintf("its key is longer than %d bytes", maxPlainKeyBytes)
	case r.Key != nil && !utf8.Valid(r.Key):
		return "its key is not UTF-8"
	}
	return ""
}

func appendBytes(b, v []byte) []byte {
	if v == nil {
		return binary.AppendVarint(b, -1)
	}
	b = binary.AppendVarint(b, int64(len(v)))
	return append(b, v...)
}

// txnMeta is what an envelope of version 2 carries of a record's batch:
// its producer and whether it is transactional or a control record. The
// zero value (flags 0) is a record of no transaction, producer id -1.
type txnMeta struct {
	flags uint8 // txnFlagTransactional, txnFlagControl
	pid   int64
	epoch int16
}

const (
	txnFlagTransactional = 1 << 0
	txnFlagControl       = 1 << 1
)

// batchTxnMeta is the txnMeta of the records of a batch with header h: the
// zero value unless it is transactional.
func batchTxnMeta(h *batch.Header) txnMeta {
	if h.Attributes&batch.AttrTransactional == 0 {
		return txnMeta{pid: -1, epoch: -1}
	}
	m := txnMeta{flags: txnFlagTransactional, pid: h.ProducerID, epoch: h.ProducerEpoch}
	if h.Attributes&batch.AttrControl != 0 {
		m.flags |= txnFlagControl
	}
	return m
}

// transactional reports whether m is a transaction's record or marker.
func (m txnMeta) transactional() bool { return m.flags&txnFlagTransactional != 0 }

// encodeEnvelope wraps a record with its timestamp, and with m when it is
// transactional (version 2), or with the sequence number it copies when
// copyOf >= 0 (version 3; a copy is never transactional).
func encodeEnvelope(r *disbackend.Record, m txnMeta, copyOf int64) []byte {
	n := envelopeHeader + 8 + txnMetaBytes + 2*binary.MaxVarintLen32 + len(r.Key) + len(r.Value) + 1
	for _, h := range r.Headers {
		n += 2*binary.MaxVarintLen32 + len(h.Key) + len(h.Value)
	}
	b := make([]byte, envelopeHeader, n)
	copy(b, envelopeMagic)
	b[8] = envelopeVersion
	b = binary.BigEndian.AppendUint64(b, uint64(r.Timestamp))
	if m.transactional() {
		b[8] = envelopeVersionTxn
		b = append(b, m.flags)
		b = binary.BigEndian.AppendUint64(b, uint64(m.pid))
		b = binary.BigEndian.AppendUint16(b, uint16(m.epoch))
	} else if copyOf >= 0 {
		b[8] = envelopeVersionCopy
		b = binary.BigEndian.AppendUint64(b, uint64(copyOf))
	}
	b = appendBytes(b, r.Key)
	b = appendBytes(b, r.Value)
	b = binary.AppendUvarint(b, uint64(len(r.Headers)))
	for _, h := range r.Headers {
		b = appendBytes(b, []byte(h.Key))
		b = appendBytes(b, h.Value)
	}
	binary.BigEndian.PutUint32(b[9:], batch.Checksum(b[envelopeHeader:]))
	return b
}

func readBytes(b []byte) (v, rest []byte, ok bool) {
	n, w := binary.Varint(b)
	if w <= 0 {
		return nil, nil, false
	}
	b = b[w:]
	if n == -1 {
		return nil, b, true
	}
	if n < 0 || n > int64(len(b)) {
		return nil, nil, false
	}
	return b[:n:n], b[n:], true
}

// decodeEnvelope unwraps data into r (key, value, headers) and returns its
// timestamp, its txnMeta (pid -1 and flags 0 but for version 2), the
// sequence number it copies (version 3; else -1) and true, or returns
// false when data is not a valid envelope (then it is plain data).
func decodeEnvelope(data []byte, r *disbackend.Record) (ts int64, m txnMeta, copyOf int64, ok bool) {
	bad := txnMeta{pid: -1, epoch: -1}
	m, copyOf = bad, -1
	if len(data) < envelopeHeader+8 || !bytes.Equal(data[:8], envelopeMagic) ||
		(data[8] != envelopeVersion && data[8] != envelopeVersionTxn && data[8] != envelopeVersionCopy) {
		return 0, bad, -1, false
	}
	if binary.BigEndian.Uint32(data[9:]) != batch.Checksum(data[envelopeHeader:]) {
		return 0, bad, -1, false
	}
	b := data[envelopeHeader:]
	ts = int64(binary.BigEndian.Uint64(b))
	b = b[8:]
	switch data[8] {
	case envelopeVersionTxn:
		if len(b) < txnMetaBytes || b[0]&txnFlagTransactional == 0 || b[0]&^(txnFlagTransactional|txnFlagControl) != 0 {
			return 0, bad, -1, false
		}
		m = txnMeta{flags: b[0], pid: int64(binary.BigEndian.Uint64(b[1:])), epoch: int16(binary.BigEndian.Uint16(b[9:]))}
		b = b[txnMetaBytes:]
	case envelopeVersionCopy:
		if len(b) < 8 || int64(binary.BigEndian.Uint64(b)) < 0 {
			return 0, bad, -1, false
		}
		copyOf = int64(binary.BigEndian.Uint64(b))
		b = b[8:]
	}
	var out disbackend.Record
	if out.Key, b, ok = readBytes(b); !ok {
		return 0, bad, -1, false
	}
	if out.Value, b, ok = readBytes(b); !ok {
		return 0, bad, -1, false
	}
	cnt, w := binary.Uvarint(b)
	if w <= 0 || cnt > uint64(len(b)) {
		return 0, bad, -1, false
	}
	b = b[w:]
	if cnt > 0 {
		out.Headers = make([]disbackend.RecordHeader, cnt)
	}
	for i := range out.Headers {
		var k []byte
		if k, b, ok = readBytes(b); !ok || k == nil {
			return 0, bad, -1, false
		}
		out.Headers[i].Key = string(k)
		if out.Headers[i].Value, b, ok = readBytes(b); !ok {
			return 0, bad, -1, false
		}
	}
	if len(b) != 0 {
		return 0, bad, -1, false
	}
	r.Key, r.Value, r.Headers = out.Key, out.Value, out.Headers
	return ts, m, copyOf, true
}

// disRecord is one record as it goes to DIS.
type disRecord struct {
	data []byte
	key  *string // partition_key, plain records with a key only
	ts   int64   // ms; sent as the record's timestamp
}

// toDIS maps a Kafka record of a batch with txnMeta m to a DIS record in
// format; refused, when not "", is why format native cannot store it
// (plainReason). A transaction's record is always an envelope (version 2),
// which format native refuses; a marker (control) is written whatever the
// format, so that a transaction always ends. copyOf >= 0 makes it the
// compactor's copy of the record at that sequence number: an envelope of
// version 3 in formats auto and envelope, and in format native when the
// record needs an envelope anyway (else a plain record, which reads as
// any other).
func toDIS(r *disbackend.Record, format string, m txnMeta, copyOf int64) (d disRecord, refused string) {
	reason := plainReason(r)
	switch {
	case m.flags&txnFlagControl != 0 || (m.transactional() && format != FormatNative):
		return disRecord{data: encodeEnvelope(r, m, -1), ts: r.Timestamp}, ""
	case m.transactional():
		return disRecord{}, "it is a transactional producer's"
	case format == FormatEnvelope || (format == FormatAuto && (reason != "" || copyOf >= 0)):
		return disRecord{data: encodeEnvelope(r, m, copyOf), ts: r.Timestamp}, ""
	case reason != "":
		return disRecord{}, reason
	}
	d = disRecord{data: r.Value, ts: r.Timestamp}
	if r.Key != nil {
		k := string(r.Key)
		d.key = &k
	}
	return d, ""
}

// fromDIS maps a DIS record (timestamp ts, ms) back to a Kafka record, its
// batch's txnMeta and the sequence number it copies (-1: not a compactor's
// copy): an envelope is unwrapped (its timestamp kept unless logAppend),
// anything else is plain (value = data, key = partition_key; no
// transaction, no copy).
func fromDIS(data []byte, key *string, ts int64, logAppend bool) (disbackend.Record, txnMeta, int64) {
	var r disbackend.Record
	if ets, m, copyOf, ok := decodeEnvelope(data, &r); ok {
		if !logAppend {
			ts = ets
		}
		r.Timestamp = ts
		return r, m, copyOf
	}
	r.Value, r.Timestamp = data, ts
	if key != nil {
		r.Key = []byte(*key)
	}
	return r, txnMeta{pid: -1, epoch: -1}, -1
}
