package dislocal

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/disgw/disgw/disbackend/localstore"
)

type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func newFakeClock() *fakeClock { return &fakeClock{t: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// call sends an unsigned request and decodes the JSON answer (nil when empty).
func call(t *testing.T, hs *httptest.Server, method, path string, body any, hdr ...string) (int, map[string]any) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, hs.URL+path, rd)
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := hs.Client().Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if len(b) == 0 {
		return resp.StatusCode, nil
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("%s %s: %d %q is not JSON", method, path, resp.StatusCode, b)
	}
	return resp.StatusCode, m
}

// wantCode asserts a DIS error answer.
func wantCode(t *testing.T, status int, m map[string]any, wantStatus int, code string) {
	t.Helper()
	if status != wantStatus || m["errorCode"] != code {
		t.Fatalf("got %d %v, want %d %s", status, m, wantStatus, code)
	}
}

func mustStatus(t *testing.T, status int, m map[string]any, want int) {
	t.Helper()
	if status != want {
		t.Fatalf("got %d %v, want %d", status, m, want)
	}
}

func createStream(t *testing.T, hs *httptest.Server, name string, parts int, extra ...any) {
	t.Helper()
	body := map[string]any{"stream_name": name, "partition_count": parts}
	for i := 0; i+1 < len(extra); i += 2 {
		body[extra[i].(string)] = extra[i+1]
	}
	st, m := call(t, hs, "POST", "/v2/p/streams", body)
	mustStatus(t, st, m, 201)
}

func b64(n int) string { return base64.StdEncoding.EncodeToString(bytes.Repeat([]byte("x"), n)) }

func put(t *testing.T, hs *httptest.Server, stream string, recs ...map[string]any) (int, map[string]any) {
	t.Helper()
	return call(t, hs, "POST", "/v2/p/records/", map[string]any{"stream_name": stream, "records": recs})
}

func getCursor(t *testing.T, hs *httptest.Server, query string) (int, map[string]any) {
	t.Helper()
	return call(t, hs, "GET", "/v2/p/cursors?"+query, nil)
}

func partitions(m map[string]any) []map[string]any {
	var out []map[string]any
	for _, p := range m["partitions"].([]any) {
		out = append(out, p.(map[string]any))
	}
	return out
}

