package disrest

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/huaweicloud/huaweicloud-sdk-go-v3/services/dis/v2/model"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap/zaptest"

	"github.com/disgw/disgw/disbackend"
	"github.com/disgw/disgw/disbackend/dislocal"
	"github.com/disgw/disgw/disbackend/localstore"
)

// TestFollowDIS: ListStreams follows what others do in DIS (a stream
// deleted, one created, one scaled down until its partitions expire) with
// one DescribeStream per new or changed stream and none for unchanged
// ones; a DELETED partition is still read (from DIS); once EXPIRED it is
// no longer listed, its read-ahead buffer and cursors are gone and a Read
// of it is ErrPartitionNotFound; a deleted stream's caches are dropped.
func TestFollowDIS(t *testing.T) {
	t.Parallel()
	var clock atomic.Int64
	clock.Store(time.Now().UnixNano())
	now := func() time.Time { return time.Unix(0, clock.Load()) }
	st, err := localstore.Open("dis", localstore.Options{FS: vfs.NewMem(), RetentionCheckInterval: -1, Logger: zaptest.NewLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	ds, err := dislocal.New(st, dislocal.Options{AK: testAK, SK: testSK, ProjectID: testProject, NoScalingLimits: true,
		RetentionUnit: time.Second, Now: now, Logger: zaptest.NewLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	var describes atomic.Int64
	streamsPath := "/v2/" + testProject + "/streams/"
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if rest, ok := strings.CutPrefix(r.URL.Path, streamsPath); ok && r.Method == http.MethodGet && !strings.Contains(rest, "/") {
			describes.Add(1)
		}
		ds.ServeHTTP(w, r)
	}))
	t.Cleanup(hs.Close)

	s := newStore(t, hs.URL, nil)
	other := sdkClient(t, hs.URL) // someone else using DIS
	ctx := ctxT(t)
	a := mkStream(t, s, "follow.a", 3)
	b := mkStream(t, s, "follow.b", 1)
	if _, err := s.Append(a, 2, kafkaBatch([]kmsg.Record{{Value: []byte("on partition 2")}}, 1)).Wait(ctx); err != nil {
		t.Fatal(err)
	}
	if res, err := s.Read(ctx, a, 2, 0, 1<<20); err != nil || len(res.Batches) != 1 {
		t.Fatalf("read a/2: %v, %d batches", err, len(res.Batches))
	}
	list := func() map[string]disbackend.Stream {
		t.Helper()
		sts, err := s.ListStreams(ctx)
		if err != nil {
			t.Fatal(err)
		}
		m := map[string]disbackend.Stream{}
		for _, st := range sts {
			m[st.Name] = st
		}
		return m
	}
	list()
	describes.Store(0)
	if m := list(); len(m) != 2 || m[a].PartitionCount != 3 || m[b].PartitionCount != 1 {
		t.Fatalf("listed %+v", m)
	}
	if n := describes.Load(); n != 0 {
		t.Errorf("a listing with nothing changed described %d streams, want 0", n)
	}

	// Others delete b, create c and scale a down to 1.
	if _, err := other.DeleteStream(&model.DeleteStreamRequest{StreamName: b}); err != nil {
		t.Fatal(err)
	}
	typ, dt, hours := model.GetCreateStreamReqStreamTypeEnum().COMMON, model.GetCreateStreamReqDataTypeEnum().BLOB, int32(24)
	if _, err := other.CreateStream(&model.CreateStreamRequest{Body: &model.CreateStreamReq{StreamName: "follow_c",
		PartitionCount: 2, StreamType: &typ, DataType: &dt, DataDuration: &hours}}); err != nil {
		t.Fatal(err)
	}
	if _, err := other.UpdatePartitionCount(&model.UpdatePartitionCountRequest{StreamName: a,
		Body: &model.UpdatePartitionCountReq{StreamName: a, TargetPartitionCount: 1}}); err != nil {
		t.Fatal(err)
	}
	describes.Store(0)
	m := list()
	if _, ok := m[b]; ok || m["follow_c"].PartitionCount != 2 || m[a].PartitionCount != 3 {
		t.Fatalf("after delete, create and scale-down: listed %+v", m)
	}
	if n := describes.Load(); n != 2 {
		t.Errorf("a listing with one new and one scaled stream described %d streams, want 2", n)
	}
	if _, ok := s.streams.peek(b); ok {
		t.Errorf("deleted stream %s still cached", b)
	}
	// DELETED: readable, from DIS.
	if res, err := s.Read(ctx, a, 2, 0, 1<<20); err != nil || len(res.Batches) != 1 {
		t.Fatalf("read DELETED a/2: %v, %d batches", err, len(res.Batches))
	}
	s.reads.mu.Lock()
	p := s.reads.m[partKey{a, 2}]
	s.reads.mu.Unlock()
	if p == nil {
		t.Fatal("no read state of a/2")
	}
	p.mu.Lock()
	p.dropSegs(&s.reads)
	p.insert(&s.reads, 0, []fetched{{sn: 0, rec: disbackend.Record{Value: []byte("stale")}, n: 5}})
	p.mu.Unlock()
	if res, err := s.Read(ctx, a, 2, 0, 1<<20); err != nil || len(res.Batches) != 1 || strings.Contains(string(res.Batches[0]), "stale") {
		t.Fatalf("read DELETED a/2 with a buffered record: %v, %d batches (served from the buffer?)", err, len(res.Batches))
	}

	// The DELETED partitions expire 24 "hours" (seconds) after the scale-down.
	clock.Add(int64(25 * time.Second))
	describes.Store(0)
	m = list()
	if m[a].PartitionCount != 1 {
		t.Fatalf("after expiry: %s has %d partitions, want 1", a, m[a].PartitionCount)
	}
	if n := describes.Load(); n != 1 {
		t.Errorf("a listing with one stream with DELETED partitions described %d streams, want 1", n)
	}
	s.reads.mu.Lock()
	_, buffered := s.reads.m[partKey{a, 2}]
	s.reads.mu.Unlock()
	if buffered {
		t.Error("read state of the EXPIRED partition a/2 kept")
	}
	if _, err := s.Read(ctx, a, 2, 0, 1<<20); !errors.Is(err, disbackend.ErrPartitionNotFound) {
		t.Errorf("read of EXPIRED a/2: %v, want ErrPartitionNotFound", err)
	}
	describes.Store(0)
	list()
	if n := describes.Load(); n != 0 {
		t.Errorf("a listing after the expiry described %d streams, want 0", n)
	}
}
