package dislocal

import (
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// The vectors of docs/dis-api.md §1.5.
func TestSignatureVectors(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, method, url, host, body, ak, sk, date, auth string
		headers                                           map[string]string
	}{
		{
			name: "V1 APIG example", method: "GET",
			url:  "/v1/77b6a44cba5143ab91d13ab9a8ff44fd/vpcs?limit=2&marker=13551d6b-755d-4757-b956-536f674975c0",
			host: "service.region.example.com", ak: "QTWAOYTTINDUT2QVKYUC", sk: "MFyfvK41ba2giqM7Uio6PznpdUKGpownRZlmVmHc",
			date:    "20191115T033655Z",
			headers: map[string]string{"Content-Type": "application/json"},
			auth:    "SDK-HMAC-SHA256 Access=QTWAOYTTINDUT2QVKYUC, SignedHeaders=content-type;host;x-sdk-date, Signature=7be6668032f70418fcc22abc52071e57aff61b84a1d2381bb430d6870f4f6ebe",
		},
		{
			name: "V2 Go SDK GET", method: "GET", url: "/path?limit=1", host: "example.huaweicloud.com",
			ak: "AccessKey", sk: "SecretKey", date: "20060102T150405Z",
			headers: map[string]string{"TEST_UNDERSCORE": "x"},
			auth:    "SDK-HMAC-SHA256 Access=AccessKey, SignedHeaders=x-sdk-date, Signature=5a2ce64c865e0e6046321c6f3d5a77ba8413eeaf355c3166c03d58d02ac79624",
		},
		{
			name: "V3 Go SDK POST", method: "POST", url: "/path?key=value", host: "example.huaweicloud.com",
			body: "{\"Name\":\"test\",\"Id\":1}\n", ak: "AccessKey", sk: "SecretKey", date: "20060102T150405Z",
			headers: map[string]string{"Content-Type": "application/json", "TEST_UNDERSCORE": "x"},
			auth:    "SDK-HMAC-SHA256 Access=AccessKey, SignedHeaders=x-sdk-date, Signature=cecc2af119b18ab70b4d094c0750f3b42c02f254903179a0fc2cc72fc9db4f59",
		},
		{
			name: "V4 legacy DIS scope", method: "GET",
			url:  "/v2/pid/cursors/?stream-name=s1&partition-id=0&cursor-type=TRIM_HORIZON",
			host: "dis.cn-north-4.myhuaweicloud.com", ak: "AccessKey", sk: "SecretKey", date: "20060102T150405Z",
			auth: "SDK-HMAC-SHA256 Credential=AccessKey/20060102/cn-north-4/dis/sdk_request, SignedHeaders=host;x-sdk-date, Signature=206c2f0720d14d380ffd5bb27bbd9677a8b338c2cd1e34b65854733767ec0c0d",
		},
		// V5-V8: computed by huaweicloud-sdk-python-dis 2.0.8's own signer
		// (disauth.Signer SignWithDerivationKey, and Sign for V8).
		{
			name: "V5 Python SDK derived key GET", method: "GET",
			url:  "/v2/pid/cursors/?stream-name=s1&partition-id=0&cursor-type=TRIM_HORIZON",
			host: "dis.cn-north-4.myhuaweicloud.com", ak: "AccessKey", sk: "SecretKey", date: "20060102T150405Z",
			auth: "V11-HMAC-SHA256 Credential=AccessKey/20060102/cn-north-4/dis/sdk_request, SignedHeaders=host;x-sdk-date, Signature=3598839e7ae6f4077ef579d2bb2101338aa0d14d5660d268fca5ed02c89d58d1",
		},
		{
			name: "V6 Python SDK derived key POST", method: "POST", url: "/v2/pid/records/",
			host: "dis.cn-north-4.myhuaweicloud.com", body: `{"stream_name": "s1"}`, ak: "AccessKey", sk: "SecretKey", date: "20060102T150405Z",
			auth: "V11-HMAC-SHA256 Credential=AccessKey/20060102/cn-north-4/dis/sdk_request, SignedHeaders=host;x-sdk-date, Signature=6f8340cb5cb11c8e68d290c79f6ec2f61b606223436aa34fe067b9f355b07e50",
		},
		// The Python SDK signs host 127.0.0.1 for 127.0.0.1:20004.
		{
			name: "V7 Python SDK derived key, host with port", method: "GET",
			url:  "/v2/pid/cursors/?stream-name=s1&partition-id=0&cursor-type=TRIM_HORIZON",
			host: "127.0.0.1:20004", ak: "AccessKey", sk: "SecretKey", date: "20060102T150405Z",
			auth: "V11-HMAC-SHA256 Credential=AccessKey/20060102/cn-north-4/dis/sdk_request, SignedHeaders=host;x-sdk-date, Signature=8f5fd05c8058475d1924be1f5393634686816f603ecae9810ac1756598a81612",
		},
		{
			name: "V8 Python SDK legacy scope, host with port", method: "GET",
			url:  "/v2/pid/cursors/?stream-name=s1&partition-id=0&cursor-type=TRIM_HORIZON",
			host: "127.0.0.1:20004", ak: "AccessKey", sk: "SecretKey", date: "20060102T150405Z",
			auth: "SDK-HMAC-SHA256 Credential=AccessKey/20060102/cn-north-4/dis/sdk_request, SignedHeaders=host;x-sdk-date, Signature=9c6d58fb29ddcb518b5d66688f206a5a154a5852ab33f15d9e590de3cba2b324",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			now, _ := time.Parse(sdkDateFormat, tc.date)
			newReq := func(auth, body string) *disError {
				r := httptest.NewRequest(tc.method, "http://"+tc.host+tc.url, strings.NewReader(body))
				for k, v := range tc.headers {
					r.Header[k] = []string{v}
				}
				r.Header.Set("X-Sdk-Date", tc.date)
				r.Header.Set("Authorization", auth)
				return verifySignature(r, []byte(body), tc.ak, tc.sk, now, time.Minute)
			}
			if derr := newReq(tc.auth, tc.body); derr != nil {
				t.Fatalf("published signature refused: %v", derr)
			}
			// One changed hex digit of the signature, or of the body, fails.
			bad := tc.auth[:len(tc.auth)-1] + "0"
			if strings.HasSuffix(tc.auth, "0") {
				bad = tc.auth[:len(tc.auth)-1] + "1"
			}
			if derr := newReq(bad, tc.body); derr == nil || derr.Code != "DIS.4100" || derr.Status != 441 {
				t.Fatalf("altered signature: got %v, want 441 DIS.4100", derr)
			}
			if derr := newReq(tc.auth, tc.body+" "); derr == nil || derr.Code != "DIS.4100" {
				t.Fatalf("altered body: got %v, want DIS.4100", derr)
			}
		})
	}
}

