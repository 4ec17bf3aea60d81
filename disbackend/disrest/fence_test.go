package disrest

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/huaweicloud/huaweicloud-sdk-go-v3/core/def"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap/zaptest"

	"github.com/disgw/disgw/disbackend"
	"github.com/disgw/disgw/disbackend/backendtest"
	"github.com/disgw/disgw/disbackend/dislocal"
	"github.com/disgw/disgw/disbackend/localstore"
	"github.com/disgw/disgw/internal/metrics"
)

// fakeFence is a fence the test controls: the keys owned (nil: every
// key), the lease (lapsed refuses every key), the membership member()
// gives, and how long takeover waits.
type fakeFence struct {
	mu        sync.Mutex
	owned     map[string]bool
	lapsed    bool
	clientID  string
	gen       int64
	isMember  bool
	delay     time.Duration
	takeovers []string
}

func (f *fakeFence) set(fn func(f *fakeFence)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fn(f)
}

func (f *fakeFence) mayWrite(key string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.lapsed && (f.owned == nil || f.owned[key]) {
		return nil
	}
	sentinel := disbackend.ErrNotLeader
	switch {
	case strings.HasPrefix(key, "g/"):
		sentinel = disbackend.ErrNotCoordinator
	case key == controllerKey:
		sentinel = disbackend.ErrNotController
	}
	return fmt.Errorf("fake fence: %s: %w", key, sentinel)
}

func (f *fakeFence) takeover(ctx context.Context, key string) error {
	if err := f.mayWrite(key); err != nil {
		return err
	}
	f.mu.Lock()
	f.takeovers = append(f.takeovers, key)
	d := f.delay
	f.mu.Unlock()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
	}
	return f.mayWrite(key)
}

func (f *fakeFence) takeoverWait(key string) time.Duration {
	if f.mayWrite(key) != nil {
		return 0
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.delay
}

func (f *fakeFence) member() (string, int64, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.clientID, f.gen, f.isMember
}

func (f *fakeFence) takeoverCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.takeovers)
}

var _ fence = (*fakeFence)(nil)

// newFencedStore is newStore with fence f.
func newFencedStore(t *testing.T, url string, f *fakeFence, mod func(*Options)) *Store {
	t.Helper()
	return newStore(t, url, func(o *Options) {
		o.fence = f
		if mod != nil {
			mod(o)
		}
	})
}

// valuesBatch is a batch of one record per value.
func valuesBatch(vals ...string) disbackend.Batch {
	recs := make([]kmsg.Record, len(vals))
	for i, v := range vals {
		recs[i] = kmsg.NewRecord()
		recs[i].Value = []byte(v)
	}
	return kafkaBatch(recs, time.Now().UnixMilli())
}

func pidBatch(pid int64, epoch int16, seq, n int32) disbackend.Batch {
	return backendtest.MakeBatch(backendtest.BatchOptions{NumRecords: n, Idempotent: true, ProducerID: pid, ProducerEpoch: epoch,
		BaseSequence: seq, Seed: uint64(pid)<<32 | uint64(seq)})
}

func appendOK(t *testing.T, s *Store, stream string, part int32, b disbackend.Batch) disbackend.AppendResult {
	t.Helper()
	res, err := s.Append(stream, part, b).Wait(ctxT(t))
	if err != nil {
		t.Fatalf("append to %s/%d: %v", stream, part, err)
	}
	return res
}

// values reads the partition's values from offset 0.
func values(t *testing.T, s *Store, stream string, part int32) []string {
	t.Helper()
	var out []string
	for i, r := range readBack(t, s, stream, part, 0) {
		if r.Offset != int64(i) {
			t.Fatalf("record %d at offset %d", i, r.Offset)
		}
		out = append(out, string(r.Value))
	}
	return out
}

// lateWritesMetric reads disgw_cluster_late_writes_total.
func lateWritesMetric(t *testing.T, m *metrics.Metrics) float64 {
	t.Helper()
	mfs, err := m.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == "disgw_cluster_late_writes_total" {
			return mf.GetMetric()[0].GetCounter().GetValue()
		}
	}
	t.Fatal("no disgw_cluster_late_writes_total")
	return 0
}

// TestFenceAppendRefused: an Append to a partition the node does not lead
// fails at once with ErrNotLeader, naming the partition, and sends
// nothing; one it leads is written.
func TestFenceAppendRefused(t *testing.T) {
	t.Parallel()
	srv, url := startDIS(t, dislocal.Options{})
	f := &fakeFence{}
	s := newFencedStore(t, url, f, func(o *Options) { o.Linger = -1 })
	stream := mkStream(t, s, "refused", 2)
	f.set(func(f *fakeFence) { f.owned = map[string]bool{disbackend.PartitionKey(stream, 0): true} })
	before := putRecordsCount(srv)
	p := s.Append(stream, 1, valuesBatch("v"))
	select {
	case <-p.Done():
	default:
		t.Fatal("an Append to a partition led elsewhere is not failed at once")
	}
	if _, err := p.Wait(ctxT(t)); !errors.Is(err, disbackend.ErrNotLeader) || !strings.Contains(err.Error(), stream+"/1") {
		t.Fatalf("append to a partition led elsewhere: %v; want ErrNotLeader naming %s/1", err, stream)
	}
	if res := appendOK(t, s, stream, 0, valuesBatch("v")); res.BaseOffset != 0 {
		t.Fatalf("append to the partition led: %+v", res)
	}
	if n := putRecordsCount(srv) - before; n != 1 {
		t.Fatalf("%d PutRecords; want 1", n)
	}
	// The lease lapsed: nothing is written, not even to the partition led.
	f.set(func(f *fakeFence) { f.lapsed = true })
	if _, err := s.Append(stream, 0, valuesBatch("w")).Wait(ctxT(t)); !errors.Is(err, disbackend.ErrNotLeader) {
		t.Fatalf("append with the lease lapsed: %v", err)
	}
}

