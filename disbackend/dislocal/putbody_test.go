package dislocal

import (
	"reflect"
	"strings"
	"testing"

	"github.com/disgw/disgw/disbackend/disapi"
)

// The PutRecords JSON body as dislocal defined it before the type moved to
// disapi, kept here to pin what a body decodes to.
type oldPutRecordsRequest struct {
	StreamName string              `json:"stream_name"`
	StreamID   string              `json:"stream_id"`
	Records    []oldPutRecordEntry `json:"records"`
}

type oldPutRecordEntry struct {
	Data            *string `json:"data"`
	ExplicitHashKey string  `json:"explicit_hash_key"`
	PartitionID     string  `json:"partition_id"`
	PartitionKey    *string `json:"partition_key"`
	Timestamp       *int64  `json:"timestamp"`
}

// TestPutRecordsBodyDecode: bodies decode to the same values with disapi's
// PutRecordsRequest as with dislocal's former type, and fail alike (the
// DIS.4300 message names the Go type, the only difference).
func TestPutRecordsBodyDecode(t *testing.T) {
	t.Parallel()
	cases := []struct{ name, body string }{
		{"every field", `{"stream_name":"s","records":[{"data":"dmFsdWU=","partition_id":"shardId-0000000000","partition_key":"k","timestamp":1700000000123}]}`},
		{"empty, null and absent fields", `{"stream_name":"s","stream_id":"id1","records":[{"data":"","explicit_hash_key":"42"},{"data":null},{},{"partition_key":null,"timestamp":null}]}`},
		{"unknown fields", `{"stream_id":"id1","records":[{"data":"eA==","partition_key":"","timestamp":0,"unknown":1}],"extra":true}`},
		{"no records", `{"stream_name":"s","records":[]}`},
		{"records absent", `{"stream_name":"s"}`},
		{"records null", `{"stream_name":"s","records":null}`},
		{"data a number", `{"stream_name":"s","records":[{"data":5}]}`},
		{"timestamp a string", `{"stream_name":"s","records":[{"timestamp":"1"}]}`},
		{"stream_name a number", `{"stream_name":1}`},
		{"an array", `[]`},
		{"cut short", `{`},
		{"blank", `  `},
	}
	norm := strings.NewReplacer("disapi.", "", "dislocal.", "", "PutRecordsRequestEntry", "T", "PutRecordsRequest", "T", "oldPutRecordEntry", "T", "oldPutRecordsRequest", "T")
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var got disapi.PutRecordsRequest
			var want oldPutRecordsRequest
			gotErr, wantErr := decodeBody([]byte(tc.body), &got), decodeBody([]byte(tc.body), &want)
			if (gotErr == nil) != (wantErr == nil) {
				t.Fatalf("error %v, want %v", gotErr, wantErr)
			}
			if gotErr != nil {
				if gotErr.Code != wantErr.Code || norm.Replace(gotErr.Message) != norm.Replace(wantErr.Message) {
					t.Errorf("error %+v, want %+v", gotErr, wantErr)
				}
				return
			}
			if got.StreamName != want.StreamName || got.StreamID != want.StreamID || len(got.Records) != len(want.Records) || (got.Records == nil) != (want.Records == nil) {
				t.Fatalf("decoded %+v, want %+v", got, want)
			}
			for i, g := range got.Records {
				if as := (oldPutRecordEntry{Data: g.Data, ExplicitHashKey: g.ExplicitHashKey, PartitionID: g.PartitionID, PartitionKey: g.PartitionKey, Timestamp: g.Timestamp}); !reflect.DeepEqual(as, want.Records[i]) {
					t.Errorf("record %d %+v, want %+v", i, g, want.Records[i])
				}
			}
		})
	}
}
