package batch

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"math"
	"runtime"
	"slices"
	"testing"

	"github.com/klauspost/compress/s2"
	"github.com/pierrec/lz4/v4"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The tests build batches with kmsg and kgo's compressors, the codec of a
// real client, and check this package against them.

// makeBatch builds a magic 2 batch of n records with kmsg, compressed with
// codec, with a correct CRC: record i has key {i}, a 100-byte value, one
// header h=x, timestamp 1000+10i.
func makeBatch(t testing.TB, n int, codec Codec) []byte {
	t.Helper()
	var recs []byte
	for i := 0; i < n; i++ {
		r := kmsg.NewRecord()
		r.OffsetDelta = int32(i)
		r.TimestampDelta64 = int64(i * 10)
		r.Key = []byte{byte(i)}
		r.Value = bytes.Repeat([]byte{'v'}, 100)
		r.Headers = []kmsg.Header{{Key: "h", Value: []byte("x")}}
		body := r.AppendTo(nil)[1:] // Length 0 encodes as one byte
		recs = binary.AppendVarint(recs, int64(len(body)))
		recs = append(recs, body...)
	}
	if codec != CodecNone {
		c, err := kgo.DefaultCompressor(codecFor(codec))
		if err != nil {
			t.Fatal(err)
		}
		out, got := c.Compress(new(bytes.Buffer), recs)
		if Codec(got) != codec {
			t.Fatalf("compressed with %d, want %d", got, codec)
		}
		recs = append([]byte(nil), out...)
	}
	b := kmsg.RecordBatch{
		FirstOffset: 0, PartitionLeaderEpoch: -1, Magic: 2,
		Attributes: int16(codec), LastOffsetDelta: int32(n - 1),
		FirstTimestamp: 1000, MaxTimestamp: 1000 + int64(n-1)*10,
		ProducerID: 7, ProducerEpoch: 2, FirstSequence: 40,
		NumRecords: int32(n), Records: recs,
	}
	raw := b.AppendTo(nil)
	binary.BigEndian.PutUint32(raw[8:], uint32(len(raw)-12))
	return resign(raw)
}

func codecFor(c Codec) kgo.CompressionCodec {
	switch c {
	case CodecGzip:
		return kgo.GzipCompression()
	case CodecSnappy:
		return kgo.SnappyCompression()
	case CodecLZ4:
		return kgo.Lz4Compression()
	case CodecZstd:
		return kgo.ZstdCompression()
	}
	return kgo.NoCompression()
}

// resign recomputes the CRC the way kmsg's users do, independently of SetCRC.
func resign(b []byte) []byte {
	binary.BigEndian.PutUint32(b[17:], crc32c(b[21:]))
	return b
}

var allCodecs = []Codec{CodecNone, CodecGzip, CodecSnappy, CodecLZ4, CodecZstd}

func TestParseAndDecode(t *testing.T) {
	for _, codec := range allCodecs {
		raw := makeBatch(t, 5, codec)
		h, err := Parse(raw)
		if err != nil {
			t.Fatalf("%s: %v", codec, err)
		}
		want := Header{BaseOffset: 0, Length: int32(len(raw) - 12), PartitionLeaderEpoch: -1, Magic: 2,
			CRC: binary.BigEndian.Uint32(raw[17:]), Attributes: int16(codec), LastOffsetDelta: 4,
			FirstTimestamp: 1000, MaxTimestamp: 1040, ProducerID: 7, ProducerEpoch: 2, BaseSequence: 40, NumRecords: 5}
		if h != want || h.Codec() != codec || CodecOf(raw) != codec || h.LastOffset() != 4 || !h.Idempotent() {
			t.Fatalf("%s: header %+v, want %+v", codec, h, want)
		}
		checked, err := Validate(raw, h)
		if err != nil {
			t.Fatalf("%s: Validate: %v", codec, err)
		}
		if checked != (Checked{MaxTimestamp: 1040, Keyless: 0}) {
			t.Fatalf("%s: Validate found %+v", codec, checked)
		}
		recs, checked2, err := ValidateAndDecode(raw, h)
		if err != nil || checked2 != checked {
			t.Fatalf("%s: ValidateAndDecode: %+v, %v", codec, checked2, err)
		}
		stored, err := DecodeRecords(raw)
		if err != nil {
			t.Fatalf("%s: DecodeRecords: %v", codec, err)
		}
		for _, rs := range [][]Record{recs, stored} {
			if len(rs) != 5 {
				t.Fatalf("%s: %d records", codec, len(rs))
			}
			r := rs[3]
			if r.Timestamp != 1030 || r.OffsetDelta != 3 || r.Offset(100) != 103 || !bytes.Equal(r.Key, []byte{3}) ||
				len(r.Value) != 100 || len(r.Headers) != 1 || r.Headers[0].Key != "h" || string(r.Headers[0].Value) != "x" {
				t.Fatalf("%s: record 3 = %+v", codec, r)
			}
		}
	}
}

