package dislocal

import (
	"bytes"
	"context"
	"crypto/md5"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"math"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"

	"github.com/disgw/disgw/disbackend"
	"github.com/disgw/disgw/disbackend/disapi"
	"github.com/disgw/disgw/kafkawire/batch"
)

// defaultFetchBytes* bound a GetRecords answer when max_fetch_bytes is
// absent: one second of the partition's read limit (UNCONFIRMED on DIS).
const (
	defaultFetchBytesCommon   = disapi.CommonReadBytesPerSec
	defaultFetchBytesAdvanced = disapi.AdvancedReadBytesPerSec
)

type putRecordsResult struct {
	FailedRecordCount int               `json:"failed_record_count"`
	Records           []putRecordResult `json:"records"`
}

type putRecordResult struct {
	PartitionID    string `json:"partition_id,omitempty"`
	SequenceNumber string `json:"sequence_number,omitempty"`
	ErrorCode      string `json:"error_code,omitempty"`
	ErrorMessage   string `json:"error_message,omitempty"`
}

// pendingRecord is one accepted record of a PutRecords.
type pendingRecord struct {
	index int // in the request
	key   []byte
	value []byte
	ts    int64
}

// hashPartition maps a hash in 0 … 2^63−1 to one of n partitions: with
// w = floor((2^63−1)/n), partition i covers [i·w : (i+1)·w − 1], the last
// one up to 2^63−1 (docs/dis-api.md §6.3).
func hashPartition(h uint64, n int32) int32 {
	w := uint64(math.MaxInt64) / uint64(n)
	i := h / w
	if i >= uint64(n) {
		i = uint64(n) - 1
	}
	return int32(i)
}

// hashRange is partition i's hash_range among n.
func hashRange(i, n int32) string {
	w := uint64(math.MaxInt64) / uint64(n)
	lo, hi := uint64(i)*w, (uint64(i)+1)*w-1
	if i == n-1 {
		hi = math.MaxInt64
	}
	return "[" + strconv.FormatUint(lo, 10) + " : " + strconv.FormatUint(hi, 10) + "]"
}

// keyHash is the DIS producers' partition-key hash: MD5, first 8 bytes
// big-endian, sign bit cleared.
func keyHash(key string) uint64 {
	sum := md5.Sum([]byte(key))
	return binary.BigEndian.Uint64(sum[:8]) & math.MaxInt64
}

// putRecords serves PutRecords (POST /v2/{project_id}/records) with a JSON
// body, or a protobuf PutRecordsRequest when the Content-Type is
// application/x-protobuf, which then answers a protobuf PutRecordsResult
// (bodies.go). Both decode into one putRecordsInput and answer one
// putRecordsResult.
func (s *Server) putRecords(r *http.Request, _ map[string]string, body []byte) (int, any, *disError) {
	pb := isProtobuf(r)
	in, derr := decodePutRecords(body, pb)
	if derr != nil {
		return 0, nil, derr
	}
	if derr := s.denied(r.Context(), in.StreamName); derr != nil {
		return 0, nil, derr
	}
	if s.opts.CallLog > 0 {
		c := Call{Op: "SendRecords", AccessKey: accessKeyOf(r.Context()), Stream: s.loggedStream(r.Context(), in), Data: make([][]byte, len(in.Records))}
		for i, e := range in.Records {
			c.Data[i] = bytes.Clone(e.Data)
		}
		s.logCall(c)
	}
	res, derr := s.appendRecords(r.Context(), in)
	if derr != nil {
		return 0, nil, derr
	}
	if pb {
		return http.StatusOK, res.proto(), nil
	}
	return http.StatusOK, res, nil
}

