package localstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/disgw/disgw/disbackend"
	"github.com/disgw/disgw/disbackend/backendtest"
	"github.com/disgw/disgw/internal/metrics"
	"github.com/disgw/disgw/kafkawire/batch"
)

// quotaFS is an in-memory filesystem of a given free space: a write that
// does not fit fails whole with ENOSPC (as a full tmpfs), a file removed
// gives its bytes back, and GetDiskUsage reports what is left (the
// store's statfs). A test fills the disk by setting avail, as another
// process would.
type quotaFS struct {
	vfs.FS
	avail  atomic.Int64
	denied atomic.Int64 // writes refused
	// failing, when set, refuses with ENOSPC every write to a file whose
	// name contains it, whatever the free space.
	failing atomic.Pointer[string]
}

func newQuotaFS(avail int64) *quotaFS {
	return newQuotaFSOn(vfs.NewMem(), avail)
}

func newQuotaFSOn(inner vfs.FS, avail int64) *quotaFS {
	q := &quotaFS{FS: inner}
	q.avail.Store(avail)
	return q
}

func (q *quotaFS) take(n int) bool {
	for {
		a := q.avail.Load()
		if a < int64(n) {
			q.denied.Add(1)
			return false
		}
		if q.avail.CompareAndSwap(a, a-int64(n)) {
			return true
		}
	}
}

func (q *quotaFS) wrap(name string, f vfs.File, err error) (vfs.File, error) {
	if err != nil {
		return nil, err
	}
	return &quotaFile{File: f, q: q, name: name}, nil
}

func (q *quotaFS) Create(name string, c vfs.DiskWriteCategory) (vfs.File, error) {
	if st, err := q.FS.Stat(name); err == nil {
		q.avail.Add(st.Size())
	}
	f, err := q.FS.Create(name, c)
	return q.wrap(name, f, err)
}

func (q *quotaFS) OpenReadWrite(name string, c vfs.DiskWriteCategory, opts ...vfs.OpenOption) (vfs.File, error) {
	f, err := q.FS.OpenReadWrite(name, c, opts...)
	return q.wrap(name, f, err)
}

func (q *quotaFS) ReuseForWrite(oldname, newname string, c vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := q.FS.ReuseForWrite(oldname, newname, c)
	return q.wrap(newname, f, err)
}

func (q *quotaFS) Remove(name string) error {
	st, serr := q.FS.Stat(name)
	err := q.FS.Remove(name)
	if err == nil && serr == nil {
		q.avail.Add(st.Size())
	}
	return err
}

func (q *quotaFS) Rename(oldname, newname string) error {
	st, serr := q.FS.Stat(newname)
	err := q.FS.Rename(oldname, newname)
	if err == nil && serr == nil {
		q.avail.Add(st.Size())
	}
	return err
}

func (q *quotaFS) GetDiskUsage(string) (vfs.DiskUsage, error) {
	a := uint64(max(q.avail.Load(), 0))
	return vfs.DiskUsage{AvailBytes: a, TotalBytes: a + 1<<30, UsedBytes: 1 << 30}, nil
}

type quotaFile struct {
	vfs.File
	q    *quotaFS
	name string
}

func (f *quotaFile) take(n int) bool {
	if p := f.q.failing.Load(); p != nil && strings.Contains(f.name, *p) {
		f.q.denied.Add(1)
		return false
	}
	return f.q.take(n)
}

func enospc(op string) error { return &os.PathError{Op: op, Path: "quota", Err: syscall.ENOSPC} }

func (f *quotaFile) Write(p []byte) (int, error) {
	if !f.take(len(p)) {
		return 0, enospc("write")
	}
	return f.File.Write(p)
}

func (f *quotaFile) WriteAt(p []byte, off int64) (int, error) {
	if !f.take(len(p)) {
		return 0, enospc("writeat")
	}
	return f.File.WriteAt(p, off)
}

// diskFullStore opens a store on q with a mark of minFree and a ballast
// of ballast bytes, the free space read every 5 ms, and one stream "t" of
// two partitions.
func diskFullStore(t *testing.T, q *quotaFS, minFree, ballast int64, log *zap.Logger) (*Store, Options) {
	t.Helper()
	opts := Options{FS: q, MinFreeBytes: minFree, BallastBytes: ballast, spaceCheck: 5 * time.Millisecond,
		CacheBytesPerPartition: -1, Logger: log, Metrics: metrics.New(metrics.Options{})}
	s := openT(t, "db", opts)
	if _, err := s.CreateStream(context.Background(), disbackend.StreamSpec{Name: "t", TopicName: "t", PartitionCount: 2, Config: disbackend.StreamConfig{Retention: time.Hour}}); err != nil {
		t.Fatal(err)
	}
	return s, opts
}