func TestParseErrors(t *testing.T) {
	good := makeBatch(t, 3, CodecNone)
	mut := func(f func(b []byte) []byte) []byte { return f(append([]byte(nil), good...)) }
	cases := []struct {
		name string
		raw  []byte
		want error
	}{
		{"crc", mut(func(b []byte) []byte { b[len(b)-1] ^= 1; return b }), ErrCorruptMessage},
		{"truncated", good[:len(good)-1], ErrCorruptMessage},
		{"short", good[:30], ErrCorruptMessage},
		{"empty", nil, ErrCorruptMessage},
		{"magic1", mut(func(b []byte) []byte { b[16] = 1; return b }), ErrInvalidRecord},
		{"magic1 short", mut(func(b []byte) []byte { b[16] = 1; return b[:20] }), ErrInvalidRecord},
		{"two batches", append(append([]byte(nil), good...), good...), ErrInvalidRecord},
		{"codec 5", resign(mut(func(b []byte) []byte { b[22] |= 5; return b })), ErrUnsupportedCompression},
		{"transactional without producer id", resign(mut(func(b []byte) []byte {
			b[22] |= 0x10
			binary.BigEndian.PutUint64(b[43:], ^uint64(0))
			return b
		})), ErrInvalidRecord},
		{"control", resign(mut(func(b []byte) []byte { b[22] |= 0x20; return b })), ErrInvalidRecord},
		{"no records", resign(mut(func(b []byte) []byte { binary.BigEndian.PutUint32(b[57:], 0); return b })), ErrInvalidRecord},
		{"last delta", resign(mut(func(b []byte) []byte { binary.BigEndian.PutUint32(b[23:], 5); return b })), ErrInvalidRecord},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := Parse(tc.raw); !errors.Is(err, tc.want) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
		})
	}
}