// loggedStream is the name of the stream a PutRecords writes to, for the
// call log: the stream its stream_id names when it has one and its
// stream_name names none, else stream_name (or the id when it has no name).
func (s *Server) loggedStream(ctx context.Context, in putRecordsInput) string {
	if in.StreamID == "" {
		return in.StreamName
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if bs, _, derr := s.streamByRef(ctx, in.StreamName, in.StreamID); derr == nil {
		return bs.Name
	}
	if in.StreamName != "" {
		return in.StreamName
	}
	return in.StreamID
}

// appendRecords writes a decoded PutRecords: it checks the stream (by
// stream_name, else stream_id: streamByRef), the sizes and the partitions
// of every record, then appends one batch per partition. Records refused
// by flow control or whose append failed are reported in the result
// (DIS.4303 or the backend's error), as DIS does.
func (s *Server) appendRecords(ctx context.Context, req putRecordsInput) (putRecordsResult, *disError) {
	if req.StreamName == "" && req.StreamID == "" {
		return putRecordsResult{}, errInvalid("stream_name or stream_id is required")
	}
	if len(req.Records) == 0 {
		return putRecordsResult{}, errf(400, disapi.CodeEmptyRequest, "Empty request. [no records]")
	}
	s.mu.Lock()
	bs, ss, derr := s.streamByRef(ctx, req.StreamName, req.StreamID)
	if derr != nil {
		s.mu.Unlock()
		return putRecordsResult{}, derr
	}
	writable, advanced, sid := ss.Writable, ss.StreamType == "ADVANCED", ss.StreamID
	s.mu.Unlock()

	maxPut := disapi.CommonPutRecordsBytes
	if advanced {
		maxPut = disapi.AdvancedPutRecordsBytes
	}
	nowMS := s.now().UnixMilli()
	parts := make([]int32, len(req.Records))
	total := 0
	for i, e := range req.Records {
		if len(e.Data) > disapi.MaxRecordBytes {
			return putRecordsResult{}, errf(400, disapi.CodeBodyError, "Request body error. [records[%d] has %d bytes, more than the %d a record may have]", i, len(e.Data), disapi.MaxRecordBytes)
		}
		total += len(e.Data)
		switch {
		case e.PartitionID != "":
			p, ok := disbackend.ParsePartitionID(e.PartitionID)
			if !ok {
				return putRecordsResult{}, errf(400, disapi.CodePartitionIDInvalid, "Invalid partition_id. [%s]", e.PartitionID)
			}
			if p >= bs.PartitionCount {
				return putRecordsResult{}, errPartitionNotFound(e.PartitionID)
			}
			if p >= writable {
				return putRecordsResult{}, errf(400, disapi.CodePartitionNotFound, "Partition does not exist. [%s is DELETED: read-only after a scale-down]", disbackend.PartitionID(p))
			}
			parts[i] = p
		case e.ExplicitHashKey != "":
			h, err := strconv.ParseUint(e.ExplicitHashKey, 10, 63)
			if err != nil {
				return putRecordsResult{}, errInvalid("records[%d].explicit_hash_key %q is not a number in 0 … 9223372036854775807", i, e.ExplicitHashKey)
			}
			parts[i] = hashPartition(h, writable)
		case e.PartitionKey != nil:
			parts[i] = hashPartition(keyHash(*e.PartitionKey), writable)
		default:
			parts[i] = rand.Int32N(writable)
		}
	}
	if total > maxPut {
		return putRecordsResult{}, errf(400, disapi.CodeBodyError, "Request body error. [%d bytes of records, more than the %d a PutRecords may carry]", total, maxPut)
	}

	res := putRecordsResult{Records: make([]putRecordResult, len(req.Records))}
	byPart := map[int32][]pendingRecord{}
	var order []int32
	for i, e := range req.Records {
		p := parts[i]
		if s.opts.FlowControl && !s.flow.takeWrite(flowKey(sid, p), advanced, len(e.Data)) {
			res.FailedRecordCount++
			res.Records[i] = putRecordResult{ErrorCode: disapi.CodeFlowControl, ErrorMessage: "Exceeded traffic control limit."}
			continue
		}
		rec := pendingRecord{index: i, value: e.Data, ts: nowMS}
		if e.PartitionKey != nil {
			rec.key = []byte(*e.PartitionKey)
		}
		if e.Timestamp != nil {
			rec.ts = *e.Timestamp
		}
		if _, ok := byPart[p]; !ok {
			order = append(order, p)
		}
		byPart[p] = append(byPart[p], rec)
	}
	pendings := make([]*disbackend.Pending, len(order))
	for i, p := range order {
		pendings[i] = s.b.Append(bs.Name, p, buildBatch(byPart[p]))
	}
	for i, p := range order {
		ar, err := pendings[i].Wait(ctx)
		recs := byPart[p]
		if err != nil {
			if errors.Is(err, disbackend.ErrStreamNotFound) {
				return putRecordsResult{}, errStreamNotFound(bs.Name)
			}
			de := backendError(err, bs.Name, disbackend.PartitionID(p), "")
			for _, rec := range recs {
				res.FailedRecordCount++
				res.Records[rec.index] = putRecordResult{ErrorCode: de.Code, ErrorMessage: de.Message}
			}
			continue
		}
		for j, rec := range recs {
			res.Records[rec.index] = putRecordResult{
				PartitionID:    disbackend.PartitionID(p),
				SequenceNumber: strconv.FormatInt(ar.BaseOffset+int64(j), 10),
			}
		}
	}
	return res, nil
}

// buildBatch encodes records as one uncompressed Kafka record batch (magic
// 2, CreateTime, not idempotent) with base offset 0: value = data, key =
// partition_key (null when absent), timestamp = the record's.
func buildBatch(recs []pendingRecord) disbackend.Batch {
	rs := make([]disbackend.Record, len(recs))
	for i, rec := range recs {
		rs[i] = disbackend.Record{OffsetDelta: int32(i), Timestamp: rec.ts, Key: rec.key, Value: rec.value}
	}
	raw := batch.Encode(batch.NewHeader(0), rs)
	h, err := batch.ParseHeader(raw)
	if err != nil {
		panic(err) // Encode's own output
	}
	return disbackend.Batch{Raw: raw, Header: h, Records: rs}
}

// Cursor types.
const (
	atSequenceNumber    = "AT_SEQUENCE_NUMBER"
	afterSequenceNumber = "AFTER_SEQUENCE_NUMBER"
	trimHorizon         = "TRIM_HORIZON"
	latest              = "LATEST"
	atTimestamp         = "AT_TIMESTAMP"
)

// cursor is the partition cursor's content, in the shape DIS itself uses
// (URL-safe Base64 of this JSON; the DIS Kafka adapter decodes it). The
// type is always resolved to AT_SEQUENCE_NUMBER of a concrete position.
type cursor struct {
	Param struct {
		StreamName  string `json:"stream-name"`
		PartitionID string `json:"partition-id"`
		CursorType  string `json:"cursor-type"`
		Sequence    string `json:"starting-sequence-number"`
	} `json:"getIteratorParam"`
	Generated int64 `json:"generateTimestamp"` // ms
}

func (s *Server) encodeCursor(stream string, p int32, sn int64) string {
	var c cursor
	c.Param.StreamName = stream
	c.Param.PartitionID = disbackend.PartitionID(p)
	c.Param.CursorType = atSequenceNumber
	c.Param.Sequence = strconv.FormatInt(sn, 10)
	c.Generated = s.now().UnixMilli()
	b, _ := json.Marshal(c)
	return base64.RawURLEncoding.EncodeToString(b)
}

func decodeCursor(v string) (c cursor, p int32, sn int64, ok bool) {
	if v == "" || len(v) > disapi.MaxCursorLen {
		return c, 0, 0, false
	}
	b, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(v, "="))
	if err != nil || json.Unmarshal(b, &c) != nil {
		return c, 0, 0, false
	}
	p, ok = disbackend.ParsePartitionID(c.Param.PartitionID)
	sn, err = strconv.ParseInt(c.Param.Sequence, 10, 64)
	return c, p, sn, ok && err == nil && sn >= 0 && c.Param.StreamName != ""
}

