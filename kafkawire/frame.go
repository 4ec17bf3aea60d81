// Package kafkawire owns the Kafka wire format of requests: framing (4-byte
// size prefix, capped before allocating), request headers, decoding
// requests and encoding responses through franz-go's kmsg. The record
// batches inside produce requests and fetch responses are the leaf package
// kafkawire/batch's.
//
// It knows nothing of DIS, topics or groups.
package kafkawire

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// DefaultMaxFrameBytes is Kafka's socket.request.max.bytes default: 100 MiB.
const DefaultMaxFrameBytes = 100 << 20

// Errors returned while reading a request. Every one of them means the
// connection is closed (Kafka closes the connection on a bad frame).
var (
	// ErrFrameTooLarge: the size prefix is over the configured cap (or
	// negative). Kafka closes the connection (InvalidReceiveException).
	ErrFrameTooLarge = errors.New("request frame larger than the maximum")
	// ErrUnknownAPIKey: the API key is not one kmsg knows.
	ErrUnknownAPIKey = errors.New("unknown API key")
	// ErrUnsupportedVersion: kmsg cannot decode this version of the API.
	ErrUnsupportedVersion = errors.New("unsupported API version")
	// ErrMalformed: the header or body does not decode.
	ErrMalformed = errors.New("malformed request")
)

// ReadFrame reads one size-prefixed frame from r. It checks the size against
// maxBytes before allocating. Errors: io.EOF on a clean close between frames,
// io.ErrUnexpectedEOF on a truncated frame, ErrFrameTooLarge.
func ReadFrame(r io.Reader, maxBytes int32) ([]byte, error) {
	n, err := ReadFrameSize(r, maxBytes)
	if err != nil {
		return nil, err
	}
	buf := make([]byte, n)
	if _, err := io.ReadFull(r, buf); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return nil, err
	}
	return buf, nil
}

// ReadFrameSize reads a frame's 4-byte size prefix from r and checks it
// against maxBytes, so the caller can decide before allocating the body.
// Errors: io.EOF on a clean close between frames, io.ErrUnexpectedEOF on a
// truncated prefix, ErrFrameTooLarge (also for a negative size).
func ReadFrameSize(r io.Reader, maxBytes int32) (int32, error) {
	var size [4]byte
	if _, err := io.ReadFull(r, size[:]); err != nil {
		return 0, err
	}
	n := int32(binary.BigEndian.Uint32(size[:]))
	if n < 0 {
		return 0, fmt.Errorf("%w: negative frame size %d", ErrFrameTooLarge, n)
	}
	if n > maxBytes {
		return 0, fmt.Errorf("%w: %d bytes, maximum %d", ErrFrameTooLarge, n, maxBytes)
	}
	return n, nil
}

// Request is one decoded Kafka request.
type Request struct {
	Key           int16
	Version       int16
	CorrelationID int32
	ClientID      string // null reads as "" (as Kafka does)
	// Body is the decoded request. It is nil only when ParseRequest returned
	// ErrUnsupportedVersion for an ApiVersions request (KIP-511: the caller
	// answers with a v0 UNSUPPORTED_VERSION response without parsing it).
	Body kmsg.Request
	// Entries is how many entries the body's arrays declare, counted
	// before decoding (0 for a request type ParseRequest does not walk).
	Entries int
	// FrameBytes is the frame's size (without its size prefix): the one
	// allocation that byte slices in Body keep alive.
	FrameBytes int
}

// ParseRequest decodes a frame (without its size prefix): the request header
// (v1, or v2 with tagged fields for flexible versions) and the body through
// kmsg. Byte slices in Body (record batches) alias frame.
//
// Before decoding the body it counts the entries the body's arrays
// declare (limits.go): past MaxRequestEntries it returns ErrMalformed
// wrapping ErrTooManyEntries, having allocated nothing for them.
//
// Errors: ErrMalformed, ErrUnknownAPIKey, ErrUnsupportedVersion (a version
// kmsg cannot decode). For ApiVersions at an unknown version it returns the
// header with a nil Body and ErrUnsupportedVersion.
func ParseRequest(frame []byte) (*Request, error) {
	if len(frame) < 8 {
		return nil, fmt.Errorf("%w: %d-byte frame is shorter than a request header", ErrMalformed, len(frame))
	}
	rd := kbin.Reader{Src: frame}
	req := &Request{Key: rd.Int16(), Version: rd.Int16(), CorrelationID: rd.Int32(), FrameBytes: len(frame)}
	if cid := rd.NullableString(); cid != nil {
		req.ClientID = *cid
	}
	if !rd.Ok() {
		return req, fmt.Errorf("%w: truncated request header", ErrMalformed)
	}
	body := kmsg.RequestForKey(req.Key)
	if body == nil {
		return req, fmt.Errorf("%w: %d", ErrUnknownAPIKey, req.Key)
	}
	if req.Version < 0 || req.Version > body.MaxVersion() {
		return req, fmt.Errorf("%w: %s v%d (known up to v%d)", ErrUnsupportedVersion, kmsg.NameForKey(req.Key), req.Version, body.MaxVersion())
	}
	body.SetVersion(req.Version)
	if body.IsFlexible() {
		kmsg.SkipTags(&rd)
		if !rd.Ok() {
			return req, fmt.Errorf("%w: truncated request header tags", ErrMalformed)
		}
	}
	entries, err := peekEntries(req.Key, req.Version, body.IsFlexible(), rd.Src)
	if err != nil {
		return req, err
	}
	req.Entries = entries
	if err := body.ReadFrom(rd.Src); err != nil {
		return req, fmt.Errorf("%w: %s v%d body: %v", ErrMalformed, kmsg.NameForKey(req.Key), req.Version, err)
	}
	req.Body = body
	return req, nil
}

// AppendResponse appends a size-prefixed response frame: size, correlation
// id, the header's empty tag section for flexible versions (never for
// ApiVersions, whose response header is always v0), then the body encoded by
// kmsg at resp's version.
func AppendResponse(dst []byte, correlationID int32, resp kmsg.Response) []byte {
	start := len(dst)
	dst = append(dst, 0, 0, 0, 0)
	dst = binary.BigEndian.AppendUint32(dst, uint32(correlationID))
	if resp.IsFlexible() && resp.Key() != 18 {
		dst = append(dst, 0)
	}
	dst = resp.AppendTo(dst)
	binary.BigEndian.PutUint32(dst[start:], uint32(len(dst)-start-4))
	return dst
}