// TestValidateRefuses: batches that pass Parse (header and CRC) but whose
// records do not check out.
func TestValidateRefuses(t *testing.T) {
	liar := resign(func() []byte { b := makeBatch(t, 3, CodecNone); b[22] |= byte(CodecGzip); return b }())
	garbage := makeBatch(t, 2, CodecNone)
	for i := HeaderLen; i < len(garbage); i++ {
		garbage[i] = 0xff
	}
	resign(garbage)
	short := makeBatch(t, 3, CodecNone) // fewer records than the header says
	binary.BigEndian.PutUint32(short[57:], 4)
	binary.BigEndian.PutUint32(short[23:], 3)
	resign(short)
	trailing := makeBatch(t, 2, CodecNone) // a byte after the last record
	trailing = append(trailing, 0)
	binary.BigEndian.PutUint32(trailing[8:], uint32(len(trailing)-12))
	resign(trailing)
	// Offset deltas 0, 2 (a gap) in a produced batch.
	gap := Encode(NewHeader(0), []Record{{OffsetDelta: 0, Value: []byte("a")}, {OffsetDelta: 2, Value: []byte("b")}})
	binary.BigEndian.PutUint32(gap[23:], 1)
	resign(gap)
	// A record whose length covers one byte more than its fields.
	loose := Encode(NewHeader(0), []Record{{Value: []byte("abc")}})
	loose[HeaderLen] += 2 // zig-zag: length + 1
	loose = append(loose, 0)
	binary.BigEndian.PutUint32(loose[8:], uint32(len(loose)-12))
	resign(loose)
	// A header with a null key.
	nullKey := Encode(NewHeader(0), []Record{{Value: []byte("v"), Headers: []RecordHeader{{Key: "k", Value: []byte("x")}}}})
	i := bytes.LastIndex(nullKey, []byte{2, 'k'})
	nullKey = append(append(append([]byte(nil), nullKey[:i]...), 1), nullKey[i+2:]...) // key length -1
	nullKey[HeaderLen] -= 2
	binary.BigEndian.PutUint32(nullKey[8:], uint32(len(nullKey)-12))
	resign(nullKey)
	// The offset delta 0 written in 6 bytes: Kafka's reader takes at most 5
	// for a varint ("Varint is too long").
	overlong := Encode(NewHeader(0), []Record{{Value: []byte("v")}})
	i = HeaderLen + 3 // length, attributes, timestamp delta, then the offset delta
	overlong = append(append(append([]byte(nil), overlong[:i]...), 0x80, 0x80, 0x80, 0x80, 0x80, 0x00), overlong[i+1:]...)
	overlong[HeaderLen] += 10
	binary.BigEndian.PutUint32(overlong[8:], uint32(len(overlong)-12))
	resign(overlong)
	huge := makeBatch(t, 3, CodecNone)
	binary.BigEndian.PutUint32(huge[57:], 1<<30)
	binary.BigEndian.PutUint32(huge[23:], 1<<30-1)
	resign(huge)
	for _, tc := range []struct {
		name string
		raw  []byte
		want error
	}{
		// As Kafka: data that does not decompress is CORRUPT_MESSAGE;
		// records that do not decode or match the header INVALID_RECORD.
		{"codec lies", liar, ErrCorruptMessage},
		{"garbage", garbage, ErrInvalidRecord},
		{"count", short, ErrInvalidRecord},
		{"trailing", trailing, ErrInvalidRecord},
		{"offset gap", gap, ErrInvalidRecord},
		{"record longer than its fields", loose, ErrInvalidRecord},
		{"null header key", nullKey, ErrInvalidRecord},
		{"overlong varint", overlong, ErrInvalidRecord},
		{"count larger than the data", huge, ErrInvalidRecord},
	} {
		h, err := Parse(tc.raw)
		if err != nil {
			t.Fatalf("%s: Parse refused it already: %v", tc.name, err)
		}
		if _, err := Validate(tc.raw, h); !errors.Is(err, tc.want) {
			t.Errorf("%s: Validate = %v, want %v", tc.name, err, tc.want)
		}
		if _, _, err := ValidateAndDecode(tc.raw, h); !errors.Is(err, tc.want) {
			t.Errorf("%s: ValidateAndDecode = %v, want %v", tc.name, err, tc.want)
		}
	}
	// A stored batch may have gaps.
	if recs, err := DecodeRecords(gap); err != nil || len(recs) != 2 || recs[1].Offset(0) != 2 {
		t.Fatalf("DecodeRecords(gap) = %+v, %v", recs, err)
	}
}