// getCursor serves GetCursor (GET /v2/{project_id}/cursors): the stream is
// the query's stream-name, or its stream-id (streamByRef: the name wins
// when it names a stream).
func (s *Server) getCursor(r *http.Request, _ map[string]string, _ []byte) (int, any, *disError) {
	q := r.URL.Query()
	name, id, pid := q.Get("stream-name"), q.Get("stream-id"), q.Get("partition-id")
	if name == "" && id == "" {
		return 0, nil, errInvalid("stream-name or stream-id is required")
	}
	if pid == "" {
		return 0, nil, errf(400, disapi.CodePartitionIDInvalid, "Invalid partition_id. [partition-id is required]")
	}
	typ := q.Get("cursor-type")
	if typ == "" {
		typ = atSequenceNumber
	}
	switch typ {
	case atSequenceNumber, afterSequenceNumber, trimHorizon, latest, atTimestamp:
	default:
		return 0, nil, errf(400, disapi.CodeCursorTypeInvalid, "Invalid cursor type. [%s]", typ)
	}
	ctx := r.Context()
	s.mu.Lock()
	bs, ss, derr := s.streamByRef(ctx, name, id)
	var p int32
	if derr == nil {
		p, derr = s.readablePartition(bs, ss, pid)
	}
	s.mu.Unlock()
	if derr != nil {
		return 0, nil, derr
	}
	name = bs.Name
	rng, err := s.b.Range(name, p)
	if err != nil {
		return 0, nil, backendError(err, name, pid, "")
	}
	var pos int64
	switch typ {
	case atSequenceNumber, afterSequenceNumber:
		v := q.Get("starting-sequence-number")
		sn, err := strconv.ParseInt(v, 10, 64)
		if err != nil || sn < 0 {
			return 0, nil, errf(400, disapi.CodeSequenceNumberInvalid, "Invalid sequence_number. [%q]", v)
		}
		pos = sn
		if typ == afterSequenceNumber {
			pos = sn + 1
		}
		if pos < rng.First || pos > rng.Next {
			return 0, nil, errf(400, disapi.CodeSequenceNumberOutOfRange, "Sequence_number out of range. [%s is outside the valid range [%d : %d] of %s]",
				v, rng.First, max(rng.Next-1, rng.First), disbackend.PartitionID(p))
		}
	case trimHorizon:
		pos = rng.First
	case latest:
		pos = rng.Next
	case atTimestamp:
		v := q.Get("timestamp")
		ts, err := strconv.ParseInt(v, 10, 64)
		if err != nil || ts < 0 {
			return 0, nil, errInvalid("timestamp %q must be epoch milliseconds", v)
		}
		if pos, derr = s.offsetAtTimestamp(ctx, name, p, ts, rng); derr != nil {
			return 0, nil, derr
		}
	}
	return http.StatusOK, map[string]string{"partition_cursor": s.encodeCursor(name, p, pos)}, nil
}

