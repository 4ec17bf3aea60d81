package dislocal

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/golang/snappy"
	"github.com/huaweicloud/huaweicloud-sdk-go-v3/core/auth/signer"
	"github.com/huaweicloud/huaweicloud-sdk-go-v3/core/request"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/disgw/disgw/disbackend/dislocal/disproto"
	"github.com/disgw/disgw/disbackend/localstore"
)

// The Content-Type the Java and Python SDKs send in protobuf mode.
const sdkProtobufContentType = "application/x-protobuf; charset=utf-8"

// rawCall sends body as is with the given headers (name, value pairs) and
// returns the status, the answer's Content-Type and its bytes.
func rawCall(t *testing.T, hs *httptest.Server, method, path string, body []byte, hdr ...string) (int, string, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, hs.URL+path, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	return doRaw(t, hs.Client(), req)
}

func doRaw(t *testing.T, c *http.Client, req *http.Request) (int, string, []byte) {
	t.Helper()
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", req.Method, req.URL, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header.Get("Content-Type"), b
}

// putProto sends a protobuf PutRecords and decodes its PutRecordsResult.
func putProto(t *testing.T, hs *httptest.Server, req *disproto.PutRecordsRequest) *disproto.PutRecordsResult {
	t.Helper()
	b, err := proto.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	st, ct, body := rawCall(t, hs, "POST", "/v2/p/records", b, "Content-Type", sdkProtobufContentType)
	return wantProtoAnswer[disproto.PutRecordsResult](t, st, ct, body)
}

// getProto reads a cursor in protobuf mode, as the Java SDK does: a GET
// with the protobuf Content-Type and the usual query.
func getProto(t *testing.T, hs *httptest.Server, cursor string) *disproto.GetRecordsResult {
	t.Helper()
	st, ct, body := rawCall(t, hs, "GET", "/v2/p/records?limit=1000&partition-cursor="+url.QueryEscape(cursor), nil, "Content-Type", sdkProtobufContentType)
	return wantProtoAnswer[disproto.GetRecordsResult](t, st, ct, body)
}

// wantProtoAnswer asserts a 200 protobuf answer and decodes it as the SDKs
// do: proto.Unmarshal, like Java's build() and Python's ParseFromString,
// fails when a proto2 required field is missing.
func wantProtoAnswer[T any, P interface {
	*T
	proto.Message
}](t *testing.T, status int, ct string, body []byte) P {
	t.Helper()
	if status != 200 || ct != "application/x-protobuf" || len(body) == 0 {
		t.Fatalf("got %d %q %q, want 200 with a non-empty application/x-protobuf body", status, ct, body)
	}
	m := P(new(T))
	if err := proto.Unmarshal(body, m); err != nil {
		t.Fatalf("answer %x is not a %T: %v", body, m, err)
	}
	return m
}

// wantJSONError asserts a DIS error answer in JSON, the form both SDKs
// read in protobuf mode too.
func wantJSONError(t *testing.T, status int, ct string, body []byte, wantStatus int, code string) {
	t.Helper()
	var m struct {
		ErrorCode string `json:"errorCode"`
		Message   string `json:"message"`
	}
	if err := json.Unmarshal(body, &m); err != nil || !strings.HasPrefix(ct, "application/json") {
		t.Fatalf("got %d %q %q, want a JSON DIS error", status, ct, body)
	}
	if status != wantStatus || m.ErrorCode != code {
		t.Fatalf("got %d %s (%s), want %d %s", status, m.ErrorCode, m.Message, wantStatus, code)
	}
}

// jsonRecords reads a cursor in JSON mode.
func jsonRecords(t *testing.T, hs *httptest.Server, cursor string) (records []map[string]any, next string) {
	t.Helper()
	st, m := call(t, hs, "GET", "/v2/p/records?limit=1000&partition-cursor="+url.QueryEscape(cursor), nil)
	mustStatus(t, st, m, 200)
	for _, r := range m["records"].([]any) {
		records = append(records, r.(map[string]any))
	}
	return records, m["next_partition_cursor"].(string)
}

func thCursor(t *testing.T, hs *httptest.Server, stream string, p int) string {
	t.Helper()
	st, m := getCursor(t, hs, fmt.Sprintf("stream-name=%s&partition-id=%d&cursor-type=TRIM_HORIZON", stream, p))
	mustStatus(t, st, m, 200)
	return m["partition_cursor"].(string)
}