// TestDecompressionBomb: a batch claiming or inflating to more than
// MaxDecompressedBytes is refused as corrupt, without inflating it.
func TestDecompressionBomb(t *testing.T) {
	claim := binary.AppendUvarint(nil, 200<<20) // a raw snappy block claiming 200 MiB
	claim = append(claim, 0, 0, 0, 0)
	if _, err := decompress(claim, CodecSnappy); !errors.Is(err, errTooLarge) {
		t.Fatalf("snappy claim: %v", err)
	}
	xerial := append(append([]byte(nil), xerialPrefix...), 0, 0, 0, 1, 0, 0, 0, 1)
	block := append(binary.AppendUvarint(nil, 50<<20), 0, 0, 0, 0)
	for i := 0; i < 3; i++ { // three blocks claiming 50 MiB each
		xerial = binary.BigEndian.AppendUint32(xerial, uint32(len(block)))
		xerial = append(xerial, block...)
	}
	if _, err := decompress(xerial, CodecSnappy); !errors.Is(err, errTooLarge) {
		t.Fatalf("xerial snappy claiming 150 MiB: %v, want errTooLarge", err)
	}
	zeros := make([]byte, MaxDecompressedBytes+1)
	for _, codec := range []Codec{CodecZstd, CodecGzip, CodecLZ4, CodecSnappy} {
		c, err := kgo.DefaultCompressor(codecFor(codec))
		if err != nil {
			t.Fatal(err)
		}
		bomb, _ := c.Compress(new(bytes.Buffer), zeros)
		if codec != CodecSnappy && len(bomb) > 2<<20 {
			t.Fatalf("%s: bomb is %d bytes", codec, len(bomb))
		}
		if _, err := decompress(append([]byte(nil), bomb...), codec); !errors.Is(err, errTooLarge) {
			t.Fatalf("%s: %v, want errTooLarge", codec, err)
		}
	}
}

// TestSnappyXerial decodes the xerial framing the Java producer writes
// (kgo writes it too) and raw snappy.
func TestSnappyXerial(t *testing.T) {
	data := bytes.Repeat([]byte("disgw snappy "), 20000) // several 32 KiB blocks
	c, err := kgo.DefaultCompressor(kgo.SnappyCompression())
	if err != nil {
		t.Fatal(err)
	}
	framed, _ := c.Compress(new(bytes.Buffer), data)
	if !bytes.HasPrefix(framed, xerialPrefix) {
		t.Skip("kgo no longer writes xerial framing")
	}
	got, err := decompress(framed, CodecSnappy)
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("xerial: %d bytes, %v", len(got), err)
	}
	d := kgo.DefaultDecompressor()
	want, err := d.Decompress(framed, kgo.CodecSnappy)
	if err != nil || !bytes.Equal(want, got) {
		t.Fatalf("kgo decodes it differently: %v", err)
	}
}

func TestEncodeRoundTrip(t *testing.T) {
	recs := []Record{
		{OffsetDelta: 0, Timestamp: 1000, Key: []byte("a"), Value: []byte("1")},
		{OffsetDelta: 1, Timestamp: 990, Key: nil, Value: nil, Headers: []RecordHeader{{Key: "h", Value: []byte("v")}, {Key: "n", Value: nil}}},
		{OffsetDelta: 3, Timestamp: 1500, Key: []byte{}, Value: []byte{}},
	}
	h := NewHeader(42)
	h.ProducerID, h.ProducerEpoch, h.BaseSequence = 9, 1, 100
	h.Attributes = AttrLogAppendTime | int16(CodecGzip) // the codec bits are cleared
	raw := Encode(h, recs)
	if !CheckCRC(raw) {
		t.Fatal("CRC")
	}
	got, err := ParseHeader(raw)
	if err != nil || got.BaseOffset != 42 || got.NumRecords != 3 || got.LastOffsetDelta != 3 || got.FirstTimestamp != 1000 ||
		got.MaxTimestamp != 1500 || got.Attributes != AttrLogAppendTime || got.ProducerID != 9 || got.ProducerEpoch != 1 ||
		got.BaseSequence != 100 || got.PartitionLeaderEpoch != -1 || int(got.Length) != len(raw)-12 {
		t.Fatalf("header %+v, %v", got, err)
	}
	// kmsg reads it as a client would.
	var kb kmsg.RecordBatch
	if err := kb.ReadFrom(raw); err != nil || kb.NumRecords != 3 {
		t.Fatalf("kmsg: %v", err)
	}
	data := kb.Records
	for i := range recs {
		var kr kmsg.Record
		l, n := binary.Varint(data)
		if err := kr.ReadFrom(data[:n+int(l)]); err != nil {
			t.Fatalf("kmsg record %d: %v", i, err)
		}
		data = data[n+int(l):]
		w := recs[i]
		if kr.OffsetDelta != w.OffsetDelta || kb.FirstTimestamp+kr.TimestampDelta64 != w.Timestamp ||
			(kr.Key == nil) != (w.Key == nil) || !bytes.Equal(kr.Key, w.Key) || (kr.Value == nil) != (w.Value == nil) ||
			len(kr.Headers) != len(w.Headers) {
			t.Fatalf("kmsg record %d = %+v, want %+v", i, kr, w)
		}
		if RecordLen(&w, w.Timestamp-1000, int64(w.OffsetDelta)) != n+int(l) {
			t.Fatalf("RecordLen of record %d = %d, encoded %d", i, RecordLen(&w, w.Timestamp-1000, int64(w.OffsetDelta)), n+int(l))
		}
	}
	// Decoded back (a LogAppendTime batch: every record has the max timestamp).
	back, err := DecodeRecords(raw)
	if err != nil || len(back) != 3 {
		t.Fatalf("DecodeRecords: %v", err)
	}
	for i := range back {
		if back[i].Timestamp != 1500 || back[i].OffsetDelta != recs[i].OffsetDelta || !sameBytes(back[i].Key, recs[i].Key) ||
			!sameBytes(back[i].Value, recs[i].Value) || len(back[i].Headers) != len(recs[i].Headers) {
			t.Fatalf("record %d = %+v, want %+v", i, back[i], recs[i])
		}
	}
	if back[1].Headers[1].Value != nil || string(back[1].Headers[0].Value) != "v" {
		t.Fatalf("headers %+v", back[1].Headers)
	}
}