func TestScaling(t *testing.T) {
	t.Parallel()
	clk := newFakeClock()
	_, hs := startServer(t, Options{Now: clk.Now, RetentionUnit: time.Minute})
	createStream(t, hs, "s", 3)
	st, m := put(t, hs, "s", map[string]any{"data": b64(3), "partition_id": "2"})
	mustStatus(t, st, m, 200)

	st, m = call(t, hs, "PUT", "/v2/p/streams/s", map[string]any{"stream_name": "s", "target_partition_count": 1})
	mustStatus(t, st, m, 200)
	_, d := call(t, hs, "GET", "/v2/p/streams/s", nil)
	ps := partitions(d)
	if d["writable_partition_count"] != 1.0 || d["readable_partition_count"] != 3.0 || len(ps) != 3 ||
		ps[0]["status"] != "ACTIVE" || ps[1]["status"] != "DELETED" || ps[2]["status"] != "DELETED" ||
		ps[0]["hash_range"] != "[0 : 9223372036854775807]" || ps[2]["sequence_number_range"] != "[0 : 1]" {
		t.Fatalf("after scale-down: %v", d)
	}
	if h := d["update_partition_counts"].([]any); len(h) != 1 || h[0].(map[string]any)["target_partition_count"] != 1.0 {
		t.Fatalf("scaling history: %v", h)
	}
	// DELETED: refuses writes, still readable.
	st, m = put(t, hs, "s", map[string]any{"data": b64(3), "partition_id": "shardId-0000000002"})
	wantCode(t, st, m, 400, "DIS.4302")
	st, m = getCursor(t, hs, "stream-name=s&partition-id=2&cursor-type=TRIM_HORIZON")
	mustStatus(t, st, m, 200)
	// No second scaling within the hour of a successful one.
	st, m = call(t, hs, "PUT", "/v2/p/streams/s", map[string]any{"stream_name": "s", "target_partition_count": 2})
	wantCode(t, st, m, 400, "DIS.4200")

	// 61 minutes later: scale up to 2 reactivates partition 1.
	clk.Advance(61 * time.Minute)
	st, m = call(t, hs, "PUT", "/v2/p/streams/s", map[string]any{"stream_name": "s", "target_partition_count": 2})
	mustStatus(t, st, m, 200)
	_, d = call(t, hs, "GET", "/v2/p/streams/s", nil)
	ps = partitions(d)
	if ps[1]["status"] != "ACTIVE" || ps[2]["status"] != "EXPIRED" || d["readable_partition_count"] != 2.0 || ps[2]["sequence_number_range"] != nil {
		t.Fatalf("after scale-up, retention (24 min) past: %v", d)
	}
	// Partition 2 outlived its data: EXPIRED, DIS.4319.
	st, m = getCursor(t, hs, "stream-name=s&partition-id=2&cursor-type=TRIM_HORIZON")
	wantCode(t, st, m, 400, "DIS.4319")

	// Another hour on: scale up past the backend's count adds partitions from 0.
	clk.Advance(61 * time.Minute)
	st, m = call(t, hs, "PUT", "/v2/p/streams/s", map[string]any{"target_partition_count": 4})
	mustStatus(t, st, m, 200)
	_, d = call(t, hs, "GET", "/v2/p/streams/s?start_partitionId=shardId-0000000001&limit_partitions=2", nil)
	ps = partitions(d)
	if len(ps) != 2 || ps[0]["partition_id"] != "shardId-0000000002" || ps[0]["status"] != "ACTIVE" ||
		ps[1]["sequence_number_range"] != "[0 : 0]" || d["has_more_partitions"] != false || d["writable_partition_count"] != 4.0 {
		t.Fatalf("after scale-up to 4: %v", d)
	}
}

func TestFlowControl(t *testing.T) {
	t.Parallel()
	clk := newFakeClock()
	_, hs := startServer(t, Options{Now: clk.Now, FlowControl: true})
	createStream(t, hs, "f", 1)
	const kb600 = 600 << 10
	st, m := put(t, hs, "f", map[string]any{"data": b64(kb600), "partition_id": "0"})
	if st != 200 || m["failed_record_count"] != 0.0 {
		t.Fatalf("first 600 KB: %d %v", st, m)
	}
	// 424 KB left this second: the large record is refused, the small one after it passes.
	st, m = put(t, hs, "f", map[string]any{"data": b64(kb600), "partition_id": "0"}, map[string]any{"data": b64(10), "partition_id": "0"})
	recs := m["records"].([]any)
	r0, r1 := recs[0].(map[string]any), recs[1].(map[string]any)
	if st != 200 || m["failed_record_count"] != 1.0 || r0["error_code"] != "DIS.4303" || r1["sequence_number"] != "1" {
		t.Fatalf("over the byte rate: %d %v", st, m)
	}
	clk.Advance(time.Second)
	st, m = put(t, hs, "f", map[string]any{"data": b64(kb600), "partition_id": "0"})
	if st != 200 || m["failed_record_count"] != 0.0 {
		t.Fatalf("a second later: %d %v", st, m)
	}
	// 1,000 records a second, then DIS.4303.
	clk.Advance(time.Second)
	var many []map[string]any
	for range 1001 {
		many = append(many, map[string]any{"data": b64(1), "partition_id": "0"})
	}
	st, m = put(t, hs, "f", many...)
	if st != 200 || m["failed_record_count"] != 1.0 || m["records"].([]any)[1000].(map[string]any)["error_code"] != "DIS.4303" {
		t.Fatalf("1,001 records in a second: %d failed", int(m["failed_record_count"].(float64)))
	}
	// Reads: 2 MB a second. 2.4 MB stored (four 600 KB records), read
	// from 0 with a 4 MB cap: the fifth 600 KB record waits.
	for range 2 {
		clk.Advance(time.Second)
		put(t, hs, "f", map[string]any{"data": b64(kb600), "partition_id": "0"})
	}
	_, c := getCursor(t, hs, "stream-name=f&partition-id=0&cursor-type=TRIM_HORIZON")
	st, m = call(t, hs, "GET", "/v2/p/records?limit=10000&max_fetch_bytes=4194304&partition-cursor="+c["partition_cursor"].(string), nil)
	mustStatus(t, st, m, 200)
	if got := m["records"].([]any); len(got) != 1004 {
		t.Fatalf("read %d records in one second, want 1004 (up to the fourth 600 KB one)", len(got))
	}
	st, m = call(t, hs, "GET", "/v2/p/records?partition-cursor="+m["next_partition_cursor"].(string), nil)
	wantCode(t, st, m, 400, "DIS.4303")
}