// TestProtobufRecords: PutRecords and GetRecords in protobuf, mixed with
// JSON on the same stream, give the same records both ways: sequence
// numbers, raw bytes (all 256 values, and empty), partition keys (and
// their absence), timestamps; the proto2 required fields are present.
func TestProtobufRecords(t *testing.T) {
	t.Parallel()
	_, hs := startServer(t, Options{ProjectID: "p"})
	createStream(t, hs, "pb", 3)
	st, desc := call(t, hs, "GET", "/v2/p/streams/pb", nil)
	mustStatus(t, st, desc, 200)

	all := make([]byte, 256)
	for i := range all {
		all[i] = byte(i)
	}
	type want struct {
		part string
		data []byte
		key  *string
		ts   int64 // 0: the server's clock
	}
	wants := []want{
		{"shardId-0000000000", all, proto.String("k1"), 1700000000123},
		{"shardId-0000000001", []byte{}, nil, 0},
		{"shardId-0000000000", []byte("hello"), proto.String("k3"), 0}, // explicitHashKey 0 beats the key's hash
		{"shardId-0000000002", []byte{0, 0xff, '\n'}, proto.String(""), 5},
	}
	res := putProto(t, hs, &disproto.PutRecordsRequest{
		// The Python SDK always sets streamId (required in its copy), often "".
		StreamName: proto.String("pb"), StreamId: proto.String(""),
		Records: []*disproto.PutRecordsRequestEntry{
			{Data: all, PartitionKey: proto.String("k1"), PartitionId: proto.String("0"), Timestamp: proto.Int64(1700000000123)},
			{Data: []byte{}, PartitionId: proto.String("shardId-0000000001")},
			{Data: []byte("hello"), ExplicitHashKey: proto.String("0"), PartitionKey: proto.String("k3")},
			{Data: []byte{0, 0xff, '\n'}, PartitionId: proto.String("2"), PartitionKey: proto.String(""), Timestamp: proto.Int64(5)},
		},
	})
	if res.FailedRecordCount == nil || *res.FailedRecordCount != 0 || len(res.Records) != len(wants) {
		t.Fatalf("PutRecordsResult %v", res)
	}
	seqs := map[string][]string{} // partition → sequence numbers in order
	for i, e := range res.Records {
		if e.GetShardId() != wants[i].part || e.SequenceNumber == nil || e.ErrorCode != nil || e.ErrorMessage != nil {
			t.Fatalf("result %d: %v, want partition %s", i, e, wants[i].part)
		}
		seqs[e.GetShardId()] = append(seqs[e.GetShardId()], e.GetSequenceNumber())
	}

	// A JSON PutRecords to the same stream, then by stream id with an
	// unknown name (protobuf, as the SDKs' cross-account writes do).
	st, m := put(t, hs, "pb", map[string]any{"data": base64.StdEncoding.EncodeToString([]byte("json")), "partition_id": "shardId-0000000001", "partition_key": "kj", "timestamp": 42})
	mustStatus(t, st, m, 200)
	jr := m["records"].([]any)[0].(map[string]any)
	seqs["shardId-0000000001"] = append(seqs["shardId-0000000001"], jr["sequence_number"].(string))
	wants = append(wants, want{"shardId-0000000001", []byte("json"), proto.String("kj"), 42})
	res = putProto(t, hs, &disproto.PutRecordsRequest{
		StreamName: proto.String("other"), StreamId: proto.String(desc["stream_id"].(string)),
		Records: []*disproto.PutRecordsRequestEntry{{Data: []byte("by id"), PartitionId: proto.String("1"), Timestamp: proto.Int64(7)}},
	})
	if res.GetFailedRecordCount() != 0 || len(res.Records) != 1 || res.Records[0].GetShardId() != "shardId-0000000001" {
		t.Fatalf("PutRecords by stream id: %v", res)
	}
	seqs["shardId-0000000001"] = append(seqs["shardId-0000000001"], res.Records[0].GetSequenceNumber())
	wants = append(wants, want{"shardId-0000000001", []byte("by id"), nil, 7})

	byPart := map[string][]want{}
	for _, w := range wants {
		byPart[w.part] = append(byPart[w.part], w)
	}
	for p := 0; p < 3; p++ {
		part := fmt.Sprintf("shardId-%010d", p)
		cur := thCursor(t, hs, "pb", p)
		pr := getProto(t, hs, cur)
		jrecs, jnext := jsonRecords(t, hs, cur)
		if len(pr.Records) != len(byPart[part]) || len(jrecs) != len(pr.Records) || pr.NextShardIterator == nil {
			t.Fatalf("%s: %d protobuf records, %d JSON, want %d (%v)", part, len(pr.Records), len(jrecs), len(byPart[part]), pr)
		}
		for i, r := range pr.Records {
			w, jrec := byPart[part][i], jrecs[i]
			jdata, err := base64.StdEncoding.DecodeString(jrec["data"].(string))
			if err != nil {
				t.Fatal(err)
			}
			if r.SequenceNumber == nil || r.GetSequenceNumber() != seqs[part][i] || jrec["sequence_number"] != seqs[part][i] {
				t.Fatalf("%s record %d: sequence numbers %v / %v, want %s", part, i, r.SequenceNumber, jrec["sequence_number"], seqs[part][i])
			}
			if r.Data == nil || !bytes.Equal(r.Data, w.data) || !bytes.Equal(jdata, w.data) {
				t.Fatalf("%s record %d: data %x / %x, want %x", part, i, r.Data, jdata, w.data)
			}
			jkey, hasKey := jrec["partition_key"]
			if (w.key == nil) != (r.PartitionKey == nil) || (w.key == nil) == hasKey || (w.key != nil && (r.GetPartitionKey() != *w.key || jkey != *w.key)) {
				t.Fatalf("%s record %d: keys %v / %v, want %v", part, i, r.PartitionKey, jkey, w.key)
			}
			if r.Timestamp == nil || float64(r.GetTimestamp()) != jrec["timestamp"] || (w.ts != 0 && r.GetTimestamp() != w.ts) || r.GetTimestamp() <= 0 {
				t.Fatalf("%s record %d: timestamps %v / %v, want %d", part, i, r.Timestamp, jrec["timestamp"], w.ts)
			}
			if r.GetTimestampType() != "CreateTime" || jrec["timestamp_type"] != "CreateTime" {
				t.Fatalf("%s record %d: timestamp types %v / %v", part, i, r.TimestampType, jrec["timestamp_type"])
			}
		}
		// At the end: no records, and still the required next cursor,
		// which reads the same as JSON's.
		end := getProto(t, hs, pr.GetNextShardIterator())
		if len(end.Records) != 0 || end.NextShardIterator == nil || *end.NextShardIterator == "" {
			t.Fatalf("%s: read at the end: %v", part, end)
		}
		if jend, _ := jsonRecords(t, hs, jnext); len(jend) != 0 {
			t.Fatalf("%s: JSON read at the end: %v", part, jend)
		}
	}

	// failedRecordCount 0 is on the wire (proto2 required), not left out.
	b, _ := proto.Marshal(&disproto.PutRecordsRequest{StreamName: proto.String("pb"), Records: []*disproto.PutRecordsRequestEntry{{Data: []byte("x")}}})
	_, _, body := rawCall(t, hs, "POST", "/v2/p/records", b, "Content-Type", sdkProtobufContentType)
	if num, typ, n := protowire.ConsumeTag(body); n < 0 || num != 21 || typ != protowire.VarintType || body[n] != 0 {
		t.Fatalf("PutRecordsResult %x does not start with failedRecordCount = 0", body)
	}
}