// startDISWrapped is startDIS behind wrap.
func startDISWrapped(t *testing.T, wrap func(http.Handler) http.Handler) string {
	t.Helper()
	st, err := localstore.Open("dis", localstore.Options{FS: vfs.NewMem(), RetentionCheckInterval: -1, Logger: zaptest.NewLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	s, err := dislocal.New(st, dislocal.Options{AK: testAK, SK: testSK, ProjectID: testProject, NoScalingLimits: true,
		Logger: zaptest.NewLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(wrap(s))
	t.Cleanup(hs.Close)
	return hs.URL
}

// TestFenceRefusedBetweenRetries: the fence is asked before every
// PutRecords, retries included: a PutRecords DIS failed is not sent again
// once the fence refuses, and its batch fails with ErrNotLeader.
func TestFenceRefusedBetweenRetries(t *testing.T) {
	t.Parallel()
	f := &fakeFence{}
	var puts atomic.Int32
	url := startDISWrapped(t, func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method == http.MethodPost && strings.HasSuffix(strings.TrimSuffix(r.URL.Path, "/"), "/records") {
				if puts.Add(1) == 1 {
					// DIS fails the first PutRecords (not applied), and
					// meanwhile the partition moves away.
					f.set(func(f *fakeFence) { f.owned = map[string]bool{controllerKey: true} })
					w.Header().Set("Content-Type", "application/json")
					w.WriteHeader(http.StatusInternalServerError)
					_, _ = w.Write([]byte(`{"errorCode":"DIS.5000","message":"System error."}`))
					return
				}
			}
			h.ServeHTTP(w, r)
		})
	})
	s := newFencedStore(t, url, f, func(o *Options) { o.Linger = -1; o.idemSettle = -1 })
	stream := mkStream(t, s, "retried", 1)
	if _, err := s.Append(stream, 0, valuesBatch("a", "b")).Wait(ctxT(t)); !errors.Is(err, disbackend.ErrNotLeader) {
		t.Fatalf("append refused between two attempts: %v; want ErrNotLeader", err)
	}
	if n := puts.Load(); n != 1 {
		t.Fatalf("%d PutRecords sent; want 1 (none after the fence refused)", n)
	}
	if r, err := s.describeRange(ctxT(t), stream, 0); err != nil || r.Next != 0 {
		t.Fatalf("range %+v, %v; want nothing written", r, err)
	}
}

// TestFenceTakeoverPastDeadline: a batch whose producer would give up
// (its Deadline) before the takeover wait ends is refused at once with
// ErrNotLeader and not written, and neither are the batches queued with
// it; one that can wait, or has no deadline, waits and is written.
func TestFenceTakeoverPastDeadline(t *testing.T) {
	t.Parallel()
	_, url := startDIS(t, dislocal.Options{})
	f := &fakeFence{gen: 1, delay: 2 * time.Second}
	s := newFencedStore(t, url, f, func(o *Options) { o.Linger = -1; o.idemSettle = -1 })
	stream := mkStream(t, s, "deadline", 1)

	short := pidBatch(1, 0, 0, 2)
	short.Deadline = time.Now().Add(300 * time.Millisecond)
	start := time.Now()
	_, err := s.Append(stream, 0, short).Wait(ctxT(t))
	if !errors.Is(err, disbackend.ErrNotLeader) {
		t.Fatalf("a batch that cannot wait for the takeover: %v, want ErrNotLeader", err)
	}
	if d := time.Since(start); d >= f.delay {
		t.Errorf("refused after %v, want at once (the takeover waits %v)", d, f.delay)
	}
	if n := f.takeoverCount(); n != 0 {
		t.Errorf("takeovers after the refusal: %d, want none begun", n)
	}

	// Its retry with a deadline past the wait waits and is written first.
	retry := pidBatch(1, 0, 0, 2)
	retry.Deadline = time.Now().Add(30 * time.Second)
	start = time.Now()
	if res := appendOK(t, s, stream, 0, retry); res.BaseOffset != 0 || res.Duplicate {
		t.Fatalf("the retry: %+v, want written at 0", res)
	}
	if d := time.Since(start); d < f.delay {
		t.Errorf("the retry written after %v, want the takeover's %v first", d, f.delay)
	}
	// Taken over: a short deadline no longer matters in this generation.
	next := pidBatch(1, 0, 2, 1)
	next.Deadline = time.Now().Add(300 * time.Millisecond)
	if res := appendOK(t, s, stream, 0, next); res.BaseOffset != 2 {
		t.Fatalf("after the takeover: %+v, want 2", res)
	}
	// A new generation: a batch without a deadline (acks=0) waits.
	f.set(func(f *fakeFence) { f.gen, f.delay = 2, 300*time.Millisecond })
	if res := appendOK(t, s, stream, 0, pidBatch(2, 0, 0, 1)); res.BaseOffset != 3 {
		t.Fatalf("without a deadline: %+v, want 3", res)
	}
	if n := f.takeoverCount(); n != 2 {
		t.Errorf("takeovers: %d, want one a generation", n)
	}
}

// TestFenceTakeoverReplacesWindow: the first write of a partition in a new
// generation waits for fence.takeover, then resolves the previous leader's
// intent from DIS, replacing what the node held (a former owner's stale
// window does not survive); when the node led the partition all along
// (the end offset is the one it knew) its memory is kept.
func TestFenceTakeoverReplacesWindow(t *testing.T) {
	t.Parallel()
	_, url := startDIS(t, dislocal.Options{})
	fa, fb := &fakeFence{gen: 1, owned: map[string]bool{}}, &fakeFence{gen: 1}
	mod := func(o *Options) { o.Linger = -1; o.idemSettle = -1 }
	a := newFencedStore(t, url, fa, mod)
	b := newFencedStore(t, url, fb, mod)
	stream := mkStream(t, b, "moves", 1)
	k := partKey{stream, 0}
	key := disbackend.PartitionKey(stream, 0)
	if res := appendOK(t, b, stream, 0, pidBatch(1, 0, 0, 2)); res.BaseOffset != 0 {
		t.Fatalf("B's first: %+v", res)
	}
	// A batch B remembers that DIS's window does not hold (trimmed, or a
	// window a former owner lost).
	stale := pidBatch(77, 0, 0, 1)
	b.idem.remember(k, &stale, 100, 100, 0)

	// Generation 2: A leads; its takeover waits 200 ms.
	fb.set(func(f *fakeFence) { f.owned, f.gen = map[string]bool{}, 2 })
	fa.set(func(f *fakeFence) { f.owned, f.gen, f.delay = nil, 2, 200*time.Millisecond })
	if _, err := b.Append(stream, 0, pidBatch(1, 0, 2, 1)).Wait(ctxT(t)); !errors.Is(err, disbackend.ErrNotLeader) {
		t.Fatalf("B after the move: %v", err)
	}
	start := time.Now()
	if res := appendOK(t, a, stream, 0, pidBatch(1, 0, 0, 2)); !res.Duplicate || res.BaseOffset != 0 {
		t.Fatalf("A: the retry of B's batch: %+v; want the duplicate at 0 (B's intent resolved)", res)
	}
	if d := time.Since(start); d < 200*time.Millisecond {
		t.Fatalf("A's first write after %v; want the takeover's 200 ms first", d)
	}
	if res := appendOK(t, a, stream, 0, pidBatch(1, 0, 2, 2)); res.BaseOffset != 2 {
		t.Fatalf("A: %+v", res)
	}
	if res := appendOK(t, a, stream, 0, pidBatch(2, 0, 0, 1)); res.BaseOffset != 4 {
		t.Fatalf("A: %+v", res)
	}
	if fa.takeoverCount() != 1 {
		t.Fatalf("A's takeovers: %v", fa.takeovers)
	}

	// Generation 3: B again, without having been told of generation 2.
	fa.set(func(f *fakeFence) { f.owned, f.gen = map[string]bool{}, 3 })
	fb.set(func(f *fakeFence) { f.owned, f.gen = nil, 3 })
	if res := appendOK(t, b, stream, 0, pidBatch(1, 0, 4, 1)); res.BaseOffset != 5 {
		t.Fatalf("B: producer 1 after A's batches: %+v", res)
	}
	pids := func(s *Store) []int64 {
		ps, err := s.ActiveProducers(ctxT(t), stream, 0)
		if err != nil {
			t.Fatal(err)
		}
		var out []int64
		for _, p := range ps {
			out = append(out, p.ProducerID)
		}
		return out
	}
	if got := pids(b); !slices.Equal(got, []int64{1, 2}) {
		t.Fatalf("B's producers after taking the partition back: %v; want [1 2] (the stale 77 dropped)", got)
	}

	// Generation 4, B still the leader and nothing written meanwhile: its
	// memory is kept.
	stale2 := pidBatch(88, 0, 0, 1)
	b.idem.remember(k, &stale2, 200, 200, 0)
	fb.set(func(f *fakeFence) { f.gen = 4 })
	if res := appendOK(t, b, stream, 0, pidBatch(2, 0, 1, 1)); res.BaseOffset != 6 {
		t.Fatalf("B in generation 4: %+v", res)
	}
	if got := pids(b); !slices.Equal(got, []int64{1, 2, 88}) {
		t.Fatalf("B's producers, the partition led all along: %v; want [1 2 88]", got)
	}
	if n := fb.takeoverCount(); n != 3 {
		t.Fatalf("B's takeovers: %v; want one per generation it wrote in", fb.takeovers)
	}
	if got := b.fence.mayWrite(key); got != nil {
		t.Fatal(got)
	}
}

// TestFenceViewChanged: a partition given up (viewChanged) loses its
// writer (queued appends fail with ErrNotLeader), idempotence and
// compaction state; taken back, it is rebuilt from DIS.
func TestFenceViewChanged(t *testing.T) {
	t.Parallel()
	_, url := startDIS(t, dislocal.Options{})
	f := &fakeFence{gen: 1}
	s := newFencedStore(t, url, f, func(o *Options) { o.Linger = -1; o.idemSettle = -1 })
	stream := mkStream(t, s, "given", 1)
	k := partKey{stream, 0}
	key := disbackend.PartitionKey(stream, 0)
	appendOK(t, s, stream, 0, pidBatch(5, 0, 0, 2))
	paused, release := make(chan struct{}), make(chan struct{})
	var pause atomic.Bool
	s.beforePut = func(string, int32) bool {
		if pause.CompareAndSwap(true, false) {
			close(paused)
			<-release
			return true
		}
		return false
	}
	pause.Store(true)
	inFlight := s.Append(stream, 0, pidBatch(5, 0, 2, 1))
	<-paused
	queued := s.Append(stream, 0, pidBatch(5, 0, 3, 1))

	f.set(func(f *fakeFence) { f.owned = map[string]bool{}; f.gen = 2 })
	s.viewChanged([]string{key}, nil)
	if _, err := queued.Wait(ctxT(t)); !errors.Is(err, disbackend.ErrNotLeader) {
		t.Fatalf("an append queued when the partition moved: %v", err)
	}
	if ps, _ := s.ActiveProducers(ctxT(t), stream, 0); len(ps) != 0 {
		t.Fatalf("producers of a partition given up: %+v", ps)
	}
	s.closeMu.Lock()
	_, kept := s.writers[k]
	s.closeMu.Unlock()
	if kept {
		t.Fatal("the writer of a partition given up is kept")
	}
	close(release) // its fence check passed before the move: written, but answered after it
	if res, err := inFlight.Wait(ctxT(t)); !errors.Is(err, disbackend.ErrNotLeader) {
		t.Fatalf("the PutRecords in flight, answered after the move: %+v, %v; want ErrNotLeader", res, err)
	}
	if ps, _ := s.ActiveProducers(ctxT(t), stream, 0); len(ps) != 0 {
		t.Fatalf("producers of a partition given up, after its last answer: %+v", ps)
	}
	if _, err := s.Append(stream, 0, pidBatch(5, 0, 3, 1)).Wait(ctxT(t)); !errors.Is(err, disbackend.ErrNotLeader) {
		t.Fatalf("append after the move: %v", err)
	}

	// Back in generation 3: the window comes from DIS (the intent of the
	// batch in flight).
	f.set(func(f *fakeFence) { f.owned = nil; f.gen = 3 })
	if res := appendOK(t, s, stream, 0, pidBatch(5, 0, 2, 1)); !res.Duplicate || res.BaseOffset != 2 {
		t.Fatalf("the retry of the batch written in flight: %+v", res)
	}
	if res := appendOK(t, s, stream, 0, pidBatch(5, 0, 3, 1)); res.Duplicate || res.BaseOffset != 3 {
		t.Fatalf("the next batch: %+v", res)
	}
}

// TestFenceNonContiguous: a batch whose records DIS wrote with sequence
// numbers that are not contiguous (another writer between two PutRecords
// of it) is refused with ErrNotLeader, counted, never acknowledged with
// one base offset. On a single node too.
func TestFenceNonContiguous(t *testing.T) {
	t.Parallel()
	_, url := startDIS(t, dislocal.Options{})
	m := metrics.New(metrics.Options{})
	a := newStore(t, url, func(o *Options) { o.Linger = -1; o.BatchCount = 2; o.idemSettle = -1; o.Metrics = m })
	b := newStore(t, url, func(o *Options) { o.Linger = -1 })
	stream := mkStream(t, a, "split", 1)
	var puts atomic.Int32
	a.beforePut = func(string, int32) bool {
		if puts.Add(1) == 2 {
			appendOK(t, b, stream, 0, valuesBatch("x"))
		}
		return false
	}
	if _, err := a.Append(stream, 0, valuesBatch("1", "2", "3", "4")).Wait(ctxT(t)); !errors.Is(err, disbackend.ErrNotLeader) {
		t.Fatalf("a batch split by another writer: %v; want ErrNotLeader", err)
	}
	if got := values(t, a, stream, 0); !slices.Equal(got, []string{"1", "2", "x", "3", "4"}) {
		t.Fatalf("partition: %v", got)
	}
	if a.LateWrites() != 1 || a.OutOfOrder() != 1 || lateWritesMetric(t, m) != 1 {
		t.Fatalf("late writes %d, out of order %d, metric %v; want 1", a.LateWrites(), a.OutOfOrder(), lateWritesMetric(t, m))
	}
	// Its next batch is written as usual.
	if res := appendOK(t, a, stream, 0, valuesBatch("5")); res.BaseOffset != 5 {
		t.Fatalf("next: %+v", res)
	}
}

// TestFenceLateWrite is the failpoint of docs/cluster.md §4: node A is
// paused between its fence check and its PutRecords; the partition moves
// to B, which writes; A's PutRecords lands after B's records: DIS wrote
// it, A refuses it to its producer (ErrNotLeader) and counts it. B's next
// batch, after A's records, is acknowledged where DIS put it.
func TestFenceLateWrite(t *testing.T) {
	t.Parallel()
	_, url := startDIS(t, dislocal.Options{})
	m := metrics.New(metrics.Options{})
	fa, fb := &fakeFence{gen: 1}, &fakeFence{gen: 1, owned: map[string]bool{}}
	a := newFencedStore(t, url, fa, func(o *Options) { o.Linger = -1; o.idemSettle = -1; o.Metrics = m })
	b := newFencedStore(t, url, fb, func(o *Options) { o.Linger = -1; o.idemSettle = -1 })
	stream := mkStream(t, a, "late", 1)
	paused, release := make(chan struct{}), make(chan struct{})
	var pause atomic.Bool
	a.beforePut = func(string, int32) bool {
		if pause.CompareAndSwap(true, false) {
			close(paused)
			<-release
			return true
		}
		return false
	}
	if res := appendOK(t, a, stream, 0, valuesBatch("a1", "a2", "a3")); res.BaseOffset != 0 {
		t.Fatalf("A: %+v", res)
	}
	if _, err := b.Append(stream, 0, valuesBatch("b0")).Wait(ctxT(t)); !errors.Is(err, disbackend.ErrNotLeader) {
		t.Fatalf("B before the move: %v", err)
	}
	pause.Store(true)
	late := a.Append(stream, 0, valuesBatch("a4", "a5", "a6"))
	<-paused
	// A's lease lapses; B leads in generation 2.
	fa.set(func(f *fakeFence) { f.lapsed = true })
	fb.set(func(f *fakeFence) { f.owned, f.gen = nil, 2 })
	if res := appendOK(t, b, stream, 0, valuesBatch("b1", "b2")); res.BaseOffset != 3 {
		t.Fatalf("B: %+v", res)
	}
	close(release)
	if res, err := late.Wait(ctxT(t)); !errors.Is(err, disbackend.ErrNotLeader) {
		t.Fatalf("A's late write: %+v, %v; want ErrNotLeader", res, err)
	}
	if a.LateWrites() != 1 || a.OutOfOrder() != 1 || lateWritesMetric(t, m) != 1 {
		t.Fatalf("A: late writes %d, out of order %d, metric %v; want 1", a.LateWrites(), a.OutOfOrder(), lateWritesMetric(t, m))
	}
	if res := appendOK(t, b, stream, 0, valuesBatch("b3")); res.BaseOffset != 8 {
		t.Fatalf("B after A's late write: %+v; want 8", res)
	}
	if b.LateWrites() != 0 {
		t.Fatalf("B: %d late writes", b.LateWrites())
	}
	if got := values(t, b, stream, 0); !slices.Equal(got, []string{"a1", "a2", "a3", "b1", "b2", "a4", "a5", "a6", "b3"}) {
		t.Fatalf("partition: %v", got)
	}
}

// TestFenceAnswerAfterLapse: a PutRecords answered when the lease has
// lapsed is refused even where it landed where expected (a new leader may
// have resolved the intent before it landed); the idempotent batch is
// remembered, so that its retry, once the lease holds again, is answered
// as a duplicate.
func TestFenceAnswerAfterLapse(t *testing.T) {
	t.Parallel()
	_, url := startDIS(t, dislocal.Options{})
	f := &fakeFence{gen: 1}
	s := newFencedStore(t, url, f, func(o *Options) { o.Linger = -1; o.idemSettle = -1 })
	stream := mkStream(t, s, "lapse", 1)
	appendOK(t, s, stream, 0, pidBatch(3, 0, 0, 2))
	var pause atomic.Bool
	s.beforePut = func(string, int32) bool {
		if pause.CompareAndSwap(true, false) {
			f.set(func(f *fakeFence) { f.lapsed = true }) // the lease lapses while the request is on its way
		}
		return false
	}
	pause.Store(true)
	if _, err := s.Append(stream, 0, pidBatch(3, 0, 2, 2)).Wait(ctxT(t)); !errors.Is(err, disbackend.ErrNotLeader) {
		t.Fatalf("answered after the lease lapsed: %v; want ErrNotLeader", err)
	}
	if s.LateWrites() != 1 {
		t.Fatalf("late writes %d", s.LateWrites())
	}
	f.set(func(f *fakeFence) { f.lapsed = false })
	if res := appendOK(t, s, stream, 0, pidBatch(3, 0, 2, 2)); !res.Duplicate || res.BaseOffset != 2 {
		t.Fatalf("the retry: %+v; want the duplicate at 2", res)
	}
	if res := appendOK(t, s, stream, 0, pidBatch(3, 0, 4, 1)); res.Duplicate || res.BaseOffset != 4 {
		t.Fatalf("the next: %+v", res)
	}
}

// groupCall is a request of dislocal's consumer-group API (JoinGroup,
// SyncGroup), which the SDK has no model for.
type groupCall struct {
	AppName  string `json:"app_name"`
	ClientID string `json:"client_id"`
	Body     any    `json:"body,omitempty"`
}

type groupAnswer struct {
	State             string `json:"state"`
	SyncDelayedTimeMs *int64 `json:"syncDelayedTimeMs,omitempty"`
	Generation        *int64 `json:"generation,omitempty"`
	HttpStatusCode    int    `json:"-"`
}

func groupDef(path string) *def.HttpRequestDef {
	b := def.NewHttpRequestDefBuilder().WithMethod(http.MethodPost).WithPath(path).
		WithResponse(new(groupAnswer)).WithContentType("application/json").
		WithRequestField(def.NewFieldDef().WithName("AppName").WithJsonTag("app_name").WithLocationType(def.Path)).
		WithRequestField(def.NewFieldDef().WithName("Body").WithLocationType(def.Body))
	if strings.Contains(path, "{client_id}") {
		b = b.WithRequestField(def.NewFieldDef().WithName("ClientID").WithJsonTag("client_id").WithLocationType(def.Path))
	}
	return b.Build()
}

// joinNodes has ids join nodesApp's consumer group (subscribed to stream)
// and sync, and returns the generation they are in.
func joinNodes(t *testing.T, s *Store, stream string, ids ...string) int64 {
	t.Helper()
	for _, id := range ids {
		v, err := s.c.HcClient.Sync(&groupCall{AppName: nodesApp, Body: map[string]any{"clientId": id, "interestedStream": []string{stream}}},
			groupDef("/v2/{project_id}/apps/{app_name}/consumers"))
		if err != nil || v.(*groupAnswer).State != "OK" {
			t.Fatalf("join %s: %+v, %v", id, v, err)
		}
	}
	var gen int64 = -1
	for _, id := range ids {
		deadline := time.Now().Add(10 * time.Second)
		for {
			v, err := s.c.HcClient.Sync(&groupCall{AppName: nodesApp, ClientID: id, Body: map[string]any{}},
				groupDef("/v2/{project_id}/apps/{app_name}/consumers/{client_id}/partitions"))
			if err != nil {
				t.Fatalf("sync %s: %v", id, err)
			}
			a := v.(*groupAnswer)
			if a.State == "OK" && a.Generation != nil {
				if gen >= 0 && *a.Generation != gen {
					t.Fatalf("sync %s: generation %d, another's %d", id, *a.Generation, gen)
				}
				gen = *a.Generation
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("sync %s: %+v", id, a)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	return gen
}

// TestFenceIntentsFencedByDIS: with a membership, a partition's intents
// are checkpoints of nodesApp committed with the node's client_id and
// generation_id: DIS refuses the intent of a stale generation, and the
// write fails with ErrNotLeader, nothing written. The next leader resolves
// the intents from nodesApp, and from idemApp for one written before
// cluster mode.
func TestFenceIntentsFencedByDIS(t *testing.T) {
	t.Parallel()
	_, url := startDIS(t, dislocal.Options{GroupSyncDelay: 20 * time.Millisecond})
	mod := func(o *Options) { o.Linger = -1; o.idemSettle = -1 }
	solo := newStore(t, url, mod)
	stream := mkStream(t, solo, "fenced", 2)
	// A single node's intent, before cluster mode.
	if res := appendOK(t, solo, stream, 1, pidBatch(5, 0, 0, 2)); res.BaseOffset != 0 {
		t.Fatalf("single node: %+v", res)
	}
	_ = solo.Close()

	fa := &fakeFence{}
	ma := metrics.New(metrics.Options{})
	ma.ClusterMode()
	a := newFencedStore(t, url, fa, func(o *Options) { mod(o); o.Metrics = ma })
	if err := a.ensureApp(ctxT(t), nodesApp); err != nil {
		t.Fatal(err)
	}
	gen := joinNodes(t, a, stream, "node-a")
	fa.set(func(f *fakeFence) { f.clientID, f.gen, f.isMember = "node-a", gen, true })
	if res := appendOK(t, a, stream, 0, pidBatch(9, 0, 0, 3)); res.BaseOffset != 0 {
		t.Fatalf("A: %+v", res)
	}
	sn, meta, err := a.checkpointOf(ctxT(t), nodesApp, stream, 0)
	if err != nil {
		t.Fatal(err)
	}
	if cp, err := decodeIdem(meta); err != nil || sn != 0 || len(cp.intent) != 1 || cp.intent[0].pid != 9 {
		t.Fatalf("nodesApp's checkpoint: %d %q (%+v, %v); want A's intent", sn, meta, cp, err)
	}
	if res := appendOK(t, a, stream, 1, pidBatch(5, 0, 0, 2)); !res.Duplicate || res.BaseOffset != 0 {
		t.Fatalf("the retry of the single node's batch: %+v; want its duplicate (idemApp's intent read)", res)
	}

	// node-b joins: generation gen+1; A still commits with gen.
	gen2 := joinNodes(t, a, stream, "node-a", "node-b")
	if gen2 <= gen {
		t.Fatalf("generation %d after %d", gen2, gen)
	}
	if n := gathered(t, ma, "disgw_cluster_intents_refused_total"); n != 0 {
		t.Fatalf("disgw_cluster_intents_refused_total = %v before any refusal", n)
	}
	if _, err := a.Append(stream, 0, pidBatch(9, 0, 3, 1)).Wait(ctxT(t)); !errors.Is(err, disbackend.ErrNotLeader) {
		t.Fatalf("A's intent in a stale generation: %v; want ErrNotLeader", err)
	}
	if n := gathered(t, ma, "disgw_cluster_intents_refused_total"); n != 1 {
		t.Errorf("disgw_cluster_intents_refused_total = %v after one refused intent, want 1", n)
	}
	if r, err := a.describeRange(ctxT(t), stream, 0); err != nil || r.Next != 3 {
		t.Fatalf("range %+v, %v; want nothing written after the refused intent", r, err)
	}

	// B, the next leader, in the current generation.
	fb := &fakeFence{clientID: "node-b", gen: gen2, isMember: true}
	b := newFencedStore(t, url, fb, mod)
	if res := appendOK(t, b, stream, 0, pidBatch(9, 0, 0, 3)); !res.Duplicate || res.BaseOffset != 0 {
		t.Fatalf("B: the retry of A's batch: %+v; want its duplicate", res)
	}
	if res := appendOK(t, b, stream, 0, pidBatch(9, 0, 3, 1)); res.Duplicate || res.BaseOffset != 3 {
		t.Fatalf("B: the batch A could not write: %+v", res)
	}
}

// TestFenceProducerIDs: in cluster mode producer ids carry the node id in
// their high bits, each node reserving its blocks in a checkpoint of its
// own, starting past the single node's ids.
func TestFenceProducerIDs(t *testing.T) {
	t.Parallel()
	_, url := startDIS(t, dislocal.Options{})
	solo := newStore(t, url, nil)
	if id, _, err := solo.InitProducerID(ctxT(t)); err != nil || id != 0 {
		t.Fatalf("single node: %d, %v", id, err)
	}
	n3 := newFencedStore(t, url, &fakeFence{}, func(o *Options) { o.NodeID = 3 })
	n0 := newFencedStore(t, url, &fakeFence{}, func(o *Options) { o.NodeID = 0 })
	want := func(s *Store, node, n int64) {
		t.Helper()
		id, epoch, err := s.InitProducerID(ctxT(t))
		if err != nil || epoch != 0 || id != node<<40|n {
			t.Fatalf("node %d: %d (node %d, n %d), %v; want n %d", node, id, id>>40, id&(1<<40-1), err, n)
		}
	}
	want(n3, 3, pidBlock)
	want(n3, 3, pidBlock+1)
	want(n0, 0, pidBlock)
	// A restarted node goes on from its own reservation.
	n3b := newFencedStore(t, url, &fakeFence{}, func(o *Options) { o.NodeID = 3 })
	want(n3b, 3, 2*pidBlock)
	// The single node's own is untouched.
	if id, _, err := solo.InitProducerID(ctxT(t)); err != nil || id != 1 {
		t.Fatalf("single node: %d, %v", id, err)
	}
	bad := newFencedStore(t, url, &fakeFence{}, func(o *Options) { o.NodeID = 1024 })
	if _, _, err := bad.InitProducerID(ctxT(t)); !errors.Is(err, disbackend.ErrInvalidConfig) {
		t.Fatalf("node 1024: %v", err)
	}
	apps, err := solo.ListApps(ctxT(t))
	if err != nil || len(apps) != 0 {
		t.Fatalf("apps listed: %+v, %v; want none (the nodes' producer-id apps are the gateway's)", apps, err)
	}
}

// TestFenceCompactorSkipsOthers: the compactor sweeps, indexes and
// snapshots only the compacted partitions this node leads.
func TestFenceCompactorSkipsOthers(t *testing.T) {
	t.Parallel()
	_, url := startDIS(t, dislocal.Options{})
	f := &fakeFence{}
	s := newFencedStore(t, url, f, func(o *Options) { o.Linger = -1 })
	other := newStore(t, url, func(o *Options) { o.Linger = -1; o.NoCompactor = true })
	cfg := disbackend.StreamConfig{Retention: 24 * time.Hour, MaxMessageBytes: 1 << 20, CleanupPolicy: disbackend.CleanupCompact,
		DeleteRetention: time.Hour, MinCleanableDirtyRatio: 0.5}
	const stream = "kept"
	if _, err := s.CreateStream(ctxT(t), disbackend.StreamSpec{Name: stream, TopicName: stream, PartitionCount: 2, Config: cfg}); err != nil {
		t.Fatal(err)
	}
	f.set(func(f *fakeFence) { f.owned = map[string]bool{disbackend.PartitionKey(stream, 0): true} })
	val := func(k string) []byte { return []byte("v-" + k) }
	appendOK(t, s, stream, 0, keyedBatch([]string{"a", "b"}, val))
	appendOK(t, other, stream, 1, keyedBatch([]string{"c", "d", "e"}, val))
	part := func(p int32) (loaded bool, indexed int64, keys int) {
		s.compact.mu.Lock()
		cp := s.compact.parts[partKey{stream, p}]
		s.compact.mu.Unlock()
		if cp == nil {
			return false, 0, 0
		}
		cp.mu.Lock()
		defer cp.mu.Unlock()
		return cp.loaded, cp.indexed, len(cp.keys)
	}
	deadline := time.Now().Add(15 * time.Second)
	for {
		if loaded, indexed, _ := part(0); loaded && indexed == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("partition 0, led, not swept")
		}
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(time.Second) // sweeps of partition 1 would have run by now
	if loaded, indexed, keys := part(1); loaded || indexed != 0 || keys != 0 {
		t.Fatalf("partition 1, led elsewhere: loaded %v, indexed %d, %d keys; want untouched", loaded, indexed, keys)
	}
	// Copies of a partition led elsewhere are refused.
	if _, err := s.appendCopies(partKey{stream, 1}, keyedBatch([]string{"c"}, val).Records, []int64{0}).Wait(ctxT(t)); !errors.Is(err, disbackend.ErrNotLeader) {
		t.Fatalf("a copy to a partition led elsewhere: %v", err)
	}
}

// TestFenceOtherWrites: group commits and state, log start offsets and the
// controller's writes go through the fence.
func TestFenceOtherWrites(t *testing.T) {
	t.Parallel()
	_, url := startDIS(t, dislocal.Options{})
	f := &fakeFence{}
	s := newFencedStore(t, url, f, func(o *Options) { o.Linger = -1; o.NoCompactor = true })
	stream := mkStream(t, s, "others", 1)
	appendOK(t, s, stream, 0, valuesBatch("a", "b"))
	app, err := disbackend.AppNameForGroup("grp")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.CreateApp(ctxT(t), disbackend.App{Name: app, GroupID: "grp"}); err != nil {
		t.Fatal(err)
	}
	cp := []disbackend.Checkpoint{{Stream: stream, Partition: 0, SequenceNumber: 1, LeaderEpoch: -1}}
	if err := s.CommitCheckpoints(ctxT(t), app, cp); err != nil {
		t.Fatal(err)
	}
	f.set(func(f *fakeFence) { f.owned = map[string]bool{} })
	is := func(what string, err, want error) {
		t.Helper()
		if !errors.Is(err, want) {
			t.Errorf("%s: %v; want %v", what, err, want)
		}
	}
	is("commit", s.CommitCheckpoints(ctxT(t), app, cp), disbackend.ErrNotCoordinator)
	is("delete checkpoints", s.DeleteCheckpoints(ctxT(t), app, stream, []int32{0}), disbackend.ErrNotCoordinator)
	is("delete app", s.DeleteApp(ctxT(t), app), disbackend.ErrNotCoordinator)
	_, err = s.CreateApp(ctxT(t), disbackend.App{Name: "g2", GroupID: "g2"})
	is("create app", err, disbackend.ErrNotCoordinator)
	is("save group state", s.SaveGroupState(ctxT(t), "grp", []byte("state")), disbackend.ErrNotCoordinator)
	_, err = s.DeleteRecords(ctxT(t), stream, 0, 1)
	is("delete records", err, disbackend.ErrNotLeader)
	_, err = s.CreateStream(ctxT(t), disbackend.StreamSpec{Name: "new", TopicName: "new", PartitionCount: 1,
		Config: disbackend.StreamConfig{Retention: 24 * time.Hour, MaxMessageBytes: 1 << 20}})
	is("create stream", err, disbackend.ErrNotController)
	is("delete stream", s.DeleteStream(ctxT(t), stream), disbackend.ErrNotController)
	is("partitions", s.UpdatePartitionCount(ctxT(t), stream, 2), disbackend.ErrNotController)
	is("configs", s.UpdateStreamConfig(ctxT(t), stream, disbackend.StreamConfig{Retention: 48 * time.Hour, MaxMessageBytes: 1 << 20}), disbackend.ErrNotController)
	is("acls", s.UpdateACLs(ctxT(t), func(a []disbackend.ACL) ([]disbackend.ACL, error) { return a, nil }), disbackend.ErrNotController)
	is("scram", s.PutScramCredential(ctxT(t), "u", disbackend.ScramCredential{Mechanism: "SCRAM-SHA-256"}), disbackend.ErrNotController)
	is("scram delete", s.DeleteScramCredential(ctxT(t), "u", "SCRAM-SHA-256"), disbackend.ErrNotController)
	// Nothing changed in DIS.
	cps, err := s.Checkpoints(ctxT(t), app, stream)
	if err != nil || len(cps) != 1 || cps[0].SequenceNumber != 1 {
		t.Fatalf("checkpoints %+v, %v", cps, err)
	}
	if st, err := s.DescribeStream(ctxT(t), stream); err != nil || st.PartitionCount != 1 {
		t.Fatalf("stream %+v, %v", st, err)
	}
	// Owning them again, they go.
	f.set(func(f *fakeFence) { f.owned = nil })
	if err := s.SaveGroupState(ctxT(t), "grp", []byte("state")); err != nil {
		t.Fatal(err)
	}
	if first, err := s.DeleteRecords(ctxT(t), stream, 0, 1); err != nil || first != 1 {
		t.Fatalf("delete records: %d, %v", first, err)
	}
}

// TestFenceGroupWritesTakeOver: a group's writes (committed offsets, its
// state, and loading it) go through the fence's takeover, so the
// coordinator a group moved to writes nothing before its previous
// coordinator's writes can no longer land (docs/cluster.md §6): no commit
// of the old coordinator lands after the new one's.
func TestFenceGroupWritesTakeOver(t *testing.T) {
	t.Parallel()
	_, url := startDIS(t, dislocal.Options{})
	f := &fakeFence{}
	s := newFencedStore(t, url, f, func(o *Options) { o.Linger = -1; o.NoCompactor = true })
	stream := mkStream(t, s, "takeover-groups", 1)
	appendOK(t, s, stream, 0, valuesBatch("a", "b"))
	app, err := disbackend.AppNameForGroup("moved")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.CreateApp(ctxT(t), disbackend.App{Name: app, GroupID: "moved"}); err != nil {
		t.Fatal(err)
	}
	key := disbackend.GroupKey("moved")
	took := func() int {
		f.mu.Lock()
		defer f.mu.Unlock()
		n := 0
		for _, k := range f.takeovers {
			if k == key {
				n++
			}
		}
		return n
	}
	cp := []disbackend.Checkpoint{{Stream: stream, Partition: 0, SequenceNumber: 1, LeaderEpoch: -1}}
	steps := []struct {
		name string
		do   func() error
	}{
		{"commit", func() error { return s.CommitCheckpoints(ctxT(t), app, cp) }},
		{"save state", func() error { return s.SaveGroupState(ctxT(t), "moved", []byte("state")) }},
		{"load state", func() error { _, err := s.GroupState(ctxT(t), "moved"); return err }},
		{"delete checkpoints", func() error { return s.DeleteCheckpoints(ctxT(t), app, stream, []int32{0}) }},
	}
	for _, st := range steps {
		before := took()
		if err := st.do(); err != nil {
			t.Fatalf("%s: %v", st.name, err)
		}
		if took() == before {
			t.Errorf("%s did not go through the fence's takeover of %s", st.name, key)
		}
	}
	// A takeover that cannot end (ctx) stops the write.
	f.set(func(f *fakeFence) { f.delay = time.Hour })
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if err := s.CommitCheckpoints(ctx, app, cp); err == nil {
		t.Fatal("commit while the takeover waits: nil error, want ctx's")
	}
}

// TestFenceIntentFilledByLateWrite: a leader's intent whose PutRecords
// never went (the leader lost the partition before it sent), and whose
// expected offsets another node's late write then filled with as many
// records: the next leader must not take those records for the intent's
// batch, or it answers the producer's retry as a duplicate at offsets
// that hold other records (the retry lost, the producer told a wrong
// offset). The intent's checksums tell them apart: the retry is written
// after them. An intent whose records are where it expected them is still
// resolved as written, and its retry answered as a duplicate.
func TestFenceIntentFilledByLateWrite(t *testing.T) {
	t.Parallel()
	_, url := startDIS(t, dislocal.Options{})
	mod := func(o *Options) { o.Linger = -1; o.idemSettle = -1 }
	a := newFencedStore(t, url, &fakeFence{gen: 1}, mod)
	stream := mkStream(t, a, "filled", 2)
	si, err := a.streamInfo(ctxT(t), stream, true)
	if err != nil {
		t.Fatal(err)
	}
	intent := func(k partKey, b disbackend.Batch, send bool) {
		t.Helper()
		recs, err := a.toDISRecords(&b, nil, false, FormatEnvelope)
		if err != nil {
			t.Fatal(err)
		}
		ps := &putState{}
		a.learn(ctxT(t), k, ps)
		e := idemEntry{pid: b.ProducerID, epoch: b.ProducerEpoch, seq: b.BaseSequence, n: b.NumRecords, maxTS: b.MaxTimestamp, sum: recordsSum(recs)}
		if err := a.commitIntent(ctxT(t), k, si.id, ps, []idemEntry{e}); err != nil {
			t.Fatal(err)
		}
		if send {
			if _, _, err := a.putRecords(ctxT(t), k, recs, ps, si.advanced, nil); err != nil {
				t.Fatal(err)
			}
		}
	}
	// Partition 0: the intent not sent, its offsets filled by the late
	// write of as many other records.
	b0 := pidBatch(9, 0, 0, 3)
	intent(partKey{stream, 0}, b0, false)
	late := valuesBatch("late1", "late2", "late3")
	lrecs, err := a.toDISRecords(&late, nil, false, FormatEnvelope)
	if err != nil {
		t.Fatal(err)
	}
	// The late PutRecords, sent by the node that checked its fence before
	// it lost the partition.
	if sns, _, err := a.putRecords(ctxT(t), partKey{stream, 0}, lrecs, &putState{}, si.advanced, nil); err != nil || sns[0] != 0 {
		t.Fatalf("late write: %v, %v", sns, err)
	}
	// Partition 1: the intent sent, its answer lost.
	b1 := pidBatch(9, 0, 0, 3)
	intent(partKey{stream, 1}, b1, true)
	_ = a.Close()

	b := newFencedStore(t, url, &fakeFence{gen: 2}, mod)
	if res := appendOK(t, b, stream, 0, b0); res.Duplicate || res.BaseOffset != 3 {
		t.Fatalf("the retry of a batch whose intent a late write filled: %+v; want written at 3", res)
	}
	if got := values(t, b, stream, 0); len(got) != 6 || got[0] != "late1" || got[3] == "late1" {
		t.Fatalf("partition 0: %q", got)
	}
	if res := appendOK(t, b, stream, 1, b1); !res.Duplicate || res.BaseOffset != 0 {
		t.Fatalf("the retry of a batch written: %+v; want the duplicate at 0", res)
	}
}
