package main

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"
	"net"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The differential harness's wire: one TCP connection per server, requests
// encoded with kmsg's RequestFormatter at the exact version the harness
// pins (kgo would negotiate its own), responses decoded with kmsg.

// wireConn is one raw Kafka connection.
type wireConn struct {
	addr string
	c    net.Conn
	r    *bufio.Reader
	corr int32
	f    *kmsg.RequestFormatter
}

func dialWire(addr string) (*wireConn, error) {
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return nil, err
	}
	return &wireConn{addr: addr, c: c, r: bufio.NewReader(c), f: kmsg.NewRequestFormatter(kmsg.FormatterClientID("disgw-compat-diff"))}, nil
}

func (w *wireConn) Close() { _ = w.c.Close() }

// do sends req at req.GetVersion() and reads its response (30 s limit). A
// closed connection is redialled for the next request.
func (w *wireConn) do(req kmsg.Request) (kmsg.Response, error) {
	if w.c == nil {
		nw, err := dialWire(w.addr)
		if err != nil {
			return nil, err
		}
		*w = *nw
	}
	resp, err := w.roundTrip(req)
	if err != nil {
		_ = w.c.Close()
		w.c = nil
	}
	return resp, err
}

func (w *wireConn) roundTrip(req kmsg.Request) (kmsg.Response, error) {
	w.corr++
	_ = w.c.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := w.c.Write(w.f.AppendRequest(nil, req, w.corr)); err != nil {
		return nil, err
	}
	var size [4]byte
	if _, err := io.ReadFull(w.r, size[:]); err != nil {
		return nil, fmt.Errorf("reading the response: %w (connection closed)", err)
	}
	n := binary.BigEndian.Uint32(size[:])
	if n > 64<<20 || n < 4 {
		return nil, fmt.Errorf("response size %d", n)
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(w.r, body); err != nil {
		return nil, err
	}
	if corr := int32(binary.BigEndian.Uint32(body)); corr != w.corr {
		return nil, fmt.Errorf("correlation id %d, want %d", corr, w.corr)
	}
	body = body[4:]
	resp := req.ResponseKind()
	resp.SetVersion(req.GetVersion())
	if resp.IsFlexible() && req.Key() != 18 { // ApiVersions' response header has no tags
		b := kbin.Reader{Src: body}
		for i := b.Uvarint(); i > 0; i-- {
			b.Uvarint()
			b.Span(int(b.Uvarint()))
		}
		if err := b.Complete(); err != nil {
			return nil, fmt.Errorf("response header tags: %w", err)
		}
		body = b.Src
	}
	if err := resp.ReadFrom(body); err != nil {
		return nil, fmt.Errorf("decoding %s v%d response: %w", kmsg.NameForKey(req.Key()), req.GetVersion(), err)
	}
	return resp, nil
}

// downconvert re-encodes a response at an older version and decodes it
// again: the fields that version lacks are gone, as a Kafka 3.x broker
// answering the old version would have left them.
func downconvert(resp kmsg.Response, version int16) (kmsg.Response, error) {
	cp := kmsg.ResponseForKey(resp.Key())
	src := reflect.ValueOf(resp).Elem()
	reflect.ValueOf(cp).Elem().Set(src)
	cp.SetVersion(version)
	b := cp.AppendTo(nil)
	out := kmsg.ResponseForKey(resp.Key())
	out.SetVersion(version)
	if err := out.ReadFrom(b); err != nil {
		return nil, err
	}
	return out, nil
}

// fieldDiff is one field whose values differ.
type fieldDiff struct {
	Path         string
	Kafka, Disgw string
	kval, dval   reflect.Value
}

// keyFields name, in order of preference, the field that identifies an
// element of a list of structs: elements are matched by it, not by
// position (servers order topics, configs and groups differently). A
// config resource of ListConfigResources is keyed by type and name: a
// broker and a broker logger share the node's name.
var keyFields = [][]string{
	{"ApiKey"}, {"ResourceType", "ResourceName"}, {"Type", "Name"}, {"Topic"}, {"Name"}, {"Group"}, {"TransactionalID"}, {"Partition"},
	{"Key"}, {"Feature"},
}

func elemKey(v reflect.Value) (string, bool) {
	if v.Kind() == reflect.Pointer {
		if v.IsNil() {
			return "", false
		}
		v = v.Elem()
	}
	if v.Kind() != reflect.Struct {
		return "", false
	}
	for _, fs := range keyFields {
		var parts []string
		for _, f := range fs {
			fv := v.FieldByName(f)
			if !fv.IsValid() {
				parts = nil
				break
			}
			parts = append(parts, fmtVal(fv))
		}
		if parts != nil {
			return strings.Join(parts, "/"), true
		}
	}
	return "", false
}

func fmtVal(v reflect.Value) string {
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() {
			return "null"
		}
		return fmtVal(v.Elem())
	case reflect.String:
		return strconv.Quote(v.String())
	case reflect.Slice:
		if v.Type().Elem().Kind() == reflect.Uint8 {
			if v.IsNil() {
				return "null"
			}
			return fmt.Sprintf("%q", v.Bytes())
		}
		if v.IsNil() {
			return "null"
		}
		var parts []string
		for i := 0; i < v.Len() && i < 8; i++ {
			parts = append(parts, fmtVal(v.Index(i)))
		}
		if v.Len() > 8 {
			parts = append(parts, fmt.Sprintf("... %d in all", v.Len()))
		}
		return "[" + strings.Join(parts, " ") + "]"
	case reflect.Struct:
		if k, ok := elemKey(v); ok {
			return "{" + k + " ...}"
		}
		return fmt.Sprintf("%+v", v.Interface())
	case reflect.Array:
		return fmt.Sprintf("%x", v.Interface())
	}
	return fmt.Sprint(v.Interface())
}

