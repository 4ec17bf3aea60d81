// Package localstore is disgw's embedded backend: a Pebble database holding
// streams (Kafka topics) of partitions with DIS semantics (sequence numbers
// from 0 per partition, [first : next] ranges, retention by append time) and
// the idempotent-producer state Kafka's ProducerStateManager keeps.
//
// It stores each Kafka record batch whole, as the producer sent it with only
// its base offset rewritten, so Fetch returns stored bytes without decoding.
// Appends from every partition go through one writer goroutine that commits a
// group of them as one synced Pebble batch (group commit); nothing is visible
// to readers, and no Append completes, before that sync. Recently synced
// batches stay in a bounded in-memory tail cache, so consumers that follow the
// producers are served without touching Pebble.
//
// It owns no Kafka wire types (no kmsg) and knows nothing of groups or
// connections; the gateway drives it through disbackend.Backend.
package localstore

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"go.uber.org/zap"

	"github.com/disgw/disgw/disbackend"
)

var _ disbackend.Backend = (*Store)(nil)

// Options configure Open. The zero value is usable.
type Options struct {
	// FS is the filesystem Pebble uses; nil means vfs.Default (the OS).
	// Tests pass vfs.NewMem or vfs.NewCrashableMem.
	FS vfs.FS
	// Logger receives the store's logs, named "localstore"; nil means
	// zap.NewNop().
	Logger *zap.Logger
	// Now is the clock for append times, retention and producer expiry; nil
	// means time.Now.
	Now func() time.Time
	// RetentionCheckInterval is how often the background loop runs
	// EnforceRetention; 0 means 1 minute, < 0 disables the loop.
	RetentionCheckInterval time.Duration
	// ProducerStateExpiry drops an idempotent producer's state for a
	// partition after it appended nothing there for this long (Kafka
	// producer.id.expiration.ms); 0 means 24 hours, < 0 never expires.
	ProducerStateExpiry time.Duration
	// CacheBytesPerPartition bounds the tail cache of one partition, in
	// bytes; 0 means 8 MiB, < 0 disables the cache.
	CacheBytesPerPartition int64
	// CacheBytes bounds the tail caches of all partitions together, in bytes;
	// 0 means 256 MiB.
	CacheBytes int64
}

const (
	defaultRetentionCheck  = time.Minute
	defaultProducerExpiry  = 24 * time.Hour
	defaultPartitionCache  = 8 << 20
	defaultCacheBytes      = 256 << 20
	maxGroupBytes          = 16 << 20 // bytes of batches committed by one sync, at most (one batch may exceed it)
	maxGroupItems          = 4096
	appendQueueLen         = 4096
	pendingSyncGroups      = 2 // groups applied and waiting for their sync, at most
	producerIDBlock        = 1000
	memTableSize           = 64 << 20
	batchHeaderLen         = 61
	logAppendTimeAttribute = 0x08
)

// Store is the Pebble-backed disbackend.Backend. Safe for concurrent use.
type Store struct {
	db             *pebble.DB
	log            *zap.Logger
	now            func() time.Time
	producerExpiry time.Duration
	cache          *tailCache

	// closed is set first thing in Close; every operation checks it.
	closed atomic.Bool
	// dbMu is read-held by every use of db outside the writer goroutines, and
	// write-held by Close around db.Close, so no iterator outlives the DB.
	dbMu sync.RWMutex

	// mu guards streams and every stream's fields. Changing stream metadata
	// also holds wmu, so holders of wmu may read streams without mu.
	mu      sync.RWMutex
	streams map[string]*stream

	// wmu serializes assembling and applying a write group with stream
	// metadata changes and retention. It guards producers, nextSid and every
	// partition's assigned.
	wmu       sync.Mutex
	producers map[producerKey]*producerState
	nextSid   uint64

	// pidMu guards the producer-id allocator.
	pidMu             sync.Mutex
	pidNext, pidLimit int64

	// reqMu guards sending on reqs against Close closing it.
	reqMu     sync.RWMutex
	reqClosed bool
	reqs      chan *appendReq
	syncq     chan *group
	// failure is the first storage error of the writer; once set, appends
	// fail with ErrUnavailable (a WAL that failed to sync cannot be trusted).
	failure atomic.Pointer[error]

	changedMu sync.Mutex
	changed   chan struct{}

	stop    chan struct{}
	writers sync.WaitGroup // writer and syncer
	bg      sync.WaitGroup // retention loop
}

// stream is one stream as kept in memory. Fields are guarded by Store.mu.
type stream struct {
	meta  disbackend.Stream
	sid   uint64
	parts []*partition
}

