package dislocal

// Request and answer bodies other than plain JSON: the protobuf bodies of
// PutRecords and GetRecords, and compressed request bodies. What the
// official SDKs send (Java huaweicloud-sdk-java-dis 1.3.21 at 213fb5e:
// DISClient.innerPutRecords/innerGetRecords, AbstractDISClient.compressBody,
// ProtobufHttpMessageConverter; Python huaweicloud-sdk-python-dis at
// 4530adb: disclient.__sendRecords/getRecords):
//
//   - body.serialize.type=protobuf (Python: bodySerializeType="protobuf")
//     changes PutRecords and GetRecords only. Both send
//     "Content-Type: application/x-protobuf; charset=utf-8" (GetRecords on
//     its bodiless GET, its parameters still in the query); PutRecords'
//     body is a serialized PutRecordsRequest. Both read the 2xx answer as
//     PutRecordsResult / GetRecordsResult, raw bytes for data; the Java
//     SDK picks its reader by the answer's Content-Type (application/json
//     would go to its JSON reader) and takes an empty body as no answer.
//     Errors are read as before: status code plus the JSON
//     {"errorCode","message"} body, which both SDKs parse as JSON.
//   - body.compress.enabled (Java only) compresses every POST/PUT body, JSON
//     or protobuf, after serialization and before signing, so the signature
//     covers the compressed bytes: Content-Encoding lz4 (raw LZ4 block,
//     uncompressed size in x-dis-lz4-content-length), snappy (raw snappy
//     block, xerial Snappy.compress) or zstd (one zstd frame,
//     x-dis-zstd-content-length). It also sends Accept-Encoding with the
//     same codec; answers are never compressed here, which the SDK reads.
//   - data.compress.enabled (snappy of each record's data) is done and
//     undone by the SDK alone: the server stores the bytes it gets.

import (
	"encoding/base64"
	"errors"
	"mime"
	"net/http"
	"strconv"
	"strings"

	"github.com/golang/snappy"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
	"google.golang.org/protobuf/proto"

	"github.com/disgw/disgw/disbackend/disapi"
	"github.com/disgw/disgw/disbackend/dislocal/disproto"
)

// protobufContentType is the media type of the SDKs' protobuf bodies.
const protobufContentType = "application/x-protobuf"

// isProtobuf reports whether r's Content-Type is application/x-protobuf
// (parameters such as charset ignored): its PutRecords body is protobuf,
// and PutRecords and GetRecords answer in protobuf.
func isProtobuf(r *http.Request) bool {
	mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	return err == nil && mt == protobufContentType
}

// zstdDecoder decodes zstd request bodies (DecodeAll only, which is safe
// for concurrent use and starts no goroutines), never past maxBodyBytes.
var zstdDecoder, _ = zstd.NewReader(nil,
	zstd.WithDecoderConcurrency(1),
	zstd.WithDecoderLowmem(true),
	zstd.WithDecoderMaxMemory(maxBodyBytes))

// decodeContentEncoding undoes the Java SDK's body compression (see the
// file comment) by the request's Content-Encoding: "" and "identity" are
// the body as is; lz4, snappy and zstd are decoded to at most
// maxBodyBytes. Errors: DIS.4300 for an unknown encoding or undecodable
// data (400), or for more than maxBodyBytes once decoded (413).
func decodeContentEncoding(h http.Header, body []byte) ([]byte, *disError) {
	enc := strings.ToLower(strings.TrimSpace(h.Get("Content-Encoding")))
	if enc == "" || enc == "identity" || len(body) == 0 {
		return body, nil
	}
	tooLarge := errf(413, disapi.CodeBodyError, "Request body error. [larger than %d bytes once decoded (Content-Encoding %s)]", maxBodyBytes, enc)
	bad := func(err error) *disError {
		return errf(400, disapi.CodeBodyError, "Request body error. [Content-Encoding %s: %v]", enc, err)
	}
	switch enc {
	case "lz4":
		// A raw block carries no length: the SDK sends it in a header.
		// Without one, the most a block can inflate to (255 times, less
		// than the limit) bounds the buffer.
		n := min(maxBodyBytes, 255*len(body)+16)
		exact := false
		if v := h.Get("X-Dis-Lz4-Content-Length"); v != "" {
			l, err := strconv.Atoi(v)
			if err != nil || l < 0 {
				return nil, bad(errors.New("x-dis-lz4-content-length " + strconv.Quote(v) + " is not a length"))
			}
			if l > maxBodyBytes {
				return nil, tooLarge
			}
			n, exact = l, true
		}
		out := make([]byte, n)
		m, err := lz4.UncompressBlock(body, out)
		if err != nil {
			return nil, bad(err)
		}
		if exact && m != n {
			return nil, bad(errors.New("decoded " + strconv.Itoa(m) + " bytes, x-dis-lz4-content-length says " + strconv.Itoa(n)))
		}
		return out[:m], nil
	case "snappy":
		n, err := snappy.DecodedLen(body)
		if err != nil {
			return nil, bad(err)
		}
		if n > maxBodyBytes {
			return nil, tooLarge
		}
		out, err := snappy.Decode(make([]byte, n), body)
		if err != nil {
			return nil, bad(err)
		}
		return out, nil
	case "zstd":
		out, err := zstdDecoder.DecodeAll(body, nil)
		if errors.Is(err, zstd.ErrDecoderSizeExceeded) || errors.Is(err, zstd.ErrWindowSizeExceeded) || len(out) > maxBodyBytes {
			return nil, tooLarge
		}
		if err != nil {
			return nil, bad(err)
		}
		return out, nil
	}
	return nil, errf(400, disapi.CodeBodyError, "Request body error. [unsupported Content-Encoding %q: lz4, snappy or zstd]", enc)
}

