package localstore

import (
	"context"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"go.uber.org/goleak"
	"go.uber.org/zap/zaptest"

	"github.com/disgw/disgw/disbackend"
	"github.com/disgw/disgw/disbackend/backendtest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func openT(t *testing.T, dir string, opts Options) *Store {
	t.Helper()
	if opts.Logger == nil {
		opts.Logger = zaptest.NewLogger(t)
	}
	opts.RetentionCheckInterval = -1
	s, err := Open(dir, opts)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return s
}

func TestBackendOnDisk(t *testing.T) {
	t.Parallel()
	backendtest.Run(t, func(t *testing.T) disbackend.Backend {
		return openT(t, t.TempDir(), Options{})
	})
}

func TestBackendInMemory(t *testing.T) {
	t.Parallel()
	backendtest.Run(t, func(t *testing.T) disbackend.Backend {
		return openT(t, "db", Options{FS: vfs.NewCrashableMem()})
	})
}

// TestBackendNoCache runs the suite with the tail cache off, so every read
// goes through Pebble.
func TestBackendNoCache(t *testing.T) {
	t.Parallel()
	backendtest.Run(t, func(t *testing.T) disbackend.Backend {
		return openT(t, "db", Options{FS: vfs.NewMem(), CacheBytesPerPartition: -1})
	})
}

// TestBackendTinyCache keeps a cache of a few KiB so reads cross from Pebble
// into the cache.
func TestBackendTinyCache(t *testing.T) {
	t.Parallel()
	backendtest.Run(t, func(t *testing.T) disbackend.Backend {
		return openT(t, "db", Options{FS: vfs.NewMem(), CacheBytesPerPartition: 3000, CacheBytes: 5000})
	})
}

// TestBackendSmallSegments rolls segments every few KiB, so reads, recovery
// and retention cross segment boundaries.
func TestBackendSmallSegments(t *testing.T) {
	t.Parallel()
	backendtest.Run(t, func(t *testing.T) disbackend.Backend {
		return openT(t, "db", Options{FS: vfs.NewCrashableMem(), SegmentBytes: 4096, CacheBytesPerPartition: -1})
	})
}

// harness opens stores on Pebble's crashable in-memory filesystem (or a
// temp dir) and remembers each store's filesystem, directory and clock.
type harness struct {
	mu     sync.Mutex
	stores map[*Store]harnessEntry
	disk   bool
	opts   Options // SegmentBytes and cache sizes for every store
}

type harnessEntry struct {
	fs  vfs.FS
	dir string
	now func() time.Time
}

func (h *harness) open(t *testing.T, e harnessEntry) *Store {
	opts := h.opts
	opts.FS, opts.Now = e.fs, e.now
	s := openT(t, e.dir, opts)
	h.mu.Lock()
	h.stores[s] = e
	h.mu.Unlock()
	return s
}

func (h *harness) entry(b disbackend.Backend) harnessEntry {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.stores[b.(*Store)]
}

func (h *harness) backendtest() backendtest.Harness {
	bh := backendtest.Harness{
		Open: func(t *testing.T, now func() time.Time) disbackend.Backend {
			e := harnessEntry{fs: vfs.NewCrashableMem(), dir: "db", now: now}
			if h.disk {
				e = harnessEntry{fs: vfs.Default, dir: t.TempDir(), now: now}
			}
			return h.open(t, e)
		},
		Reopen: func(t *testing.T, b disbackend.Backend) disbackend.Backend {
			e := h.entry(b)
			if err := b.Close(); err != nil {
				t.Fatalf("Close: %v", err)
			}
			return h.open(t, e)
		},
		EnforceRetention: func(b disbackend.Backend) error { return b.(*Store).EnforceRetention() },
	}
	if !h.disk {
		bh.Crash = func(t *testing.T, b disbackend.Backend, keep int, seed uint64) func(t *testing.T) disbackend.Backend {
			e := h.entry(b)
			clone := e.fs.(*vfs.MemFS).CrashClone(vfs.CrashCloneCfg{
				UnsyncedDataPercent: keep,
				RNG:                 rand.New(rand.NewPCG(seed, seed)),
			})
			return func(t *testing.T) disbackend.Backend {
				return h.open(t, harnessEntry{fs: clone, dir: e.dir, now: e.now})
			}
		}
	}
	return bh
}