// Open opens (creating if needed) the store in dir and recovers every stream,
// partition range and producer state from it. Errors are Pebble's or a
// corrupt key, wrapped with the directory.
func Open(dir string, opts Options) (*Store, error) {
	if opts.FS == nil {
		opts.FS = vfs.Default
	}
	if opts.Logger == nil {
		opts.Logger = zap.NewNop()
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.RetentionCheckInterval == 0 {
		opts.RetentionCheckInterval = defaultRetentionCheck
	}
	if opts.ProducerStateExpiry == 0 {
		opts.ProducerStateExpiry = defaultProducerExpiry
	}
	if opts.CacheBytesPerPartition == 0 {
		opts.CacheBytesPerPartition = defaultPartitionCache
	}
	if opts.CacheBytes == 0 {
		opts.CacheBytes = defaultCacheBytes
	}
	log := opts.Logger.Named("localstore")

	popts := &pebble.Options{
		FS:                          opts.FS,
		Logger:                      pebbleLogger{log.Named("pebble").Sugar()},
		MemTableSize:                memTableSize,
		MemTableStopWritesThreshold: 4,
		L0CompactionThreshold:       4,
		L0StopWritesThreshold:       24,
		FormatMajorVersion:          pebble.FormatNewest,
	}
	// Batches are stored as the producer sent them (often compressed already);
	// compressing blocks again costs CPU for little.
	popts.ApplyCompressionSettings(func() pebble.DBCompressionSettings { return pebble.DBCompressionNone })
	// Value separation writes batch values once into blob files at flush, so
	// compactions move only keys and index entries instead of rewriting
	// every batch at each level.
	popts.Experimental.ValueSeparationPolicy = func() pebble.ValueSeparationPolicy {
		return pebble.ValueSeparationPolicy{
			Enabled:               true,
			MinimumSize:           256,
			MaxBlobReferenceDepth: 10,
			RewriteMinimumAge:     10 * time.Minute,
			TargetGarbageRatio:    0.25,
		}
	}
	popts.EnsureDefaults()
	db, err := pebble.Open(dir, popts)
	if err != nil {
		return nil, fmt.Errorf("localstore: open %s: %w", dir, err)
	}
	s := &Store{
		db:             db,
		log:            log,
		now:            opts.Now,
		producerExpiry: opts.ProducerStateExpiry,
		cache:          newTailCache(opts.CacheBytesPerPartition, opts.CacheBytes),
		streams:        make(map[string]*stream),
		producers:      make(map[producerKey]*producerState),
		reqs:           make(chan *appendReq, appendQueueLen),
		syncq:          make(chan *group, pendingSyncGroups),
		changed:        make(chan struct{}),
		stop:           make(chan struct{}),
	}
	if err := s.recover(); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("localstore: open %s: recover: %w", dir, err)
	}
	s.writers.Add(2)
	go s.writeLoop()
	go s.syncLoop()
	if opts.RetentionCheckInterval > 0 {
		s.bg.Add(1)
		go s.retentionLoop(opts.RetentionCheckInterval)
	}
	log.Info("opened", zap.String("dir", dir), zap.Int("streams", len(s.streams)),
		zap.Int("producer_states", len(s.producers)))
	return s, nil
}

// Close completes every queued append (syncing it), stops the background
// loop and closes Pebble. Later calls return ErrClosed; later appends,
// reads and metadata operations fail with ErrClosed.
func (s *Store) Close() error {
	if s.closed.Swap(true) {
		return fmt.Errorf("localstore: close: %w", disbackend.ErrClosed)
	}
	s.reqMu.Lock()
	s.reqClosed = true
	close(s.reqs)
	s.reqMu.Unlock()
	s.writers.Wait()
	close(s.stop)
	s.bg.Wait()

	s.dbMu.Lock()
	defer s.dbMu.Unlock()
	// Synced appends are already in the WAL; a flush makes the next Open
	// replay less.
	err := s.db.Flush()
	if cerr := s.db.Close(); err == nil {
		err = cerr
	}
	s.notifyChanged()
	if err != nil {
		return fmt.Errorf("localstore: close: %w", err)
	}
	s.log.Info("closed")
	return nil
}

// enter read-locks dbMu for one operation that uses the DB, failing with
// ErrClosed once Close began. Pair with s.dbMu.RUnlock.
func (s *Store) enter(op string) error {
	s.dbMu.RLock()
	if s.closed.Load() {
		s.dbMu.RUnlock()
		return fmt.Errorf("localstore: %s: %w", op, disbackend.ErrClosed)
	}
	return nil
}

// Changed returns a channel closed the next time any partition's synced
// range changes (appends synced, retention, deletion, Close). Take it before
// reading, then wait on it for a long poll (Kafka fetch max.wait.ms).
func (s *Store) Changed() <-chan struct{} {
	s.changedMu.Lock()
	defer s.changedMu.Unlock()
	return s.changed
}

func (s *Store) notifyChanged() {
	s.changedMu.Lock()
	close(s.changed)
	s.changed = make(chan struct{})
	s.changedMu.Unlock()
}

// lookup returns the partition of stream name, or ErrStreamNotFound /
// ErrPartitionNotFound wrapped with op.
func (s *Store) lookup(op, name string, part int32) (*partition, error) {
	s.mu.RLock()
	st := s.streams[name]
	var p *partition
	if st != nil && part >= 0 && int(part) < len(st.parts) {
		p = st.parts[part]
	}
	s.mu.RUnlock()
	if st == nil {
		return nil, fmt.Errorf("localstore: %s stream %q: %w", op, name, disbackend.ErrStreamNotFound)
	}
	if p == nil {
		return nil, fmt.Errorf("localstore: %s stream %q partition %d: %w", op, name, part, disbackend.ErrPartitionNotFound)
	}
	return p, nil
}

// storageFailure returns the writer's recorded storage error, if any.
func (s *Store) storageFailure() error {
	if e := s.failure.Load(); e != nil {
		return *e
	}
	return nil
}

func (s *Store) fail(err error) {
	if s.failure.CompareAndSwap(nil, &err) {
		s.log.Error("storage failed; refusing appends", zap.Error(err))
	}
}

var errCorrupt = errors.New("corrupt key or value")

// pebbleLogger routes Pebble's own logs to zap.
type pebbleLogger struct{ l *zap.SugaredLogger }

func (p pebbleLogger) Infof(format string, args ...any)  { p.l.Infof(format, args...) }
func (p pebbleLogger) Errorf(format string, args ...any) { p.l.Errorf(format, args...) }
func (p pebbleLogger) Fatalf(format string, args ...any) { p.l.Fatalf(format, args...) }