func TestCursorsAndRetention(t *testing.T) {
	t.Parallel()
	clk := newFakeClock()
	s, hs := startServer(t, Options{Now: clk.Now, RetentionUnit: time.Second})
	createStream(t, hs, "r", 1, "data_duration", 24)
	st, m := put(t, hs, "r", map[string]any{"data": b64(5), "partition_key": "k"}, map[string]any{"data": b64(5), "explicit_hash_key": "42"})
	mustStatus(t, st, m, 200)
	_, c := getCursor(t, hs, "stream-name=r&partition-id=0&cursor-type=AT_SEQUENCE_NUMBER&starting-sequence-number=0")
	cur := c["partition_cursor"].(string)

	// Retention is 24 "hours" of one second each.
	clk.Advance(25 * time.Second)
	if err := s.b.(*localstore.Store).EnforceRetention(); err != nil {
		t.Fatal(err)
	}
	st, m = call(t, hs, "GET", "/v2/p/records?partition-cursor="+cur, nil)
	wantCode(t, st, m, 400, "DIS.4226")
	st, m = getCursor(t, hs, "stream-name=r&partition-id=0&starting-sequence-number=1")
	wantCode(t, st, m, 400, "DIS.4224")
	_, c = getCursor(t, hs, "stream-name=r&partition-id=0&cursor-type=TRIM_HORIZON")
	cur = c["partition_cursor"].(string)
	st, m = call(t, hs, "GET", "/v2/p/records?partition-cursor="+cur, nil)
	if st != 200 || len(m["records"].([]any)) != 0 {
		t.Fatalf("after retention: %d %v", st, m)
	}
	// Cursors live 5 minutes.
	clk.Advance(5*time.Minute + time.Millisecond)
	st, m = call(t, hs, "GET", "/v2/p/records?partition-cursor="+cur, nil)
	wantCode(t, st, m, 400, "DIS.4225")

	for _, tc := range []struct{ query, code string }{
		{"stream-name=r&partition-id=0&cursor-type=SOMEWHERE", "DIS.4215"},
		{"stream-name=r&partition-id=0&starting-sequence-number=x", "DIS.4216"},
		{"stream-name=r&partition-id=7&cursor-type=LATEST", "DIS.4302"},
		{"stream-name=r&partition-id=shard-1&cursor-type=LATEST", "DIS.4201"},
		{"stream-name=nope&partition-id=0&cursor-type=LATEST", "DIS.4301"},
	} {
		st, m = getCursor(t, hs, tc.query)
		wantCode(t, st, m, 400, tc.code)
	}
	st, m = call(t, hs, "GET", "/v2/p/records?partition-cursor=garbage", nil)
	wantCode(t, st, m, 400, "DIS.4217")
}