// TestProtobufErrors: a bad protobuf PutRecords, and any DIS error in
// protobuf mode, is a DIS error in JSON with DIS's status, as the SDKs
// read it; the server keeps serving.
func TestProtobufErrors(t *testing.T) {
	t.Parallel()
	_, hs := startServer(t, Options{ProjectID: "p"})
	createStream(t, hs, "pe", 1)
	valid, _ := proto.Marshal(&disproto.PutRecordsRequest{StreamName: proto.String("pe"), Records: []*disproto.PutRecordsRequestEntry{{Data: []byte("abcdef"), PartitionKey: proto.String("k")}}})
	marshal := func(m proto.Message) []byte {
		b, err := proto.MarshalOptions{AllowPartial: true}.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	for _, tc := range []struct {
		name   string
		body   []byte
		status int
		code   string
	}{
		{"JSON body sent as protobuf", []byte(`{"stream_name":"pe","records":[{"data":"eA=="}]}`), 400, "DIS.4300"},
		{"the SDK's failing byte", []byte("\x06\x01"), 400, "DIS.4300"},
		{"truncated", valid[:len(valid)-3], 400, "DIS.4300"},
		{"field number 0", []byte{0x00, 0x01}, 400, "DIS.4300"},
		{"varint of 11 bytes", append(protowire.AppendTag(nil, 29, protowire.VarintType), bytes.Repeat([]byte{0xff}, 11)...), 400, "DIS.4300"},
		{"length past the end", protowire.AppendVarint(protowire.AppendTag(nil, 2, protowire.BytesType), 1<<30), 400, "DIS.4300"},
		{"extendedInfo without its required fields", marshal(&disproto.PutRecordsRequest{StreamName: proto.String("pe"), Records: []*disproto.PutRecordsRequestEntry{{Data: []byte("x"), ExtendedInfo: &disproto.PutRecordsRequestEntryExtendedInfo{EndFlag: proto.Bool(true)}}}}), 400, "DIS.4300"},
		{"empty body", nil, 400, "DIS.4202"},
		{"no records", marshal(&disproto.PutRecordsRequest{StreamName: proto.String("pe")}), 400, "DIS.4202"},
		{"no stream name", marshal(&disproto.PutRecordsRequest{Records: []*disproto.PutRecordsRequestEntry{{Data: []byte("x")}}}), 400, "DIS.4200"},
		{"record without data", marshal(&disproto.PutRecordsRequest{StreamName: proto.String("pe"), Records: []*disproto.PutRecordsRequestEntry{{PartitionKey: proto.String("k")}}}), 400, "DIS.4200"},
		{"missing stream", marshal(&disproto.PutRecordsRequest{StreamName: proto.String("nope"), Records: []*disproto.PutRecordsRequestEntry{{Data: []byte("x")}}}), 400, "DIS.4301"},
		{"missing partition", marshal(&disproto.PutRecordsRequest{StreamName: proto.String("pe"), Records: []*disproto.PutRecordsRequestEntry{{Data: []byte("x"), PartitionId: proto.String("3")}}}), 400, "DIS.4302"},
		{"record over 1 MB", marshal(&disproto.PutRecordsRequest{StreamName: proto.String("pe"), Records: []*disproto.PutRecordsRequestEntry{{Data: make([]byte, 1<<20+1)}}}), 400, "DIS.4300"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st, ct, body := rawCall(t, hs, "POST", "/v2/p/records", tc.body, "Content-Type", sdkProtobufContentType)
			wantJSONError(t, st, ct, body, tc.status, tc.code)
		})
	}
	// GetRecords errors in protobuf mode are JSON too.
	st, ct, body := rawCall(t, hs, "GET", "/v2/p/records?partition-cursor=bm90LWEtY3Vyc29y", nil, "Content-Type", sdkProtobufContentType)
	wantJSONError(t, st, ct, body, 400, "DIS.4217")
	// Still serving; the bad requests wrote nothing.
	res := putProto(t, hs, &disproto.PutRecordsRequest{StreamName: proto.String("pe"), Records: []*disproto.PutRecordsRequestEntry{{Data: []byte("ok")}}})
	if res.GetFailedRecordCount() != 0 || res.Records[0].GetSequenceNumber() != "0" {
		t.Fatalf("after the errors: %v", res)
	}
}

