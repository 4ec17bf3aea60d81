package dislocal

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"

	"github.com/golang/snappy"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"

	"github.com/disgw/disgw/disbackend/disapi"
)

// The headers of a compressed request body, as the DIS Java SDK sends them
// with body.compress.enabled=true (body.compress.type lz4, the default,
// snappy or zstd): Content-Encoding names the codec, and for lz4 and zstd
// the length of the uncompressed body is in its own header.
const (
	headerLZ4Length  = "X-Dis-Lz4-Content-Length"
	headerZstdLength = "X-Dis-Zstd-Content-Length"
)

// zstdDecoder decodes zstd request bodies (made at the first); DecodeAll
// is safe for concurrent use. Its window and output are bounded by
// maxBodyBytes.
var zstdDecoder = sync.OnceValues(func() (*zstd.Decoder, error) {
	return zstd.NewReader(nil, zstd.WithDecoderConcurrency(4), zstd.WithDecoderMaxMemory(maxBodyBytes),
		zstd.WithDecoderMaxWindow(maxBodyBytes))
})

// decodeContent undoes the body compression of the DIS SDKs: body as sent
// with Content-Encoding lz4 (one LZ4 block, as lz4-java's
// LZ4Compressor.compress writes it, of the length in
// X-Dis-Lz4-Content-Length), snappy (one snappy block, snappy-java's
// Snappy.compress) or zstd (a zstd frame; X-Dis-Zstd-Content-Length, when
// given, must match). Without Content-Encoding, or with identity, body is
// returned as it is. The uncompressed body may have at most maxBodyBytes.
// Errors: 400 DIS.4300 for an unknown Content-Encoding, a missing or bad
// length header, or a body that does not decompress to it; 413 DIS.4300
// for an uncompressed body over maxBodyBytes.
func decodeContent(h http.Header, body []byte) ([]byte, *disError) {
	enc := strings.ToLower(strings.TrimSpace(h.Get("Content-Encoding")))
	if enc == "" || enc == "identity" {
		return body, nil
	}
	bad := func(format string, args ...any) *disError {
		return errf(400, disapi.CodeBodyError, "Request body error. [Content-Encoding %s: %s]", enc, fmt.Sprintf(format, args...))
	}
	tooLarge := func(n int) *disError {
		return errf(413, disapi.CodeBodyError, "Request body error. [Content-Encoding %s: %d bytes uncompressed, larger than %d]", enc, n, maxBodyBytes)
	}
	// length reads the uncompressed length header name (-1 when absent
	// and not required).
	length := func(name string, required bool) (int, *disError) {
		v := strings.TrimSpace(h.Get(name))
		if v == "" {
			if required {
				return 0, bad("no %s header", name)
			}
			return -1, nil
		}
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return 0, bad("%s %q is not a length", name, v)
		}
		if n > maxBodyBytes {
			return 0, tooLarge(n)
		}
		return n, nil
	}
	switch enc {
	case "lz4":
		n, derr := length(headerLZ4Length, true)
		if derr != nil {
			return nil, derr
		}
		out := make([]byte, n)
		got, err := lz4.UncompressBlock(body, out)
		if err != nil {
			return nil, bad("%v", err)
		}
		if got != n {
			return nil, bad("%d bytes uncompressed, %s says %d", got, headerLZ4Length, n)
		}
		return out, nil
	case "snappy":
		n, err := snappy.DecodedLen(body)
		if err != nil {
			return nil, bad("%v", err)
		}
		if n > maxBodyBytes {
			return nil, tooLarge(n)
		}
		out, err := snappy.Decode(nil, body)
		if err != nil {
			return nil, bad("%v", err)
		}
		return out, nil
	case "zstd":
		n, derr := length(headerZstdLength, false)
		if derr != nil {
			return nil, derr
		}
		dec, err := zstdDecoder()
		if err != nil {
			return nil, bad("%v", err)
		}
		out, err := dec.DecodeAll(body, nil)
		if err != nil {
			return nil, bad("%v", err)
		}
		if len(out) > maxBodyBytes {
			return nil, tooLarge(len(out))
		}
		if n >= 0 && len(out) != n {
			return nil, bad("%d bytes uncompressed, %s says %d", len(out), headerZstdLength, n)
		}
		return out, nil
	default:
		return nil, bad("not supported (lz4, snappy, zstd)")
	}
}