// idem is batch seq of idempotent producer 7 (one record each).
func idem(seq int32) disbackend.Batch {
	return backendtest.MakeBatch(backendtest.BatchOptions{NumRecords: 1, RecordBytes: 100, Idempotent: true,
		ProducerID: 7, BaseSequence: seq, Seed: uint64(seq)})
}

// waitState waits until the store is full (or not), at most 2 s.
func waitState(t *testing.T, s *Store, full bool) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Second)
	for (s.StorageNotReady() != "") != full {
		if time.Now().After(deadline) {
			t.Fatalf("store not %s after 2 s (StorageNotReady %q)", map[bool]string{true: "full", false: "writable"}[full], s.StorageNotReady())
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// readAll reads partition part of "t" from 0 and returns each batch's
// base offset and producer sequence.
func readAll(t *testing.T, s *Store, part int32) (bases []int64, seqs []int32) {
	t.Helper()
	r, err := s.Range("t", part)
	if err != nil {
		t.Fatal(err)
	}
	for off := r.First; off < r.Next; {
		res, err := s.Read(context.Background(), "t", part, off, 1<<20)
		if err != nil || len(res.Batches) == 0 {
			t.Fatalf("read at %d of [%d : %d]: %d batches, %v", off, r.First, r.Next, len(res.Batches), err)
		}
		for _, b := range res.Batches {
			h, err := batch.Parse(b)
			if err != nil {
				t.Fatalf("stored batch at %d: %v", off, err)
			}
			bases = append(bases, h.BaseOffset)
			seqs = append(seqs, h.BaseSequence)
			off = h.BaseOffset + int64(h.LastOffsetDelta) + 1
		}
	}
	return bases, seqs
}

// checkIdemAcked fails unless partition 0 of "t" holds exactly the sequences
// 0..n-1 of producer 7 at offsets 0..n-1: every acknowledged batch once,
// in order, nothing taken back left behind.
func checkIdemAcked(t *testing.T, s *Store, n int) {
	t.Helper()
	bases, seqs := readAll(t, s, 0)
	if len(bases) != n {
		t.Fatalf("partition 0 holds %d batches (sequences %v), want %d", len(bases), seqs, n)
	}
	for i := range bases {
		if bases[i] != int64(i) || seqs[i] != int32(i) {
			t.Fatalf("batch %d: offset %d sequence %d, want %d and %d (sequences %v)", i, bases[i], seqs[i], i, i, seqs)
		}
	}
}

// gauge returns the value of the gauge name in m, -1 when it is not there.
func gauge(t *testing.T, m *metrics.Metrics, name string) float64 {
	t.Helper()
	mfs, err := m.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name && len(mf.GetMetric()) == 1 {
			return mf.GetMetric()[0].GetGauge().GetValue()
		}
	}
	return -1
}

// TestDiskFullMark: below storage_min_free_bytes produces are refused at
// once with ErrStorageFull (KAFKA_STORAGE_ERROR), reads go on, /readyz
// says why; with the space back produces resume by themselves; every
// acknowledged record is readable; the warn line is written once.
func TestDiskFullMark(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	core, logs := observer.New(zapcore.InfoLevel)
	q := newQuotaFS(1 << 30)
	s, opts := diskFullStore(t, q, 8<<20, 1<<20, zap.New(core))
	defer func() { _ = s.Close() }()
	if _, err := q.FS.Stat("db/" + ballastName); err != nil {
		t.Fatalf("no ballast after the first start: %v", err)
	}
	waitGauge := func(name string, want float64) {
		t.Helper()
		deadline := time.Now().Add(2 * time.Second)
		for gauge(t, opts.Metrics, name) != want {
			if time.Now().After(deadline) {
				t.Fatalf("%s = %v, want %v", name, gauge(t, opts.Metrics, name), want)
			}
			time.Sleep(2 * time.Millisecond)
		}
	}
	waitGauge("disgw_storage_full", 0)
	seq := int32(0)
	for ; seq < 10; seq++ {
		if _, err := s.Append("t", 0, idem(seq)).Wait(ctx); err != nil {
			t.Fatal(err)
		}
	}

	q.avail.Store(4 << 20) // another process took the space: below the mark
	waitState(t, s, true)
	for range 3 {
		start := time.Now()
		_, err := s.Append("t", 0, idem(seq)).Wait(ctx)
		if !errors.Is(err, disbackend.ErrStorageFull) {
			t.Fatalf("append below the mark: %v, want ErrStorageFull", err)
		}
		if d := time.Since(start); d > time.Second {
			t.Fatalf("refused after %v, want at once", d)
		}
	}
	if why := s.StorageNotReady(); !strings.Contains(why, "disk full") || !strings.Contains(why, "storage_min_free_bytes") {
		t.Fatalf("StorageNotReady %q", why)
	}
	waitGauge("disgw_storage_full", 1)
	waitGauge("disgw_storage_free_bytes", 4<<20)
	checkIdemAcked(t, s, 10)
	if _, err := q.FS.Stat("db/" + ballastName); err != nil {
		t.Fatalf("the mark alone deleted the ballast: %v", err)
	}

	q.avail.Store(1 << 30)
	waitState(t, s, false)
	waitGauge("disgw_storage_full", 0)
	if _, err := s.Append("t", 0, idem(seq)).Wait(ctx); err != nil {
		t.Fatalf("append once the space is back: %v", err)
	}
	seq++
	checkIdemAcked(t, s, int(seq))
	if n := logs.FilterMessage("disk full: refusing produces").Len(); n != 1 {
		t.Fatalf("%d disk-full lines, want 1", n)
	}
	if n := logs.FilterMessage("disk space available again: accepting produces").Len(); n != 1 {
		t.Fatalf("%d lines for the end of the state, want 1", n)
	}
}

// TestDiskFullMarkCountsWrites: between two reads of the free space the
// writer counts down what it writes, so a burst stops at the mark, not a
// check interval later.
func TestDiskFullMarkCountsWrites(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	q := newQuotaFS(1 << 30)
	opts := Options{FS: q, MinFreeBytes: 1 << 20, BallastBytes: -1, spaceCheck: time.Hour, CacheBytesPerPartition: -1}
	s := openT(t, "db", opts)
	defer func() { _ = s.Close() }()
	if _, err := s.CreateStream(ctx, disbackend.StreamSpec{Name: "t", TopicName: "t", PartitionCount: 1, Config: disbackend.StreamConfig{Retention: time.Hour}}); err != nil {
		t.Fatal(err)
	}
	q.avail.Store(1<<20 + 64<<10) // 64 KiB above the mark
	s.space.read()                // as the check would, once
	refused := 0
	for seq := int32(0); seq < 200; seq++ { // 200 batches of ~1 KiB
		b := backendtest.MakeBatch(backendtest.BatchOptions{NumRecords: 1, RecordBytes: 1000, Seed: uint64(seq)})
		_, err := s.Append("t", 0, b).Wait(ctx)
		switch {
		case errors.Is(err, disbackend.ErrStorageFull):
			refused++
		case err != nil:
			t.Fatal(err)
		}
	}
	if refused < 100 {
		t.Fatalf("%d of 200 1-KiB appends refused with 64 KiB above the mark, want most", refused)
	}
	if a := q.avail.Load(); a < 1<<20-64<<10 {
		t.Fatalf("%d bytes left, the writer went far below the 1 MiB mark", a)
	}
}

// TestDiskFullENOSPC: with no mark, a segment write that finds the disk
// full is taken back whole: its appends are refused with ErrStorageFull,
// the ballast is deleted, the offsets and the producer's state are as
// before it, so its retry once space is back is written at the next
// offset (not a duplicate, not out of order), and after a restart every
// acknowledged batch is there once.
func TestDiskFullENOSPC(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	core, logs := observer.New(zapcore.InfoLevel)
	q := newQuotaFS(1 << 30)
	s, opts := diskFullStore(t, q, -1, 1<<20, zap.New(core))
	seq := int32(0)
	for ; seq < 10; seq++ {
		if _, err := s.Append("t", 0, idem(seq)).Wait(ctx); err != nil {
			t.Fatal(err)
		}
	}
	q.avail.Store(0)
	// Several appends in flight: whatever groups they form, none is
	// acknowledged, and a retry of each goes in order afterwards.
	var pends []*disbackend.Pending
	for i := range int32(5) {
		pends = append(pends, s.Append("t", 0, idem(seq+i)))
	}
	for i, p := range pends {
		if _, err := p.Wait(ctx); !errors.Is(err, disbackend.ErrStorageFull) {
			t.Fatalf("append %d on a full disk: %v, want ErrStorageFull", i, err)
		}
	}
	if q.denied.Load() == 0 {
		t.Fatal("no write was refused: the test did not fill the disk")
	}
	if _, err := q.FS.Stat("db/" + ballastName); err == nil {
		t.Fatal("the ballast is still there after ENOSPC")
	}
	// The ballast's room is not for produces: the state refuses them.
	if _, err := s.Append("t", 0, idem(seq)).Wait(ctx); !errors.Is(err, disbackend.ErrStorageFull) {
		t.Fatalf("append with the ballast's room free: %v, want ErrStorageFull", err)
	}
	if r, _ := s.Range("t", 0); r.Next != 10 {
		t.Fatalf("range %+v after the refused appends, want next 10", r)
	}
	checkIdemAcked(t, s, 10)
	// The ballast's room is for the metadata: a commit goes through.
	if _, err := s.CreateApp(ctx, disbackend.App{Name: "g", GroupID: "g"}); err != nil {
		t.Fatalf("create app on a full disk: %v", err)
	}
	if err := s.CommitCheckpoints(ctx, "g", []disbackend.Checkpoint{{Stream: "t", Partition: 0, SequenceNumber: 5}}); err != nil {
		t.Fatalf("commit on a full disk: %v", err)
	}

	q.avail.Store(1 << 30)
	waitState(t, s, false)
	if _, err := q.FS.Stat("db/" + ballastName); err != nil {
		t.Fatalf("the ballast was not reserved again: %v", err)
	}
	for i := range int32(5) {
		res, err := s.Append("t", 0, idem(seq+i)).Wait(ctx)
		if err != nil || res.Duplicate || res.BaseOffset != int64(seq+i) {
			t.Fatalf("retry of sequence %d: %+v, %v; want a new batch at %d", seq+i, res, err, seq+i)
		}
	}
	seq += 5
	checkIdemAcked(t, s, int(seq))
	s = reopen(t, s, opts)
	defer func() { _ = s.Close() }()
	checkIdemAcked(t, s, int(seq))
	if n := logs.FilterMessage("disk full: refusing produces").Len(); n != 1 {
		t.Fatalf("%d disk-full lines, want 1", n)
	}
}

// TestDiskFullStopAndStart: a Close with the disk full (the ballast gone,
// a commit in Pebble's memtable) returns at once, and a start with the
// disk still full comes up in the state, serving reads (its metadata
// read-only: a commit is refused with ErrStorageFull); once space is back
// the metadata takes writes again and produces resume, without a restart.
func TestDiskFullStopAndStart(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	core, logs := observer.New(zapcore.DebugLevel)
	q := newQuotaFS(1 << 30)
	s, opts := diskFullStore(t, q, 8<<20, 1<<20, zap.New(core))
	for seq := int32(0); seq < 10; seq++ {
		if _, err := s.Append("t", 0, idem(seq)).Wait(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.CreateApp(ctx, disbackend.App{Name: "g", GroupID: "g"}); err != nil {
		t.Fatal(err)
	}
	if err := s.CommitCheckpoints(ctx, "g", []disbackend.Checkpoint{{Stream: "t", Partition: 0, SequenceNumber: 7}}); err != nil {
		t.Fatal(err)
	}
	q.avail.Store(0)
	waitState(t, s, true)
	start := time.Now()
	_ = s.Close() // its index files may not fit: the next start scans
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("Close on a full disk took %v", d)
	}

	q.avail.Store(0)
	s = openT(t, "db", opts)
	defer func() { _ = s.Close() }()
	if s.StorageNotReady() == "" {
		t.Fatal("a start on a full disk is not in the disk-full state")
	}
	checkIdemAcked(t, s, 10)
	if cps, err := s.Checkpoints(ctx, "g", "t"); err != nil || len(cps) != 1 || cps[0].SequenceNumber != 7 {
		t.Fatalf("checkpoints after a start on a full disk: %+v, %v", cps, err)
	}
	if _, err := s.Append("t", 0, idem(10)).Wait(ctx); !errors.Is(err, disbackend.ErrStorageFull) {
		t.Fatalf("append after a start on a full disk: %v, want ErrStorageFull", err)
	}
	if err := s.CommitCheckpoints(ctx, "g", []disbackend.Checkpoint{{Stream: "t", Partition: 0, SequenceNumber: 8}}); !errors.Is(err, disbackend.ErrStorageFull) {
		t.Fatalf("commit with the metadata read-only: %v, want ErrStorageFull", err)
	}

	// Space back: the metadata is opened for writing again, without a
	// restart, and everything takes writes.
	q.avail.Store(1 << 30)
	waitState(t, s, false)
	if err := s.CommitCheckpoints(ctx, "g", []disbackend.Checkpoint{{Stream: "t", Partition: 0, SequenceNumber: 9}}); err != nil {
		t.Fatalf("commit once space is back: %v", err)
	}
	if res, err := s.Append("t", 0, idem(10)).Wait(ctx); err != nil || res.BaseOffset != 10 {
		t.Fatalf("append once space is back: %+v, %v", res, err)
	}
	checkIdemAcked(t, s, 11)
	if cps, err := s.Checkpoints(ctx, "g", "t"); err != nil || len(cps) != 1 || cps[0].SequenceNumber != 9 {
		t.Fatalf("checkpoints once space is back: %+v, %v", cps, err)
	}
	var buf bytes.Buffer
	for _, e := range logs.All() {
		buf.WriteString(e.Message + "\n")
	}
	if n := logs.Len(); n > 200 {
		t.Fatalf("%d log lines, want a bounded number:\n%s", n, buf.String())
	}
}

// TestDiskFullTakeBackAcrossStreams: a group that wrote one stream's
// segment and found no room for the next stream's is taken back on both:
// after a crash (only what was synced survives) each partition holds
// exactly its acknowledged batches, the first stream's next batch where
// the taken-back one was, nothing of it left between.
func TestDiskFullTakeBackAcrossStreams(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	mem := vfs.NewCrashableMem()
	q := newQuotaFSOn(mem, 1<<30)
	opts := Options{FS: q, MinFreeBytes: -1, BallastBytes: -1, spaceCheck: 5 * time.Millisecond, CacheBytesPerPartition: -1}
	s := openT(t, "db", opts)
	for _, name := range []string{"a", "b"} {
		if _, err := s.CreateStream(ctx, disbackend.StreamSpec{Name: name, TopicName: name, PartitionCount: 1,
			Config: disbackend.StreamConfig{Retention: time.Hour}}); err != nil {
			t.Fatal(err)
		}
	}
	mk := func(seed uint64) disbackend.Batch {
		return backendtest.MakeBatch(backendtest.BatchOptions{NumRecords: 1, RecordBytes: 200, Seed: seed})
	}
	if _, err := s.Append("a", 0, mk(1)).Wait(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Append("b", 0, mk(2)).Wait(ctx); err != nil {
		t.Fatal(err)
	}
	s.mu.RLock()
	sidB := s.streams["b"].sid
	s.mu.RUnlock()
	failB := fmt.Sprintf("%016x-", sidB)
	q.failing.Store(&failB)
	// One group for both: the writer is held after taking the first
	// until both are queued (Store.groupHook).
	release := make(chan struct{})
	hold := func() { <-release }
	s.groupHook.Store(&hold)
	pa := s.Append("a", 0, mk(3))
	pb := s.Append("b", 0, mk(4))
	s.groupHook.Store(nil)
	close(release)
	for name, p := range map[string]*disbackend.Pending{"a": pa, "b": pb} {
		if _, err := p.Wait(ctx); !errors.Is(err, disbackend.ErrStorageFull) {
			t.Fatalf("append to %s in the group that found no room: %v, want ErrStorageFull", name, err)
		}
	}
	q.failing.Store(nil)
	waitState(t, s, false)
	if res, err := s.Append("a", 0, mk(5)).Wait(ctx); err != nil || res.BaseOffset != 1 {
		t.Fatalf("append to a once space is back: %+v, %v; want offset 1", res, err)
	}
	crashed := newQuotaFSOn(mem.CrashClone(vfs.CrashCloneCfg{}), 1<<30)
	_ = s.Close()
	opts.FS = crashed
	s = openT(t, "db", opts)
	defer func() { _ = s.Close() }()
	for name, want := range map[string][]uint64{"a": {1, 5}, "b": {2}} {
		res, err := s.Read(ctx, name, 0, 0, 1<<20)
		if err != nil {
			t.Fatalf("read %s after the crash: %v", name, err)
		}
		if len(res.Batches) != len(want) {
			t.Fatalf("%s holds %d batches after the crash, want %d", name, len(res.Batches), len(want))
		}
		for i, b := range res.Batches {
			w := mk(want[i])
			batch.SetBaseOffset(w.Raw, int64(i))
			if !bytes.Equal(b, w.Raw) {
				t.Fatalf("%s batch %d after the crash is not the acknowledged one (seed %d)", name, i, want[i])
			}
		}
	}
}

// TestDiskFullPebbleFlush: a metadata flush that finds the disk full
// (no ballast left to delete) enters the state; Pebble retries it without
// end, but slowly and with its error line limited; Close returns at once
// (no flush: the log is synced), and a start with space replays the
// commits from the log.
func TestDiskFullPebbleFlush(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	core, logs := observer.New(zapcore.InfoLevel)
	q := newQuotaFS(1 << 30)
	s, opts := diskFullStore(t, q, -1, -1, zap.New(core))
	if _, err := s.CreateApp(ctx, disbackend.App{Name: "g", GroupID: "g"}); err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		if err := s.CommitCheckpoints(ctx, "g", []disbackend.Checkpoint{{Stream: "t", Partition: 0, SequenceNumber: int64(i)}}); err != nil {
			t.Fatal(err)
		}
	}
	// The memtable's sstable finds no room; the log's small writes fit
	// (a log write that does not is fatal to Pebble: the ballast is
	// there for it).
	sst := ".sst"
	q.failing.Store(&sst)
	q.avail.Store(1 << 20)
	if _, err := s.db.AsyncFlush(); err != nil {
		t.Fatal(err)
	}
	waitState(t, s, true)
	time.Sleep(time.Second) // Pebble retries meanwhile
	if n := logs.FilterMessage("background error").Len(); n < 1 || n > 2 {
		t.Fatalf("%d lines of Pebble's failed flush in a second, want 1 (its retries limited to ten a second, its lines to one in 10 s)", n)
	}
	if n := q.denied.Load(); n > 40 {
		t.Fatalf("%d writes refused in a second: Pebble's retries are not slowed", n)
	}
	closed := make(chan error, 1)
	start := time.Now()
	go func() { closed <- s.Close() }()
	select {
	case <-closed:
	case <-time.After(5 * time.Second):
		t.Fatal("Close with a failing flush has not returned after 5 s")
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("Close with a failing flush took %v", d)
	}
	q.failing.Store(nil)
	q.avail.Store(1 << 30)
	s = openT(t, "db", opts)
	defer func() { _ = s.Close() }()
	if cps, err := s.Checkpoints(ctx, "g", "t"); err != nil || len(cps) != 1 || cps[0].SequenceNumber != 9 {
		t.Fatalf("checkpoints after the restart: %+v, %v", cps, err)
	}
}

// TestCutBack: on a file with a descriptor (a segment on the OS
// filesystem, written with writev) cutBack truncates it and moves its
// write offset back, so the next writev goes where the taken-back one
// began and nothing of it is left.
func TestCutBack(t *testing.T) {
	if !canWritev {
		t.Skip("no writev here")
	}
	path := t.TempDir() + "/seg.log"
	f, err := vfs.Default.Create(path, vfs.WriteCategoryUnspecified)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := writevAll(int(f.Fd()), [][]byte{[]byte("kept"), []byte("taken-back")}); err != nil {
		t.Fatal(err)
	}
	ok, err := cutBack(f, 4)
	if !ok || err != nil {
		t.Fatalf("cutBack: %v %v", ok, err)
	}
	if _, err := writevAll(int(f.Fd()), [][]byte{[]byte("+next")}); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != "kept+next" {
		t.Fatalf("file %q after cutBack and a write, want %q", got, "kept+next")
	}
	if ok, _ := cutBack(vfsNoFd{f}, 0); ok {
		t.Fatal("cutBack of a file without a descriptor reported it cut")
	}
}

type vfsNoFd struct{ vfs.File }

func (vfsNoFd) Fd() uintptr { return vfs.InvalidFd }
