package dislocal

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"

	"github.com/huaweicloud/huaweicloud-sdk-go-v3/core/auth/signer"
	"github.com/huaweicloud/huaweicloud-sdk-go-v3/core/request"

	"github.com/disgw/disgw/disbackend/disapi"
)

// signedGet returns a GET of rawURL signed with ak/sk by the official Go
// SDK's signer (SDK-HMAC-SHA256, the scheme disrest uses), for the
// endpoints the SDK has no call for, such as /dislocal/stats.
func signedGet(t *testing.T, rawURL, ak, sk string) *http.Request {
	t.Helper()
	u, err := url.Parse(rawURL)
	if err != nil {
		t.Fatal(err)
	}
	sr := request.NewHttpRequestBuilder().WithEndpoint(u.Scheme+"://"+u.Host).WithPath(u.Path).
		WithMethod(http.MethodGet).AddHeaderParam("Host", u.Host).Build()
	extra, err := signer.Sign(sr, ak, sk)
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequest(http.MethodGet, rawURL, nil)
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

// doJSON sends req and decodes its JSON answer.
func doJSON(t *testing.T, c *http.Client, req *http.Request) (int, map[string]any) {
	t.Helper()
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("%d %q is not JSON", resp.StatusCode, b)
	}
	return resp.StatusCode, m
}

// TestStatsAuthenticated: with AK/SK configured, GET /dislocal/stats answers
// only a request signed with them, the others get DIS's 441 errors as a
// DIS operation would; with a token configured, the token opens it too.
func TestStatsAuthenticated(t *testing.T) {
	t.Parallel()
	_, hs := startServer(t, Options{AK: testAK, SK: testSK, Token: "tok"})
	stats := hs.URL + "/dislocal/stats"

	unsigned, _ := http.NewRequest(http.MethodGet, stats, nil)
	st, m := doJSON(t, hs.Client(), unsigned)
	wantCode(t, st, m, 441, disapi.CodeAuthorizationEmpty)
	st, m = doJSON(t, hs.Client(), signedGet(t, stats, testAK, "not-"+testSK))
	wantCode(t, st, m, 441, disapi.CodeBadSignature)
	st, m = doJSON(t, hs.Client(), signedGet(t, stats, "other-ak", testSK))
	wantCode(t, st, m, 441, disapi.CodeAKInvalid)
	badTok, _ := http.NewRequest(http.MethodGet, stats, nil)
	badTok.Header.Set("X-Auth-Token", "nope")
	st, m = doJSON(t, hs.Client(), badTok)
	wantCode(t, st, m, 441, disapi.CodeTokenInvalid)

	st, m = doJSON(t, hs.Client(), signedGet(t, stats, testAK, testSK))
	if st != 200 || m["requests"] == nil {
		t.Fatalf("signed GET /dislocal/stats: %d %v", st, m)
	}
	if errs := m["errors"].(map[string]any); len(errs) != 0 {
		t.Fatalf("stats requests were counted as DIS operations: %v", m)
	}
	tok, _ := http.NewRequest(http.MethodGet, stats, nil)
	tok.Header.Set("X-Auth-Token", "tok")
	if st, m := doJSON(t, hs.Client(), tok); st != 200 {
		t.Fatalf("GET /dislocal/stats with the token: %d %v", st, m)
	}
}

// doJSONArray sends req and decodes its JSON array answer.
func doJSONArray(t *testing.T, hs *httptest.Server, req *http.Request) (int, []map[string]any) {
	t.Helper()
	resp, err := hs.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var m []map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("%d %q is not a JSON array", resp.StatusCode, b)
	}
	return resp.StatusCode, m
}
