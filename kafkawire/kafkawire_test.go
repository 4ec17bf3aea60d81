package kafkawire

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"io"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// makeBatch builds a magic 2 batch of n records with kmsg, compressed with
// codec, with a correct CRC.
func makeBatch(t testing.TB, n int, codec int8) []byte {
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
		if int8(got) != codec {
			t.Fatalf("compressed with %d, want %d", got, codec)
		}
		recs = append([]byte(nil), out...)
	}
	b := kmsg.RecordBatch{
		FirstOffset: 0, PartitionLeaderEpoch: -1, Magic: 2,
		Attributes: int16(codec), LastOffsetDelta: int32(n - 1),
		FirstTimestamp: 1000, MaxTimestamp: 1000 + int64(n-1)*10,
		ProducerID: -1, ProducerEpoch: -1, FirstSequence: -1,
		NumRecords: int32(n), Records: recs,
	}
	raw := b.AppendTo(nil)
	binary.BigEndian.PutUint32(raw[8:], uint32(len(raw)-12))
	binary.BigEndian.PutUint32(raw[17:], crc32.Checksum(raw[21:], crc32.MakeTable(crc32.Castagnoli)))
	return raw
}

func codecFor(c int8) kgo.CompressionCodec {
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

func TestParseBatch(t *testing.T) {
	for _, codec := range []int8{CodecNone, CodecGzip, CodecSnappy, CodecLZ4, CodecZstd} {
		raw := makeBatch(t, 5, codec)
		b, err := ParseBatch(raw)
		if err != nil {
			t.Fatalf("codec %d: %v", codec, err)
		}
		if b.NumRecords != 5 || Codec(raw) != codec {
			t.Fatalf("codec %d: header %+v", codec, b)
		}
		recs, err := DecodeRecords(raw)
		if err != nil {
			t.Fatalf("codec %d: decode: %v", codec, err)
		}
		if len(recs) != 5 || recs[3].TimestampDelta64 != 1030 || recs[3].Key[0] != 3 || string(recs[3].Headers[0].Value) != "x" {
			t.Fatalf("codec %d: records %+v", codec, recs[3])
		}
	}
}

func TestParseBatchErrors(t *testing.T) {
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
		{"magic1", mut(func(b []byte) []byte { b[16] = 1; return b }), ErrInvalidRecord},
		{"two batches", append(append([]byte(nil), good...), good...), ErrInvalidRecord},
		{"codec 5", resign(mut(func(b []byte) []byte { b[22] |= 5; return b })), ErrUnsupportedCompression},
		{"transactional", resign(mut(func(b []byte) []byte { b[22] |= 0x10; return b })), ErrInvalidRecord},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := ParseBatch(tc.raw); !errors.Is(err, tc.want) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
		})
	}
}

func resign(b []byte) []byte {
	binary.BigEndian.PutUint32(b[17:], crc32.Checksum(b[21:], crc32.MakeTable(crc32.Castagnoli)))
	return b
}

func encodeRequest(key, version int16, corr int32, body kmsg.Request) []byte {
	body.SetVersion(version)
	out := binary.BigEndian.AppendUint16(nil, uint16(key))
	out = binary.BigEndian.AppendUint16(out, uint16(version))
	out = binary.BigEndian.AppendUint32(out, uint32(corr))
	out = binary.BigEndian.AppendUint16(out, 4)
	out = append(out, "test"...)
	if body.IsFlexible() {
		out = append(out, 0)
	}
	return body.AppendTo(out)
}

func TestParseRequest(t *testing.T) {
	m := kmsg.NewPtrMetadataRequest()
	topic := "a.b"
	m.Topics = []kmsg.MetadataRequestTopic{{Topic: &topic}}
	for _, v := range []int16{0, 8, 9, 13} {
		req, err := ParseRequest(encodeRequest(3, v, 7, m))
		if err != nil {
			t.Fatalf("v%d: %v", v, err)
		}
		got := req.Body.(*kmsg.MetadataRequest)
		if req.CorrelationID != 7 || req.ClientID != "test" || *got.Topics[0].Topic != "a.b" {
			t.Fatalf("v%d: %+v", v, req)
		}
	}
	if _, err := ParseRequest(encodeRequest(3, 14, 1, m)); !errors.Is(err, ErrUnsupportedVersion) {
		t.Fatalf("v14: %v", err)
	}
	av := kmsg.NewPtrApiVersionsRequest()
	req, err := ParseRequest(encodeRequest(18, 99, 5, av))
	if !errors.Is(err, ErrUnsupportedVersion) || req == nil || req.Key != 18 || req.CorrelationID != 5 {
		t.Fatalf("ApiVersions v99: %v %+v", err, req)
	}
	bad := encodeRequest(3, 1, 1, m)
	bad[0], bad[1] = 0x7f, 0x00
	if _, err := ParseRequest(bad); !errors.Is(err, ErrUnknownAPIKey) {
		t.Fatalf("unknown key: %v", err)
	}
	if _, err := ParseRequest(encodeRequest(3, 1, 1, m)[:12]); !errors.Is(err, ErrMalformed) {
		t.Fatalf("truncated: %v", err)
	}
}

func TestReadFrame(t *testing.T) {
	frame := binary.BigEndian.AppendUint32(nil, 3)
	frame = append(frame, 1, 2, 3)
	got, err := ReadFrame(bytes.NewReader(frame), 10)
	if err != nil || !bytes.Equal(got, []byte{1, 2, 3}) {
		t.Fatalf("%v %v", got, err)
	}
	if _, err := ReadFrame(bytes.NewReader(frame), 2); !errors.Is(err, ErrFrameTooLarge) {
		t.Fatalf("cap: %v", err)
	}
	if _, err := ReadFrame(bytes.NewReader(frame[:5]), 10); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("truncated: %v", err)
	}
	if _, err := ReadFrame(bytes.NewReader(nil), 10); !errors.Is(err, io.EOF) {
		t.Fatalf("eof: %v", err)
	}
	huge := binary.BigEndian.AppendUint32(nil, 0xffffffff)
	if _, err := ReadFrame(bytes.NewReader(huge), 10); !errors.Is(err, ErrFrameTooLarge) {
		t.Fatalf("negative: %v", err)
	}
}

