package dislocal

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"

	"github.com/golang/snappy"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
)

// compressBody compresses body as the DIS Java SDK does with
// body.compress.type enc, and returns the headers it sends with it.
func compressBody(t testing.TB, enc string, body []byte) ([]byte, map[string]string) {
	switch enc {
	case "lz4":
		out := make([]byte, lz4.CompressBlockBound(len(body)))
		n, err := lz4.CompressBlock(body, out, nil)
		if err != nil || n == 0 {
			t.Fatalf("lz4: %d, %v", n, err)
		}
		return out[:n], map[string]string{"Content-Encoding": "lz4", headerLZ4Length: strconv.Itoa(len(body))}
	case "snappy":
		return snappy.Encode(nil, body), map[string]string{"Content-Encoding": "snappy"}
	case "zstd":
		e, err := zstd.NewWriter(nil)
		if err != nil {
			t.Fatal(err)
		}
		defer e.Close()
		return e.EncodeAll(body, nil), map[string]string{"Content-Encoding": "zstd", headerZstdLength: strconv.Itoa(len(body))}
	}
	t.Fatalf("unknown encoding %s", enc)
	return nil, nil
}

// rawCall sends body with hdr and returns the status and the DIS error
// code (empty when none).
func rawCall(t *testing.T, hs *httptest.Server, method, path string, body []byte, hdr map[string]string) (int, map[string]any) {
	t.Helper()
	req, _ := http.NewRequest(method, hs.URL+path, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := hs.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var m map[string]any
	_ = json.Unmarshal(b, &m)
	return resp.StatusCode, m
}

// TestCompressedBodies: PutRecords and CreateStream with bodies compressed
// as the DIS Java SDK sends them (body.compress.enabled), then read back;
// bodies that do not decompress are refused with DIS.4300.
func TestCompressedBodies(t *testing.T) {
	t.Parallel()
	_, hs := startServer(t, Options{})
	for _, enc := range []string{"lz4", "snappy", "zstd"} {
		stream := "c-" + enc
		cs, _ := json.Marshal(map[string]any{"stream_name": stream, "partition_count": 1})
		body, hdr := compressBody(t, enc, cs)
		st, m := rawCall(t, hs, "POST", "/v2/p/streams", body, hdr)
		mustStatus(t, st, m, 201)

		var recs []map[string]any
		for i := range 50 {
			recs = append(recs, map[string]any{"partition_key": "k" + strconv.Itoa(i),
				"data": base64.StdEncoding.EncodeToString([]byte(enc + " value " + strconv.Itoa(i)))})
		}
		pr, _ := json.Marshal(map[string]any{"stream_name": stream, "records": recs})
		body, hdr = compressBody(t, enc, pr)
		if len(body) >= len(pr) {
			t.Fatalf("%s: %d bytes compressed, %d plain", enc, len(body), len(pr))
		}
		st, m = rawCall(t, hs, "POST", "/v2/p/records/", body, hdr)
		mustStatus(t, st, m, 200)
		if m["failed_record_count"] != 0.0 || len(m["records"].([]any)) != 50 {
			t.Fatalf("%s: put records: %v", enc, m)
		}
		st, m = getCursor(t, hs, "stream-name="+stream+"&partition-id=0&cursor-type=TRIM_HORIZON")
		mustStatus(t, st, m, 200)
		st, m = call(t, hs, "GET", "/v2/p/records?partition-cursor="+m["partition_cursor"].(string), nil)
		mustStatus(t, st, m, 200)
		got := m["records"].([]any)
		if len(got) != 50 {
			t.Fatalf("%s: read %d records", enc, len(got))
		}
		for i, r := range got {
			r := r.(map[string]any)
			v, _ := base64.StdEncoding.DecodeString(r["data"].(string))
			if r["partition_key"] != "k"+strconv.Itoa(i) || string(v) != enc+" value "+strconv.Itoa(i) {
				t.Fatalf("%s: record %d: %v (%q)", enc, i, r, v)
			}
		}

		// Corrupt: refused, nothing appended.
		body, hdr = compressBody(t, enc, pr)
		st, m = rawCall(t, hs, "POST", "/v2/p/records/", body[:len(body)/2], hdr)
		wantCode(t, st, m, 400, "DIS.4300")
	}
	pr, _ := json.Marshal(map[string]any{"stream_name": "c-lz4", "records": []map[string]any{{"data": b64(3)}}})
	body, hdr := compressBody(t, "lz4", pr)
	delete(hdr, headerLZ4Length)
	st, m := rawCall(t, hs, "POST", "/v2/p/records/", body, hdr)
	wantCode(t, st, m, 400, "DIS.4300")
	hdr[headerLZ4Length] = strconv.Itoa(len(pr) + 1)
	st, m = rawCall(t, hs, "POST", "/v2/p/records/", body, hdr)
	wantCode(t, st, m, 400, "DIS.4300")
	hdr[headerLZ4Length] = strconv.Itoa(maxBodyBytes + 1)
	st, m = rawCall(t, hs, "POST", "/v2/p/records/", body, hdr)
	wantCode(t, st, m, 413, "DIS.4300")
	st, m = rawCall(t, hs, "POST", "/v2/p/records/", pr, map[string]string{"Content-Encoding": "br"})
	wantCode(t, st, m, 400, "DIS.4300")
	// A zstd bomb: far more than maxBodyBytes from a small body.
	e, _ := zstd.NewWriter(nil)
	bomb := e.EncodeAll(make([]byte, maxBodyBytes+1024), nil)
	e.Close()
	st, m = rawCall(t, hs, "POST", "/v2/p/records/", bomb, map[string]string{"Content-Encoding": "zstd"})
	if st != 400 && st != 413 || m["errorCode"] != "DIS.4300" {
		t.Fatalf("zstd bomb of %d bytes: %d %v", len(bomb), st, m)
	}

	_, m = call(t, hs, "GET", "/v2/p/streams/c-lz4", nil)
	if r := partitions(m)[0]["sequence_number_range"]; r != "[0 : 50]" {
		t.Fatalf("c-lz4 after the refused bodies: %v", r)
	}
}

// FuzzDecodeContent: any body with any of the encodings decodes or gives a
// DIS.4300 error, never more than maxBodyBytes, never a panic.
func FuzzDecodeContent(f *testing.F) {
	for _, enc := range []string{"lz4", "snappy", "zstd"} {
		b, hdr := compressBody(f, enc, []byte(`{"stream_name":"s","records":[{"data":"eA=="}]}`))
		n, _ := strconv.Atoi(hdr[headerLZ4Length] + hdr[headerZstdLength])
		f.Add(enc, b, n)
	}
	f.Add("lz4", []byte{0xff, 0, 0}, 1<<20)
	f.Add("identity", []byte("{}"), -1)
	f.Fuzz(func(t *testing.T, enc string, body []byte, n int) {
		h := http.Header{}
		h.Set("Content-Encoding", enc)
		if n >= 0 {
			h.Set(headerLZ4Length, strconv.Itoa(n))
			h.Set(headerZstdLength, strconv.Itoa(n))
		}
		out, derr := decodeContent(h, body)
		if derr != nil {
			if derr.Code != "DIS.4300" || derr.Status != 400 && derr.Status != 413 {
				t.Fatalf("error %d %s", derr.Status, derr.Code)
			}
			return
		}
		if len(out) > maxBodyBytes && len(out) != len(body) {
			t.Fatalf("%d bytes decoded", len(out))
		}
	})
}
