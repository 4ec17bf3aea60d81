package disrest

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"testing"

	"github.com/disgw/disgw/disbackend"
)

// The PutRecords body as disrest defined and built it before the body type
// moved to disapi, kept here to pin the wire bytes.
type oldPutEntry struct {
	Data         string  `json:"data"`
	PartitionID  string  `json:"partition_id"`
	PartitionKey *string `json:"partition_key,omitempty"`
	Timestamp    *int64  `json:"timestamp,omitempty"`
}

type oldPutBody struct {
	StreamName string        `json:"stream_name"`
	Records    []oldPutEntry `json:"records"`
}

type oldPutRequest struct {
	Body *oldPutBody `json:"body,omitempty"`
}

func oldPutRecordsBody(stream string, part int32, recs []disRecord, todo []int) *oldPutBody {
	pid := disbackend.PartitionID(part)
	body := &oldPutBody{StreamName: stream, Records: make([]oldPutEntry, len(todo))}
	for i, idx := range todo {
		rec := recs[idx]
		e := oldPutEntry{Data: base64.StdEncoding.EncodeToString(rec.data), PartitionID: pid, PartitionKey: rec.key}
		if rec.ts >= 0 {
			ts := rec.ts
			e.Timestamp = &ts
		}
		body.Records[i] = e
	}
	return body
}

// sdkJSON encodes v as the SDK's HTTP client does a request body
// (encoding/json, HTML not escaped).
func sdkJSON(t *testing.T, v any) []byte {
	t.Helper()
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// TestPutRecordsBodyBytes: the PutRecords body built with disapi's type
// encodes to the same bytes as the body disrest built before, for records
// with and without data, partition key (empty, with characters JSON may
// escape) and timestamp (DIS-stamped, zero, negative never sent), a subset
// of the records (todo) and a request with no records.
func TestPutRecordsBodyBytes(t *testing.T) {
	t.Parallel()
	str := func(s string) *string { return &s }
	recs := []disRecord{
		{data: []byte("value"), key: str("key"), ts: 1_700_000_000_123},
		{data: nil, key: nil, ts: -1},
		{data: []byte{}, key: str(""), ts: 0},
		{data: []byte{0, 0xff, '<', '>', '&', '"', '\\', '\n'}, key: str("<&>\"\\\u2028é"), ts: 1},
		{data: bytes.Repeat([]byte("x"), 1000), key: nil, ts: 1<<53 + 1},
	}
	cases := []struct {
		name   string
		stream string
		part   int32
		todo   []int
	}{
		{"all records", "s", 0, []int{0, 1, 2, 3, 4}},
		{"some, out of order", "stream-<é>", 12, []int{4, 2}},
		{"largest partition", "s", 2147483647, []int{1}},
		{"none", "s", 3, []int{}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := sdkJSON(t, &putRequest{Body: putRecordsBody(tc.stream, tc.part, recs, tc.todo)})
			want := sdkJSON(t, &oldPutRequest{Body: oldPutRecordsBody(tc.stream, tc.part, recs, tc.todo)})
			if !bytes.Equal(got, want) {
				t.Errorf("request:\n got %s\nwant %s", got, want)
			}
			got = sdkJSON(t, putRecordsBody(tc.stream, tc.part, recs, tc.todo))
			want = sdkJSON(t, oldPutRecordsBody(tc.stream, tc.part, recs, tc.todo))
			if !bytes.Equal(got, want) {
				t.Errorf("body:\n got %s\nwant %s", got, want)
			}
		})
	}
}