func sameBytes(a, b []byte) bool { return (a == nil) == (b == nil) && bytes.Equal(a, b) }

func TestSetters(t *testing.T) {
	raw := makeBatch(t, 3, CodecNone)
	SetBaseOffset(raw, 1<<40)
	SetPartitionLeaderEpoch(raw, 5)
	if BaseOffset(raw) != 1<<40 || LastOffset(raw) != 1<<40+2 || !CheckCRC(raw) {
		t.Fatalf("base offset %d, last %d, CRC ok %v", BaseOffset(raw), LastOffset(raw), CheckCRC(raw))
	}
	if h, _ := ParseHeader(raw); h.PartitionLeaderEpoch != 5 {
		t.Fatalf("leader epoch %d", h.PartitionLeaderEpoch)
	}
	SetLogAppendTime(raw, 123456)
	h, err := Parse(raw)
	if err != nil || !h.LogAppendTime() || h.MaxTimestamp != 123456 || h.FirstTimestamp != 1000 {
		t.Fatalf("after SetLogAppendTime: %+v, %v", h, err)
	}
	recs, err := DecodeRecords(raw)
	if err != nil || recs[0].Timestamp != 123456 {
		t.Fatalf("LogAppendTime records: %+v, %v", recs, err)
	}
	raw[HeaderLen] ^= 1
	if CheckCRC(raw) {
		t.Fatal("CheckCRC accepted a changed batch")
	}
	SetCRC(raw)
	if !CheckCRC(raw) {
		t.Fatal("SetCRC")
	}
	if Checksum([]byte("123456789")) != 0xe3069283 { // the CRC-32C check value
		t.Fatalf("Checksum = %08x", Checksum([]byte("123456789")))
	}
}

func TestRecordLenVarints(t *testing.T) {
	for _, v := range []int64{0, 1, -1, 63, 64, -64, -65, 8191, 8192, math.MaxInt32, math.MinInt32, math.MaxInt64, math.MinInt64} {
		if got, want := varintLen(v), len(binary.AppendVarint(nil, v)); got != want {
			t.Fatalf("varintLen(%d) = %d, want %d", v, got, want)
		}
	}
}

