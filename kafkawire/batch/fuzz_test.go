package batch

import (
	"context"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"testing"
)

// crc32c is the tests' own CRC-32C, independent of CRCTable.
func crc32c(b []byte) uint32 { return crc32.Checksum(b, crc32.MakeTable(crc32.Castagnoli)) }

// FuzzParse feeds arbitrary bytes to every decoder of the package: no
// panic; Validate and ValidateAndDecode agree; an accepted batch decodes
// to its record count, and re-encoding its records gives them back. With
// fix set, the input's length and CRC fields are made right first, so that
// mutations reach the record decoder instead of failing the CRC.
func FuzzParse(f *testing.F) {
	for _, c := range allCodecs {
		f.Add(makeBatch(f, 3, c), false)
		f.Add(makeBatch(f, 3, c), true)
	}
	f.Add(makeBatch(f, 1, CodecNone)[:40], false)
	f.Add(Encode(NewHeader(5), []Record{{Value: []byte("v"), Headers: []RecordHeader{{Key: "k"}}}, {OffsetDelta: 1}}), true)
	f.Fuzz(func(t *testing.T, raw []byte, fix bool) {
		if fix && len(raw) >= HeaderLen {
			raw = append([]byte(nil), raw...)
			binary.BigEndian.PutUint32(raw[offLength:], uint32(len(raw)-logOverhead))
			SetCRC(raw)
		}
		_, _ = DecodeRecords(raw)
		h, err := Parse(raw)
		if err != nil {
			return
		}
		vc, verr := Validate(raw, h)
		recs, dc, err := ValidateAndDecode(raw, h)
		if (verr == nil) != (err == nil) || err == nil && vc != dc {
			t.Fatalf("Validate = %+v, %v; ValidateAndDecode = %+v, %v", vc, verr, dc, err)
		}
		if err != nil {
			return
		}
		if len(recs) != int(h.NumRecords) {
			t.Fatalf("%d records decoded, header says %d", len(recs), h.NumRecords)
		}
		if h.LogAppendTime() {
			return // the records' own timestamps are not kept
		}
		again, err := DecodeRecords(Encode(h, recs))
		if err != nil || len(again) != len(recs) {
			t.Fatalf("re-encoded: %d records, %v", len(again), err)
		}
		for i := range recs {
			a, b := recs[i], again[i]
			if a.OffsetDelta != b.OffsetDelta || a.Timestamp != b.Timestamp || !sameBytes(a.Key, b.Key) || !sameBytes(a.Value, b.Value) || len(a.Headers) != len(b.Headers) {
				t.Fatalf("record %d: %+v re-encoded as %+v", i, a, b)
			}
		}
	})
}

// FuzzParseLimited runs the decoders with a decompressed-size limit and a
// small budget: no panic; what passes the limit passes Validate and
// decodes the same records; what Validate accepts is refused only as
// ErrDecompressedTooLarge; the budget is back at 0 after every call (and
// after Release of what ValidateAndDecodeLimited holds).
func FuzzParseLimited(f *testing.F) {
	for _, c := range allCodecs {
		f.Add(makeBatch(f, 3, c), uint16(64))
	}
	f.Add(zstdBatch(rleBomb(bombRecordPrefix(1<<20), 1<<20+1), 1), uint16(1024))
	f.Add(zstdBatch(rleBomb(bombRecordPrefix(1<<30), 1<<30), 1), uint16(1024))
	f.Fuzz(func(t *testing.T, raw []byte, limitKiB uint16) {
		b := NewBudget(4 << 20)
		lim := Limits{MaxBytes: int64(limitKiB) << 10, Budget: b}
		ctx := context.Background()
		_, _, _ = FindRecord(ctx, raw, lim, func(ts, _ int64) bool { return ts > 0 })
		if b.InUse() != 0 {
			t.Fatalf("FindRecord left %d bytes charged", b.InUse())
		}
		h, err := Parse(raw)
		if err != nil {
			return
		}
		_, lerr := ValidateLimited(ctx, raw, h, lim)
		recs, _, hold, derr := ValidateAndDecodeLimited(ctx, raw, h, lim)
		if (lerr == nil) != (derr == nil) {
			t.Fatalf("ValidateLimited: %v; ValidateAndDecodeLimited: %v", lerr, derr)
		}
		if derr == nil && hold.Bytes() != b.InUse() {
			t.Fatalf("hold of %d bytes, budget in use %d", hold.Bytes(), b.InUse())
		}
		hold.Release()
		if b.InUse() != 0 {
			t.Fatalf("budget in use %d after the calls", b.InUse())
		}
		plain, _, perr := ValidateAndDecode(raw, h)
		switch {
		case lerr == nil && perr != nil:
			t.Fatalf("accepted within limits, refused without: %v", perr)
		case lerr == nil && len(plain) != len(recs):
			t.Fatalf("%d records within limits, %d without", len(recs), len(plain))
		case lerr != nil && perr == nil && !errors.Is(lerr, ErrDecompressedTooLarge):
			t.Fatalf("valid batch refused within limits with %v, want ErrDecompressedTooLarge", lerr)
		}
	})
}