// offsetAtTimestamp is the sequence number of the first record whose
// timestamp is >= ts, or next when there is none.
func (s *Server) offsetAtTimestamp(ctx context.Context, name string, p int32, ts int64, rng disbackend.PartitionRange) (int64, *disError) {
	raw, err := s.b.BatchAtTimestamp(ctx, name, p, ts)
	if err != nil {
		return 0, backendError(err, name, disbackend.PartitionID(p), "")
	}
	if raw == nil {
		return rng.Next, nil
	}
	recs, err := batch.DecodeRecords(raw)
	if err != nil {
		return 0, errf(500, disapi.CodeSystemError, "System error. [%v]", err)
	}
	base := batch.BaseOffset(raw)
	for i := range recs {
		if recs[i].Timestamp >= ts {
			return max(recs[i].Offset(base), rng.First), nil
		}
	}
	return max(base+int64(len(recs)), rng.First), nil
}

// getRecordsResult is a GetRecords answer, as JSON; proto() gives the
// protobuf one.
type getRecordsResult struct {
	Records             []record `json:"records"`
	NextPartitionCursor string   `json:"next_partition_cursor"`
}

// record is one record of a GetRecords answer.
type record struct {
	PartitionKey   *string `json:"partition_key,omitempty"` // the Kafka key; absent when null
	SequenceNumber string  `json:"sequence_number"`
	Data           []byte  `json:"data"` // encoding/json writes standard Base64, as DIS; never nil
	Timestamp      int64   `json:"timestamp"`
	TimestampType  string  `json:"timestamp_type"`
}

// getRecords serves GetRecords (GET /v2/{project_id}/records): JSON, or a
// protobuf GetRecordsResult when the request's Content-Type is
// application/x-protobuf (bodies.go). The query is the same for both.
func (s *Server) getRecords(r *http.Request, _ map[string]string, _ []byte) (int, any, *disError) {
	res, derr := s.readRecords(r)
	if derr != nil {
		return 0, nil, derr
	}
	if isProtobuf(r) {
		return http.StatusOK, res.proto(), nil
	}
	return http.StatusOK, res, nil
}

