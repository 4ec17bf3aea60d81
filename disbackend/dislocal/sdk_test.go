package dislocal

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/huaweicloud/huaweicloud-sdk-go-v3/core/auth/basic"
	"github.com/huaweicloud/huaweicloud-sdk-go-v3/core/config"
	"github.com/huaweicloud/huaweicloud-sdk-go-v3/core/sdkerr"
	dis "github.com/huaweicloud/huaweicloud-sdk-go-v3/services/dis/v2"
	"github.com/huaweicloud/huaweicloud-sdk-go-v3/services/dis/v2/model"
	"go.uber.org/zap/zaptest"

	"github.com/disgw/disgw/disbackend/localstore"
)

const (
	testAK      = "QTWAOYTTINDUT2QVKYUC"
	testSK      = "MFyfvK41ba2giqM7Uio6PznpdUKGpownRZlmVmHc"
	testProject = "d575b0b740e54221aeb9a165653b103d"
)

// startServer runs a Server over a fresh localstore on 127.0.0.1:0.
func startServer(t testing.TB, opts Options) (*Server, *httptest.Server) {
	t.Helper()
	dir := t.TempDir()
	st, err := localstore.Open(dir, localstore.Options{Now: opts.Now, RetentionCheckInterval: -1, Logger: zaptest.NewLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	if opts.StateFile == "" {
		opts.StateFile = dir + "/dislocal.json"
	}
	opts.Logger = zaptest.NewLogger(t)
	s, err := New(st, opts)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(s)
	t.Cleanup(hs.Close)
	return s, hs
}

func sdkClient(t *testing.T, endpoint, ak, sk string) *dis.DisClient {
	t.Helper()
	cred, err := basic.NewCredentialsBuilder().WithAk(ak).WithSk(sk).WithProjectId(testProject).SafeBuild()
	if err != nil {
		t.Fatal(err)
	}
	hc, err := dis.DisClientBuilder().
		WithEndpoints([]string{endpoint}).
		WithCredential(cred).
		WithHttpConfig(config.DefaultHttpConfig().WithTimeout(10 * time.Second)).
		SafeBuild()
	if err != nil {
		t.Fatal(err)
	}
	return dis.NewDisClient(hc)
}

// disCode returns the HTTP status and DIS error code of an SDK error. The
// Go SDK does not parse DIS's {"errorCode","message"} body, so the raw body
// is in ErrorMessage.
func disCode(t *testing.T, err error) (int, string) {
	t.Helper()
	var se *sdkerr.ServiceResponseError
	if !errors.As(err, &se) {
		t.Fatalf("error %v (%T) is not a service response error", err, err)
	}
	var body struct {
		ErrorCode string `json:"errorCode"`
	}
	if json.Unmarshal([]byte(se.ErrorMessage), &body) != nil {
		t.Fatalf("error body %q is not DIS's JSON", se.ErrorMessage)
	}
	return se.StatusCode, body.ErrorCode
}

// readAll follows next_partition_cursor until a read returns no records.
func readAll(t *testing.T, c *dis.DisClient, cur string) []model.Record {
	t.Helper()
	var out []model.Record
	for {
		resp, err := c.ConsumeRecords(&model.ConsumeRecordsRequest{PartitionCursor: cur})
		if err != nil {
			t.Fatal(err)
		}
		if resp.Records == nil || len(*resp.Records) == 0 {
			return out
		}
		out = append(out, *resp.Records...)
		cur = *resp.NextPartitionCursor
	}
}

func cursorOf(t *testing.T, c *dis.DisClient, req model.ShowCursorRequest) string {
	t.Helper()
	resp, err := c.ShowCursor(&req)
	if err != nil {
		t.Fatalf("ShowCursor %+v: %v", req, err)
	}
	return *resp.PartitionCursor
}

func ptr[T any](v T) *T { return &v }

func sn(r model.Record) int64 {
	n, _ := strconv.ParseInt(*r.SequenceNumber, 10, 64)
	return n
}

// TestOfficialSDK drives dislocal, signatures checked, with the official Go
// SDK's DIS client, unchanged.
func TestOfficialSDK(t *testing.T) {
	t.Parallel()
	srv, hs := startServer(t, Options{AK: testAK, SK: testSK, ProjectID: testProject})
	c := sdkClient(t, hs.URL, testAK, testSK)
	const stream = "sdk_stream-1"

	_, err := c.CreateStream(&model.CreateStreamRequest{Body: &model.CreateStreamReq{
		StreamName: stream, PartitionCount: 3, DataDuration: ptr(int32(24)),
		StreamType: ptr(model.GetCreateStreamReqStreamTypeEnum().COMMON),
	}})
	if err != nil {
		t.Fatal(err)
	}

	// 1,000 records in two PutRecords of 500, keyed so that they spread.
	type sent struct{ key, data string }
	byPart := map[string][]sent{}
	for batch := 0; batch < 2; batch++ {
		var entries []model.PutRecordsRequestEntry
		var want []sent
		for i := 0; i < 500; i++ {
			n := batch*500 + i
			s := sent{key: fmt.Sprintf("key-%d", n%37), data: fmt.Sprintf("record %d", n)}
			want = append(want, s)
			entries = append(entries, model.PutRecordsRequestEntry{
				Data: base64.StdEncoding.EncodeToString([]byte(s.data)), PartitionKey: ptr(s.key),
			})
		}
		resp, err := c.SendRecords(&model.SendRecordsRequest{Body: &model.PutRecordsRequest{StreamName: stream, Records: entries}})
		if err != nil {
			t.Fatal(err)
		}
		if *resp.FailedRecordCount != 0 || len(*resp.Records) != 500 {
			t.Fatalf("SendRecords: %d failed, %d results", *resp.FailedRecordCount, len(*resp.Records))
		}
		for i, r := range *resp.Records {
			p := *r.PartitionId
			if got, want := *r.SequenceNumber, strconv.Itoa(len(byPart[p])); got != want {
				t.Fatalf("record %d in %s: sequence number %s, want %s", batch*500+i, p, got, want)
			}
			byPart[p] = append(byPart[p], want[i])
		}
	}
	if len(byPart) != 3 {
		t.Fatalf("records went to %d partitions, want 3", len(byPart))
	}

	// TRIM_HORIZON reads every partition back, in order, with keys.
	total := 0
	for p, want := range byPart {
		got := readAll(t, c, cursorOf(t, c, model.ShowCursorRequest{StreamName: stream, PartitionId: p, CursorType: ptr(model.GetShowCursorRequestCursorTypeEnum().TRIM_HORIZON)}))
		if len(got) != len(want) {
			t.Fatalf("%s: read %d records, want %d", p, len(got), len(want))
		}
		for i, r := range got {
			data, _ := base64.StdEncoding.DecodeString(*r.Data)
			if sn(r) != int64(i) || string(data) != want[i].data || r.PartitionKey == nil || *r.PartitionKey != want[i].key {
				t.Fatalf("%s record %d: got sn %s data %q key %v, want %q %q", p, i, *r.SequenceNumber, data, r.PartitionKey, want[i].data, want[i].key)
			}
			if *r.TimestampType != "CreateTime" || *r.Timestamp <= 0 {
				t.Fatalf("%s record %d: timestamp %d %s", p, i, *r.Timestamp, *r.TimestampType)
			}
		}
		total += len(got)
	}
	if total != 1000 {
		t.Fatalf("read %d records back, want 1000", total)
	}

	const p0 = "shardId-0000000000"
	all := readAll(t, c, cursorOf(t, c, model.ShowCursorRequest{StreamName: stream, PartitionId: "0", CursorType: ptr(model.GetShowCursorRequestCursorTypeEnum().TRIM_HORIZON)}))
	n0 := int64(len(all))
	types := model.GetShowCursorRequestCursorTypeEnum()
	// AT_SEQUENCE_NUMBER and AFTER_SEQUENCE_NUMBER.
	at := readAll(t, c, cursorOf(t, c, model.ShowCursorRequest{StreamName: stream, PartitionId: p0, CursorType: ptr(types.AT_SEQUENCE_NUMBER), StartingSequenceNumber: ptr("5")}))
	if len(at) == 0 || sn(at[0]) != 5 || int64(len(at)) != n0-5 {
		t.Fatalf("AT_SEQUENCE_NUMBER 5: %d records from %v", len(at), at[0].SequenceNumber)
	}
	after := readAll(t, c, cursorOf(t, c, model.ShowCursorRequest{StreamName: stream, PartitionId: p0, CursorType: ptr(types.AFTER_SEQUENCE_NUMBER), StartingSequenceNumber: ptr("5")}))
	if len(after) == 0 || sn(after[0]) != 6 {
		t.Fatalf("AFTER_SEQUENCE_NUMBER 5: first %v", after[0].SequenceNumber)
	}
	// AT_TIMESTAMP: the first record whose timestamp is >= that of record 10.
	ts := *all[10].Timestamp
	atTS := readAll(t, c, cursorOf(t, c, model.ShowCursorRequest{StreamName: stream, PartitionId: p0, CursorType: ptr(types.AT_TIMESTAMP), Timestamp: ptr(ts)}))
	first := sn(atTS[0])
	if *atTS[0].Timestamp < ts || (first > 0 && *all[first-1].Timestamp >= ts) || first > 10 {
		t.Fatalf("AT_TIMESTAMP %d: starts at %d (timestamp %d)", ts, first, *atTS[0].Timestamp)
	}
	// LATEST: nothing now, then the record written after the cursor.
	resp, err := c.ConsumeRecords(&model.ConsumeRecordsRequest{PartitionCursor: cursorOf(t, c, model.ShowCursorRequest{StreamName: stream, PartitionId: p0, CursorType: ptr(types.LATEST)})})
	if err != nil || len(*resp.Records) != 0 {
		t.Fatalf("LATEST: %v, %v", err, resp)
	}
	put, err := c.SendRecords(&model.SendRecordsRequest{Body: &model.PutRecordsRequest{StreamName: stream, Records: []model.PutRecordsRequestEntry{
		{Data: base64.StdEncoding.EncodeToString([]byte("late")), PartitionId: ptr(p0)},
	}}})
	if err != nil || *(*put.Records)[0].SequenceNumber != strconv.FormatInt(n0, 10) {
		t.Fatalf("SendRecords to %s: %v %+v", p0, err, put)
	}
	late := readAll(t, c, *resp.NextPartitionCursor)
	if len(late) != 1 || sn(late[0]) != n0 || late[0].PartitionKey != nil {
		t.Fatalf("after LATEST: %+v", late)
	}

	// DescribeStream.
	desc, err := c.ShowStream(&model.ShowStreamRequest{StreamName: stream})
	if err != nil {
		t.Fatal(err)
	}
	if len(*desc.StreamId) != 19 || *desc.RetentionPeriod != 24 || *desc.WritablePartitionCount != 3 ||
		*desc.ReadablePartitionCount != 3 || len(*desc.Partitions) != 3 || desc.StreamType.Value() != "COMMON" {
		t.Fatalf("ShowStream: %+v", desc)
	}
	for i, p := range *desc.Partitions {
		n := int64(len(byPart[*p.PartitionId]))
		if i == 0 {
			n++
		}
		if p.Status.Value() != "ACTIVE" || *p.SequenceNumberRange != fmt.Sprintf("[0 : %d]", n) || *p.HashRange != hashRange(int32(i), 3) {
			t.Fatalf("partition %d: %s %s %s", i, p.Status.Value(), *p.SequenceNumberRange, *p.HashRange)
		}
	}

	// An app and a checkpoint.
	if _, err := c.CreateApp(&model.CreateAppRequest{Body: &model.CreateAppReq{AppName: "sdk-app"}}); err != nil {
		t.Fatal(err)
	}
	_, err = c.CommitCheckpoint(&model.CommitCheckpointRequest{Body: &model.CommitCheckpointReq{
		AppName: "sdk-app", CheckpointType: model.GetCommitCheckpointReqCheckpointTypeEnum().LAST_READ,
		StreamName: stream, PartitionId: p0, SequenceNumber: "7", Metadata: ptr("meta"),
	}})
	if err != nil {
		t.Fatal(err)
	}
	cp, err := c.ShowCheckpoint(&model.ShowCheckpointRequest{StreamName: stream, PartitionId: p0, AppName: "sdk-app",
		CheckpointType: model.GetShowCheckpointRequestCheckpointTypeEnum().LAST_READ})
	if err != nil || *cp.SequenceNumber != "7" || *cp.Metadata != "meta" {
		t.Fatalf("ShowCheckpoint: %v %+v", err, cp)
	}
	app, err := c.ShowApp(&model.ShowAppRequest{AppName: "sdk-app"})
	if err != nil || len(*app.CommitCheckpointStreamNames) != 1 || (*app.CommitCheckpointStreamNames)[0] != stream {
		t.Fatalf("ShowApp: %v %+v", err, app)
	}

	// Documented errors.
	_, err = c.ShowStream(&model.ShowStreamRequest{StreamName: "no-such-stream"})
	if st, code := disCode(t, err); st != 400 || code != "DIS.4301" {
		t.Fatalf("missing stream: %d %s, want 400 DIS.4301", st, code)
	}
	_, err = c.ShowCursor(&model.ShowCursorRequest{StreamName: stream, PartitionId: p0, CursorType: ptr(types.AT_SEQUENCE_NUMBER), StartingSequenceNumber: ptr("100000")})
	if st, code := disCode(t, err); st != 400 || code != "DIS.4224" {
		t.Fatalf("out-of-range sequence number: %d %s, want 400 DIS.4224", st, code)
	}
	bad := sdkClient(t, hs.URL, testAK, testSK+"x")
	_, err = bad.ShowStream(&model.ShowStreamRequest{StreamName: stream})
	if st, code := disCode(t, err); st != 441 || code != "DIS.4100" {
		t.Fatalf("wrong secret key: %d %s, want 441 DIS.4100", st, code)
	}

	stats := srv.Stats()
	if stats.Requests["SendRecords"] != 3 || stats.Errors["ShowStream"] != 2 || stats.Requests["ConsumeRecords"] == 0 {
		t.Fatalf("stats: %+v", stats)
	}
}
