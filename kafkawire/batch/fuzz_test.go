package batch

import (
	"encoding/binary"
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
