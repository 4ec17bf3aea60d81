// Package localstore is disgw's embedded backend: streams (Kafka topics) of
// partitions with DIS semantics (sequence numbers from 0 per partition,
// [first : next] ranges, retention by append time), the idempotent-producer
// state Kafka's ProducerStateManager keeps, and apps with their checkpoints
// (Kafka consumer groups' committed offsets).
//
// It stores each Kafka record batch whole, as the producer sent it with only
// its base offset rewritten, so Fetch returns stored bytes without decoding.
// Batches go to append-only segment files, one active per stream
// (segment.go), written once and read back with large contiguous reads;
// metadata (streams, partition floors, the producer-id allocator, apps and
// checkpoints) lives in a Pebble database, every write synced. Appends from
// every partition go through one writer goroutine that writes a group of
// them, one Write per stream, while a sync goroutine fdatasyncs the groups
// before (group commit); nothing is visible to readers, and no Append
// completes, before that sync. Recently synced batches stay in a bounded
// in-memory tail cache, so consumers that follow the producers are served
// without reading the files. Batches are found through a sparse index on
// disk (index.go), so memory does not grow with what is stored; producer
// states are snapshotted when a segment is sealed (snapshot.go), and a
// journal of the active segments' index bounds what a restart after a
// crash scans (journal.go).
//
// On disk, dir/meta holds Pebble and dir/segments the segment files, their
// indexes and journals, and the producer snapshots.
//
// It owns no Kafka wire types (no kmsg) and knows nothing of groups or
// connections; the gateway drives it through disbackend.Backend.
package localstore

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"go.uber.org/zap"

	"github.com/disgw/disgw/disbackend"
	"github.com/disgw/disgw/internal/metrics"
)

var (
	_ disbackend.Backend         = (*Store)(nil)
	_ disbackend.ConfigValidator = (*Store)(nil)
)

// Options configure Open. The zero value is usable.
type Options struct {
	// FS is the filesystem for Pebble and the segment files; nil (or
	// vfs.Default) means the OS, with every file the store creates mode
	// 0600 and every directory 0700 (what exists keeps its mode).
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
	// partition (its dedupe window) once it has appended nothing there for
	// this long (Kafka producer.id.expiration.ms,
	// disbackend.ProducerStates.Expire); 0 means 24 hours, < 0 never
	// expires. Idle states are looked for at most every minute (at most
	// every ProducerStateExpiry when shorter), by the writer when appends
	// come and by each retention pass; Open does not load expired ones.
	// After expiry the producer is accepted at any sequence, so keep it
	// longer than clients' delivery.timeout.ms.
	ProducerStateExpiry time.Duration
	// CacheBytesPerPartition bounds the tail cache of one partition, in
	// bytes; 0 means 8 MiB, < 0 disables the cache.
	CacheBytesPerPartition int64
	// CacheBytes bounds the tail caches of all partitions together, in bytes;
	// 0 means 256 MiB.
	CacheBytes int64
	// SegmentBytes is the size at which a stream's segment file is sealed
	// and a new one started, in bytes (one write group may exceed it), for
	// streams whose config sets no SegmentBytes (segment.bytes); 0 means
	// 256 MiB. Retention removes whole segments, so it is also the
	// granularity at which expired data leaves the disk.
	SegmentBytes int64
	// CleanerInterval is how often the log cleaner looks for compacted
	// streams to clean (cleaner.go); 0 means 15 s (Kafka
	// log.cleaner.backoff.ms), < 0 disables the cleaner.
	CleanerInterval time.Duration
	// CleanerBufferBytes bounds the log cleaner's key map, in bytes (24 per
	// key; Kafka log.cleaner.dedupe.buffer.size); a partition with more
	// keys than it holds is cleaned in several passes. 0 means 128 MiB.
	CleanerBufferBytes int64
	// MaxUnindexedBytes bounds the bytes of the active segments, summed
	// over every stream, that no index on disk covers: past it the syncer
	// writes the active segments' journals (journal.go). A restart after a
	// crash scans at most this much (plus the batches written but not yet
	// synced at the crash). 0 means 64 MiB.
	MaxUnindexedBytes int64
	// MinFreeBytes is the free space, in bytes, on the data directory's
	// filesystem below which the store refuses appends with
	// disbackend.ErrStorageFull (Kafka KAFKA_STORAGE_ERROR) until it is
	// back (storage_min_free_bytes, diskfull.go); 0 means 256 MiB, < 0
	// sets no mark (a write failing with ENOSPC still enters the state).
	// Only where the filesystem reports its free space (statfs; not an
	// in-memory one).
	MinFreeBytes int64
	// BallastBytes is the size of the ballast file reserved in the data
	// directory and deleted at the first write that fails with ENOSPC, so
	// that metadata, offset commits and a clean stop have room; 0 means
	// 64 MiB, < 0 none. Reserved again once there is room for it above
	// MinFreeBytes.
	BallastBytes int64
	// Metrics receives the disk gauges (disgw_storage_full,
	// disgw_storage_free_bytes); nil means none.
	Metrics *metrics.Metrics

	// freeBytes, when set (tests), replaces the filesystem's free space
	// (statfs) for the mark; spaceCheck, when > 0, how often it is read
	// (1 s otherwise).
	freeBytes  func() (int64, error)
	spaceCheck time.Duration
	// cleanerHook, when set (tests), is called at each step of a cleaning
	// pass, of sealing a segment, of writing a journal block or a producer
	// snapshot, and of a read, on the goroutine taking it.
	cleanerHook func(step string)
}

