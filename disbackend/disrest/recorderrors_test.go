package disrest

import (
	"bytes"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/disgw/disgw/disbackend"
	"github.com/disgw/disgw/disbackend/dislocal"
)

// TestRecordErrors: a batch with records that record format native cannot
// store, or larger than DIS takes in one record, is refused whole with a
// disbackend.RecordsError naming each of them in batch order (KIP-467
// record errors): ErrInvalidRecord when all are format refusals,
// ErrRecordTooLarge when any is too large; nothing is written.
func TestRecordErrors(t *testing.T) {
	t.Parallel()
	_, url := startDIS(t, dislocal.Options{})
	s := newStore(t, url, nil)
	stream := mkStreamFormat(t, s, "record-errors", 1, disbackend.RecordFormatNative)

	recs := testRecords()
	var want []int32
	for i, r := range recs {
		rec := asRecord(r)
		if plainReason(&rec) != "" {
			want = append(want, int32(i))
		}
	}
	big := slices.Clone(recs)
	big = append(big, kmsg.Record{Key: []byte("big"), Value: bytes.Repeat([]byte{'v'}, maxRecordBytes+1)})
	for _, tc := range []struct {
		name  string
		recs  []kmsg.Record
		want  []int32
		err   error
		large int32 // the index of the record too large, or -1
	}{
		{"native", recs, want, disbackend.ErrInvalidRecord, -1},
		{"native and too large", big, append(slices.Clone(want), int32(len(recs))), disbackend.ErrRecordTooLarge, int32(len(recs))},
	} {
		_, err := s.Append(stream, 0, kafkaBatch(tc.recs, 1)).Wait(ctxT(t))
		var re *disbackend.RecordsError
		if !errors.As(err, &re) || !errors.Is(err, tc.err) {
			t.Fatalf("%s: %v, want a RecordsError of %v", tc.name, err, tc.err)
		}
		if tc.err == disbackend.ErrRecordTooLarge && errors.Is(err, disbackend.ErrInvalidRecord) {
			t.Fatalf("%s: %v is also ErrInvalidRecord", tc.name, err)
		}
		var got []int32
		for _, r := range re.Records {
			got = append(got, r.Index)
			prefix := nativeRefusal
			if r.Index == tc.large {
				prefix = "the record is "
			}
			if !strings.HasPrefix(r.Message, prefix) {
				t.Errorf("%s: record %d: %q, want it to begin %q", tc.name, r.Index, r.Message, prefix)
			}
		}
		if !slices.Equal(got, tc.want) {
			t.Fatalf("%s: record errors %v, want %v", tc.name, got, tc.want)
		}
		if r, _ := s.Range(stream, 0); r.Next != 0 {
			t.Fatalf("%s: a refused batch wrote %d records", tc.name, r.Next)
		}
	}
}
