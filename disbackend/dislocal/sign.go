package dislocal

import (
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"net"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/disgw/disgw/disbackend/disapi"
)

// AK/SK request signing, the variants DIS accepts (docs/dis-api.md §1.4): two
// under the label SDK-HMAC-SHA256 and the derived-key one of the Python
// DIS SDK:
//
//   - A, the API-gateway scheme of the Go SDK v3: Authorization
//     "SDK-HMAC-SHA256 Access=AK, SignedHeaders=..., Signature=...", the
//     HMAC keyed with the raw SK.
//   - B, the legacy DIS scheme of the Java and Python DIS SDKs:
//     "SDK-HMAC-SHA256 Credential=AK/yyyyMMdd/region/dis/sdk_request, ...",
//     the key derived from "SDK"+SK, the date, region and service.
//   - V11, B with a derived secret, the default of the Python DIS SDK since
//     2.0.8 (huaweicloud-sdk-python-dis, disauth.SignWithDerivationKey):
//     "V11-HMAC-SHA256 Credential=AK/yyyyMMdd/region/dis/sdk_request, ...",
//     signed as B with the label V11-HMAC-SHA256 in the string to sign and,
//     in place of SK, the lower-case hex of HKDF-SHA256(secret SK, salt AK,
//     info "yyyyMMdd/region/dis", 32 bytes).
//
// All share the canonical request; the server recomputes it from exactly
// the headers named in SignedHeaders.

const (
	signAlgorithm   = "SDK-HMAC-SHA256"
	v11Algorithm    = "V11-HMAC-SHA256"
	sdkDateFormat   = "20060102T150405Z"
	unsignedPayload = "UNSIGNED-PAYLOAD"
	emptyBodySHA256 = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
)

// authHeader is a parsed Authorization header.
type authHeader struct {
	Algorithm     string // signAlgorithm or v11Algorithm
	AK            string
	Scope         string // variants B and V11: yyyyMMdd/region/dis/sdk_request
	SignedHeaders []string
	Signature     string
}

// parseAuthorization parses the variants' header. ok is false when it is
// not "SDK-HMAC-SHA256 k=v, k=v, k=v" (or V11-HMAC-SHA256 with a
// Credential) with a signature.
func parseAuthorization(h string) (a authHeader, ok bool) {
	alg, rest, found := strings.Cut(h, " ")
	if !found || (alg != signAlgorithm && alg != v11Algorithm) {
		return a, false
	}
	a.Algorithm = alg
	for _, part := range strings.Split(rest, ",") {
		k, v, found := strings.Cut(strings.TrimSpace(part), "=")
		if !found {
			return a, false
		}
		switch k {
		case "Access":
			a.AK = v
		case "Credential":
			ak, scope, _ := strings.Cut(v, "/")
			a.AK, a.Scope = ak, scope
		case "SignedHeaders":
			if v != "" {
				a.SignedHeaders = strings.Split(v, ";")
			}
		case "Signature":
			a.Signature = v
		default:
			return a, false
		}
	}
	return a, a.Signature != "" && (alg == signAlgorithm || a.Scope != "")
}

// escapeRFC3986 percent-encodes everything but A-Z a-z 0-9 - _ . ~ with
// upper-case hex, as both SDKs' signers do.
func escapeRFC3986(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '_' || c == '.' || c == '~' {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('%')
		b.WriteByte("0123456789ABCDEF"[c>>4])
		b.WriteByte("0123456789ABCDEF"[c&15])
	}
	return b.String()
}

// canonicalRequest builds the canonical request of method, path (decoded),
// query, the signed headers' values (names lower case) and the payload hash.
func canonicalRequest(method, path string, query url.Values, signed []string, header func(name string) []string, payloadHash string) string {
	segs := strings.Split(path, "/")
	for i, s := range segs {
		segs[i] = escapeRFC3986(s)
	}
	uri := strings.Join(segs, "/")
	if !strings.HasSuffix(uri, "/") {
		uri += "/"
	}
	keys := make([]string, 0, len(query))
	for k := range query {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var qs []string
	for _, k := range keys {
		vals := append([]string(nil), query[k]...)
		sort.Strings(vals)
		for _, v := range vals {
			qs = append(qs, escapeRFC3986(k)+"="+escapeRFC3986(v))
		}
	}
	var hb strings.Builder
	for _, name := range signed {
		vals := append([]string(nil), header(name)...)
		sort.Strings(vals)
		for _, v := range vals {
			hb.WriteString(name)
			hb.WriteByte(':')
			hb.WriteString(strings.TrimSpace(v))
			hb.WriteByte('\n')
		}
	}
	return strings.Join([]string{method, uri, strings.Join(qs, "&"), hb.String(), strings.Join(signed, ";"), payloadHash}, "\n")
}

func sha256Hex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

func hmacSHA256(key []byte, msg string) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(msg))
	return m.Sum(nil)
}

// signatureA is variant A's signature: hex HMAC-SHA256(SK, string to sign).
func signatureA(sk, sdkDate, canonical string) string {
	sts := signAlgorithm + "\n" + sdkDate + "\n" + sha256Hex([]byte(canonical))
	return hex.EncodeToString(hmacSHA256([]byte(sk), sts))
}

// signatureB is variant B's signature, with scope yyyyMMdd/region/dis/sdk_request.
func signatureB(sk, sdkDate, scope, canonical string) string {
	return scopedSignature(signAlgorithm, sk, sdkDate, scope, canonical)
}