const (
	defaultRetentionCheck = time.Minute
	defaultProducerExpiry = disbackend.DefaultProducerIDExpiration
	producerExpiryCheck   = time.Minute // at most, between two looks for idle producer states
	defaultPartitionCache = 8 << 20
	defaultCacheBytes     = 256 << 20
	maxGroupBytes         = 16 << 20 // bytes of batches committed by one sync, at most (one batch may exceed it)
	maxGroupItems         = 4096
	appendQueueLen        = 4096
	pendingSyncGroups     = 4  // groups written and waiting for their sync, at most
	maxSyncGroups         = 16 // groups synced together, at most
	producerIDBlock       = 1000
	memTableSize          = 4 << 20 // Pebble holds metadata only
	defaultMaxUnindexed   = 64 << 20
	// maxActiveChunks bounds the index entries the active segments keep in
	// memory, all streams together (64 bytes each, 8 MiB): past it
	// the active segment with the most is sealed, its entries written to
	// its index file.
	maxActiveChunks = 1 << 17
)

// Store is the Pebble-backed disbackend.Backend. Safe for concurrent use.
type Store struct {
	db *pebble.DB
	fs vfs.FS // the filesystem, wrapped by vfs.OnDiskFull (diskfull.go)
	// segFS is fs unwrapped, for the segment files: a segment write that
	// finds no room is taken back and refused, not made again in the
	// ballast's room (which is for metadata, index files and a clean stop).
	segFS         vfs.FS
	segDir        string
	dir           string // the data directory as Open was given it (LogDir)
	segBytes      int64
	log           *zap.Logger
	now           func() time.Time
	clusterID     string // set by Open
	cleanerBuffer int64  // Options.CleanerBufferBytes
	cleanerHook   func(step string)
	// txnView is the transactions the log cleaner respects (SetTxnView);
	// nil: none.
	txnView        atomic.Pointer[disbackend.TxnView]
	producerExpiry time.Duration
	cache          *tailCache
	space          *spaceWatch // the disk-full state (diskfull.go)
	metaDir        string
	// pebbleOpts makes Pebble's options (read-only or not), for Open and
	// reopenMeta.
	pebbleOpts func(readOnly bool) *pebble.Options
	// warnLimit limits the warn lines a full disk could repeat (a write
	// taken back, a producer snapshot not written) to one a minute each.
	warnLimit limitedLog
	// groupHook, when set (tests only), is called by the writer after it
	// took a group's first append and before it takes the others queued,
	// so a test can make several appends one group (diskfull_crash_test.go).
	groupHook atomic.Pointer[func()]

	aclMu sync.Mutex // serialises UpdateACLs

	// closed is set first thing in Close; every operation checks it.
	closed atomic.Bool
	// dbMu is read-held by every use of db outside the writer goroutines, and
	// write-held by Close around db.Close, so no iterator outlives the DB.
	dbMu sync.RWMutex
	// scramMu serialises read-modify-writes of SCRAM credentials.
	scramMu sync.Mutex

	// mu guards streams and every stream's fields. Changing stream metadata
	// also holds wmu, so holders of wmu may read streams without mu.
	mu      sync.RWMutex
	streams map[string]*stream

	// wmu serializes assembling and writing a group with stream metadata
	// changes and retention. It guards producers, nextSid, every partition's
	// assigned, the segment lists and every segment's writer-side fields.
	wmu       sync.Mutex
	producers disbackend.ProducerStates[producerKey]
	nextSid   uint64
	segs      map[uint64][]*segment // by sid, oldest first, the active one last
	active    map[uint64]*segment   // by sid
	nextSeg   uint64                // number of the next segment file
	assembled uint64                // groups assembled so far
	wbuf      []byte                // the writer's group buffer
	hbuf      []byte                // the writer's frame headers (writev path)
	iovs      [][]byte              // the writer's iovecs (writev path)
	rollNeed  map[*stream]int64     // rollBefore's
	undo      groupUndo             // the producer states before the group being assembled

	// activeChunks counts the index entries the active segments hold in
	// memory; unindexed the bytes published that no index or journal
	// block covers (both added by the syncer, taken off at seal).
	activeChunks atomic.Int64
	unindexed    atomic.Int64
	maxUnindexed int64 // Options.MaxUnindexedBytes
	// jsegs are the active segments with bytes no journal block covers
	// (the syncer's; seal, after quiesce, takes a segment off).
	jsegs map[*segment]struct{}

	// producersCheckedMS (guarded by wmu) is when idle producer states
	// were last looked for (ms; expireProducers).
	producersCheckedMS int64
	// loadCutoffMS, set by recover before it replays the segments: a batch
	// appended at or before it rebuilds no producer state (expired).
	loadCutoffMS int64

	// syncedMu guards synced and syncerDone; syncedCond is signalled when
	// they change (quiesce waits on it).
	syncedMu   sync.Mutex
	syncedCond *sync.Cond
	synced     uint64 // groups published so far
	syncerDone bool

	// appsMu serializes app and checkpoint writes (CreateApp checks and
	// sets; DeleteStream holds it after wmu to drop checkpoints).
	appsMu sync.Mutex

	// pidMu guards the producer-id allocator.
	pidMu             sync.Mutex
	pidNext, pidLimit int64

	// reqMu guards sending on reqs against Close closing it.
	reqMu     sync.RWMutex
	reqClosed bool
	reqs      chan *appendReq
	syncq     chan *group
	// failure is the first storage error of the writer; once set, appends
	// fail with ErrUnavailable (a file that failed a write or sync cannot
	// be trusted).
	failure atomic.Pointer[error]

	// stats is what Open's recovery did (recover.go).
	stats openStats

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
	// clean is the log cleaner's state of a compacted stream; only the
	// cleaner goroutine uses it after Open.
	clean cleanerState
	// snapshots are the numbers of its producer snapshot files, oldest
	// first (snapshot.go). Guarded by wmu.
	snapshots []uint64
}