func TestAppendResponse(t *testing.T) {
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.Version = 3
	out := AppendResponse(nil, 9, resp)
	if int(binary.BigEndian.Uint32(out)) != len(out)-4 || binary.BigEndian.Uint32(out[4:]) != 9 {
		t.Fatalf("frame %x", out)
	}
	// ApiVersions has a v0 response header even when flexible: the body
	// starts right after the correlation id.
	var back kmsg.ApiVersionsResponse
	back.Version = 3
	if err := back.ReadFrom(out[8:]); err != nil {
		t.Fatal(err)
	}
	m := kmsg.NewPtrMetadataResponse()
	m.Version = 12
	out = AppendResponse(nil, 1, m)
	if out[8] != 0 {
		t.Fatalf("flexible header needs an empty tag section")
	}
}

func TestValidateRecords(t *testing.T) {
	for _, codec := range []int8{CodecNone, CodecGzip, CodecSnappy, CodecLZ4, CodecZstd} {
		raw := makeBatch(t, 5, codec)
		b, err := ParseBatch(raw)
		if err != nil {
			t.Fatal(err)
		}
		if err := ValidateRecords(&b); err != nil {
			t.Fatalf("codec %d: %v", codec, err)
		}
	}
	// A CRC-valid batch whose codec bit lies (uncompressed data marked gzip).
	liar := resign(func() []byte { b := makeBatch(t, 3, CodecNone); b[22] |= CodecGzip; return b }())
	// A CRC-valid batch whose record bytes are garbage.
	garbage := makeBatch(t, 2, CodecNone)
	for i := BatchHeaderLen; i < len(garbage); i++ {
		garbage[i] = 0xff
	}
	resign(garbage)
	// Fewer records than the header says.
	short := makeBatch(t, 3, CodecNone)
	binary.BigEndian.PutUint32(short[57:], 4)
	binary.BigEndian.PutUint32(short[23:], 3)
	resign(short)
	for name, raw := range map[string][]byte{"codec lies": liar, "garbage": garbage, "count": short} {
		b, err := ParseBatch(raw)
		if err != nil {
			t.Fatalf("%s: ParseBatch refused it already: %v", name, err)
		}
		if err := ValidateRecords(&b); !errors.Is(err, ErrCorruptMessage) {
			t.Errorf("%s: %v, want ErrCorruptMessage", name, err)
		}
	}
}

// TestDecompressionBomb: a batch claiming or inflating to more than
// MaxDecompressedBatchBytes is refused as corrupt, without inflating it.
func TestDecompressionBomb(t *testing.T) {
	// snappy: a raw block whose header claims 200 MiB.
	claim := binary.AppendUvarint(nil, 200<<20)
	claim = append(claim, 0, 0, 0, 0)
	if _, err := decompress(claim, CodecSnappy); !errors.Is(err, errTooLarge) {
		t.Fatalf("snappy claim: %v", err)
	}
	// zstd and gzip: real data that inflates past the bound.
	zeros := make([]byte, MaxDecompressedBatchBytes+1)
	for _, codec := range []int8{CodecZstd, CodecGzip, CodecLZ4} {
		c, err := kgo.DefaultCompressor(codecFor(codec))
		if err != nil {
			t.Fatal(err)
		}
		bomb, _ := c.Compress(new(bytes.Buffer), zeros)
		if len(bomb) > 2<<20 {
			t.Fatalf("codec %d: bomb is %d bytes", codec, len(bomb))
		}
		if _, err := decompress(append([]byte(nil), bomb...), codec); !errors.Is(err, errTooLarge) {
			t.Fatalf("codec %d: %v, want errTooLarge", codec, err)
		}
	}
}

func TestEncodeBatch(t *testing.T) {
	recs := []kmsg.Record{
		{TimestampDelta64: 1000, OffsetDelta: 0, Key: []byte("a"), Value: []byte("1")},
		{TimestampDelta64: 990, OffsetDelta: 1, Key: nil, Value: nil, Headers: []kmsg.Header{{Key: "h", Value: []byte("v")}}},
		{TimestampDelta64: 1500, OffsetDelta: 3, Value: []byte("gap before me")},
	}
	raw := EncodeBatch(42, 0, recs)
	b, err := ParseBatch(raw)
	if err == nil {
		err = ValidateRecords(&b)
	}
	// Offset deltas with a gap are a valid stored batch but not a valid
	// produced one; check the gap-free prefix through the full validation.
	if err == nil {
		t.Fatal("a batch with an offset gap passed produce validation")
	}
	raw = EncodeBatch(42, 0, recs[:2])
	if b, err = ParseBatch(raw); err != nil || ValidateRecords(&b) != nil {
		t.Fatalf("encoded batch does not validate: %v", err)
	}
	back, err := DecodeRecords(raw)
	if err != nil || len(back) != 2 || b.FirstOffset != 42 || b.MaxTimestamp != 1000 {
		t.Fatalf("decode: %v %d %+v", err, len(back), b)
	}
	if back[1].TimestampDelta64 != 990 || back[1].Value != nil || string(back[1].Headers[0].Value) != "v" || string(back[0].Key) != "a" {
		t.Fatalf("round trip: %+v", back)
	}
}