func TestValidationAndErrors(t *testing.T) {
	t.Parallel()
	srv, hs := startServer(t, Options{ProjectID: "p"})
	createStream(t, hs, "v", 2, "stream_type", "ADVANCED")
	for _, tc := range []struct {
		name   string
		method string
		path   string
		body   any
		status int
		code   string
	}{
		{"bad stream name", "POST", "/v2/p/streams", map[string]any{"stream_name": "a.b", "partition_count": 1}, 400, "DIS.4200"},
		{"retention too short", "POST", "/v2/p/streams", map[string]any{"stream_name": "x", "partition_count": 1, "data_duration": 12}, 400, "DIS.4200"},
		{"retention too long", "POST", "/v2/p/streams", map[string]any{"stream_name": "x", "partition_count": 1, "data_duration": 169}, 400, "DIS.4200"},
		{"stream exists", "POST", "/v2/p/streams", map[string]any{"stream_name": "v", "partition_count": 1}, 400, "DIS.4307"},
		{"empty body", "POST", "/v2/p/streams", nil, 400, "DIS.4202"},
		{"record over 1 MB", "POST", "/v2/p/records", map[string]any{"stream_name": "v", "records": []any{map[string]any{"data": b64(1<<20 + 1)}}}, 400, "DIS.4300"},
		{"no records", "POST", "/v2/p/records", map[string]any{"stream_name": "v", "records": []any{}}, 400, "DIS.4202"},
		{"put to missing stream", "POST", "/v2/p/records", map[string]any{"stream_name": "nope", "records": []any{map[string]any{"data": b64(1)}}}, 400, "DIS.4301"},
		{"other project", "GET", "/v2/q/streams", nil, 400, "DIS.4117"},
		{"delete missing stream", "DELETE", "/v2/p/streams/nope", nil, 400, "DIS.4301"},
		{"update retention out of range", "PUT", "/v3/p/streams/v", map[string]any{"stream_name": "v", "data_duration": 200}, 400, "DIS.4200"},
		{"dump task create", "POST", "/v2/p/streams/v/transfer-tasks", map[string]any{"destination_type": "OBS"}, 400, "DIS.4335"},
		{"dump task show", "GET", "/v2/p/streams/v/transfer-tasks/t1", nil, 400, "DIS.4354"},
		{"metrics", "GET", "/v2/p/streams/v/metrics?label=total_put_bytes_per_stream&start_time=1&end_time=2", nil, 400, "DIS.4209"},
		{"missing app", "GET", "/v2/p/apps/nope", nil, 400, "DIS.4332"},
		{"unknown path", "GET", "/v2/p/nothing", nil, 404, "DIS.4200"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st, m := call(t, hs, tc.method, tc.path, tc.body)
			wantCode(t, st, m, tc.status, tc.code)
		})
	}
	// ADVANCED takes 5 MB a request; listing pages through streams.
	createStream(t, hs, "w", 1)
	createStream(t, hs, "x", 1)
	st, m := call(t, hs, "GET", "/v2/p/streams?limit=2", nil)
	if st != 200 || m["has_more_streams"] != true || m["total_number"] != 3.0 || len(m["stream_names"].([]any)) != 2 {
		t.Fatalf("list page 1: %v", m)
	}
	_, m = call(t, hs, "GET", "/v2/p/streams?limit=2&start_stream_name=w", nil)
	if names := m["stream_names"].([]any); len(names) != 1 || names[0] != "x" || m["has_more_streams"] != false {
		t.Fatalf("list page 2: %v", m)
	}
	st, m = call(t, hs, "PUT", "/v3/p/streams/v", map[string]any{"stream_name": "v", "data_duration": 72, "data_type": "JSON"})
	mustStatus(t, st, m, 204)
	_, m = call(t, hs, "GET", "/v2/p/streams/v", nil)
	if m["retention_period"] != 72.0 || m["data_type"] != "JSON" || m["stream_type"] != "ADVANCED" {
		t.Fatalf("after UpdateStream: %v", m)
	}
	st, m = call(t, hs, "DELETE", "/v2/p/streams/x", nil)
	mustStatus(t, st, m, 204)
	if s := srv.Stats(); s.Requests["CreateStream"] != 8 || s.Errors["CreateStream"] != 5 {
		t.Fatalf("stats %+v", s)
	}
	_, m = call(t, hs, "GET", "/dislocal/stats", nil)
	if m["requests"].(map[string]any)["DeleteStream"] != 2.0 {
		t.Fatalf("GET /dislocal/stats: %v", m)
	}
}