// compareValues walks a (Kafka's) and b (disgw's) field by field.
func compareValues(path string, a, b reflect.Value, out *[]fieldDiff) {
	add := func() {
		*out = append(*out, fieldDiff{Path: path, Kafka: fmtVal(a), Disgw: fmtVal(b), kval: a, dval: b})
	}
	switch a.Kind() {
	case reflect.Pointer:
		if a.IsNil() || b.IsNil() {
			if a.IsNil() != b.IsNil() {
				add()
			}
			return
		}
		compareValues(path, a.Elem(), b.Elem(), out)
	case reflect.Struct:
		t := a.Type()
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			if !f.IsExported() || f.Name == "UnknownTags" || f.Name == "Version" {
				continue
			}
			compareValues(joinPath(path, f.Name), a.Field(i), b.Field(i), out)
		}
	case reflect.Slice:
		if strings.HasSuffix(path, "RecordBatches") && a.Type().Elem().Kind() == reflect.Uint8 {
			if flattenBatches {
				compareValues(path, reflect.ValueOf(flatten(decodeBatches(a.Bytes()))), reflect.ValueOf(flatten(decodeBatches(b.Bytes()))), out)
				return
			}
			compareValues(path, reflect.ValueOf(decodeBatches(a.Bytes())), reflect.ValueOf(decodeBatches(b.Bytes())), out)
			return
		}
		if a.Type().Elem().Kind() == reflect.Uint8 {
			if a.IsNil() != b.IsNil() || string(a.Bytes()) != string(b.Bytes()) {
				add()
			}
			return
		}
		// nil is a null array, empty an empty one: they differ on the wire.
		if a.IsNil() != b.IsNil() && a.Len() == 0 && b.Len() == 0 {
			add()
			return
		}
		if a.Len() > 0 {
			if _, ok := elemKey(a.Index(0)); ok {
				compareKeyed(path, a, b, out)
				return
			}
		} else if b.Len() > 0 {
			if _, ok := elemKey(b.Index(0)); ok {
				compareKeyed(path, a, b, out)
				return
			}
		}
		if a.Len() != b.Len() {
			*out = append(*out, fieldDiff{Path: path + ".len", Kafka: fmtVal(a), Disgw: fmtVal(b), kval: a, dval: b})
			return
		}
		for i := 0; i < a.Len(); i++ {
			compareValues(fmt.Sprintf("%s[%d]", path, i), a.Index(i), b.Index(i), out)
		}
	case reflect.Map:
		if !reflect.DeepEqual(a.Interface(), b.Interface()) {
			add()
		}
	default:
		if !reflect.DeepEqual(a.Interface(), b.Interface()) {
			add()
		}
	}
}

func joinPath(p, f string) string {
	if p == "" {
		return f
	}
	return p + "." + f
}

// compareKeyed matches the elements of two lists by elemKey.
func compareKeyed(path string, a, b reflect.Value, out *[]fieldDiff) {
	am, bm := map[string]reflect.Value{}, map[string]reflect.Value{}
	var keys []string
	for i := 0; i < a.Len(); i++ {
		k, _ := elemKey(a.Index(i))
		if _, dup := am[k]; !dup {
			keys = append(keys, k)
		}
		am[k] = a.Index(i)
	}
	for i := 0; i < b.Len(); i++ {
		k, _ := elemKey(b.Index(i))
		if _, ok := am[k]; !ok {
			if _, dup := bm[k]; !dup {
				keys = append(keys, k)
			}
		}
		bm[k] = b.Index(i)
	}
	sort.Strings(keys)
	for _, k := range keys {
		p := fmt.Sprintf("%s[%s]", path, k)
		av, aok := am[k]
		bv, bok := bm[k]
		switch {
		case aok && bok:
			compareValues(p, av, bv, out)
		case aok:
			*out = append(*out, fieldDiff{Path: p, Kafka: "present", Disgw: "missing", kval: av})
		default:
			*out = append(*out, fieldDiff{Path: p, Kafka: "missing", Disgw: "present", dval: bv})
		}
	}
}