// signedRequest returns a request signed with ak/sk by the official Go
// SDK's signer over body exactly as given (the compressed bytes, as the
// Java SDK signs them), with headers (name, value pairs) signed too.
func signedRequest(t *testing.T, method, rawURL string, body []byte, hdr ...string) *http.Request {
	t.Helper()
	u, err := url.Parse(rawURL)
	if err != nil {
		t.Fatal(err)
	}
	b := request.NewHttpRequestBuilder().WithEndpoint(u.Scheme+"://"+u.Host).WithPath(u.Path).
		WithMethod(method).AddHeaderParam("Host", u.Host)
	for i := 0; i+1 < len(hdr); i += 2 {
		b = b.AddHeaderParam(hdr[i], hdr[i+1])
	}
	for k, v := range u.Query() {
		b = b.AddQueryParam(k, reflect.ValueOf(v[0])) // the signer reads reflect.Values
	}
	if len(body) > 0 {
		b = b.WithBody("", string(body))
	}
	sr := b.Build()
	extra, err := signer.Sign(sr, testAK, testSK)
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequest(method, rawURL, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range sr.GetHeaderParams() {
		req.Header.Set(k, v)
	}
	for k, v := range extra {
		req.Header.Set(k, v)
	}
	return req
}

// compressors compress as the Java SDK's compressBody does, giving the
// headers it sends.
var compressors = map[string]func(t testing.TB, src []byte) ([]byte, []string){
	"lz4": func(t testing.TB, src []byte) ([]byte, []string) {
		out := make([]byte, lz4.CompressBlockBound(len(src)))
		n, err := lz4.CompressBlock(src, out, nil)
		if err != nil || n == 0 {
			t.Fatalf("lz4: %d %v", n, err)
		}
		return out[:n], []string{"Content-Encoding", "lz4", "X-Dis-Lz4-Content-Length", strconv.Itoa(len(src))}
	},
	"snappy": func(_ testing.TB, src []byte) ([]byte, []string) {
		return snappy.Encode(nil, src), []string{"Content-Encoding", "snappy"}
	},
	"zstd": func(t testing.TB, src []byte) ([]byte, []string) {
		enc, err := zstd.NewWriter(nil)
		if err != nil {
			t.Fatal(err)
		}
		defer enc.Close()
		return enc.EncodeAll(src, nil), []string{"Content-Encoding", "zstd", "X-Dis-Zstd-Content-Length", strconv.Itoa(len(src))}
	},
}

// TestCompressedBodies: with the Java SDK's body.compress.enabled, every
// POST body, JSON or protobuf, comes compressed (lz4, snappy, zstd) and
// signed as compressed; dislocal checks the signature over the bytes sent
// and decodes them. Bad compressed data is DIS.4300, too much of it once
// decoded 413.
func TestCompressedBodies(t *testing.T) {
	t.Parallel()
	_, hs := startServer(t, Options{AK: testAK, SK: testSK, ProjectID: "p"})
	payload := bytes.Repeat([]byte("compressible "), 200)
	for _, enc := range []string{"lz4", "snappy", "zstd"} {
		t.Run(enc, func(t *testing.T) {
			t.Parallel()
			stream := "c_" + enc
			create, _ := json.Marshal(map[string]any{"stream_name": stream, "partition_count": 1})
			zc, hdr := compressors[enc](t, create)
			st, ct, body := doRaw(t, hs.Client(), signedRequest(t, "POST", hs.URL+"/v2/p/streams", zc, append([]string{"Content-Type", "application/json; charset=utf-8"}, hdr...)...))
			if st != 201 {
				t.Fatalf("compressed CreateStream: %d %s %s", st, ct, body)
			}
			put, _ := proto.Marshal(&disproto.PutRecordsRequest{StreamName: proto.String(stream), Records: []*disproto.PutRecordsRequestEntry{
				{Data: payload, PartitionKey: proto.String("k")}, {Data: []byte(enc)},
			}})
			zp, hdr := compressors[enc](t, put)
			if len(zp) >= len(put) {
				t.Fatalf("%s did not compress: %d of %d bytes", enc, len(zp), len(put))
			}
			st, ct, body = doRaw(t, hs.Client(), signedRequest(t, "POST", hs.URL+"/v2/p/records", zp, append([]string{"Content-Type", sdkProtobufContentType}, hdr...)...))
			res := wantProtoAnswer[disproto.PutRecordsResult](t, st, ct, body)
			if res.GetFailedRecordCount() != 0 || len(res.Records) != 2 {
				t.Fatalf("compressed PutRecords: %v", res)
			}
			cur := signedRequest(t, "GET", hs.URL+"/v2/p/cursors?stream-name="+stream+"&partition-id=0&cursor-type=TRIM_HORIZON", nil)
			st, m := doJSON(t, hs.Client(), cur)
			mustStatus(t, st, m, 200)
			get := signedRequest(t, "GET", hs.URL+"/v2/p/records?partition-cursor="+m["partition_cursor"].(string), nil, "Content-Type", sdkProtobufContentType)
			st, ct, body = doRaw(t, hs.Client(), get)
			got := wantProtoAnswer[disproto.GetRecordsResult](t, st, ct, body)
			if len(got.Records) != 2 || !bytes.Equal(got.Records[0].Data, payload) || got.Records[0].GetPartitionKey() != "k" || string(got.Records[1].Data) != enc {
				t.Fatalf("read back: %v", got)
			}
			// The signature is over the compressed bytes: a request signed
			// over the decoded body is refused. (The Go SDK's signer hashes
			// JSON bodies only, so this takes a CreateStream.)
			create2, _ := json.Marshal(map[string]any{"stream_name": stream + "_2", "partition_count": 1})
			zc2, hdr := compressors[enc](t, create2)
			req := signedRequest(t, "POST", hs.URL+"/v2/p/streams", create2, append([]string{"Content-Type", "application/json; charset=utf-8"}, hdr...)...)
			req.Body, req.ContentLength = io.NopCloser(bytes.NewReader(zc2)), int64(len(zc2))
			st, ct, body = doRaw(t, hs.Client(), req)
			wantJSONError(t, st, ct, body, 441, "DIS.4100")
		})
	}

	_, open := startServer(t, Options{ProjectID: "p"})
	createStream(t, open, "ce", 1)
	put, _ := proto.Marshal(&disproto.PutRecordsRequest{StreamName: proto.String("ce"), Records: []*disproto.PutRecordsRequestEntry{{Data: []byte("0123456789abcdef0123456789abcdef")}}})
	lz, _ := compressors["lz4"](t, put)
	zs, _ := compressors["zstd"](t, put)
	bomb, _ := compressors["zstd"](t, make([]byte, maxBodyBytes+1))
	for _, tc := range []struct {
		name   string
		body   []byte
		hdr    []string
		status int
	}{
		{"unknown encoding", put, []string{"Content-Encoding", "br"}, 400},
		{"lz4 length wrong", lz, []string{"Content-Encoding", "lz4", "X-Dis-Lz4-Content-Length", strconv.Itoa(len(put) + 1)}, 400},
		{"lz4 length not a number", lz, []string{"Content-Encoding", "lz4", "X-Dis-Lz4-Content-Length", "-1"}, 400},
		{"lz4 length over the limit", lz, []string{"Content-Encoding", "lz4", "X-Dis-Lz4-Content-Length", strconv.Itoa(maxBodyBytes + 1)}, 413},
		{"lz4 garbage", []byte{0xff, 0xff, 0xff, 0xff}, []string{"Content-Encoding", "lz4"}, 400},
		{"snappy garbage", []byte{0x05, 0xff, 0xff}, []string{"Content-Encoding", "snappy"}, 400},
		{"snappy claiming more than the limit", snappyHeader(maxBodyBytes + 1), []string{"Content-Encoding", "snappy"}, 413},
		{"zstd garbage", put, []string{"Content-Encoding", "zstd"}, 400},
		{"zstd truncated", zs[:len(zs)-4], []string{"Content-Encoding", "zstd"}, 400},
		{"zstd over the limit", bomb, []string{"Content-Encoding", "zstd"}, 413},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st, ct, body := rawCall(t, open, "POST", "/v2/p/records", tc.body, append([]string{"Content-Type", sdkProtobufContentType}, tc.hdr...)...)
			wantJSONError(t, st, ct, body, tc.status, "DIS.4300")
		})
	}
	// Without the length header, lz4 still decodes (bounded by the ratio).
	st, ct, body := rawCall(t, open, "POST", "/v2/p/records", lz, "Content-Type", sdkProtobufContentType, "Content-Encoding", "LZ4")
	if res := wantProtoAnswer[disproto.PutRecordsResult](t, st, ct, body); res.GetFailedRecordCount() != 0 {
		t.Fatalf("lz4 without a length: %v", res)
	}
}

