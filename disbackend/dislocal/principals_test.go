package dislocal

import (
	"encoding/base64"
	"testing"

	"github.com/huaweicloud/huaweicloud-sdk-go-v3/services/dis/v2/model"

	"github.com/disgw/disgw/disbackend/disapi"
)

// TestKeysDenyAndCallLog: with further key pairs (Keys), a request signed
// with any of them is served and counted by its AK; a wrong SK of one of
// them is refused as for the main pair; Deny answers 403 DIS.4116 to an
// AK on the streams of its prefixes (describe, cursor, PutRecords) and
// serves them to the others; the call log keeps each PutRecords' AK,
// stream and data, also at GET /dislocal/calls.
func TestKeysDenyAndCallLog(t *testing.T) {
	t.Parallel()
	const ak2, sk2 = "second-ak", "second-sk"
	srv, hs := startServer(t, Options{AK: testAK, SK: testSK, ProjectID: testProject,
		Keys: map[string]string{ak2: sk2}, Deny: map[string][]string{ak2: {"private"}}, CallLog: 10})
	main, second := sdkClient(t, hs.URL, testAK, testSK), sdkClient(t, hs.URL, ak2, sk2)
	for _, name := range []string{"open", "private-1"} {
		if _, err := main.CreateStream(&model.CreateStreamRequest{Body: &model.CreateStreamReq{StreamName: name, PartitionCount: 1,
			DataDuration: ptr(int32(24)), StreamType: ptr(model.GetCreateStreamReqStreamTypeEnum().COMMON)}}); err != nil {
			t.Fatal(err)
		}
	}
	send := func(c interface {
		SendRecords(*model.SendRecordsRequest) (*model.SendRecordsResponse, error)
	}, stream, data string) error {
		_, err := c.SendRecords(&model.SendRecordsRequest{Body: &model.PutRecordsRequest{StreamName: stream,
			Records: []model.PutRecordsRequestEntry{{Data: base64.StdEncoding.EncodeToString([]byte(data))}}}})
		return err
	}
	if err := send(second, "open", "by-second"); err != nil {
		t.Fatalf("second key: %v", err)
	}
	if err := send(main, "private-1", "by-main"); err != nil {
		t.Fatalf("main key on a stream denied to the second: %v", err)
	}
	if err := send(sdkClient(t, hs.URL, ak2, "not-"+sk2), "open", "x"); err == nil {
		t.Error("a wrong SK of the second key was served")
	} else if st, code := disCode(t, err); st != 441 || code != disapi.CodeBadSignature {
		t.Errorf("wrong SK: %d %s", st, code)
	}
	if err := send(second, "private-1", "denied"); err == nil {
		t.Error("PutRecords of a denied stream served")
	} else if st, code := disCode(t, err); st != 403 || code != disapi.CodeForbidden {
		t.Errorf("denied PutRecords: %d %s", st, code)
	}
	if _, err := second.ShowStream(&model.ShowStreamRequest{StreamName: "private-1"}); err == nil {
		t.Error("DescribeStream of a denied stream served")
	} else if st, code := disCode(t, err); st != 403 || code != disapi.CodeForbidden {
		t.Errorf("denied DescribeStream: %d %s", st, code)
	}
	typ := model.GetShowCursorRequestCursorTypeEnum().LATEST
	if _, err := second.ShowCursor(&model.ShowCursorRequest{StreamName: "private-1", PartitionId: "0", CursorType: &typ}); err == nil {
		t.Error("GetCursor of a denied stream served")
	} else if st, code := disCode(t, err); st != 403 || code != disapi.CodeForbidden {
		t.Errorf("denied GetCursor: %d %s", st, code)
	}

	st := srv.Stats().AccessKeys
	if st[ak2]["SendRecords"] != 2 || st[testAK]["SendRecords"] != 1 || st[testAK]["CreateStream"] != 2 {
		t.Errorf("counts by access key: %v", st)
	}
	calls := srv.Calls()
	want := []Call{{"SendRecords", ak2, "open", [][]byte{[]byte("by-second")}}, {"SendRecords", testAK, "private-1", [][]byte{[]byte("by-main")}}}
	if len(calls) != len(want) {
		t.Fatalf("calls: %+v, want %+v", calls, want)
	}
	for i := range want {
		if calls[i].AccessKey != want[i].AccessKey || calls[i].Stream != want[i].Stream || string(calls[i].Data[0]) != string(want[i].Data[0]) {
			t.Errorf("call %d: %+v, want %+v", i, calls[i], want[i])
		}
	}
	code, m := doJSONArray(t, hs, signedGet(t, hs.URL+"/dislocal/calls", ak2, sk2))
	if code != 200 || len(m) != 2 || m[0]["access_key"] != ak2 {
		t.Errorf("GET /dislocal/calls: %d %v", code, m)
	}
}