// Open opens (creating if needed) the store in dir and recovers every stream,
// partition range and producer state from it (recover.go): sealed segments
// from their index files, producer states from their snapshots, the
// segments active at a crash from their journals and a scan of the frames
// after them (at most Options.MaxUnindexedBytes, plus the writes in flight
// at the crash) up to the first torn one; a store of the first format is
// migrated. With less free space than Options.MinFreeBytes it deletes the
// ballast first and comes up refusing appends (diskfull.go); with too
// little for Pebble to flush the log it replays, the metadata is opened
// read-only until there is room. Errors are Pebble's, the filesystem's or
// a corrupt key, wrapped with the directory.
func Open(dir string, opts Options) (*Store, error) {
	if opts.FS == nil || opts.FS == vfs.Default {
		opts.FS = privateFS{vfs.Default}
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
	if opts.SegmentBytes <= 0 {
		opts.SegmentBytes = defaultSegmentBytes
	}
	if opts.CleanerInterval == 0 {
		opts.CleanerInterval = defaultCleanerInterval
	}
	if opts.CleanerBufferBytes <= 0 {
		opts.CleanerBufferBytes = defaultCleanerBufferBytes
	}
	if opts.MaxUnindexedBytes <= 0 {
		opts.MaxUnindexedBytes = defaultMaxUnindexed
	}
	if opts.MinFreeBytes == 0 {
		opts.MinFreeBytes = defaultMinFreeBytes
	}
	if opts.BallastBytes == 0 {
		opts.BallastBytes = defaultBallastBytes
	}
	if opts.spaceCheck <= 0 {
		opts.spaceCheck = defaultSpaceCheck
	}
	log := opts.Logger.Named("localstore")
	start := time.Now()

	// The disk-full state: a start below the mark deletes the ballast
	// before Pebble replays its log; every write through fsys that fails
	// with ENOSPC deletes it too and is made again once (vfs.OnDiskFull).
	space := newSpaceWatch(opts.FS, dir, &opts, log)
	space.beforeOpen()
	fsys := vfs.OnDiskFull(opts.FS, func() { space.onENOSPC(nil) })
	plog := log.Named("pebble")
	plimit := &limitedLog{interval: pebbleLogEvery}
	pebbleOpts := func(readOnly bool) *pebble.Options {
		// Pebble holds only metadata now; its defaults are ample.
		o := &pebble.Options{
			FS:     fsys,
			Logger: pebbleLogger{l: plog.Sugar(), limit: plimit},
			// Pebble retries a flush or compaction that failed at once and
			// forever, an error line each time: slow it and limit the lines.
			EventListener: &pebble.EventListener{BackgroundError: func(err error) {
				if isENOSPC(err) {
					space.onENOSPC(err)
					time.Sleep(pebbleErrorBackoff)
				}
				if ok, left := plimit.allow("background error"); ok {
					plog.Error("background error", zap.Error(err), zap.Int("lines_left_out", left))
				}
			}},
			MemTableSize:                memTableSize,
			MemTableStopWritesThreshold: 4,
			L0CompactionThreshold:       4,
			L0StopWritesThreshold:       24,
			FormatMajorVersion:          pebble.FormatNewest,
			ReadOnly:                    readOnly,
		}
		o.EnsureDefaults()
		return o
	}
	popts := pebbleOpts(false)
	metaDir := opts.FS.PathJoin(dir, metaDirName)
	if !space.roomToOpen(metaDir) {
		// Pebble's Open flushes the log it replays and waits for that
		// flush, which it retries forever on a full disk: open it
		// read-only instead, so that reads are served.
		log.Warn("too little free space to open the metadata for writing; opening it read-only: reads are served, writes refused until there is room")
		popts = pebbleOpts(true)
		space.setReadOnly()
	}
	db, err := pebble.Open(metaDir, popts)
	if err != nil && !popts.ReadOnly && (isENOSPC(err) || space.full.Load()) {
		// No room even for the metadata's log: open it read-only, so
		// that reads are served; writes wait for a restart.
		log.Warn("opening the metadata failed on a full disk; opening it read-only: reads are served, writes refused until there is room",
			zap.Error(err))
		popts = pebbleOpts(true)
		db, err = pebble.Open(metaDir, popts)
		if err == nil {
			space.setReadOnly()
		}
	}
	if err != nil {
		if errors.Is(err, syscall.EAGAIN) || errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("localstore: open %s: the data directory is in use by another process (its lock is held): %w", dir, err)
		}
		return nil, fmt.Errorf("localstore: open %s: %w", dir, err)
	}
	segDir := opts.FS.PathJoin(dir, segmentDirName)
	err = opts.FS.MkdirAll(segDir, dirPerm)
	if err == nil {
		err = syncDir(opts.FS, dir)
	}
	if err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("localstore: open %s: segment directory: %w", dir, err)
	}
	s := &Store{
		db:             db,
		fs:             fsys,
		segFS:          opts.FS,
		metaDir:        metaDir,
		pebbleOpts:     pebbleOpts,
		space:          space,
		warnLimit:      limitedLog{interval: spaceLogEvery},
		segDir:         segDir,
		dir:            dir,
		segBytes:       opts.SegmentBytes,
		cleanerBuffer:  opts.CleanerBufferBytes,
		cleanerHook:    opts.cleanerHook,
		segs:           make(map[uint64][]*segment),
		active:         make(map[uint64]*segment),
		log:            log,
		now:            opts.Now,
		producerExpiry: opts.ProducerStateExpiry,
		cache:          newTailCache(opts.CacheBytesPerPartition, opts.CacheBytes),
		maxUnindexed:   opts.MaxUnindexedBytes,
		jsegs:          make(map[*segment]struct{}),
		streams:        make(map[string]*stream),
		reqs:           make(chan *appendReq, appendQueueLen),
		syncq:          make(chan *group, pendingSyncGroups),
		changed:        make(chan struct{}),
		stop:           make(chan struct{}),
	}
	s.syncedCond = sync.NewCond(&s.syncedMu)
	space.reopen = s.reopenMeta
	if err := s.loadClusterID(); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("localstore: open %s: cluster id: %w", dir, err)
	}
	if err := s.recover(); err != nil {
		s.closeSegments()
		_ = db.Close()
		return nil, fmt.Errorf("localstore: open %s: recover: %w", dir, err)
	}
	space.afterOpen()
	s.writers.Add(2)
	go s.writeLoop()
	go s.syncLoop()
	if opts.RetentionCheckInterval > 0 {
		s.bg.Add(1)
		go s.retentionLoop(opts.RetentionCheckInterval)
	}
	if opts.CleanerInterval > 0 {
		s.bg.Add(1)
		go s.cleanerLoop(opts.CleanerInterval)
	}
	if space.freeFn != nil {
		s.bg.Add(1)
		go s.every(opts.spaceCheck, s.space.check) // reads the free space
	}
	s.logOpened(dir, time.Since(start))
	return s, nil
}