// The Python SDK's HKDF (utils/hkdf.getDerKey) of the vectors' AK/SK.
func TestDerivedSecret(t *testing.T) {
	t.Parallel()
	if got, want := derivedSecret("AccessKey", "SecretKey", "20060102/cn-north-4/dis"), "bf33a96f2d82d07bf7bfe0a9211facab04e8dd66e3c2b0116dd168c63675a619"; got != want {
		t.Fatalf("derived secret %s, want %s", got, want)
	}
}

// Only the scoped variants' signature may leave the port out of host; a
// V11 header must carry a Credential.
func TestSignatureHostPort(t *testing.T) {
	t.Parallel()
	now, _ := time.Parse(sdkDateFormat, "20060102T150405Z")
	// V1's request signed over host service.region.example.com, sent to
	// service.region.example.com:8080: refused.
	r := httptest.NewRequest("GET", "http://service.region.example.com:8080/v1/77b6a44cba5143ab91d13ab9a8ff44fd/vpcs?limit=2&marker=13551d6b-755d-4757-b956-536f674975c0", nil)
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set("X-Sdk-Date", "20191115T033655Z")
	r.Header.Set("Authorization", "SDK-HMAC-SHA256 Access=QTWAOYTTINDUT2QVKYUC, SignedHeaders=content-type;host;x-sdk-date, Signature=7be6668032f70418fcc22abc52071e57aff61b84a1d2381bb430d6870f4f6ebe")
	v1now, _ := time.Parse(sdkDateFormat, "20191115T033655Z")
	if derr := verifySignature(r, nil, "QTWAOYTTINDUT2QVKYUC", "MFyfvK41ba2giqM7Uio6PznpdUKGpownRZlmVmHc", v1now, time.Minute); derr == nil || derr.Code != "DIS.4100" {
		t.Fatalf("variant A without the port: got %v, want DIS.4100", derr)
	}
	r = httptest.NewRequest("GET", "http://example.huaweicloud.com/path?limit=1", nil)
	r.Header.Set("X-Sdk-Date", "20060102T150405Z")
	r.Header.Set("Authorization", "V11-HMAC-SHA256 Access=AccessKey, SignedHeaders=x-sdk-date, Signature=5a2ce64c865e0e6046321c6f3d5a77ba8413eeaf355c3166c03d58d02ac79624")
	if derr := verifySignature(r, nil, "AccessKey", "SecretKey", now, time.Minute); derr == nil || derr.Code != "DIS.4102" {
		t.Fatalf("V11 without Credential: got %v, want DIS.4102", derr)
	}
}