// readRecords reads from the partition cursor's position, at most limit
// records and max_fetch_bytes of data (at least one record when it fits).
func (s *Server) readRecords(r *http.Request) (getRecordsResult, *disError) {
	q := r.URL.Query()
	cv := q.Get("partition-cursor")
	c, p, sn, ok := decodeCursor(cv)
	if !ok {
		return getRecordsResult{}, errf(400, disapi.CodeCursorInvalid, "Invalid partition_cursor.")
	}
	if s.now().UnixMilli()-c.Generated > disapi.CursorLifetime.Milliseconds() {
		return getRecordsResult{}, errf(400, disapi.CodeCursorExpired, "Expired partition cursor. [cursors are valid for 5 minutes]")
	}
	limit := disapi.DefaultGetRecordsLimit
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > disapi.MaxGetRecordsLimit {
			return getRecordsResult{}, errInvalid("limit %q must be 1-%d", v, disapi.MaxGetRecordsLimit)
		}
		limit = n
	}
	name := c.Param.StreamName
	ctx := r.Context()
	s.mu.Lock()
	bs, ss, derr := s.streamOf(ctx, name)
	if derr == nil {
		p, derr = s.readablePartition(bs, ss, c.Param.PartitionID)
	}
	var advanced bool
	var sid string
	if derr == nil {
		advanced, sid = ss.StreamType == "ADVANCED", ss.StreamID
	}
	s.mu.Unlock()
	if derr != nil {
		return getRecordsResult{}, derr
	}
	maxBytes := defaultFetchBytesCommon
	if advanced {
		maxBytes = defaultFetchBytesAdvanced
	}
	if v := q.Get("max_fetch_bytes"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return getRecordsResult{}, errInvalid("max_fetch_bytes %q must be a positive number", v)
		}
		maxBytes = n
	}
	out := []record{}
	next, size := sn, 0
	full := false
	for !full && len(out) < limit {
		res, err := s.b.Read(ctx, name, p, next, max(maxBytes-size, 64<<10))
		if err != nil {
			if errors.Is(err, disbackend.ErrOffsetOutOfRange) && next < res.Range.First {
				return getRecordsResult{}, errf(400, disapi.CodeSequenceNumberExpired, "Sequence number behind the cursor has expired. [%d is below the partition's first %d; get a new cursor]", next, res.Range.First)
			}
			if errors.Is(err, disbackend.ErrOffsetOutOfRange) {
				return getRecordsResult{}, errf(400, disapi.CodeCursorInvalid, "Invalid partition_cursor. [%d is beyond the partition's next %d]", next, res.Range.Next)
			}
			return getRecordsResult{}, backendError(err, name, c.Param.PartitionID, "")
		}
		progressed := false
		for _, raw := range res.Batches {
			recs, err := batch.DecodeRecords(raw)
			if err != nil {
				return getRecordsResult{}, errf(500, disapi.CodeSystemError, "System error. [%v]", err)
			}
			base := batch.BaseOffset(raw)
			for i := range recs {
				kr := &recs[i]
				off := kr.Offset(base)
				if off < next {
					continue
				}
				if len(out) >= limit || size+len(kr.Value) > maxBytes {
					full = true
					break
				}
				if s.opts.FlowControl && !s.flow.takeRead(flowKey(sid, p), advanced, len(kr.Value)) {
					if len(out) == 0 {
						return getRecordsResult{}, errf(400, disapi.CodeFlowControl, "Exceeded traffic control limit.")
					}
					full = true
					break
				}
				data := kr.Value
				if data == nil {
					data = []byte{}
				}
				rec := record{
					SequenceNumber: strconv.FormatInt(off, 10),
					Data:           data,
					Timestamp:      kr.Timestamp,
					TimestampType:  "CreateTime",
				}
				if kr.Key != nil {
					k := string(kr.Key)
					rec.PartitionKey = &k
				}
				out = append(out, rec)
				size += len(kr.Value)
				next = off + 1
				progressed = true
			}
			if full {
				break
			}
		}
		if !progressed {
			break
		}
	}
	return getRecordsResult{Records: out, NextPartitionCursor: s.encodeCursor(name, p, next)}, nil
}