// BenchmarkValidate is the gateway's work per produced batch on the
// embedded store (Validate) and on DIS (ValidateAndDecode): a 1 MB batch
// of 1 KiB records, uncompressed.
func BenchmarkValidate(b *testing.B) {
	recs := make([]Record, 1000)
	for i := range recs {
		recs[i] = Record{OffsetDelta: int32(i), Timestamp: 1000, Value: bytes.Repeat([]byte{byte(i)}, 1024)}
	}
	raw := Encode(NewHeader(0), recs)
	h, err := Parse(raw)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("Validate", func(b *testing.B) {
		b.SetBytes(int64(len(raw)))
		b.ReportAllocs()
		for b.Loop() {
			if _, err := Validate(raw, h); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("ValidateAndDecode", func(b *testing.B) {
		b.SetBytes(int64(len(raw)))
		b.ReportAllocs()
		for b.Loop() {
			if _, _, err := ValidateAndDecode(raw, h); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// TestDecompressRefusesWhatKafkaCannotRead: data the Go libraries decode
// but Kafka's Java client does not (S2's extensions under the snappy
// codec, the legacy LZ4 format) is refused, so it is never stored.
func TestDecompressRefusesWhatKafkaCannotRead(t *testing.T) {
	data := bytes.Repeat([]byte("0123456789abcdef"), 4096)
	s2data := s2.Encode(nil, data)
	if got, err := s2.Decode(nil, s2data); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("s2 round trip: %v", err)
	}
	if _, err := decompress(s2data, CodecSnappy); err == nil {
		t.Fatal("S2 data accepted as snappy")
	}
	var legacy bytes.Buffer
	w := lz4.NewWriter(&legacy)
	if err := w.Apply(lz4.LegacyOption(true)); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if got, err := io.ReadAll(lz4.NewReader(bytes.NewReader(legacy.Bytes()))); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("legacy lz4 round trip: %v", err)
	}
	if _, err := decompress(legacy.Bytes(), CodecLZ4); err == nil {
		t.Fatal("a legacy LZ4 frame accepted")
	}
	var frame bytes.Buffer
	w = lz4.NewWriter(&frame)
	if _, err := w.Write(data); err != nil {
		t.Fatal(err)
	}
	_ = w.Close()
	if got, err := decompress(frame.Bytes(), CodecLZ4); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("an LZ4 frame: %v", err)
	}
}

// TestDeclaredCountsSizeNothing: a compressed batch that declares a
// billion records (or a record with a huge header count) fails without
// allocating for the declared count.
func TestDeclaredCountsSizeNothing(t *testing.T) {
	c, err := kgo.DefaultCompressor(kgo.ZstdCompression())
	if err != nil {
		t.Fatal(err)
	}
	zeros, _ := c.Compress(new(bytes.Buffer), make([]byte, 64<<20))
	h := NewHeader(0)
	h.Attributes = int16(CodecZstd)
	raw := Encode(NewHeader(0), []Record{{Value: []byte("x")}})[:HeaderLen]
	raw = append(raw, zeros...)
	binary.BigEndian.PutUint16(raw[21:], uint16(CodecZstd))
	binary.BigEndian.PutUint32(raw[57:], 9_000_000) // fits 64 MiB at 7 bytes each
	binary.BigEndian.PutUint32(raw[23:], 9_000_000-1)
	binary.BigEndian.PutUint32(raw[8:], uint32(len(raw)-12))
	resign(raw)
	h, err = Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	if _, _, err := ValidateAndDecode(raw, h); !errors.Is(err, ErrInvalidRecord) {
		t.Fatalf("ValidateAndDecode = %v, want ErrInvalidRecord", err)
	}
	runtime.ReadMemStats(&after)
	// The 64 MiB of decompressed data, and no 9,000,000 * 88 bytes of records.
	if got := after.TotalAlloc - before.TotalAlloc; got > 200<<20 {
		t.Fatalf("allocated %d MiB for a batch of 64 MiB of zeros", got>>20)
	}
}

// TestRewrite: a filtered batch keeps its base offset, last offset delta,
// producer fields and codec; kgo reads it as a client would; a delete
// horizon rides in the first timestamp; an emptied batch is a header.
func TestRewrite(t *testing.T) {
	for _, codec := range allCodecs {
		raw := makeBatch(t, 5, codec)
		orig, err := Parse(raw)
		if err != nil {
			t.Fatal(err)
		}
		recs, err := DecodeRecords(raw)
		if err != nil {
			t.Fatal(err)
		}
		keep := []Record{recs[1], recs[3]}
		keep[1].Value = nil // a tombstone
		out, err := Rewrite(orig, keep, 777_000)
		if err != nil {
			t.Fatalf("%s: %v", codec, err)
		}
		h, err := ParseHeader(out)
		if err != nil || !CheckCRC(out) || h.BaseOffset != orig.BaseOffset || h.LastOffsetDelta != 4 || h.NumRecords != 2 ||
			h.Codec() != codec || h.ProducerID != 7 || h.ProducerEpoch != 2 || h.BaseSequence != 40 || h.MaxTimestamp != 1030 {
			t.Fatalf("%s: header %+v, %v", codec, h, err)
		}
		if hz, ok := h.DeleteHorizon(); !ok || hz != 777_000 {
			t.Fatalf("%s: delete horizon %d %v", codec, hz, ok)
		}
		back, err := DecodeRecords(out)
		if err != nil || len(back) != 2 || back[0].Offset(0) != 1 || back[1].Offset(0) != 3 ||
			back[0].Timestamp != 1010 || back[1].Timestamp != 1030 || back[1].Value != nil || !bytes.Equal(back[0].Value, recs[1].Value) {
			t.Fatalf("%s: decoded %+v, %v", codec, back, err)
		}
		// kmsg and kgo's decompressor, as a consumer reads it.
		var kb kmsg.RecordBatch
		if err := kb.ReadFrom(out); err != nil {
			t.Fatal(err)
		}
		data := kb.Records
		if codec != CodecNone {
			if data, err = kgo.DefaultDecompressor().Decompress(kb.Records, kgo.CompressionCodecType(codec)); err != nil {
				t.Fatalf("%s: kgo cannot decompress the rewritten batch: %v", codec, err)
			}
		}
		var kr kmsg.Record
		l, n := binary.Varint(data)
		if err := kr.ReadFrom(data[:n+int(l)]); err != nil || kr.OffsetDelta != 1 || kb.FirstTimestamp+kr.TimestampDelta64 != 1010 {
			t.Fatalf("%s: kmsg reads %+v, %v", codec, kr, err)
		}
		empty, err := Rewrite(orig, nil, -1)
		if err != nil {
			t.Fatal(err)
		}
		eh, err := ParseHeader(empty)
		if err != nil || len(empty) != HeaderLen || eh.NumRecords != 0 || eh.LastOffsetDelta != 4 || eh.Codec() != CodecNone ||
			eh.FirstTimestamp != orig.MaxTimestamp || eh.BaseSequence != 40 || !CheckCRC(empty) {
			t.Fatalf("%s: empty %+v, %v", codec, eh, err)
		}
		if recs, err := DecodeRecords(empty); err != nil || len(recs) != 0 {
			t.Fatalf("%s: empty decodes to %d, %v", codec, len(recs), err)
		}
	}
}

// TestRecompress rewrites a batch from each codec to each other at
// Kafka's levels: the header keeps its offsets, timestamps and producer
// fields, the records read back the same, and kgo's decompressor (as a
// consumer) reads the new codec.
func TestRecompress(t *testing.T) {
	h := NewHeader(0)
	h.ProducerID, h.ProducerEpoch, h.BaseSequence = 7, 2, 40
	var recs []Record
	for i := range 50 {
		recs = append(recs, Record{OffsetDelta: int32(i), Timestamp: 1000 + int64(i), Key: []byte("k"),
			Value: bytes.Repeat([]byte{byte(i)}, 100)})
	}
	plain := Encode(h, recs)
	ph, err := Parse(plain)
	if err != nil {
		t.Fatal(err)
	}
	budget := NewBudget(64 << 20)
	codecs := []Codec{CodecNone, CodecGzip, CodecSnappy, CodecLZ4, CodecZstd}
	levels := map[Codec][]int{CodecGzip: {0, 1, 9}, CodecLZ4: {0, 1, 2, 9, 17}, CodecZstd: {0, -131072, 1, 22}}
	for _, from := range codecs {
		src, err := Recompress(context.Background(), plain, ph, Limits{}, from, 0)
		if err != nil {
			t.Fatal(err)
		}
		sh, err := Parse(src)
		if err != nil || sh.Codec() != from {
			t.Fatalf("%s: %+v %v", from, sh, err)
		}
		for _, to := range codecs {
			for _, level := range append([]int{0}, levels[to]...) {
				out, err := Recompress(context.Background(), src, sh, Limits{Budget: budget}, to, level)
				if err != nil {
					t.Fatalf("%s to %s/%d: %v", from, to, level, err)
				}
				if n := budget.InUse(); n != 0 {
					t.Fatalf("%s to %s/%d: %d bytes of the budget still held", from, to, level, n)
				}
				oh, err := Parse(out)
				if err != nil || !CheckCRC(out) || oh.Codec() != to || oh.BaseOffset != 0 || oh.LastOffsetDelta != 49 || oh.NumRecords != 50 ||
					oh.FirstTimestamp != 1000 || oh.MaxTimestamp != 1049 || oh.ProducerID != 7 || oh.ProducerEpoch != 2 || oh.BaseSequence != 40 {
					t.Fatalf("%s to %s/%d: header %+v, %v", from, to, level, oh, err)
				}
				back, err := DecodeRecords(out)
				if err != nil || len(back) != 50 {
					t.Fatalf("%s to %s/%d: %d records, %v", from, to, level, len(back), err)
				}
				for i := range back {
					if back[i].Timestamp != recs[i].Timestamp || !bytes.Equal(back[i].Value, recs[i].Value) || back[i].OffsetDelta != recs[i].OffsetDelta {
						t.Fatalf("%s to %s/%d: record %d differs", from, to, level, i)
					}
				}
				var kb kmsg.RecordBatch
				if err := kb.ReadFrom(out); err != nil {
					t.Fatal(err)
				}
				if to != CodecNone {
					if _, err := kgo.DefaultDecompressor().Decompress(kb.Records, kgo.CompressionCodecType(to)); err != nil {
						t.Fatalf("%s to %s/%d: kgo cannot decompress: %v", from, to, level, err)
					}
				}
			}
		}
	}
}

// TestKeylessRecords: KeylessRecords names the records with a null key by
// their position, in every codec; an empty key is a key.
func TestKeylessRecords(t *testing.T) {
	for _, codec := range allCodecs {
		var recs []byte
		var want []int32
		for i := 0; i < 100; i++ {
			r := kmsg.NewRecord()
			r.OffsetDelta, r.TimestampDelta64, r.Value = int32(i), int64(i), []byte("v")
			switch {
			case i%10 == 3:
				want = append(want, int32(i)) // null key
			case i == 4:
				r.Key = []byte{}
			default:
				r.Key = []byte{byte(i)}
			}
			body := r.AppendTo(nil)[1:]
			recs = binary.AppendVarint(recs, int64(len(body)))
			recs = append(recs, body...)
		}
		if codec != CodecNone {
			c, err := kgo.DefaultCompressor(codecFor(codec))
			if err != nil {
				t.Fatal(err)
			}
			out, _ := c.Compress(new(bytes.Buffer), recs)
			recs = append([]byte(nil), out...)
		}
		b := kmsg.RecordBatch{PartitionLeaderEpoch: -1, Magic: 2, Attributes: int16(codec), LastOffsetDelta: 99,
			FirstTimestamp: 1000, MaxTimestamp: 1099, ProducerID: -1, ProducerEpoch: -1, FirstSequence: -1,
			NumRecords: 100, Records: recs}
		raw := b.AppendTo(nil)
		binary.BigEndian.PutUint32(raw[8:], uint32(len(raw)-12))
		raw = resign(raw)
		h, err := Parse(raw)
		if err != nil {
			t.Fatalf("%s: %v", codec, err)
		}
		checked, err := Validate(raw, h)
		if err != nil || checked.Keyless != len(want) {
			t.Fatalf("%s: Validate: %+v, %v", codec, checked, err)
		}
		got, err := KeylessRecords(context.Background(), raw, h, Limits{})
		if err != nil || !slices.Equal(got, want) {
			t.Fatalf("%s: KeylessRecords %v, %v; want %v", codec, got, err, want)
		}
	}
}