func TestSignatureHeaderErrors(t *testing.T) {
	t.Parallel()
	now, _ := time.Parse(sdkDateFormat, "20060102T150405Z")
	good := "SDK-HMAC-SHA256 Access=AccessKey, SignedHeaders=x-sdk-date, Signature=5a2ce64c865e0e6046321c6f3d5a77ba8413eeaf355c3166c03d58d02ac79624"
	cases := []struct {
		name, auth, date, ak string
		now                  time.Time
		want                 string
	}{
		{"no authorization", "", "20060102T150405Z", "AccessKey", now, "DIS.4101"},
		{"garbage", "Basic abc", "20060102T150405Z", "AccessKey", now, "DIS.4102"},
		{"no date", good, "", "AccessKey", now, "DIS.4103"},
		{"bad date", good, "2006-01-02", "AccessKey", now, "DIS.4104"},
		{"skewed date", good, "20060102T150405Z", "AccessKey", now.Add(time.Hour), "DIS.4105"},
		{"other AK", good, "20060102T150405Z", "OtherKey", now, "DIS.4107"},
		{"no signed headers", "SDK-HMAC-SHA256 Access=AccessKey, SignedHeaders=, Signature=00", "20060102T150405Z", "AccessKey", now, "DIS.4110"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest("GET", "http://example.huaweicloud.com/path?limit=1", nil)
			if tc.auth != "" {
				r.Header.Set("Authorization", tc.auth)
			}
			if tc.date != "" {
				r.Header.Set("X-Sdk-Date", tc.date)
			}
			derr := verifySignature(r, nil, tc.ak, "SecretKey", tc.now, 15*time.Minute)
			if derr == nil || derr.Code != tc.want || derr.Status != 441 {
				t.Fatalf("got %v, want 441 %s", derr, tc.want)
			}
		})
	}
}

// FuzzVerifySignature: any Authorization header, date and host is answered
// with a DIS error or accepted, never a panic; a header that parses names
// an algorithm and a signature.
func FuzzVerifySignature(f *testing.F) {
	f.Add("SDK-HMAC-SHA256 Access=AccessKey, SignedHeaders=x-sdk-date, Signature=5a2ce64c865e0e6046321c6f3d5a77ba8413eeaf355c3166c03d58d02ac79624", "20060102T150405Z", "example.huaweicloud.com")
	f.Add("SDK-HMAC-SHA256 Credential=AccessKey/20060102/cn-north-4/dis/sdk_request, SignedHeaders=host;x-sdk-date, Signature=9c6d58fb29ddcb518b5d66688f206a5a154a5852ab33f15d9e590de3cba2b324", "20060102T150405Z", "127.0.0.1:20004")
	f.Add("V11-HMAC-SHA256 Credential=AccessKey/20060102/cn-north-4/dis/sdk_request, SignedHeaders=host;x-sdk-date, Signature=8f5fd05c8058475d1924be1f5393634686816f603ecae9810ac1756598a81612", "20060102T150405Z", "127.0.0.1:20004")
	f.Add("V11-HMAC-SHA256 Credential=/, SignedHeaders=host, Signature=0", "x", "[::1]:")
	now, _ := time.Parse(sdkDateFormat, "20060102T150405Z")
	f.Fuzz(func(t *testing.T, auth, date, host string) {
		if a, ok := parseAuthorization(auth); ok && (a.Signature == "" || (a.Algorithm != signAlgorithm && a.Algorithm != v11Algorithm)) {
			t.Fatalf("parsed %q as %+v", auth, a)
		}
		r := httptest.NewRequest("GET", "http://example.huaweicloud.com/v2/pid/cursors/?stream-name=s1&partition-id=0&cursor-type=TRIM_HORIZON", nil)
		r.Host = host
		r.Header.Set("Authorization", auth)
		r.Header.Set("X-Sdk-Date", date)
		if derr := verifySignature(r, nil, "AccessKey", "SecretKey", now, time.Minute); derr != nil && derr.Status != 441 {
			t.Fatalf("status %d for %q", derr.Status, auth)
		}
	})
}