// snappyHeader is a snappy block header claiming n decoded bytes, and no data.
func snappyHeader(n int) []byte { return protowire.AppendVarint(nil, uint64(n)) }

// protoSeeds are PutRecordsRequest bodies for the fuzz targets.
func protoSeeds() [][]byte {
	var seeds [][]byte
	for _, m := range []*disproto.PutRecordsRequest{
		{StreamName: proto.String("fz"), Records: []*disproto.PutRecordsRequestEntry{{Data: []byte("a")}}},
		{StreamName: proto.String("fz"), StreamId: proto.String(""), Records: []*disproto.PutRecordsRequestEntry{
			{Data: []byte{0, 1, 2}, PartitionKey: proto.String("k"), Timestamp: proto.Int64(1)},
			{Data: []byte{}, PartitionId: proto.String("shardId-0000000000")},
			{Data: []byte("x"), ExplicitHashKey: proto.String("9223372036854775807")},
		}},
		{StreamName: proto.String("fz"), Records: []*disproto.PutRecordsRequestEntry{{Data: []byte("f"), ExtendedInfo: &disproto.PutRecordsRequestEntryExtendedInfo{
			FileName: proto.String("f"), DeliverDataId: proto.String("d"), SeqNum: proto.Int64(1), EndFlag: proto.Bool(true)}}}},
	} {
		b, _ := proto.Marshal(m)
		seeds = append(seeds, b)
	}
	return append(seeds, nil, []byte("\x06"), []byte(`{"stream_name":"fz"}`))
}