// compareResponses compares two decoded responses field by field.
func compareResponses(a, b kmsg.Response) []fieldDiff {
	sortTxnPartitions(a)
	sortTxnPartitions(b)
	var out []fieldDiff
	compareValues("", reflect.ValueOf(a).Elem(), reflect.ValueOf(b).Elem(), &out)
	return out
}

// sortTxnPartitions sorts DescribeTransactions' partitions of each topic:
// Kafka keeps a transaction's partitions in a hash set, so their order
// means nothing.
func sortTxnPartitions(r kmsg.Response) {
	dt, ok := r.(*kmsg.DescribeTransactionsResponse)
	if !ok {
		return
	}
	for i := range dt.TransactionStates {
		for j := range dt.TransactionStates[i].Topics {
			slices.Sort(dt.TransactionStates[i].Topics[j].Partitions)
		}
	}
}

// batchView is a fetched record batch decoded for comparison: its header
// (the CRC checked, not compared: it covers the producer id), and its
// records when uncompressed.
type batchView struct {
	FirstOffset          int64
	PartitionLeaderEpoch int32
	Magic                int8
	CRCValid             bool
	Attributes           int16
	LastOffsetDelta      int32
	FirstTimestamp       int64
	MaxTimestamp         int64
	ProducerID           int64
	ProducerEpoch        int16
	FirstSequence        int32
	NumRecords           int32
	Records              []kmsg.Record
	Raw                  []byte // compressed records, or what did not decode
}

// flattenBatches: compare fetched records one by one, not batch by batch
// (set for the DIS backend, which stores each Kafka record as one DIS
// record and rebuilds batches from consecutive records when it reads: a
// deliberate difference kept in diffkept.go).
var flattenBatches bool

// recordView is one fetched record with what its batch says of it.
type recordView struct {
	Offset               int64
	Timestamp            int64
	PartitionLeaderEpoch int32
	Magic                int8
	CRCValid             bool
	Attributes           int16 // the batch's
	Key, Value           []byte
	Headers              []kmsg.Header
	Raw                  []byte // a batch whose records did not decode
}

// flatten lists the records of bs in order.
func flatten(bs []batchView) []recordView {
	var out []recordView
	for _, v := range bs {
		if v.Raw != nil {
			out = append(out, recordView{Offset: v.FirstOffset, Raw: v.Raw})
			continue
		}
		for _, r := range v.Records {
			out = append(out, recordView{Offset: v.FirstOffset + int64(r.OffsetDelta), Timestamp: v.FirstTimestamp + r.TimestampDelta64,
				PartitionLeaderEpoch: v.PartitionLeaderEpoch, Magic: v.Magic, CRCValid: v.CRCValid, Attributes: v.Attributes,
				Key: r.Key, Value: r.Value, Headers: r.Headers})
		}
	}
	return out
}

func decodeBatches(b []byte) []batchView {
	var out []batchView
	for len(b) >= 12 {
		n := int(binary.BigEndian.Uint32(b[8:12])) + 12
		if n > len(b) || n < 61 {
			out = append(out, batchView{Raw: b}) // a partial batch at the end
			break
		}
		var rb kmsg.RecordBatch
		if err := rb.ReadFrom(b[:n]); err != nil {
			out = append(out, batchView{Raw: b[:n]})
			b = b[n:]
			continue
		}
		v := batchView{FirstOffset: rb.FirstOffset, PartitionLeaderEpoch: rb.PartitionLeaderEpoch, Magic: rb.Magic,
			CRCValid:   int32(crc32.Checksum(b[21:n], crc32.MakeTable(crc32.Castagnoli))) == rb.CRC,
			Attributes: rb.Attributes, LastOffsetDelta: rb.LastOffsetDelta, FirstTimestamp: rb.FirstTimestamp, MaxTimestamp: rb.MaxTimestamp,
			ProducerID: rb.ProducerID, ProducerEpoch: rb.ProducerEpoch, FirstSequence: rb.FirstSequence, NumRecords: rb.NumRecords}
		if rb.Attributes&7 == 0 {
			recs := rb.Records
			for i := 0; i < int(rb.NumRecords) && len(recs) > 0; i++ {
				var r kmsg.Record
				l, used := binary.Varint(recs)
				if used <= 0 || int(l)+used > len(recs) {
					v.Raw = recs
					break
				}
				if err := r.ReadFrom(recs[:int(l)+used]); err != nil {
					v.Raw = recs
					break
				}
				v.Records = append(v.Records, r)
				recs = recs[int(l)+used:]
			}
		} else {
			v.Raw = rb.Records
		}
		out = append(out, v)
		b = b[n:]
	}
	return out
}