// Close completes every queued append (syncing it), stops the background
// loop, seals the active segments and writes the producer snapshots (so
// the next Open reads indexes and snapshots and scans nothing) and closes
// the files and Pebble (flushing its memtable, within 3 s, unless the disk
// is full: its log is synced, the next Open replays it). Later calls return ErrClosed; later appends, reads
// and metadata operations fail with ErrClosed.
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
	var err error
	s.wmu.Lock()
	if s.storageFailure() == nil {
		for _, seg := range s.active {
			if serr := s.seal(seg, true); serr != nil && err == nil {
				err = serr
			}
		}
		s.snapshotAll()
	}
	s.wmu.Unlock()
	s.closeSegments()
	if cerr := s.closeDB(); err == nil {
		err = cerr
	}
	s.notifyChanged()
	if err != nil {
		return fmt.Errorf("localstore: close: %w", err)
	}
	s.log.Info("closed")
	return nil
}

// closeFlushWait bounds Close's flush of the metadata's memtable.
const closeFlushWait = 3 * time.Second

// closeDB flushes Pebble's memtable, so that the next Open replays less of
// its log, and closes it. With the disk full it does not flush (a flush
// that finds no room is retried by Pebble forever; the log is synced, so
// nothing is lost), and a flush that has not finished within
// closeFlushWait is left: then Pebble is not closed either (its Close
// would wait for it), which the process's exit does.
func (s *Store) closeDB() error {
	if s.space.full.Load() {
		s.log.Warn("disk full: closing the metadata without flushing it; the next start replays its log")
		return s.db.Close()
	}
	asked := make(chan struct{})
	flushed := make(chan struct{})
	go func() {
		ch, err := s.db.AsyncFlush()
		close(asked)
		if err == nil {
			<-ch
		}
		close(flushed)
	}()
	t := time.NewTimer(closeFlushWait)
	defer t.Stop()
	select {
	case <-flushed:
	case <-t.C:
		select {
		case <-asked:
		default:
			// Still in Pebble's commit pipeline: its Close would block.
			return fmt.Errorf("the metadata's flush did not start within %v; left open", closeFlushWait)
		}
		s.log.Warn("the metadata's flush did not finish; closing without it, the next start replays its log",
			zap.Duration("waited", closeFlushWait))
	}
	return s.db.Close()
}