func TestAppsAndCheckpoints(t *testing.T) {
	t.Parallel()
	_, hs := startServer(t, Options{})
	createStream(t, hs, "a", 2)
	put(t, hs, "a", map[string]any{"data": b64(1), "partition_id": "0"}, map[string]any{"data": b64(1), "partition_id": "0"})
	st, m := call(t, hs, "POST", "/v2/p/apps", map[string]any{"app_name": "g1"})
	mustStatus(t, st, m, 201)
	st, m = call(t, hs, "POST", "/v2/p/apps", map[string]any{"app_name": "g1"})
	wantCode(t, st, m, 400, "DIS.4330")
	call(t, hs, "POST", "/v2/p/apps", map[string]any{"app_name": "g2"})

	cp := func(sn string) (int, map[string]any) {
		return call(t, hs, "POST", "/v2/p/checkpoints", map[string]any{"app_name": "g1", "checkpoint_type": "LAST_READ",
			"stream_name": "a", "partition_id": "shardId-0000000000", "sequence_number": sn, "metadata": "m"})
	}
	st, m = cp("3")
	wantCode(t, st, m, 400, "DIS.4224")
	st, m = cp("2")
	mustStatus(t, st, m, 201)
	_, m = call(t, hs, "GET", "/v2/p/checkpoints?app_name=g1&stream_name=a&partition_id=0&checkpoint_type=LAST_READ", nil)
	if m["sequence_number"] != "2" || m["metadata"] != "m" {
		t.Fatalf("checkpoint: %v", m)
	}
	_, m = call(t, hs, "GET", "/v2/p/checkpoints?app_name=g1&stream_name=a&partition_id=1&checkpoint_type=LAST_READ", nil)
	if m["sequence_number"] != "-1" {
		t.Fatalf("no checkpoint: %v", m)
	}
	_, m = call(t, hs, "GET", "/v2/p/apps/g1/streams/a?checkpoint_type=LAST_READ", nil)
	states := m["partition_consuming_states"].([]any)
	s0 := states[0].(map[string]any)
	if len(states) != 2 || s0["sequence_number"] != "2" || s0["latest_offset"] != 2.0 || s0["status"] != "ACTIVE" {
		t.Fatalf("consumer state: %v", m)
	}
	st, m = call(t, hs, "GET", "/v2/p/apps/g2/streams/a", nil)
	wantCode(t, st, m, 400, "DIS.4375")
	_, m = call(t, hs, "GET", "/v2/p/apps?limit=1", nil)
	if m["total_number"] != 2.0 || m["has_more_app"] != true {
		t.Fatalf("list apps: %v", m)
	}
	_, m = call(t, hs, "GET", "/v2/p/apps?stream_name=a", nil)
	if apps := m["apps"].([]any); len(apps) != 1 || apps[0].(map[string]any)["app_name"] != "g1" {
		t.Fatalf("apps of stream a: %v", m)
	}
	st, m = call(t, hs, "DELETE", "/v2/p/checkpoints?app_name=g1&stream_name=a&checkpoint_type=LAST_READ", nil)
	mustStatus(t, st, m, 204)
	st, m = call(t, hs, "DELETE", "/v2/p/apps/g1", nil)
	mustStatus(t, st, m, 204)
	st, m = call(t, hs, "DELETE", "/v2/p/apps/g1", nil)
	wantCode(t, st, m, 400, "DIS.4332")
}

