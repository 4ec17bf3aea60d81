package localstore

import (
	"math/rand/v2"
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