func TestDurableInMemory(t *testing.T) {
	t.Parallel()
	h := &harness{stores: map[*Store]harnessEntry{}}
	backendtest.RunDurable(t, h.backendtest())
}

// TestDurableSmallSegments runs the restart, retention and crash tests with
// segments of a few KiB and no tail cache, so sealing, index files, whole
// segment removal and reads across segments are all exercised.
func TestDurableSmallSegments(t *testing.T) {
	t.Parallel()
	h := &harness{stores: map[*Store]harnessEntry{}, opts: Options{SegmentBytes: 8 << 10, CacheBytesPerPartition: -1}}
	backendtest.RunDurable(t, h.backendtest())
}

func TestDurableOnDisk(t *testing.T) {
	t.Parallel()
	h := &harness{stores: map[*Store]harnessEntry{}, disk: true}
	backendtest.RunDurable(t, h.backendtest())
}

// TestRetentionRemovesSegments checks that retention removes whole segment
// files once every batch in them expired, keeps the ones still holding live
// batches, and that DeleteStream removes the rest; reads and a restart see
// the same data.
func TestRetentionRemovesSegments(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	fs := vfs.NewMem()
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	var mu sync.Mutex
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	opts := Options{FS: fs, Now: clock, SegmentBytes: 2048, CacheBytesPerPartition: -1}
	s := openT(t, "db", opts)
	defer func() { _ = s.Close() }()
	_, err := s.CreateStream(ctx, disbackend.StreamSpec{Name: "r", TopicName: "r", PartitionCount: 2,
		Config: disbackend.StreamConfig{Retention: time.Hour}})
	if err != nil {
		t.Fatal(err)
	}
	segFiles := func() int {
		names, err := fs.List("db/segments")
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, name := range names {
			if strings.HasSuffix(name, ".log") {
				n++
			}
		}
		return n
	}
	appendN := func(n int) {
		for i := 0; i < n; i++ {
			b := backendtest.MakeBatch(backendtest.BatchOptions{NumRecords: 2, RecordBytes: 300, Seed: uint64(i)})
			if _, err := s.Append("r", int32(i%2), b).Wait(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	appendN(20) // ~700 bytes a frame: about 3 per segment
	old := segFiles()
	if old < 5 {
		t.Fatalf("%d segment files after 20 appends of 700 bytes with 2 KiB segments, want several", old)
	}
	mu.Lock()
	now = now.Add(2 * time.Hour)
	mu.Unlock()
	appendN(4)
	if err := s.EnforceRetention(); err != nil {
		t.Fatal(err)
	}
	for p := int32(0); p < 2; p++ {
		r, _ := s.Range("r", p)
		if r.First != 20 || r.Next != 24 {
			t.Fatalf("partition %d: range %+v after retention, want [20 : 24]", p, r)
		}
		res, err := s.Read(ctx, "r", p, 20, 1<<20)
		if err != nil || len(res.Batches) != 2 {
			t.Fatalf("partition %d: read after retention = %d batches, %v; want 2", p, len(res.Batches), err)
		}
	}
	if n := segFiles(); n > 3 {
		t.Fatalf("%d segment files left after everything but 4 batches expired (was %d), want at most 3", n, old)
	}
	s = reopen(t, s, opts)
	if r, _ := s.Range("r", 1); r.First != 20 || r.Next != 24 {
		t.Fatalf("range %+v after restart, want [20 : 24]", r)
	}
	if err := s.DeleteStream(ctx, "r"); err != nil {
		t.Fatal(err)
	}
	if n := segFiles(); n != 0 {
		t.Fatalf("%d segment files left after DeleteStream, want 0", n)
	}
}

func reopen(t *testing.T, s *Store, opts Options) *Store {
	t.Helper()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	return openT(t, "db", opts)
}