func TestTags(t *testing.T) {
	t.Parallel()
	_, hs := startServer(t, Options{})
	createStream(t, hs, "t", 1, "tags", []any{map[string]any{"key": "team", "value": "data"}})
	_, d := call(t, hs, "GET", "/v2/p/streams/t", nil)
	id := d["stream_id"].(string)
	base := "/v2/p/stream/" + id + "/tags"
	st, m := call(t, hs, "POST", base, map[string]any{"tag": map[string]any{"key": "env", "value": "test"}})
	mustStatus(t, st, m, 204)
	st, m = call(t, hs, "POST", base+"/action", map[string]any{"action": "create", "tags": []any{map[string]any{"key": "env", "value": "prod"}, map[string]any{"key": "k3", "value": "v.3"}}})
	mustStatus(t, st, m, 204)
	_, m = call(t, hs, "GET", base, nil)
	tags, _ := json.Marshal(m["tags"])
	if string(tags) != `[{"key":"env","value":"prod"},{"key":"k3","value":"v.3"},{"key":"team","value":"data"}]` {
		t.Fatalf("tags: %s", tags)
	}
	var eleven []any
	for i := range 11 {
		eleven = append(eleven, map[string]any{"key": "k" + strings.Repeat("x", i), "value": "v"})
	}
	st, m = call(t, hs, "POST", base+"/action", map[string]any{"action": "create", "tags": eleven})
	wantCode(t, st, m, 400, "DIS.4601")
	st, m = call(t, hs, "POST", base+"/action", map[string]any{"action": "update", "tags": []any{}})
	wantCode(t, st, m, 400, "DIS.4605")
	st, m = call(t, hs, "DELETE", base+"/team", nil)
	mustStatus(t, st, m, 204)
	st, m = call(t, hs, "DELETE", base+"/team", nil)
	wantCode(t, st, m, 400, "DIS.4604")
	st, m = call(t, hs, "GET", "/v2/p/stream/NoSuchStreamId00000/tags", nil)
	wantCode(t, st, m, 400, "DIS.4603")
	_, m = call(t, hs, "GET", "/v2/p/stream/tags", nil)
	if all, _ := json.Marshal(m["tags"]); string(all) != `[{"key":"env","values":["prod"]},{"key":"k3","values":["v.3"]}]` {
		t.Fatalf("project tags: %s", all)
	}
	_, m = call(t, hs, "POST", "/v2/p/stream/resource_instances/action", map[string]any{"action": "filter", "tags": []any{map[string]any{"key": "env", "values": []any{"prod"}}}})
	if m["total_count"] != 1.0 {
		t.Fatalf("filter: %v", m)
	}
}

func TestTokenAndFaults(t *testing.T) {
	t.Parallel()
	_, hs := startServer(t, Options{Token: "tok"})
	st, m := call(t, hs, "GET", "/v2/p/streams", nil)
	wantCode(t, st, m, 441, "DIS.4113")
	st, m = call(t, hs, "GET", "/v2/p/streams", nil, "X-Auth-Token", "other")
	wantCode(t, st, m, 441, "DIS.4114")
	st, m = call(t, hs, "GET", "/v2/p/streams", nil, "X-Auth-Token", "tok")
	mustStatus(t, st, m, 200)

	_, hs = startServer(t, Options{Faults: Faults{ErrorRate: 1}})
	st, m = call(t, hs, "GET", "/v2/p/streams", nil)
	wantCode(t, st, m, 500, "DIS.5000")

	_, hs = startServer(t, Options{Faults: Faults{DropRate: 1}})
	req, _ := http.NewRequest("GET", hs.URL+"/v2/p/streams", nil)
	if resp, err := hs.Client().Do(req); err == nil {
		resp.Body.Close()
		t.Fatalf("dropped connection answered %d", resp.StatusCode)
	}
}

func TestStateSurvivesRestart(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	open := func() (*localstore.Store, *httptest.Server) {
		st, err := localstore.Open(dir, localstore.Options{RetentionCheckInterval: -1})
		if err != nil {
			t.Fatal(err)
		}
		s, err := New(st, Options{StateFile: dir + "/dislocal.json", NoScalingLimits: true})
		if err != nil {
			t.Fatal(err)
		}
		return st, httptest.NewServer(s)
	}
	st, hs := open()
	createStream(t, hs, "k", 2, "stream_type", "ADVANCED", "tags", []any{map[string]any{"key": "a", "value": "b"}})
	call(t, hs, "PUT", "/v2/p/streams/k", map[string]any{"target_partition_count": 1})
	hs.Close()
	_ = st.Close()
	st, hs = open()
	defer func() { hs.Close(); _ = st.Close() }()
	_, d := call(t, hs, "GET", "/v2/p/streams/k", nil)
	if d["stream_type"] != "ADVANCED" || d["writable_partition_count"] != 1.0 || len(d["tags"].([]any)) != 1 || partitions(d)[1]["status"] != "DELETED" {
		t.Fatalf("after restart: %v", d)
	}
}
