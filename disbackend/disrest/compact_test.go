package disrest

import (
	"context"
	"fmt"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"go.uber.org/zap/zaptest"

	"github.com/disgw/disgw/disbackend"
	"github.com/disgw/disgw/disbackend/backendtest"
	"github.com/disgw/disgw/disbackend/disapi"
	"github.com/disgw/disgw/disbackend/dislocal"
	"github.com/disgw/disgw/disbackend/localstore"
	"github.com/disgw/disgw/kafkawire/batch"
)

// startExpiringDIS runs dislocal whose data_duration "hour" is unit, with
// its store expiring records every 20 ms.
func startExpiringDIS(t *testing.T, unit time.Duration) string {
	t.Helper()
	st, err := localstore.Open("dis", localstore.Options{FS: vfs.NewMem(), RetentionCheckInterval: 20 * time.Millisecond, Logger: zaptest.NewLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	s, err := dislocal.New(st, dislocal.Options{AK: testAK, SK: testSK, ProjectID: testProject, NoScalingLimits: true,
		RetentionUnit: unit, Logger: zaptest.NewLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(s)
	t.Cleanup(hs.Close)
	return hs.URL
}

// keyedBatch is a batch of one record per key: value nil (a tombstone)
// when value returns nil.
func keyedBatch(keys []string, value func(k string) []byte) disbackend.Batch {
	recs := make([]disbackend.Record, len(keys))
	now := time.Now().UnixMilli()
	for i, k := range keys {
		recs[i] = disbackend.Record{OffsetDelta: int32(i), Timestamp: now, Key: []byte(k), Value: value(k)}
	}
	h := batch.NewHeader(0)
	h.PartitionLeaderEpoch = 0
	return backendtest.FromRaw(batch.Encode(h, recs))
}

// readKeys reads the partition from its log start offset to its end and
// returns each key's last record (nil value: a tombstone) and the range.
func readKeys(t *testing.T, s *Store, stream string) (map[string][]byte, disbackend.PartitionRange) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for attempt := 0; ; attempt++ {
		r, err := s.describeRange(ctx, stream, 0)
		if err != nil {
			t.Fatal(err)
		}
		recs, off, err := readFrom(ctx, t, s, stream, r.First)
		if err == nil {
			last := map[string][]byte{}
			for _, rec := range recs {
				last[string(rec.Key)] = rec.Value
			}
			return last, r
		}
		if attempt == 5 {
			t.Fatalf("read %s from %d: %v", stream, off, err)
		}
		// The start expired under the read: read again from the new start.
	}
}

// TestCompactedKeepsLiveKeys: 1,000 keys × 10 versions and 100 tombstones
// on a compacted stream of dislocal whose "hour" is 100 ms (DIS keeps the
// stream's records 16.8 s). After every original record has expired, a
// read from the start yields every live key's latest value; after
// delete.retention.ms, no tombstoned key. A second Store (a gateway
// restart) restores the key index from its snapshot and keeps the keys
// through another generation of expiry, and keeps the keys of a stream
// made compact then, 18 s after it was created.
func TestCompactedKeepsLiveKeys(t *testing.T) {
	if testing.Short() {
		t.Skip("long: waits for records to expire in DIS, generation after generation")
	}
	url := startExpiringDIS(t, 100*time.Millisecond)
	s := newStore(t, url, func(o *Options) { o.Linger = time.Millisecond })
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	const stream = "compacted"
	cfg := disbackend.StreamConfig{Retention: 24 * time.Hour, MaxMessageBytes: 1 << 20, CleanupPolicy: disbackend.CleanupCompact,
		DeleteRetention: 2 * time.Second, MinCleanableDirtyRatio: 0.5}
	st, err := s.CreateStream(ctx, disbackend.StreamSpec{Name: stream, TopicName: stream, PartitionCount: 1, Config: cfg})
	if err != nil {
		t.Fatal(err)
	}
	if st.Config.CleanupPolicy != disbackend.CleanupCompact || st.Config.DeleteRetention != 2*time.Second ||
		st.Config.Retention != disapi.MaxRetentionHours*time.Hour {
		t.Fatalf("created %+v: want compact, delete.retention.ms 2000 (kept in DIS), retention 168h", st.Config)
	}
	// A stream made compact long after it was created (its create time
	// says nothing of when its records arrived).
	const altered = "altered"
	plain := cfg
	plain.CleanupPolicy = disbackend.CleanupDelete
	if _, err := s.CreateStream(ctx, disbackend.StreamSpec{Name: altered, TopicName: altered, PartitionCount: 1, Config: plain}); err != nil {
		t.Fatal(err)
	}
	created := time.Now()
	keys := make([]string, 1000)
	for i := range keys {
		keys[i] = fmt.Sprintf("key-%04d", i)
	}
	for v := range 10 {
		if _, err := s.Append(stream, 0, keyedBatch(keys, func(k string) []byte { return fmt.Appendf(nil, "%s-v%d", k, v) })).Wait(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Append(stream, 0, keyedBatch(keys[:100], func(string) []byte { return nil })).Wait(ctx); err != nil {
		t.Fatal(err)
	}
	written := time.Now()
	_, r0 := readKeys(t, s, stream)
	if r0.Next != 10_100 {
		t.Fatalf("range after writing %v, want next 10100", r0)
	}

	check := func(s *Store, what string, tombstonesGone bool) (disbackend.PartitionRange, int) {
		t.Helper()
		last, r := readKeys(t, s, stream)
		for _, k := range keys[100:] {
			if want := k + "-v9"; string(last[k]) != want {
				t.Fatalf("%s: range %v: key %s reads %q, want %q", what, r, k, last[k], want)
			}
		}
		tomb := 0
		for _, k := range keys[:100] {
			v, ok := last[k]
			if ok && v != nil {
				t.Fatalf("%s: tombstoned key %s reads %q", what, k, v)
			}
			if ok {
				tomb++
			}
		}
		if tombstonesGone && tomb > 0 {
			t.Fatalf("%s: %d tombstoned keys still read", what, tomb)
		}
		return r, tomb
	}

	// Every original record expires (16.8 s after it was written).
	deadline := time.Now().Add(90 * time.Second)
	var r1 disbackend.PartitionRange
	for {
		r, _ := check(s, "while the originals expire", false)
		if r.First >= r0.Next {
			r1 = r
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the original records did not expire within 90s: range %v", r)
		}
		time.Sleep(500 * time.Millisecond)
	}
	t.Logf("originals expired after %v: range %v", time.Since(written), r1)
	if lost := s.CompactionLost(); lost != 0 {
		t.Fatalf("the compactor counted %d lost keys", lost)
	}

	// A restart: the new Store restores the index and keeps copying.
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s2 := newStore(t, url, nil)
	madeCompact := time.Now()
	if err := s2.UpdateStreamConfig(ctx, altered, cfg); err != nil {
		t.Fatal(err)
	}
	if _, err := s2.Append(altered, 0, keyedBatch(keys[:100], func(k string) []byte { return []byte(k + "-altered") })).Wait(ctx); err != nil {
		t.Fatal(err)
	}
	checkAltered := func() disbackend.PartitionRange {
		t.Helper()
		last, r := readKeys(t, s2, altered)
		for _, k := range keys[:100] {
			if want := k + "-altered"; string(last[k]) != want {
				t.Fatalf("%s, made compact %v after it was created: range %v: key %s reads %q, want %q",
					altered, madeCompact.Sub(created), r, k, last[k], want)
			}
		}
		return r
	}
	for {
		r, tomb := check(s2, "after the restart", false)
		ra := checkAltered()
		if r.First >= r1.Next && tomb == 0 && ra.First >= 200 { // altered: its originals and first copies expired
			t.Logf("second generation expired after %v: range %v", time.Since(written), r)
			break
		}
		if time.Now().After(deadline.Add(60 * time.Second)) {
			t.Fatalf("the copies made before the restart did not expire, or tombstones stay: range %v, %d tombstones", r, tomb)
		}
		time.Sleep(500 * time.Millisecond)
	}
	check(s2, "at the end", true)
	if n := s2.compact.restored.Load(); n < 1 {
		t.Fatalf("the restarted Store restored %d key indexes from snapshots, want 1", n)
	}
	if lost := s2.CompactionLost(); lost != 0 {
		t.Fatalf("the compactor counted %d lost keys", lost)
	}
}

// readFrom reads the partition from off to its end as a consumer does
// (past each batch's last offset, KAFKA-5443) and returns the records and
// the offset to read next.
func readFrom(ctx context.Context, t *testing.T, s *Store, stream string, off int64) ([]backendtest.Record, int64, error) {
	t.Helper()
	var out []backendtest.Record
	for {
		res, err := s.Read(ctx, stream, 0, off, 1<<20)
		if err != nil {
			return out, off, err
		}
		if len(res.Batches) == 0 {
			return out, off, nil
		}
		for _, b := range res.Batches {
			recs, err := backendtest.DecodeRecords(b)
			if err != nil {
				t.Fatal(err)
			}
			for _, rec := range recs {
				if rec.Offset >= off {
					out = append(out, rec)
				}
			}
			off = max(off, batch.LastOffset(b)+1)
		}
	}
}

// TestCompactedCopiesHidden: on a compacted stream of dislocal whose
// "hour" is 50 ms (DIS keeps records 8.4 s), the compactor copies each of
// 300 keys several times (doubling intervals, then before its record
// expires), yet a consumer that follows the partition reads each key once,
// and a consumer that reads it from its start, at any moment, reads each
// key exactly once: a copy is left out while the record it copies is
// still there.
func TestCompactedCopiesHidden(t *testing.T) {
	if testing.Short() {
		t.Skip("long: waits for records to expire in DIS")
	}
	url := startExpiringDIS(t, 50*time.Millisecond)
	s := newStore(t, url, func(o *Options) { o.Linger = time.Millisecond })
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const stream = "hidden"
	cfg := disbackend.StreamConfig{Retention: 24 * time.Hour, MaxMessageBytes: 1 << 20, CleanupPolicy: disbackend.CleanupCompact,
		DeleteRetention: time.Hour, MinCleanableDirtyRatio: 0.5}
	if _, err := s.CreateStream(ctx, disbackend.StreamSpec{Name: stream, TopicName: stream, PartitionCount: 1, Config: cfg}); err != nil {
		t.Fatal(err)
	}
	keys := make([]string, 300)
	for i := range keys {
		keys[i] = fmt.Sprintf("key-%04d", i)
	}
	if _, err := s.Append(stream, 0, keyedBatch(keys, func(k string) []byte { return []byte(k + "-v") })).Wait(ctx); err != nil {
		t.Fatal(err)
	}
	followed := map[string]int{}
	var pos int64
	var r disbackend.PartitionRange
	for rounds := 0; ; rounds++ {
		recs, next, err := readFrom(ctx, t, s, stream, pos)
		if err != nil {
			t.Fatalf("follow from %d: %v", pos, err)
		}
		for _, rec := range recs {
			followed[string(rec.Key)]++
		}
		pos = next
		// A reader from the start now.
		var all []backendtest.Record
		for attempt := 0; ; attempt++ {
			if r, err = s.describeRange(ctx, stream, 0); err != nil {
				t.Fatal(err)
			}
			if all, _, err = readFrom(ctx, t, s, stream, r.First); err == nil {
				break
			}
			if attempt == 5 {
				t.Fatal(err) // the start expired under the read 6 times
			}
		}
		count := map[string]int{}
		for _, rec := range all {
			count[string(rec.Key)]++
		}
		for _, k := range keys {
			if count[k] != 1 {
				t.Fatalf("round %d, range %v: a read from the start reads key %s %d times, want once", rounds, r, k, count[k])
			}
		}
		if r.First >= 3*int64(len(keys)) { // the originals and two generations of copies expired
			break
		}
		if rounds > 400 {
			t.Fatalf("the records did not expire: range %v", r)
		}
		time.Sleep(100 * time.Millisecond)
	}
	for _, k := range keys {
		if followed[k] != 1 {
			t.Fatalf("a consumer following the partition read key %s %d times, want once (range %v)", k, followed[k], r)
		}
	}
	if lost := s.CompactionLost(); lost != 0 {
		t.Fatalf("the compactor counted %d lost keys", lost)
	}
	t.Logf("range %v: %d copies of %d keys, each read once", r, r.Next-int64(len(keys)), len(keys))
}

// TestCompactorCopyFilter: a copy is sent only while it is its key's
// latest record, no record of its key is pending, and no append's outcome
// is unknown.
func TestCompactorCopyFilter(t *testing.T) {
	var c compactor
	c.init(nil, 10)
	cp := newCpart(partKey{"s", 0}, disbackend.Stream{CreatedAt: time.Now()})
	rec := func(k string) disbackend.Record { return disbackend.Record{Key: []byte(k), Value: []byte("v")} }
	c.apply(cp, hashKey([]byte("a")), 5, false, 0)
	c.apply(cp, hashKey([]byte("b")), 6, false, 0)
	c.apply(cp, hashKey([]byte("c")), 7, false, 0)
	// A producer's batch with a new value of b is being sent.
	if _, _, err := c.begin(cp, []disbackend.Record{rec("b")}, nil); err != nil {
		t.Fatal(err)
	}
	// Copies of a@5 (latest), b@6 (a newer one pending), c@3 (stale).
	kept, src, _ := c.begin(cp, []disbackend.Record{rec("a"), rec("b"), rec("c")}, []int64{5, 6, 3})
	if len(kept) != 1 || string(kept[0].Key) != "a" || src[0] != 5 {
		t.Fatalf("kept %d copies (%v), want only a@5", len(kept), src)
	}
	c.written(cp, kept, []int64{8})
	c.written(cp, []disbackend.Record{rec("b")}, []int64{9})
	// b@9 is now the latest; a copy of b@6 is stale, one of b@9 goes.
	if kept, _, _ := c.begin(cp, []disbackend.Record{rec("b")}, []int64{6}); len(kept) != 0 {
		t.Fatal("a copy of b@6 was kept after b@9 was written")
	}
	// An append fails with an unknown outcome: no copies until a sweep.
	if _, _, err := c.begin(cp, []disbackend.Record{rec("c")}, nil); err != nil {
		t.Fatal(err)
	}
	c.failed(cp, []disbackend.Record{rec("c")})
	if kept, _, _ := c.begin(cp, []disbackend.Record{rec("a")}, []int64{8}); len(kept) != 0 {
		t.Fatal("a copy was kept while an append's outcome is unknown")
	}
	cp.unsure = 0
	if kept, _, _ := c.begin(cp, []disbackend.Record{rec("a")}, []int64{8}); len(kept) != 1 {
		t.Fatal("a copy of a@8 (its latest) was dropped")
	}
	// The key cap: 3 keys indexed, a batch of 8 new ones passes the cap of 10.
	var many []disbackend.Record
	for i := range 8 {
		many = append(many, rec(fmt.Sprint("new", i)))
	}
	if _, _, err := c.begin(cp, many, nil); err == nil {
		t.Fatalf("a batch of 8 new keys beside %d was taken with a cap of 10", c.keys.Load())
	}
}

// TestArrivedAfter: the samples bound when a record arrived.
func TestArrivedAfter(t *testing.T) {
	cp := newCpart(partKey{"s", 0}, disbackend.Stream{CreatedAt: time.UnixMilli(1000)})
	cp.addSample(10, 2000)
	cp.addSample(10, 2500) // still 10 later: tighter
	cp.addSample(20, 3000)
	for _, tc := range []struct{ off, want int64 }{{0, 1000}, {9, 1000}, {10, 2500}, {19, 2500}, {20, 3000}, {99, 3000}} {
		if got, ok := cp.arrivedAfter(tc.off); !ok || got != tc.want {
			t.Errorf("arrivedAfter(%d) = %d, %v; want %d", tc.off, got, ok, tc.want)
		}
	}
	cp.pruneSamples(15)
	if got, _ := cp.arrivedAfter(15); got != 2500 {
		t.Errorf("after pruning, arrivedAfter(15) = %d", got)
	}
}

// BenchmarkSnapshotRestore measures a gateway start's read of a compacted
// partition's key index of 1,000,000 keys from its snapshot in dislocal
// (docs/compaction.md's start-up bound): go test -run - -bench SnapshotRestore
// -benchtime 3x ./disbackend/disrest/
func BenchmarkSnapshotRestore(b *testing.B) {
	const keys = 1_000_000
	url := startExpiringDISB(b)
	s := newStoreB(b, url)
	ctx := context.Background()
	cfg := disbackend.StreamConfig{Retention: 24 * time.Hour, MaxMessageBytes: 1 << 20, CleanupPolicy: disbackend.CleanupCompact}
	st, err := s.CreateStream(ctx, disbackend.StreamSpec{Name: "big", TopicName: "big", PartitionCount: 1, Config: cfg})
	if err != nil {
		b.Fatal(err)
	}
	si, err := s.streamInfo(ctx, "big", true)
	if err != nil {
		b.Fatal(err)
	}
	cp := newCpart(partKey{"big", 0}, st)
	cp.streamID = si.id
	for i := range keys {
		s.compact.apply(cp, hashKey(fmt.Appendf(nil, "key-%d", i)), int64(i), false, 0)
	}
	cp.indexed = keys
	if err := s.compact.snapshot(ctx, cp, disbackend.PartitionRange{First: 0, Next: 0}); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for b.Loop() {
		fresh := newCpart(partKey{"big", 0}, st)
		fresh.streamID = si.id
		if err := s.compact.restore(ctx, fresh); err != nil {
			b.Fatal(err)
		}
		if len(fresh.keys) != keys {
			b.Fatalf("restored %d keys, want %d", len(fresh.keys), keys)
		}
	}
	b.ReportMetric(float64(keys), "keys")
}

func startExpiringDISB(b *testing.B) string {
	st, err := localstore.Open("dis", localstore.Options{FS: vfs.NewMem(), RetentionCheckInterval: -1})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = st.Close() })
	s, err := dislocal.New(st, dislocal.Options{AK: testAK, SK: testSK, ProjectID: testProject, NoScalingLimits: true})
	if err != nil {
		b.Fatal(err)
	}
	hs := httptest.NewServer(s)
	b.Cleanup(hs.Close)
	return hs.URL
}

func newStoreB(b *testing.B, url string) *Store {
	s, err := New(Options{Endpoint: url, ProjectID: testProject, AK: testAK, SK: testSK, PollInterval: -1, NoCompactor: true})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = s.Close() })
	return s
}