// putRecordsInput is a decoded PutRecords request, from JSON or protobuf
// alike: what putRecords serves.
type putRecordsInput struct {
	StreamName string
	StreamID   string
	Records    []putRecordInput
}

// putRecordInput is one record of a PutRecords.
type putRecordInput struct {
	Data            []byte // raw bytes; never nil once decoded
	ExplicitHashKey string
	PartitionID     string
	PartitionKey    *string // nil when absent (the record then has a null Kafka key)
	Timestamp       *int64  // ms; nil when absent
}

// decodePutRecords decodes a PutRecords body, protobuf (PutRecordsRequest)
// when pb, else JSON (data in standard Base64). Errors: DIS.4202 for an
// empty body, DIS.4300 for a body that does not decode (bad JSON, bad
// protobuf wire data, a message lacking a proto2 required field),
// DIS.4200 for a record without data or (JSON) with data not in Base64.
func decodePutRecords(body []byte, pb bool) (putRecordsInput, *disError) {
	if !pb {
		var req disapi.PutRecordsRequest
		if derr := decodeBody(body, &req); derr != nil {
			return putRecordsInput{}, derr
		}
		in := putRecordsInput{StreamName: req.StreamName, StreamID: req.StreamID, Records: make([]putRecordInput, len(req.Records))}
		for i, e := range req.Records {
			if e.Data == nil {
				return putRecordsInput{}, errInvalid("records[%d].data is required", i)
			}
			data, err := base64.StdEncoding.DecodeString(*e.Data)
			if err != nil {
				return putRecordsInput{}, errInvalid("records[%d].data is not Base64: %v", i, err)
			}
			in.Records[i] = putRecordInput{Data: data, ExplicitHashKey: e.ExplicitHashKey, PartitionID: e.PartitionID, PartitionKey: e.PartitionKey, Timestamp: e.Timestamp}
		}
		return in, nil
	}
	if len(body) == 0 {
		return putRecordsInput{}, errf(400, disapi.CodeEmptyRequest, "Empty request.")
	}
	var req disproto.PutRecordsRequest
	if err := proto.Unmarshal(body, &req); err != nil {
		return putRecordsInput{}, errf(400, disapi.CodeBodyError, "Request body error. [not a protobuf PutRecordsRequest: %v]", err)
	}
	in := putRecordsInput{StreamName: req.GetStreamName(), StreamID: req.GetStreamId(), Records: make([]putRecordInput, len(req.Records))}
	for i, e := range req.Records {
		if e.Data == nil {
			return putRecordsInput{}, errInvalid("records[%d].data is required", i)
		}
		in.Records[i] = putRecordInput{Data: e.Data, ExplicitHashKey: e.GetExplicitHashKey(), PartitionID: e.GetPartitionId(), PartitionKey: e.PartitionKey, Timestamp: e.Timestamp}
	}
	return in, nil
}

// proto is r as the SDKs' PutRecordsResult: failedRecordCount (required)
// always, and in each entry only the fields the JSON answer has.
func (r putRecordsResult) proto() *disproto.PutRecordsResult {
	out := &disproto.PutRecordsResult{FailedRecordCount: proto.Int32(int32(r.FailedRecordCount)), Records: make([]*disproto.PutRecordsResultEntry, len(r.Records))}
	for i, e := range r.Records {
		out.Records[i] = &disproto.PutRecordsResultEntry{
			ShardId:        optString(e.PartitionID),
			SequenceNumber: optString(e.SequenceNumber),
			ErrorCode:      optString(e.ErrorCode),
			ErrorMessage:   optString(e.ErrorMessage),
		}
	}
	return out
}

// proto is r as the SDKs' GetRecordsResult: nextShardIterator and each
// record's sequenceNumber (both required) always, data always (empty
// bytes for an empty record), partitionKey only when the record has one.
func (r getRecordsResult) proto() *disproto.GetRecordsResult {
	out := &disproto.GetRecordsResult{NextShardIterator: proto.String(r.NextPartitionCursor), Records: make([]*disproto.Record, len(r.Records))}
	for i, rec := range r.Records {
		data := rec.Data
		if data == nil {
			data = []byte{}
		}
		out.Records[i] = &disproto.Record{
			PartitionKey:   rec.PartitionKey,
			SequenceNumber: proto.String(rec.SequenceNumber),
			Data:           data,
			Timestamp:      proto.Int64(rec.Timestamp),
			TimestampType:  proto.String(rec.TimestampType),
		}
	}
	return out
}

// optString is nil for "", else &s: proto2 optional fields are sent only
// when the JSON answer would have them.
func optString(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// writeProto writes m with Content-Type application/x-protobuf, which the
// Java SDK needs to pick its protobuf reader. Marshal checks that the
// proto2 required fields are set; a failure answers 500 DIS.5000 in JSON.
func writeProto(w http.ResponseWriter, status int, m proto.Message) {
	b, err := proto.Marshal(m)
	if err != nil {
		writeError(w, errf(500, disapi.CodeSystemError, "System error. [encoding the protobuf answer: %v]", err))
		return
	}
	w.Header().Set("Content-Type", protobufContentType)
	w.WriteHeader(status)
	_, _ = w.Write(b)
}