// snapshotAll writes a producer snapshot for every stream whose newest
// one is older than its last segment (a segment sealed without one), so
// that the next Open replays no segment. Requires wmu, no segment active.
func (s *Store) snapshotAll() {
	for _, st := range s.streams {
		segs := s.segs[st.sid]
		if len(segs) == 0 {
			continue
		}
		last := segs[len(segs)-1].n
		if n := len(st.snapshots); n > 0 && st.snapshots[n-1] >= last {
			continue
		}
		if err := s.writeSnapshot(st, last); err != nil {
			s.log.Warn("writing a producer snapshot failed; the next start replays the stream's segments",
				zap.String("stream", st.meta.Name), zap.Error(err))
		}
	}
}

// closeSegments closes every segment file.
func (s *Store) closeSegments() {
	for _, segs := range s.segs {
		for _, sg := range segs {
			if err := sg.close(); err != nil {
				s.log.Warn("closing segment failed", zap.String("segment", sg.path), zap.Error(err))
			}
		}
	}
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

// pebbleLogger routes Pebble's own logs to zap. Its informational lines (WAL
// replay at open, "Found 2 WALs", cancelled compactions) go to debug, where
// they do not read like trouble at every start; errors (background errors)
// stay errors, and Fatalf stays fatal (Pebble expects it not to return).
// Both are limited to one line per format every pebbleLogEvery, with the
// count of those left out, as Pebble repeats them without limit while the
// disk is full.
type pebbleLogger struct {
	l     *zap.SugaredLogger
	limit *limitedLog
}

// pebbleLogEvery is how often, at most, one of Pebble's lines is logged.
const pebbleLogEvery = 10 * time.Second

func (p pebbleLogger) Infof(format string, args ...any) {
	if ok, left := p.limit.allow(format); ok {
		p.l.Debugw(fmt.Sprintf(format, args...), leftOut(left)...)
	}
}

func (p pebbleLogger) Errorf(format string, args ...any) {
	if ok, left := p.limit.allow(format); ok {
		p.l.Errorw(fmt.Sprintf(format, args...), leftOut(left)...)
	}
}

// leftOut is the field counting the lines a limit left out, if any.
func leftOut(n int) []any {
	if n == 0 {
		return nil
	}
	return []any{"lines_left_out", n}
}

func (p pebbleLogger) Fatalf(format string, args ...any) { p.l.Fatalf(format, args...) }

// loadClusterID reads the cluster id, or makes and syncs one at the first
// Open of a data directory: 16 random bytes in URL-safe Base64 without
// padding, as Kafka writes its cluster ids (Uuid.toString).
func (s *Store) loadClusterID() error {
	v, closer, err := s.db.Get([]byte{keyClusterID})
	if err == nil {
		s.clusterID = string(v)
		return closer.Close()
	}
	if err != pebble.ErrNotFound {
		return err
	}
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	id := base64.RawURLEncoding.EncodeToString(b[:])
	if err := s.db.Set([]byte{keyClusterID}, []byte(id), pebble.Sync); err != nil {
		return err
	}
	s.clusterID = id
	return nil
}

// ClusterID returns the data directory's cluster id, made at its first
// Open and kept in the metadata: the same at every start. Errors:
// ErrClosed.
func (s *Store) ClusterID(ctx context.Context) (string, error) {
	if s.closed.Load() {
		return "", fmt.Errorf("localstore: cluster id: %w", disbackend.ErrClosed)
	}
	return s.clusterID, nil
}
