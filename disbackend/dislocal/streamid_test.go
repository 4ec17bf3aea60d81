package dislocal

import (
	"context"
	"encoding/base64"
	"fmt"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/huaweicloud/huaweicloud-sdk-go-v3/services/dis/v2/model"
	"google.golang.org/protobuf/proto"

	"github.com/disgw/disgw/disbackend"
	"github.com/disgw/disgw/disbackend/disapi"
	"github.com/disgw/disgw/disbackend/dislocal/disproto"
	"github.com/disgw/disgw/disbackend/localstore"
)

// unknownStreamID is a well-formed stream_id that no stream has.
const unknownStreamID = "0000000000000000000"

// streamIDOf reads a stream's stream_id with DescribeStream.
func streamIDOf(t *testing.T, hs *httptest.Server, name string) string {
	t.Helper()
	st, m := call(t, hs, "GET", "/v2/p/streams/"+name, nil)
	mustStatus(t, st, m, 200)
	id, _ := m["stream_id"].(string)
	if len(id) != 19 {
		t.Fatalf("stream %s has stream_id %q, want 19 characters", name, id)
	}
	return id
}

// query encodes name, value pairs in order, keeping empty values (as the
// Java SDK sends a null-free request's "" fields).
func query(kv ...string) string {
	out := ""
	for i := 0; i+1 < len(kv); i += 2 {
		if out != "" {
			out += "&"
		}
		out += url.QueryEscape(kv[i]) + "=" + url.QueryEscape(kv[i+1])
	}
	return out
}

// firstData reads a cursor and returns its first record's data, in JSON
// and in protobuf (both must agree).
func firstData(t *testing.T, hs *httptest.Server, cursor string) string {
	t.Helper()
	recs, _ := jsonRecords(t, hs, cursor)
	pb := getProto(t, hs, cursor)
	if len(recs) == 0 || len(pb.Records) != len(recs) {
		t.Fatalf("cursor read %d JSON records, %d protobuf records", len(recs), len(pb.Records))
	}
	data, err := base64.StdEncoding.DecodeString(recs[0]["data"].(string))
	if err != nil || string(data) != string(pb.Records[0].Data) {
		t.Fatalf("first record: JSON %q (%v), protobuf %q", data, err, pb.Records[0].Data)
	}
	return string(data)
}

// nextSequenceNumber is the next sequence number of a stream's partition 0
// (the end of its sequence_number_range).
func nextSequenceNumber(t *testing.T, hs *httptest.Server, name string) string {
	t.Helper()
	st, m := call(t, hs, "GET", "/v2/p/streams/"+name+"?limit_partitions=1", nil)
	mustStatus(t, st, m, 200)
	r, _ := partitions(m)[0]["sequence_number_range"].(string)
	_, next, ok := strings.Cut(strings.Trim(r, "[]"), " : ")
	if !ok {
		t.Fatalf("sequence_number_range %q", r)
	}
	return next
}