// signatureV11 is variant V11's signature: variant B's keyed with the
// derived secret (derivedSecret) and labelled V11-HMAC-SHA256.
func signatureV11(ak, sk, sdkDate, scope, canonical string) string {
	return scopedSignature(v11Algorithm, derivedSecret(ak, sk, strings.TrimSuffix(scope, "/sdk_request")), sdkDate, scope, canonical)
}

// derivedSecret is V11's secret: the lower-case hex of HKDF-SHA256 (RFC
// 5869) of SK with salt AK and info "yyyyMMdd/region/service", 32 bytes.
func derivedSecret(ak, sk, info string) string {
	k, err := hkdf.Key(sha256.New, []byte(sk), []byte(ak), info, sha256.Size)
	if err != nil {
		panic(err) // only for a length over 255 hash sizes
	}
	return hex.EncodeToString(k)
}

// scopedSignature signs with the scoped key of variants B and V11: k0 =
// "SDK"+secret, then HMAC over each part of the scope.
func scopedSignature(alg, secret, sdkDate, scope, canonical string) string {
	sts := alg + "\n" + sdkDate + "\n" + scope + "\n" + sha256Hex([]byte(canonical))
	key := []byte("SDK" + secret)
	for _, part := range strings.Split(scope, "/") {
		key = hmacSHA256(key, part)
	}
	return hex.EncodeToString(hmacSHA256(key, sts))
}

// requestHeader returns the values of a lower-case header name as the
// client sent them; Go's server keeps Host and Content-Length apart. With
// hostOnly, host is r.Host without its port.
func requestHeader(r *http.Request, hostOnly bool) func(string) []string {
	return func(name string) []string {
		switch name {
		case "host":
			if h, _, err := net.SplitHostPort(r.Host); hostOnly && err == nil {
				return []string{h}
			}
			return []string{r.Host}
		case "content-length":
			if v := r.Header.Values("Content-Length"); len(v) > 0 {
				return v
			}
			if r.ContentLength >= 0 {
				return []string{strconv.FormatInt(r.ContentLength, 10)}
			}
		}
		return r.Header.Values(name)
	}
}

// verifySignature checks r's AK/SK signature against ak/sk; body is the
// request body already read. It returns the DIS error to answer, or nil.
func verifySignature(r *http.Request, body []byte, ak, sk string, now time.Time, maxSkew time.Duration) *disError {
	h := r.Header.Get("Authorization")
	if h == "" {
		return errf(441, disapi.CodeAuthorizationEmpty, "Authorization header cannot be empty.")
	}
	a, ok := parseAuthorization(h)
	if !ok {
		return errf(441, disapi.CodeAuthorizationUnparsable, "Incorrectly parsed authorization header.")
	}
	if a.AK == "" {
		return errf(441, disapi.CodeAKMissing, "Empty AccessKey header.")
	}
	if len(a.SignedHeaders) == 0 {
		return errf(441, disapi.CodeSignedHeadersMissing, "Empty SignedHeaders.")
	}
	date := r.Header.Get("X-Sdk-Date")
	if date == "" {
		return errf(441, disapi.CodeSDKDateEmpty, "Empty X-Sdk-Date header.")
	}
	t, err := time.Parse(sdkDateFormat, date)
	if err != nil {
		return errf(441, disapi.CodeSDKDateUnparsable, "Error parsing X-Sdk-Date header.")
	}
	if d := now.Sub(t); d > maxSkew || d < -maxSkew {
		return errf(441, disapi.CodeSDKDateInvalid, "Invalid X-Sdk-Date header. [%s is more than %v from the server's clock]", date, maxSkew)
	}
	if a.AK != ak {
		return errf(441, disapi.CodeAKInvalid, "Invalid AccessKey header.")
	}
	payload := r.Header.Get("X-Sdk-Content-Sha256")
	if payload != unsignedPayload {
		payload = sha256Hex(body)
	}
	if a.Scope != "" {
		parts := strings.Split(a.Scope, "/")
		if len(parts) != 4 || parts[3] != "sdk_request" {
			return errf(441, disapi.CodeAuthorizationIncomplete, "Authorization header must contain Credential, SignedHeaders and Signature.")
		}
		if parts[2] != "dis" {
			return errf(441, disapi.CodeServiceNameMissing, "Invalid service name in the Authorization header.")
		}
	}
	sign := func(canonical string) string {
		switch {
		case a.Algorithm == v11Algorithm:
			return signatureV11(ak, sk, date, a.Scope, canonical)
		case a.Scope != "":
			return signatureB(sk, date, a.Scope, canonical)
		}
		return signatureA(sk, date, canonical)
	}
	want := sign(canonicalRequest(r.Method, r.URL.Path, r.URL.Query(), a.SignedHeaders, requestHeader(r, false), payload))
	if hmac.Equal([]byte(want), []byte(a.Signature)) {
		return nil
	}
	// The Python DIS SDK signs the host without its port, whatever the
	// port (disauth.Signer: `port == '443' or '80'` is always true), and
	// sends Host with it. DIS's endpoints are on 443, where the two agree;
	// dislocal, on another port, takes the scoped variants' signature over
	// the host without the port too.
	if a.Scope != "" && slices.Contains(a.SignedHeaders, "host") && strings.Contains(r.Host, ":") {
		want = sign(canonicalRequest(r.Method, r.URL.Path, r.URL.Query(), a.SignedHeaders, requestHeader(r, true), payload))
		if hmac.Equal([]byte(want), []byte(a.Signature)) {
			return nil
		}
	}
	return errf(441, disapi.CodeBadSignature, "Authorization error.")
}