// FuzzProtobufPutRecords feeds arbitrary bodies to a protobuf PutRecords,
// through the server's handler over a real store: the answer is a
// PutRecordsResult with one entry per record the body decodes to, or a
// 4xx JSON DIS error; never a panic nor a 5xx.
func FuzzProtobufPutRecords(f *testing.F) {
	for _, s := range protoSeeds() {
		f.Add(s)
	}
	// Loggers that write to f must not be called from the fuzz function;
	// an in-memory store keeps executions fast.
	st, err := localstore.Open("/fuzz", localstore.Options{FS: vfs.NewMem(), RetentionCheckInterval: -1})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { _ = st.Close() })
	srv, err := New(st, Options{})
	if err != nil {
		f.Fatal(err)
	}
	create, _ := json.Marshal(map[string]any{"stream_name": "fz", "partition_count": 2})
	rec := httptest.NewRecorder()
	srv.ServeHTTP(rec, httptest.NewRequest("POST", "/v2/p/streams", bytes.NewReader(create)))
	if rec.Code != 201 {
		f.Fatalf("CreateStream: %d %s", rec.Code, rec.Body)
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		in, derr := decodePutRecords(body, true)
		if derr == nil {
			for i, r := range in.Records {
				if r.Data == nil {
					t.Fatalf("record %d decoded without data", i)
				}
			}
		}
		req := httptest.NewRequest("POST", "/v2/p/records", bytes.NewReader(body))
		req.Header.Set("Content-Type", sdkProtobufContentType)
		rec := httptest.NewRecorder()
		srv.ServeHTTP(rec, req)
		switch {
		case rec.Code == 200:
			var res disproto.PutRecordsResult
			if derr != nil || proto.Unmarshal(rec.Body.Bytes(), &res) != nil || len(res.Records) != len(in.Records) {
				t.Fatalf("200 %x for a body that decodes to %d records (%v)", rec.Body.Bytes(), len(in.Records), derr)
			}
		case rec.Code >= 400 && rec.Code < 500:
			var e struct{ ErrorCode string }
			if json.Unmarshal(rec.Body.Bytes(), &e) != nil || !strings.HasPrefix(e.ErrorCode, "DIS.4") {
				t.Fatalf("%d %q is not a DIS error", rec.Code, rec.Body)
			}
		default:
			t.Fatalf("%d %q", rec.Code, rec.Body)
		}
	})
}

// FuzzContentEncoding decodes arbitrary data as each Content-Encoding,
// with an arbitrary length header: an error of status 400 or 413, or at
// most maxBodyBytes; never a panic.
func FuzzContentEncoding(f *testing.F) {
	for _, s := range protoSeeds() {
		for enc, c := range compressors {
			z, hdr := c(f, s)
			if len(hdr) == 4 {
				f.Add(enc, hdr[3], z)
			} else {
				f.Add(enc, "", z)
			}
		}
	}
	f.Add("lz4", "", []byte{0xf0})
	f.Add("snappy", "", snappyHeader(1<<31))
	f.Fuzz(func(t *testing.T, enc, length string, body []byte) {
		h := http.Header{}
		h.Set("Content-Encoding", enc)
		if length != "" {
			h.Set("X-Dis-Lz4-Content-Length", length)
		}
		out, derr := decodeContentEncoding(h, body)
		switch {
		case derr != nil:
			if derr.Status != 400 && derr.Status != 413 || derr.Code != "DIS.4300" {
				t.Fatalf("error %d %s", derr.Status, derr.Code)
			}
		case len(out) > maxBodyBytes:
			t.Fatalf("decoded %d bytes", len(out))
		}
	})
}