// idServer runs dislocal over a localstore and a state file in dir, to be
// restarted over the same directory.
func idServer(t *testing.T, dir string) (*Server, *httptest.Server, func()) {
	t.Helper()
	st, err := localstore.Open(dir, localstore.Options{RetentionCheckInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(st, Options{StateFile: dir + "/dislocal.json"})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(s)
	return s, hs, func() { hs.Close(); _ = st.Close() }
}

// TestStreamIDCalls: every call that DIS's SDKs address by stream_id
// (docs/dis-api.md §2.5) finds the stream by its id in JSON, alone or
// beside an empty or unknown stream_name; a stream_name that names a
// stream wins over a stream_id naming another; an unknown id is DIS.4301,
// and neither name nor id is DIS.4200. The ids stay the same, and still
// address their streams, after dislocal restarts.
func TestStreamIDCalls(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	_, hs, stop := idServer(t, dir)
	defer func() { stop() }()
	createStream(t, hs, "s", 2)
	createStream(t, hs, "other", 1)
	createApp(t, hs, "g")
	id, otherID := streamIDOf(t, hs, "s"), streamIDOf(t, hs, "other")
	if id == otherID {
		t.Fatalf("two streams share stream_id %s", id)
	}
	for _, stream := range []string{"s", "other"} {
		st, m := put(t, hs, stream, map[string]any{"data": base64.StdEncoding.EncodeToString([]byte(stream + ":0")), "partition_id": "0"})
		mustStatus(t, st, m, 200)
	}
	data := func(v string) string { return base64.StdEncoding.EncodeToString([]byte(v)) }
	rec := []map[string]any{{"data": data("x"), "partition_id": "shardId-0000000000"}}

	type step struct {
		name             string
		method, path     string
		body             map[string]any
		wantStatus       int
		wantCode         string                       // a DIS error, else success
		check            func(m map[string]any) error // the answer, on success
		written, cursors string                       // PutRecords: the stream written; GetCursor: the stream read
	}
	steps := []step{
		// PutRecords (body stream_id).
		{name: "PutRecords by id", method: "POST", path: "/v2/p/records/", body: map[string]any{"stream_id": id, "records": rec}, written: "s"},
		{name: "PutRecords by id, empty name", method: "POST", path: "/v2/p/records/", body: map[string]any{"stream_name": "", "stream_id": id, "records": rec}, written: "s"},
		{name: "PutRecords by id, unknown name", method: "POST", path: "/v2/p/records/", body: map[string]any{"stream_name": "nope", "stream_id": id, "records": rec}, written: "s"},
		{name: "PutRecords name wins over id", method: "POST", path: "/v2/p/records/", body: map[string]any{"stream_name": "other", "stream_id": id, "records": rec}, written: "other"},
		{name: "PutRecords unknown id", method: "POST", path: "/v2/p/records/", body: map[string]any{"stream_id": unknownStreamID, "records": rec}, wantStatus: 400, wantCode: disapi.CodeStreamNotFound},
		{name: "PutRecords unknown name and id", method: "POST", path: "/v2/p/records/", body: map[string]any{"stream_name": "nope", "stream_id": unknownStreamID, "records": rec}, wantStatus: 400, wantCode: disapi.CodeStreamNotFound},
		{name: "PutRecords neither", method: "POST", path: "/v2/p/records/", body: map[string]any{"stream_name": "", "records": rec}, wantStatus: 400, wantCode: disapi.CodeInvalidRequest},

		// GetCursor (query stream-id), read back with GetRecords.
		{name: "GetCursor by id, empty name (Java SDK)", method: "GET", path: "/v2/p/cursors/?" + query("stream-name", "", "stream-id", id, "partition-id", "shardId-0000000000", "starting-sequence-number", "0"), cursors: "s"},
		{name: "GetCursor by id alone (Python SDK)", method: "GET", path: "/v2/p/cursors/?" + query("stream-id", id, "partition-id", "0", "cursor-type", "TRIM_HORIZON"), cursors: "s"},
		{name: "GetCursor name wins over id", method: "GET", path: "/v2/p/cursors/?" + query("stream-name", "other", "stream-id", id, "partition-id", "0", "cursor-type", "TRIM_HORIZON"), cursors: "other"},
		{name: "GetCursor unknown id", method: "GET", path: "/v2/p/cursors/?" + query("stream-id", unknownStreamID, "partition-id", "0", "cursor-type", "TRIM_HORIZON"), wantStatus: 400, wantCode: disapi.CodeStreamNotFound},
		{name: "GetCursor id, unknown partition", method: "GET", path: "/v2/p/cursors/?" + query("stream-id", id, "partition-id", "2", "cursor-type", "TRIM_HORIZON"), wantStatus: 400, wantCode: disapi.CodePartitionNotFound},
		{name: "GetCursor neither", method: "GET", path: "/v2/p/cursors/?" + query("stream-name", "", "partition-id", "0", "cursor-type", "TRIM_HORIZON"), wantStatus: 400, wantCode: disapi.CodeInvalidRequest},

		// CommitCheckpoint (body stream_id), GetCheckpoint and DeleteCheckpoint (query stream_id).
		{name: "CommitCheckpoint by id", method: "POST", path: "/v2/p/checkpoints/", body: map[string]any{"app_name": "g", "checkpoint_type": "LAST_READ", "stream_id": id, "partition_id": "shardId-0000000000", "sequence_number": "1", "metadata": "by-id"}, wantStatus: 201},
		{name: "GetCheckpoint by id", method: "GET", path: "/v2/p/checkpoints/?" + query("app_name", "g", "checkpoint_type", "LAST_READ", "partition_id", "shardId-0000000000", "stream_id", id), check: wantCheckpoint("1", "by-id")},
		{name: "GetCheckpoint by name sees it", method: "GET", path: "/v2/p/checkpoints/?" + query("app_name", "g", "checkpoint_type", "LAST_READ", "partition_id", "0", "stream_name", "s"), check: wantCheckpoint("1", "by-id")},
		{name: "GetCheckpoint other untouched", method: "GET", path: "/v2/p/checkpoints/?" + query("app_name", "g", "checkpoint_type", "LAST_READ", "partition_id", "0", "stream_name", "other"), check: wantCheckpoint("-1", "")},
		{name: "CommitCheckpoint name wins over id", method: "POST", path: "/v2/p/checkpoints/", body: map[string]any{"app_name": "g", "checkpoint_type": "LAST_READ", "stream_name": "other", "stream_id": id, "partition_id": "0", "sequence_number": "1", "metadata": "named"}, wantStatus: 201},
		{name: "GetCheckpoint name wins over id", method: "GET", path: "/v2/p/checkpoints/?" + query("app_name", "g", "checkpoint_type", "LAST_READ", "partition_id", "0", "stream_name", "other", "stream_id", id), check: wantCheckpoint("1", "named")},
		{name: "GetCheckpoint by id after a commit to other", method: "GET", path: "/v2/p/checkpoints/?" + query("app_name", "g", "checkpoint_type", "LAST_READ", "partition_id", "0", "stream_id", id), check: wantCheckpoint("1", "by-id")},
		{name: "CommitCheckpoint unknown id", method: "POST", path: "/v2/p/checkpoints/", body: map[string]any{"app_name": "g", "checkpoint_type": "LAST_READ", "stream_id": unknownStreamID, "partition_id": "0", "sequence_number": "0"}, wantStatus: 400, wantCode: disapi.CodeStreamNotFound},
		{name: "CommitCheckpoint neither", method: "POST", path: "/v2/p/checkpoints/", body: map[string]any{"app_name": "g", "checkpoint_type": "LAST_READ", "partition_id": "0", "sequence_number": "0"}, wantStatus: 400, wantCode: disapi.CodeInvalidRequest},
		{name: "GetCheckpoint unknown id", method: "GET", path: "/v2/p/checkpoints/?" + query("app_name", "g", "checkpoint_type", "LAST_READ", "partition_id", "0", "stream_id", unknownStreamID), wantStatus: 400, wantCode: disapi.CodeStreamNotFound},
		{name: "GetCheckpoint neither", method: "GET", path: "/v2/p/checkpoints/?" + query("app_name", "g", "checkpoint_type", "LAST_READ", "partition_id", "0"), wantStatus: 400, wantCode: disapi.CodeInvalidRequest},

		// ShowConsumerState (the Python SDK: the id in the path and in stream_id).
		{name: "ShowConsumerState by id", method: "GET", path: "/v2/p/apps/g/streams/" + id + "?" + query("checkpoint_type", "LAST_READ", "limit", "10", "start_partition_id", "", "stream_id", id), check: func(m map[string]any) error {
			ps, _ := m["partition_consuming_states"].([]any)
			if m["stream_name"] != "s" || len(ps) != 2 || ps[0].(map[string]any)["sequence_number"] != "1" {
				return fmt.Errorf("consumer state %v, want stream s with checkpoint 1 on partition 0 of 2", m)
			}
			return nil
		}},
		{name: "ShowConsumerState unknown id", method: "GET", path: "/v2/p/apps/g/streams/" + unknownStreamID + "?" + query("stream_id", unknownStreamID), wantStatus: 400, wantCode: disapi.CodeStreamNotFound},

		// DescribeStream (query stream_id; the Java adapter puts the id in the path and stream_name too).
		{name: "DescribeStream by id (Java adapter)", method: "GET", path: "/v2/p/streams/" + id + "/?" + query("stream_name", id, "start_partitionId", "", "limit_partitions", "100", "stream_id", id), check: wantDescribed("s", id)},
		{name: "DescribeStream by id (Python SDK)", method: "GET", path: "/v2/p/streams/nope?" + query("limit_partitions", "1000", "stream_id", id), check: wantDescribed("s", id)},
		{name: "DescribeStream name wins over id", method: "GET", path: "/v2/p/streams/other?" + query("stream_id", id), check: wantDescribed("other", otherID)},
		{name: "DescribeStream unknown id", method: "GET", path: "/v2/p/streams/" + unknownStreamID + "?" + query("stream_id", unknownStreamID), wantStatus: 400, wantCode: disapi.CodeStreamNotFound},

		// DeleteCheckpoint last: it empties what the steps above read.
		{name: "DeleteCheckpoint unknown id", method: "DELETE", path: "/v2/p/checkpoints/?" + query("app_name", "g", "checkpoint_type", "LAST_READ", "stream_id", unknownStreamID), wantStatus: 400, wantCode: disapi.CodeStreamNotFound},
		{name: "DeleteCheckpoint neither", method: "DELETE", path: "/v2/p/checkpoints/?" + query("app_name", "g", "checkpoint_type", "LAST_READ"), wantStatus: 400, wantCode: disapi.CodeInvalidRequest},
		{name: "DeleteCheckpoint by id", method: "DELETE", path: "/v2/p/checkpoints/?" + query("app_name", "g", "checkpoint_type", "LAST_READ", "partition_id", "0", "stream_id", id), wantStatus: 204},
		{name: "GetCheckpoint after DeleteCheckpoint by id", method: "GET", path: "/v2/p/checkpoints/?" + query("app_name", "g", "checkpoint_type", "LAST_READ", "partition_id", "0", "stream_name", "s"), check: wantCheckpoint("-1", "")},
		{name: "DeleteCheckpoint by id kept other's", method: "GET", path: "/v2/p/checkpoints/?" + query("app_name", "g", "checkpoint_type", "LAST_READ", "partition_id", "0", "stream_name", "other"), check: wantCheckpoint("1", "named")},
	}
	for _, tc := range steps {
		t.Run(tc.name, func(t *testing.T) {
			before := map[string]string{}
			if tc.written != "" {
				for _, s := range []string{"s", "other"} {
					before[s] = nextSequenceNumber(t, hs, s)
				}
			}
			var body any
			if tc.body != nil {
				body = tc.body
			}
			st, m := call(t, hs, tc.method, tc.path, body)
			if tc.wantCode != "" {
				wantCode(t, st, m, tc.wantStatus, tc.wantCode)
				return
			}
			want := tc.wantStatus
			if want == 0 {
				want = 200
			}
			mustStatus(t, st, m, want)
			if tc.check != nil {
				if err := tc.check(m); err != nil {
					t.Fatal(err)
				}
			}
			if tc.written != "" {
				if m["failed_record_count"] != 0.0 {
					t.Fatalf("PutRecords answered %v", m)
				}
				for _, s := range []string{"s", "other"} {
					after := nextSequenceNumber(t, hs, s)
					if grew := after != before[s]; grew != (s == tc.written) {
						t.Errorf("stream %s: next sequence number %s -> %s; want a record on %s only", s, before[s], after, tc.written)
					}
				}
			}
			if tc.cursors != "" {
				if got := firstData(t, hs, m["partition_cursor"].(string)); got != tc.cursors+":0" {
					t.Errorf("cursor reads %q first, want %q", got, tc.cursors+":0")
				}
			}
		})
	}

	// Restart: the ids are the same and still address their streams.
	stop()
	_, hs, stop = idServer(t, dir)
	if got := streamIDOf(t, hs, "s"); got != id {
		t.Fatalf("stream_id after a restart %s, want %s", got, id)
	}
	st, m := call(t, hs, "GET", "/v2/p/cursors/?"+query("stream-id", id, "partition-id", "0", "cursor-type", "TRIM_HORIZON"), nil)
	mustStatus(t, st, m, 200)
	if got := firstData(t, hs, m["partition_cursor"].(string)); got != "s:0" {
		t.Errorf("after a restart the id's cursor reads %q first, want s:0", got)
	}
}

// wantCheckpoint checks a GetCheckpoint answer.
func wantCheckpoint(sn, meta string) func(map[string]any) error {
	return func(m map[string]any) error {
		if m["sequence_number"] != sn || m["metadata"] != meta {
			return fmt.Errorf("checkpoint %v, want sequence_number %s, metadata %q", m, sn, meta)
		}
		return nil
	}
}

// wantDescribed checks a DescribeStream answer's name and id.
func wantDescribed(name, id string) func(map[string]any) error {
	return func(m map[string]any) error {
		if m["stream_name"] != name || m["stream_id"] != id || len(asSlice(m["partitions"])) == 0 {
			return fmt.Errorf("described %v, want stream %s (%s) with its partitions", m, name, id)
		}
		return nil
	}
}

// TestStreamIDProtobuf: a protobuf PutRecords addresses its stream by
// streamId (field 30) as the JSON body does by stream_id: alone, with an
// unknown streamName, losing to a streamName that names a stream, and
// DIS.4301 (in JSON) for an unknown id.
func TestStreamIDProtobuf(t *testing.T) {
	t.Parallel()
	_, hs := startServer(t, Options{})
	createStream(t, hs, "s", 1)
	createStream(t, hs, "other", 1)
	id := streamIDOf(t, hs, "s")
	recs := []*disproto.PutRecordsRequestEntry{{Data: []byte("pb"), PartitionId: proto.String("0")}}
	cases := []struct {
		name       string
		req        *disproto.PutRecordsRequest
		wantStream string // "" for DIS.4301
	}{
		{"id only", &disproto.PutRecordsRequest{StreamId: proto.String(id), Records: recs}, "s"},
		{"unknown name and id", &disproto.PutRecordsRequest{StreamName: proto.String("nope"), StreamId: proto.String(id), Records: recs}, "s"},
		{"name wins over id", &disproto.PutRecordsRequest{StreamName: proto.String("other"), StreamId: proto.String(id), Records: recs}, "other"},
		{"unknown id", &disproto.PutRecordsRequest{StreamId: proto.String(unknownStreamID), Records: recs}, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := map[string]string{"s": nextSequenceNumber(t, hs, "s"), "other": nextSequenceNumber(t, hs, "other")}
			if tc.wantStream == "" {
				b, _ := proto.Marshal(tc.req)
				st, ct, body := rawCall(t, hs, "POST", "/v2/p/records/", b, "Content-Type", sdkProtobufContentType)
				wantJSONError(t, st, ct, body, 400, disapi.CodeStreamNotFound)
				return
			}
			res := putProto(t, hs, tc.req)
			if res.GetFailedRecordCount() != 0 || len(res.Records) != 1 || res.Records[0].GetSequenceNumber() != before[tc.wantStream] {
				t.Fatalf("PutRecordsResult %v, want the record at %s of %s", res, before[tc.wantStream], tc.wantStream)
			}
			for _, s := range []string{"s", "other"} {
				if grew := nextSequenceNumber(t, hs, s) != before[s]; grew != (s == tc.wantStream) {
					t.Errorf("stream %s grew %v, want a record on %s only", s, grew, tc.wantStream)
				}
			}
		})
	}
	// The records are read back in protobuf through a cursor got by id.
	st, m := getCursor(t, hs, query("stream-id", id, "partition-id", "0", "cursor-type", "TRIM_HORIZON"))
	mustStatus(t, st, m, 200)
	pb := getProto(t, hs, m["partition_cursor"].(string))
	if len(pb.Records) != 2 || string(pb.Records[0].Data) != "pb" || pb.Records[1].GetSequenceNumber() != "1" {
		t.Fatalf("stream s read by id in protobuf: %v, want the 2 records written by id", pb.Records)
	}
}

// TestStreamIDSDKAndDeny: the official Go SDK's PutRecords with only
// StreamId writes to the stream, and an AK denied a stream (Options.Deny)
// is denied it by id as by name (403 DIS.4116).
func TestStreamIDSDKAndDeny(t *testing.T) {
	t.Parallel()
	const ak2, sk2 = "second-ak", "second-sk"
	_, hs := startServer(t, Options{AK: testAK, SK: testSK, ProjectID: testProject,
		Keys: map[string]string{ak2: sk2}, Deny: map[string][]string{ak2: {"private"}}})
	main, second := sdkClient(t, hs.URL, testAK, testSK), sdkClient(t, hs.URL, ak2, sk2)
	ids := map[string]string{}
	for _, name := range []string{"open", "private-1"} {
		if _, err := main.CreateStream(&model.CreateStreamRequest{Body: &model.CreateStreamReq{StreamName: name, PartitionCount: 1,
			DataDuration: ptr(int32(24)), StreamType: ptr(model.GetCreateStreamReqStreamTypeEnum().COMMON)}}); err != nil {
			t.Fatal(err)
		}
		d, err := main.ShowStream(&model.ShowStreamRequest{StreamName: name})
		if err != nil || d.StreamId == nil {
			t.Fatalf("describe %s: %v %v", name, d, err)
		}
		ids[name] = *d.StreamId
	}
	send := func(c interface {
		SendRecords(*model.SendRecordsRequest) (*model.SendRecordsResponse, error)
	}, id string) (*model.SendRecordsResponse, error) {
		return c.SendRecords(&model.SendRecordsRequest{Body: &model.PutRecordsRequest{StreamId: &id,
			Records: []model.PutRecordsRequestEntry{{Data: base64.StdEncoding.EncodeToString([]byte("by-id"))}}}})
	}
	res, err := send(second, ids["open"])
	if err != nil || res.FailedRecordCount == nil || *res.FailedRecordCount != 0 || len(*res.Records) != 1 || *(*res.Records)[0].SequenceNumber != "0" {
		t.Fatalf("Go SDK PutRecords by stream_id: %v %v", res, err)
	}
	if _, err := send(main, ids["private-1"]); err != nil {
		t.Fatalf("main key by id on a stream denied to the second: %v", err)
	}
	if _, err := send(second, ids["private-1"]); err == nil {
		t.Error("PutRecords by id of a denied stream served")
	} else if st, code := disCode(t, err); st != 403 || code != disapi.CodeForbidden {
		t.Errorf("denied PutRecords by id: %d %s", st, code)
	}
	if _, err := send(second, unknownStreamID); err == nil {
		t.Error("PutRecords by an unknown id served")
	} else if st, code := disCode(t, err); st != 400 || code != disapi.CodeStreamNotFound {
		t.Errorf("PutRecords by an unknown id: %d %s", st, code)
	}
}

// TestStreamIDRecreated: a stream deleted and created again under its name
// has a new stream_id, and the old id names no stream (DIS.4301), whether
// dislocal deleted it or the backend did behind its back (its state file
// then still maps the name to the old id).
func TestStreamIDRecreated(t *testing.T) {
	t.Parallel()
	srv, hs := startServer(t, Options{})
	cases := []struct {
		name     string
		recreate func(t *testing.T, stream string)
	}{
		{"through dislocal", func(t *testing.T, stream string) {
			st, m := call(t, hs, "DELETE", "/v2/p/streams/"+stream, nil)
			mustStatus(t, st, m, 204)
			createStream(t, hs, stream, 1)
		}},
		{"behind dislocal's back", func(t *testing.T, stream string) {
			ctx := context.Background()
			if err := srv.b.DeleteStream(ctx, stream); err != nil {
				t.Fatal(err)
			}
			if _, err := srv.b.CreateStream(ctx, disbackend.StreamSpec{Name: stream, TopicName: stream, PartitionCount: 1, Config: disbackend.StreamConfig{Retention: time.Hour}}); err != nil {
				t.Fatal(err)
			}
		}},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			stream := fmt.Sprintf("r%d", i)
			createStream(t, hs, stream, 1)
			old := streamIDOf(t, hs, stream)
			tc.recreate(t, stream)
			st, m := call(t, hs, "GET", "/v2/p/streams/"+old+"?"+query("stream_id", old), nil)
			wantCode(t, st, m, 400, disapi.CodeStreamNotFound)
			st, m = getCursor(t, hs, query("stream-id", old, "partition-id", "0", "cursor-type", "LATEST"))
			wantCode(t, st, m, 400, disapi.CodeStreamNotFound)
			if id := streamIDOf(t, hs, stream); id == old {
				t.Fatalf("recreated stream kept stream_id %s", old)
			} else {
				st, m = call(t, hs, "GET", "/v2/p/streams/x?"+query("stream_id", id), nil)
				mustStatus(t, st, m, 200)
				if m["stream_name"] != stream {
					t.Fatalf("new id describes %v", m)
				}
			}
		})
	}
}
