package gateway

import (
	"reflect"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/disgw/disgw/kafkawire/batch"
)

// observeRequest counts one answered request in disgw_requests_total and
// disgw_request_duration_seconds: the error label is the name of the
// response's first non-zero error code (top level, then topics and
// partitions in order), NONE when there is none, and for a request that
// closed the connection instead of being answered UNKNOWN_SERVER_ERROR.
func (s *Server) observeRequest(r reply, resp kmsg.Response, err error) {
	m := s.cfg.Metrics
	if m == nil || r.req == nil {
		return
	}
	name := kerr.UnknownServerError.Message
	if err == nil {
		name = errorNameOf(resp)
	}
	m.Request(kmsg.NameForKey(r.req.Key), r.req.Version, name, time.Since(r.start))
}

// errorNameOf is the name of resp's first non-zero error code, NONE when
// it has none (or is nil: acks=0).
func errorNameOf(resp kmsg.Response) string {
	var code int16
	switch r := resp.(type) {
	case nil:
	case *kmsg.ProduceResponse: // the hot paths, without reflection
		code = produceErrorCode(r)
	case *kmsg.FetchResponse:
		code = fetchErrorCode(r)
	default:
		code = firstErrorCode(reflect.ValueOf(resp), 0)
	}
	if code != 0 {
		return errorName(code)
	}
	return "NONE"
}

// produceErrorCode is firstErrorCode of a Produce response.
func produceErrorCode(r *kmsg.ProduceResponse) int16 {
	for i := range r.Topics {
		for j := range r.Topics[i].Partitions {
			if c := r.Topics[i].Partitions[j].ErrorCode; c != 0 {
				return c
			}
		}
	}
	return 0
}

// fetchErrorCode is firstErrorCode of a Fetch response: its top-level
// code, then its partitions' in order.
func fetchErrorCode(r *kmsg.FetchResponse) int16 {
	if r.ErrorCode != 0 {
		return r.ErrorCode
	}
	for i := range r.Topics {
		for j := range r.Topics[i].Partitions {
			if c := r.Topics[i].Partitions[j].ErrorCode; c != 0 {
				return c
			}
		}
	}
	return 0
}

// errorName is Kafka's name of code (UNKNOWN_TOPIC_OR_PARTITION), or the
// number for a code kerr does not know.
func errorName(code int16) string {
	if e := kerr.ErrorForCode(code); e != nil {
		if ke, ok := e.(*kerr.Error); ok {
			return ke.Message
		}
	}
	return "UNKNOWN_SERVER_ERROR"
}

// firstErrorCode walks a kmsg response (pointers, structs, slices) for the
// first non-zero int16 field named ErrorCode. depth bounds the walk.
func firstErrorCode(v reflect.Value, depth int) int16 {
	if depth > 6 {
		return 0
	}
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if v.IsNil() {
			return 0
		}
		return firstErrorCode(v.Elem(), depth+1)
	case reflect.Struct:
		if f := v.FieldByName("ErrorCode"); f.IsValid() && f.Kind() == reflect.Int16 && f.Int() != 0 {
			return int16(f.Int())
		}
		for i := 0; i < v.NumField(); i++ {
			if f := v.Field(i); f.Kind() == reflect.Slice && f.Type().Elem().Kind() == reflect.Struct {
				if code := firstErrorCode(f, depth+1); code != 0 {
					return code
				}
			}
		}
	case reflect.Slice:
		for i := 0; i < v.Len(); i++ {
			if code := firstErrorCode(v.Index(i), depth+1); code != 0 {
				return code
			}
		}
	}
	return 0
}

// countFetched adds the records and batch bytes of a Fetch response to
// disgw_records_out_total and disgw_bytes_out_total per topic.
func (s *Server) countFetched(r *kmsg.FetchRequest, resp *kmsg.FetchResponse) {
	m := s.cfg.Metrics
	if m == nil {
		return
	}
	for i := range resp.Topics {
		t := &resp.Topics[i]
		name := t.Topic
		if r.Version >= 13 {
			if st := s.topics.getByID(t.TopicID); st != nil {
				name = st.TopicName
			}
		}
		for j := range t.Partitions {
			if b := t.Partitions[j].RecordBatches; len(b) > 0 {
				m.Out(name, t.Partitions[j].Partition, countRecords(b), len(b))
			}
		}
	}
}

// countRecords counts the records of concatenated magic-2 batches (each
// header's record count); it stops at anything else.
func countRecords(b []byte) int {
	n := 0
	for len(b) >= batch.HeaderLen {
		h, err := batch.ParseHeader(b)
		if err != nil || h.Length <= 0 || int(h.Length)+12 > len(b) {
			break
		}
		n += int(h.NumRecords)
		b = b[int(h.Length)+12:]
	}
	return n
}
