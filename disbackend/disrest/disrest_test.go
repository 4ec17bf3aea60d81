package disrest

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"net/http/httptest"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	dis "github.com/huaweicloud/huaweicloud-sdk-go-v3/services/dis/v2"
	"github.com/huaweicloud/huaweicloud-sdk-go-v3/services/dis/v2/model"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap/zaptest"

	"github.com/disgw/disgw/disbackend"
	"github.com/disgw/disgw/disbackend/backendtest"
	"github.com/disgw/disgw/disbackend/disapi"
	"github.com/disgw/disgw/disbackend/dislocal"
	"github.com/disgw/disgw/disbackend/localstore"
	"github.com/disgw/disgw/kafkawire/batch"
)

const (
	testAK      = "QTWAOYTTINDUT2QVKYUC"
	testSK      = "MFyfvK41ba2giqM7Uio6PznpdUKGpownRZlmVmHc"
	testProject = "d575b0b740e54221aeb9a165653b103d"
)

// startDIS runs dislocal (signatures checked) over an in-memory localstore
// on 127.0.0.1:0.
func startDIS(t *testing.T, opts dislocal.Options) (*dislocal.Server, string) {
	t.Helper()
	s, _, url := startDISStore(t, opts)
	return s, url
}

// startDISStore is startDIS also returning the localstore under dislocal,
// which runs retention only when told (EnforceRetention) on opts.Now.
func startDISStore(t *testing.T, opts dislocal.Options) (*dislocal.Server, *localstore.Store, string) {
	t.Helper()
	st, err := localstore.Open("dis", localstore.Options{FS: vfs.NewMem(), RetentionCheckInterval: -1, Now: opts.Now,
		Logger: zaptest.NewLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	opts.AK, opts.SK, opts.ProjectID = testAK, testSK, testProject
	opts.NoScalingLimits = true
	opts.Logger = zaptest.NewLogger(t)
	s, err := dislocal.New(st, opts)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(s)
	t.Cleanup(hs.Close)
	return s, st, hs.URL
}

func newStore(t *testing.T, endpoint string, mod func(*Options)) *Store {
	t.Helper()
	o := Options{Endpoint: endpoint, ProjectID: testProject, AK: testAK, SK: testSK,
		PollInterval: -1, RetryBackoff: 10 * time.Millisecond, RetryTimeout: 20 * time.Second,
		Logger: zaptest.NewLogger(t)}
	if mod != nil {
		mod(&o)
	}
	s, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// TestBackend runs the conformance suite on disrest talking to dislocal.
func TestBackend(t *testing.T) {
	t.Parallel()
	backendtest.RunWith(t, func(t *testing.T) disbackend.Backend {
		_, url := startDIS(t, dislocal.Options{})
		return newStore(t, url, nil)
	}, backendtest.Options{
		RecordLevel:  true,
		MaxRetention: disapi.MaxRetentionHours * time.Hour,
		NativeCommit: sdkCommit,
		Skip: map[string]string{
			"CheckpointTime": "DIS keeps no commit time; CommittedAt is the time of the read",
		},
	})
}

// sdkCommit commits cp as a DIS application does: one CommitCheckpoint
// with the DIS SDK, straight to DIS.
func sdkCommit(_ context.Context, b disbackend.Backend, app string, cp disbackend.Checkpoint) error {
	s := b.(*Store)
	_, err := s.c.CommitCheckpoint(&model.CommitCheckpointRequest{Body: &model.CommitCheckpointReq{
		AppName: app, CheckpointType: model.GetCommitCheckpointReqCheckpointTypeEnum().LAST_READ,
		StreamName: cp.Stream, PartitionId: disbackend.PartitionID(cp.Partition),
		SequenceNumber: strconv.FormatInt(cp.SequenceNumber, 10), Metadata: &cp.Metadata,
	}})
	return err
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func mkStream(t *testing.T, s *Store, topic string, parts int32) string {
	t.Helper()
	return mkStreamFormat(t, s, topic, parts, "")
}

// mkStreamFormat is mkStream with the topic config dis.record.format.
func mkStreamFormat(t *testing.T, s *Store, topic string, parts int32, format string) string {
	t.Helper()
	name, err := disbackend.StreamNameForTopic(topic)
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.CreateStream(ctxT(t), disbackend.StreamSpec{Name: name, TopicName: topic, PartitionCount: parts,
		Config: disbackend.StreamConfig{Retention: 24 * time.Hour, MaxMessageBytes: 1 << 20, RecordFormat: format}})
	if err != nil {
		t.Fatal(err)
	}
	return name
}

// kafkaBatch encodes records as a Kafka batch the way a producer does.
func kafkaBatch(recs []kmsg.Record, firstTS int64) disbackend.Batch {
	var body []byte
	maxTS := firstTS
	for i := range recs {
		r := recs[i]
		maxTS = max(maxTS, firstTS+r.TimestampDelta64)
		r.OffsetDelta = int32(i)
		enc := r.AppendTo(nil)
		body = binary.AppendVarint(body, int64(len(enc)-1))
		body = append(body, enc[1:]...)
	}
	rb := kmsg.RecordBatch{Magic: 2, LastOffsetDelta: int32(len(recs) - 1), FirstTimestamp: firstTS, MaxTimestamp: maxTS,
		ProducerID: -1, ProducerEpoch: -1, FirstSequence: -1, NumRecords: int32(len(recs)), Records: body}
	raw := rb.AppendTo(nil)
	binary.BigEndian.PutUint32(raw[8:], uint32(len(raw)-12))
	batch.SetCRC(raw)
	return backendtest.FromRaw(raw)
}

// asRecord is a kmsg record as disbackend's.
func asRecord(r kmsg.Record) disbackend.Record {
	out := disbackend.Record{OffsetDelta: r.OffsetDelta, Timestamp: r.TimestampDelta64, Key: r.Key, Value: r.Value}
	for _, h := range r.Headers {
		out.Headers = append(out.Headers, disbackend.RecordHeader{Key: h.Key, Value: h.Value})
	}
	return out
}

// testRecords need every path of the record format: plain ones and ones
// that need the envelope.
func testRecords() []kmsg.Record {
	magicValue := append(append([]byte{}, envelopeMagic...), "not an envelope"...)
	return []kmsg.Record{
		{Key: []byte("k1"), Value: []byte("plain value"), TimestampDelta64: 0},
		{Value: []byte("plain, no key"), TimestampDelta64: 1},
		{Key: []byte("tomb"), Value: nil, TimestampDelta64: 2},
		{Key: []byte{}, Value: []byte{}, TimestampDelta64: 3},
		{Key: []byte{0xff, 0x00, 0xfe}, Value: []byte("binary key"), TimestampDelta64: 4},
		{Key: []byte("h"), Value: []byte("with headers"), TimestampDelta64: 5,
			Headers: []kmsg.Header{{Key: "a", Value: []byte("1")}, {Key: "null", Value: nil}, {Key: "", Value: []byte{}}}},
		{Value: magicValue, TimestampDelta64: 6},
	}
}

func readBack(t *testing.T, s *Store, stream string, part int32, from int64) []backendtest.Record {
	t.Helper()
	res, err := s.Read(ctxT(t), stream, part, from, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	var out []backendtest.Record
	for _, raw := range res.Batches {
		if !backendtest.CheckCRC(raw) {
			t.Fatal("CRC mismatch")
		}
		recs, err := backendtest.DecodeRecords(raw)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, recs...)
	}
	return out
}

// TestRecordFormats appends records of every kind in each format, set as
// the Store's default or as the topic's dis.record.format (over another
// default, written by a Store that learns it from the stream's tags),
// reads them back exactly, and reads the plain ones with the official SDK
// as plain DIS data.
func TestRecordFormats(t *testing.T) {
	t.Parallel()
	_, url := startDIS(t, dislocal.Options{})
	const ts0 = 1_700_000_000_000
	for _, tc := range []struct{ name, def, topic, format string }{
		{"auto", FormatAuto, "", FormatAuto},
		{"envelope", FormatEnvelope, "", FormatEnvelope},
		{"topic-envelope", FormatAuto, FormatEnvelope, FormatEnvelope},
		{"topic-auto", FormatEnvelope, FormatAuto, FormatAuto},
	} {
		format := tc.format
		t.Run(tc.name, func(t *testing.T) {
			stream := mkStreamFormat(t, newStore(t, url, nil), "fmt."+tc.name, 1, tc.topic)
			s := newStore(t, url, func(o *Options) { o.RecordFormat = tc.def })
			recs := testRecords()
			res, err := s.Append(stream, 0, kafkaBatch(recs, ts0)).Wait(ctxT(t))
			if err != nil || res.BaseOffset != 0 {
				t.Fatalf("Append = %+v, %v", res, err)
			}
			got := readBack(t, s, stream, 0, 0)
			if len(got) != len(recs) {
				t.Fatalf("%d records back, want %d", len(got), len(recs))
			}
			for i, r := range recs {
				want := backendtest.Record{Offset: int64(i), Timestamp: ts0 + r.TimestampDelta64, Key: r.Key, Value: r.Value}
				for _, h := range r.Headers {
					want.Headers = append(want.Headers, backendtest.Header{Key: h.Key, Value: h.Value})
				}
				if !got[i].Equal(want) {
					t.Fatalf("record %d = %s %q/%q, want %s %q/%q", i, got[i], got[i].Key, got[i].Value, want, want.Key, want.Value)
				}
			}
			// The SDK consumer sees plain records as plain data.
			c := sdkClient(t, url)
			typ := model.GetShowCursorRequestCursorTypeEnum().TRIM_HORIZON
			cur, err := c.ShowCursor(&model.ShowCursorRequest{StreamName: stream, PartitionId: "0", CursorType: &typ})
			if err != nil {
				t.Fatal(err)
			}
			out, err := c.ConsumeRecords(&model.ConsumeRecordsRequest{PartitionCursor: *cur.PartitionCursor})
			if err != nil {
				t.Fatal(err)
			}
			for i, r := range *out.Records {
				data, _ := base64.StdEncoding.DecodeString(*r.Data)
				rec := asRecord(recs[i])
				plain := plainReason(&rec) == "" && format == FormatAuto
				if plain != bytes.Equal(data, recs[i].Value) {
					t.Fatalf("record %d: SDK reads %q; plain %v", i, data, plain)
				}
				if !plain && !bytes.HasPrefix(data, envelopeMagic) {
					t.Fatalf("record %d: not an envelope: %q", i, data)
				}
			}
		})
	}
	for _, tc := range []struct{ name, def, topic string }{
		{"native", FormatNative, ""},
		{"topic-native", FormatEnvelope, FormatNative},
	} {
		t.Run(tc.name, func(t *testing.T) {
			stream := mkStreamFormat(t, newStore(t, url, nil), "fmt-"+tc.name, 1, tc.topic)
			s := newStore(t, url, func(o *Options) { o.RecordFormat = tc.def })
			_, err := s.Append(stream, 0, kafkaBatch(testRecords(), ts0)).Wait(ctxT(t))
			if err == nil || !errors.Is(err, errNeedsEnvelope) || !strings.Contains(err.Error(), "tombstone") {
				t.Fatalf("native append of a tombstone: %v, want a refusal naming the reason", err)
			}
			if r, _ := s.Range(stream, 0); r.Next != 0 {
				t.Fatalf("a refused batch wrote %d records", r.Next)
			}
		})
	}
}

func TestEnvelopeCorruptReadsPlain(t *testing.T) {
	r := disbackend.Record{Key: []byte("k"), Value: []byte("v"), Timestamp: 42, Headers: []disbackend.RecordHeader{{Key: "x", Value: []byte("y")}}}
	env := encodeEnvelope(&r, txnMeta{pid: -1, epoch: -1}, -1)
	got, _, _ := fromDIS(env, nil, 7, false)
	if got.Timestamp != 42 || string(got.Key) != "k" || string(got.Value) != "v" || len(got.Headers) != 1 {
		t.Fatalf("envelope read back as %+v", got)
	}
	bad := bytes.Clone(env)
	bad[len(bad)-1] ^= 1
	got, _, _ = fromDIS(bad, nil, 7, false)
	if got.Timestamp != 7 || !bytes.Equal(got.Value, bad) || got.Key != nil {
		t.Fatal("an envelope with a wrong CRC did not read as plain data")
	}
}

// TestEnvelopeTxn: a transactional record and a marker read back with
// their producer and bits (envelope version 2), whatever the format but
// native, which refuses a transactional record and still writes a marker.
func TestEnvelopeTxn(t *testing.T) {
	r := disbackend.Record{Key: []byte("k"), Value: []byte("v"), Timestamp: 42}
	for _, m := range []txnMeta{{flags: txnFlagTransactional, pid: 7, epoch: 3},
		{flags: txnFlagTransactional | txnFlagControl, pid: 1 << 40, epoch: -2}} {
		for _, format := range []string{FormatAuto, FormatEnvelope, FormatNative} {
			d, refused := toDIS(&r, format, m, -1)
			if format == FormatNative && m.flags == txnFlagTransactional {
				if refused == "" {
					t.Fatalf("format native took a transactional record")
				}
				continue
			}
			if refused != "" {
				t.Fatalf("%s: %+v refused: %s", format, m, refused)
			}
			got, gm, copyOf := fromDIS(d.data, nil, 7, false)
			if gm != m || copyOf != -1 || got.Timestamp != 42 || string(got.Key) != "k" || string(got.Value) != "v" {
				t.Fatalf("%s: %+v read back as %+v %+v", format, m, gm, got)
			}
		}
	}
	d, _ := toDIS(&r, FormatAuto, txnMeta{pid: -1, epoch: -1}, -1)
	if _, gm, _ := fromDIS(d.data, nil, 7, false); gm.transactional() || bytes.HasPrefix(d.data, envelopeMagic) {
		t.Fatalf("a plain record read back as %+v", gm)
	}
}

// TestEnvelopeCopy: a compactor's copy reads back with the sequence number
// it copies (envelope version 3) in formats auto and envelope; format
// native writes a record that can be plain as a plain record (a copy no
// read can tell), and one that needs an envelope as a copy.
func TestEnvelopeCopy(t *testing.T) {
	plain := disbackend.Record{Key: []byte("k"), Value: []byte("v"), Timestamp: 42}
	headed := disbackend.Record{Key: []byte("k"), Value: []byte("v"), Timestamp: 42, Headers: []disbackend.RecordHeader{{Key: "h", Value: []byte("x")}}}
	none := txnMeta{pid: -1, epoch: -1}
	for _, tc := range []struct {
		r      disbackend.Record
		format string
		want   int64
	}{
		{plain, FormatAuto, 1 << 33}, {plain, FormatEnvelope, 1 << 33}, {plain, FormatNative, -1},
		{headed, FormatAuto, 1 << 33}, {headed, FormatEnvelope, 1 << 33},
	} {
		d, refused := toDIS(&tc.r, tc.format, none, 1<<33)
		if refused != "" {
			t.Fatalf("%s: copy refused: %s", tc.format, refused)
		}
		got, gm, copyOf := fromDIS(d.data, d.key, d.ts, false)
		if copyOf != tc.want || gm != none || got.Timestamp != 42 || string(got.Key) != "k" || string(got.Value) != "v" ||
			len(got.Headers) != len(tc.r.Headers) {
			t.Fatalf("%s: %+v copy read back as %+v, copy of %d (want %d)", tc.format, tc.r, got, copyOf, tc.want)
		}
	}
}

func sdkClient(t *testing.T, url string) *dis.DisClient {
	t.Helper()
	s := newStore(t, url, nil)
	return s.c
}

// TestCursorCache: a consumer reading on follows next_partition_cursor:
// one GetCursor, then a GetRecords only when it has read what the ones
// before returned (read-ahead, readahead.go).
func TestCursorCache(t *testing.T) {
	t.Parallel()
	srv, url := startDIS(t, dislocal.Options{})
	s := newStore(t, url, func(o *Options) { o.RangeTTL = time.Minute })
	stream := mkStream(t, s, "cursors", 1)
	var off int64
	before := srv.Stats().Requests
	for round := 1; round <= 2; round++ {
		for i := 0; i < 5; i++ {
			if _, err := s.Append(stream, 0, kafkaBatch(testRecords()[:2], 1)).Wait(ctxT(t)); err != nil {
				t.Fatal(err)
			}
		}
		for off < int64(10*round) {
			res, err := s.Read(ctxT(t), stream, 0, off, 3*16)
			if err != nil || len(res.Batches) != 1 {
				t.Fatalf("Read(%d) = %d batches, %v", off, len(res.Batches), err)
			}
			recs, _ := backendtest.DecodeRecords(res.Batches[0])
			off = recs[len(recs)-1].Offset + 1
		}
	}
	after := srv.Stats().Requests
	cursors, gets := after["ShowCursor"]-before["ShowCursor"], after["ConsumeRecords"]-before["ConsumeRecords"]
	if cursors != 1 || gets != 2 {
		t.Fatalf("%d GetCursor and %d GetRecords for a sequential read of two appends; want one cursor, then next_partition_cursor, one GetRecords per append", cursors, gets)
	}
}

// TestRetries: with 15% of the requests failing (DIS.5000) and 15% dropped,
// every append lands once and in order (offsets exact with one writer).
func TestRetries(t *testing.T) {
	t.Parallel()
	_, url := startDIS(t, dislocal.Options{Faults: dislocal.Faults{ErrorRate: 0.15, DropRate: 0.15}})
	s := newStore(t, url, nil)
	var stream string
	for {
		_, err := s.CreateStream(ctxT(t), disbackend.StreamSpec{Name: "retry", TopicName: "retry", PartitionCount: 1,
			Config: disbackend.StreamConfig{Retention: 24 * time.Hour, MaxMessageBytes: 1 << 20}})
		if err == nil || errors.Is(err, disbackend.ErrStreamExists) {
			stream = "retry"
			break
		}
		if !errors.Is(err, disbackend.ErrUnavailable) {
			t.Fatal(err)
		}
	}
	var pend []*disbackend.Pending
	for i := 0; i < 30; i++ {
		pend = append(pend, s.Append(stream, 0, backendtest.MakeBatch(backendtest.BatchOptions{NumRecords: 3, Seed: uint64(i)})))
	}
	for i, p := range pend {
		res, err := p.Wait(ctxT(t))
		if err != nil {
			t.Fatalf("append %d: %v", i, err)
		}
		if res.BaseOffset != int64(3*i) {
			t.Fatalf("append %d: offset %d, want %d", i, res.BaseOffset, 3*i)
		}
	}
	if n := s.OutOfOrder(); n != 0 {
		t.Fatalf("OutOfOrder() = %d", n)
	}
}

// TestLostAnswers: a fifth of the requests are served by DIS but their
// answer never arrives (the connection closes). A PutRecords without an
// answer is checked against the partition (DescribeStream, and GetRecords
// of what was added) before it is sent again: every append lands exactly
// once and in order, at the offsets acknowledged.
func TestLostAnswers(t *testing.T) {
	t.Parallel()
	_, url := startDIS(t, dislocal.Options{Faults: dislocal.Faults{LostRate: 0.2}})
	s := newStore(t, url, func(o *Options) { o.Linger = -1 })
	var stream string
	for {
		_, err := s.CreateStream(ctxT(t), disbackend.StreamSpec{Name: "lost", TopicName: "lost", PartitionCount: 1,
			Config: disbackend.StreamConfig{Retention: 24 * time.Hour, MaxMessageBytes: 1 << 20}})
		if err == nil || errors.Is(err, disbackend.ErrStreamExists) {
			stream = "lost"
			break
		}
		if !errors.Is(err, disbackend.ErrUnavailable) {
			t.Fatal(err)
		}
	}
	var want []backendtest.Record
	for i := range 40 {
		b := backendtest.MakeBatch(backendtest.BatchOptions{NumRecords: 3, Seed: uint64(200 + i)})
		recs, err := backendtest.DecodeRecords(b.Raw)
		if err != nil {
			t.Fatal(err)
		}
		res, err := s.Append(stream, 0, b).Wait(ctxT(t))
		if err != nil {
			t.Fatalf("append %d: %v", i, err)
		}
		if res.BaseOffset != int64(len(want)) {
			t.Fatalf("append %d: offset %d, want %d", i, res.BaseOffset, len(want))
		}
		want = append(want, recs...)
	}
	reader := newStore(t, url, nil)
	var got []backendtest.Record
	for len(got) < len(want) {
		res, err := reader.Read(ctxT(t), stream, 0, int64(len(got)), 1<<20)
		if err != nil {
			if errors.Is(err, disbackend.ErrUnavailable) {
				continue
			}
			t.Fatal(err)
		}
		if len(res.Batches) == 0 {
			t.Fatalf("no records at %d", len(got))
		}
		for _, raw := range res.Batches {
			recs, err := backendtest.DecodeRecords(raw)
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, recs...)
		}
	}
	for i := range want {
		if !bytes.Equal(got[i].Value, want[i].Value) {
			t.Fatalf("record %d differs: written twice or out of order", i)
		}
	}
	if r, err := reader.Range(stream, 0); err == nil && r.Next != int64(len(want)) {
		t.Fatalf("partition holds %d records, %d appended: duplicates", r.Next, len(want))
	}
}

// TestCheckpoints covers what the suite's Checkpoints subtest does that
// fits DIS: offsets inside the partitions' ranges.
func TestCheckpoints(t *testing.T) {
	t.Parallel()
	_, url := startDIS(t, dislocal.Options{})
	s := newStore(t, url, nil)
	ctx := ctxT(t)
	a := mkStream(t, s, "cp.a", 3)
	b := mkStream(t, s, "cp-b", 2)
	for p := int32(0); p < 3; p++ {
		if _, err := s.Append(a, p, backendtest.MakeBatch(backendtest.BatchOptions{NumRecords: 10})).Wait(ctx); err != nil {
			t.Fatal(err)
		}
	}
	long := strings.Repeat("g", 300)
	for _, g := range []string{"grp", long, "zeta"} {
		name, _ := disbackend.AppNameForGroup(g)
		if _, err := s.CreateApp(ctx, disbackend.App{Name: name, GroupID: g}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.CreateApp(ctx, disbackend.App{Name: "zeta", GroupID: "other"}); !errors.Is(err, disbackend.ErrNameCollision) {
		t.Fatalf("second group for an app: %v", err)
	}
	longApp, _ := disbackend.AppNameForGroup(long)
	cps := []disbackend.Checkpoint{
		{Stream: a, Partition: 2, SequenceNumber: 7, Metadata: "m2"},
		{Stream: b, Partition: 1, SequenceNumber: 0},
		{Stream: a, Partition: 0, SequenceNumber: 10, Metadata: strings.Repeat("é", disbackend.MaxCheckpointMetadataLen)},
	}
	if err := s.CommitCheckpoints(ctx, longApp, cps); err != nil {
		t.Fatal(err)
	}
	got, err := s.Checkpoints(ctx, longApp, "")
	if err != nil || len(got) != 3 || got[0].Stream != b || got[1].Partition != 0 || got[1].SequenceNumber != 10 ||
		got[1].Metadata != cps[2].Metadata || got[2].Metadata != "m2" {
		t.Fatalf("Checkpoints = %+v, %v", got, err)
	}
	for _, bad := range []disbackend.Checkpoint{
		{Stream: a, Partition: 1, SequenceNumber: 1, Metadata: strings.Repeat("x", 1001)},
		{Stream: "nope", Partition: 0},
		{Stream: b, Partition: 2},
	} {
		if err := s.CommitCheckpoints(ctx, longApp, []disbackend.Checkpoint{{Stream: a, Partition: 1, SequenceNumber: 5}, bad}); err == nil {
			t.Fatalf("commit with %+v succeeded", bad)
		}
	}
	if got, _ := s.Checkpoints(ctx, longApp, a); len(got) != 2 {
		t.Fatalf("a refused commit wrote: %+v", got)
	}
	apps, err := s.ListApps(ctx)
	if err != nil || len(apps) != 3 {
		t.Fatalf("ListApps = %+v, %v", apps, err)
	}
	for _, app := range apps {
		if app.Name == longApp && app.GroupID != long {
			t.Fatalf("hashed app's group id %q, want the original", app.GroupID)
		}
	}
	// Another node lists the same groups and topics.
	other := newStore(t, url, nil)
	if app, err := other.DescribeApp(ctx, longApp); err != nil || app.GroupID != long {
		t.Fatalf("other node: DescribeApp = %+v, %v", app, err)
	}
	if st, err := other.ListStreams(ctx); err != nil || len(st) != 2 || st[1].TopicName != "cp.a" {
		t.Fatalf("other node: ListStreams = %+v, %v", st, err)
	}
	if err := s.DeleteCheckpoints(ctx, longApp, a, []int32{2}); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.Checkpoints(ctx, longApp, ""); len(got) != 2 {
		t.Fatalf("after deleting one: %+v", got)
	}
	if err := s.DeleteCheckpoints(ctx, longApp, a, nil); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.Checkpoints(ctx, longApp, ""); len(got) != 1 || got[0].Stream != b {
		t.Fatalf("after deleting the stream's: %+v", got)
	}
}

func TestRetentionRange(t *testing.T) {
	for _, tc := range []struct {
		r    time.Duration
		want int32
	}{{24 * time.Hour, 24}, {25*time.Hour - time.Millisecond, 25}, {168 * time.Hour, 168}} {
		if h, err := retentionHours(tc.r); err != nil || h != tc.want {
			t.Fatalf("retentionHours(%v) = %d, %v; want %d", tc.r, h, err, tc.want)
		}
	}
	for _, r := range []time.Duration{time.Hour, 23 * time.Hour, 169 * time.Hour, disbackend.UnlimitedRetention, 0} {
		_, err := retentionHours(r)
		if !errors.Is(err, disbackend.ErrInvalidConfig) || !strings.Contains(err.Error(), "24 to 168 hours") {
			t.Fatalf("retentionHours(%v): %v; want ErrInvalidConfig naming the range", r, err)
		}
	}
}

// TestCommitCheckpointsParallel: a commit of 24 partitions sends its
// CommitCheckpoint calls several at a time, never more than
// commitParallelism, and every checkpoint reads back.
func TestCommitCheckpointsParallel(t *testing.T) {
	t.Parallel()
	srv, url := startDIS(t, dislocal.Options{Faults: dislocal.Faults{Latency: 20 * time.Millisecond}})
	s := newStore(t, url, nil)
	ctx := ctxT(t)
	const parts = 24
	stream := mkStream(t, s, "cp.par", parts)
	var cps []disbackend.Checkpoint
	for p := int32(0); p < parts; p++ {
		if _, err := s.Append(stream, p, backendtest.MakeBatch(backendtest.BatchOptions{NumRecords: 5})).Wait(ctx); err != nil {
			t.Fatal(err)
		}
		cps = append(cps, disbackend.Checkpoint{Stream: stream, Partition: p, SequenceNumber: int64(p % 6), LeaderEpoch: -1})
	}
	if _, err := s.CreateApp(ctx, disbackend.App{Name: "par", GroupID: "par"}); err != nil {
		t.Fatal(err)
	}
	before := srv.Stats()
	if err := s.CommitCheckpoints(ctx, "par", cps); err != nil {
		t.Fatal(err)
	}
	after := srv.Stats()
	if n := after.Requests["CommitCheckpoint"] - before.Requests["CommitCheckpoint"]; n != parts {
		t.Fatalf("%d CommitCheckpoint calls for %d partitions", n, parts)
	}
	if after.MaxInFlight < 2 || after.MaxInFlight > commitParallelism {
		t.Fatalf("at most %d DIS calls in flight at once; want 2 to %d", after.MaxInFlight, commitParallelism)
	}
	got, err := s.Checkpoints(ctx, "par", stream)
	if err != nil || len(got) != parts {
		t.Fatalf("Checkpoints = %d, %v", len(got), err)
	}
	for i, cp := range got {
		if cp.Partition != int32(i) || cp.SequenceNumber != int64(i%6) {
			t.Fatalf("checkpoint %d = %+v", i, cp)
		}
	}
}

// TestPutRecordsTimeout: DIS answers after 0-250 ms and the Store gives a
// request 150 ms: a PutRecords that times out (dislocal applies it anyway)
// is checked and, if not written, sent again; every acknowledged batch is
// at its offset, and none is written twice.
func TestPutRecordsTimeout(t *testing.T) {
	t.Parallel()
	// PutRecords only: with every request delayed, five reads in a row
	// (the dedupe checkpoint before the first write) timed out once in
	// CI and the append failed before any PutRecords.
	_, url := startDIS(t, dislocal.Options{Faults: dislocal.Faults{Jitter: 250 * time.Millisecond, DelayOps: []string{"SendRecords"}}})
	stream := mkStream(t, newStore(t, url, nil), "timeout", 1)
	s := newStore(t, url, func(o *Options) { o.RequestTimeout = 150 * time.Millisecond; o.Linger = -1 })
	reader := newStore(t, url, nil)
	for i := range 8 {
		b := backendtest.MakeBatch(backendtest.BatchOptions{NumRecords: 2, Seed: uint64(100 + i)})
		want, err := backendtest.DecodeRecords(b.Raw)
		if err != nil {
			t.Fatal(err)
		}
		res, err := s.Append(stream, 0, b).Wait(ctxT(t))
		if err != nil {
			t.Fatalf("append %d: %v", i, err)
		}
		got := readBack(t, reader, stream, 0, res.BaseOffset)
		if len(got) < 2 || !bytes.Equal(got[0].Value, want[0].Value) || !bytes.Equal(got[1].Value, want[1].Value) {
			t.Fatalf("append %d at offset %d: read back %v, want its records", i, res.BaseOffset, got)
		}
	}
	// And none written twice: a PutRecords that timed out is given time
	// to land before it is taken as not written.
	if r, err := reader.describeRange(ctxT(t), stream, 0); err != nil || r.Next != 16 {
		t.Fatalf("partition range %+v, %v: want the 16 records appended", r, err)
	}
}

// TestClusterIDStable: every Store on the same DIS project gives the same
// cluster id (two gateway nodes, or one restarted), another project
// another one.
func TestClusterIDStable(t *testing.T) {
	t.Parallel()
	_, url := startDIS(t, dislocal.Options{})
	a, err := newStore(t, url, nil).ClusterID(ctxT(t))
	if err != nil || len(a) != 22 {
		t.Fatalf("ClusterID = %q, %v; want 22 characters (16 bytes, Base64)", a, err)
	}
	if b, err := newStore(t, url, nil).ClusterID(ctxT(t)); err != nil || b != a {
		t.Fatalf("a second Store: %q, %v; want %q", b, err, a)
	}
	_, other := startDIS(t, dislocal.Options{})
	if c, err := newStore(t, other, nil).ClusterID(ctxT(t)); err != nil || c == a {
		t.Fatalf("another DIS: %q, %v; want another id than %q", c, err, a)
	}
}

// FuzzDecodeEnvelope: any DIS data decodes without a panic, and what a
// valid envelope decodes to encodes and decodes back the same.
func FuzzDecodeEnvelope(f *testing.F) {
	r := disbackend.Record{Key: []byte("k"), Value: []byte("v"), Timestamp: 42, Headers: []disbackend.RecordHeader{{Key: "x", Value: nil}}}
	f.Add(encodeEnvelope(&r, txnMeta{pid: -1, epoch: -1}, -1))
	f.Add(encodeEnvelope(&r, txnMeta{flags: txnFlagTransactional | txnFlagControl, pid: 9, epoch: 1}, -1))
	f.Add(encodeEnvelope(&r, txnMeta{pid: -1, epoch: -1}, 12345))
	f.Add([]byte("plain"))
	f.Fuzz(func(t *testing.T, data []byte) {
		var got disbackend.Record
		ts, m, copyOf, ok := decodeEnvelope(data, &got)
		if !ok {
			return
		}
		if copyOf >= 0 && m.transactional() {
			t.Fatalf("%x decoded to a transactional copy", data)
		}
		got.Timestamp = ts
		var back disbackend.Record
		ts2, m2, copyOf2, ok := decodeEnvelope(encodeEnvelope(&got, m, copyOf), &back)
		back.Timestamp = ts2
		if !ok || m2 != m || copyOf2 != copyOf || !reflect.DeepEqual(back, got) {
			t.Fatalf("%x decoded to %+v %+v %d, which round-trips to %+v %+v %d", data, got, m, copyOf, back, m2, copyOf2)
		}
	})
}
