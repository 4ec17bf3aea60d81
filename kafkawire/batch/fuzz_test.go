package batch

import (
	"hash/crc32"
	"testing"
)

// crc32c is the tests' own CRC-32C, independent of CRCTable.
func crc32c(b []byte) uint32 { return crc32.Checksum(b, crc32.MakeTable(crc32.Castagnoli)) }

// FuzzParse feeds arbitrary bytes to every decoder of the package: no
// panic; Validate and ValidateAndDecode agree; an accepted batch decodes
// to its record count, and re-encoding its records gives them back.
func FuzzParse(f *testing.F) {
	for _, c := range allCodecs {
		f.Add(makeBatch(f, 3, c))
	}
	f.Add(makeBatch(f, 1, CodecNone)[:40])
	f.Add(Encode(NewHeader(5), []Record{{Value: []byte("v"), Headers: []RecordHeader{{Key: "k"}}}, {OffsetDelta: 1}}))
	f.Fuzz(func(t *testing.T, raw []byte) {
		_, _ = DecodeRecords(raw)
		h, err := Parse(raw)
		if err != nil {
			return
		}
		verr := Validate(raw, h)
		recs, err := ValidateAndDecode(raw, h)
		if (verr == nil) != (err == nil) {
			t.Fatalf("Validate = %v, ValidateAndDecode = %v", verr, err)
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
