package localstore

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/disgw/disgw/disbackend"
	"github.com/disgw/disgw/internal/metrics"
)

// A full disk is a state the store enters and leaves by itself
// (docs/operations.md, "A full disk"): below Options.MinFreeBytes of free
// space, or once a write failed with ENOSPC, it refuses appends with
// disbackend.ErrStorageFull (KAFKA_STORAGE_ERROR) and keeps serving reads;
// it leaves the state once the free space is back above the mark. A
// ballast file, reserved in the data directory and deleted at the first
// ENOSPC (CockroachDB's emergency ballast), leaves the metadata, index
// files and a clean stop room to work.

const (
	defaultMinFreeBytes = 256 << 20
	defaultBallastBytes = 64 << 20
	// defaultSpaceCheck is how often the free space is read (statfs).
	defaultSpaceCheck = time.Second
	// minLeaveFree is the least free space, in bytes, at which the state
	// is left when it was entered on ENOSPC with no mark set.
	minLeaveFree = 16 << 20
	// spaceLogEvery is how often, at most, the state's warn line is
	// written while it lasts (and while it comes and goes).
	spaceLogEvery = time.Minute
	// ballastName is the ballast's file in the data directory.
	ballastName = "ballast"
	// pebbleErrorBackoff slows Pebble's retries of a flush or compaction
	// that failed for lack of space (it retries at once, forever): its
	// BackgroundError handler sleeps this long.
	pebbleErrorBackoff = 100 * time.Millisecond
)

// isENOSPC reports whether err is a write refused for lack of space.
func isENOSPC(err error) bool { return errors.Is(err, syscall.ENOSPC) }

// spaceWatch is the store's disk-full state, its free-space estimate and
// its ballast. Safe for concurrent use.
type spaceWatch struct {
	fs           vfs.FS // not wrapped by vfs.OnDiskFull
	dir          string
	ballast      string // the ballast's path
	minFree      int64  // bytes; 0: no mark
	ballastBytes int64  // 0: no ballast
	log          *zap.Logger
	metrics      *metrics.Metrics
	freeFn       func() (int64, error) // nil: the filesystem does not say

	full atomic.Bool
	// free is the free space as last read minus the bytes written since
	// (the writer counts them down), so the mark is seen between reads;
	// -1 when unknown.
	free atomic.Int64

	mu          sync.Mutex
	reason      string    // why it is full
	since       time.Time // when it became full
	readOnly    bool      // the metadata is open read-only: full until reopened for writing
	ballastHeld bool
	// reopen opens the metadata for writing again (Store.reopenMeta),
	// once there is room, after a start that opened it read-only.
	reopen     func() bool
	lastLog    time.Time
	suppressed int // state changes not logged since lastLog
	// warnLimit limits the ballast's warn lines (a reservation or a
	// deletion that fails) to one a minute each.
	warnLimit limitedLog
}

// newSpaceWatch makes the watch of dir on fsys: with a mark and a ballast
// only when fsys reports its free space (vfs.FS.GetDiskUsage; an in-memory
// filesystem does not, unless a test sets it).
func newSpaceWatch(fsys vfs.FS, dir string, opts *Options, log *zap.Logger) *spaceWatch {
	w := &spaceWatch{fs: fsys, dir: dir, ballast: fsys.PathJoin(dir, ballastName), log: log, metrics: opts.Metrics,
		warnLimit: limitedLog{interval: spaceLogEvery}}
	w.free.Store(-1)
	if opts.MinFreeBytes > 0 {
		w.minFree = opts.MinFreeBytes
	}
	if opts.BallastBytes > 0 {
		w.ballastBytes = opts.BallastBytes
	}
	freeFn := opts.freeBytes
	if freeFn == nil {
		freeFn = func() (int64, error) {
			u, err := fsys.GetDiskUsage(dir)
			if err != nil {
				return 0, err
			}
			return int64(min(u.AvailBytes, 1<<62)), nil
		}
	}
	if _, err := freeFn(); err == nil || !errors.Is(err, vfs.ErrUnsupported) {
		w.freeFn = freeFn
	}
	return w
}

// read reads the free space (statfs) into the estimate and the gauge; -1
// when unknown.
func (w *spaceWatch) read() int64 {
	if w.freeFn == nil {
		return -1
	}
	free, err := w.freeFn()
	if err != nil {
		return -1
	}
	w.free.Store(free)
	w.metrics.SetStorage(w.full.Load(), free)
	return free
}

// beforeOpen runs before the metadata is opened: with the free space below
// the mark (or none at all) it deletes the ballast, so that the metadata
// can replay its log and take writes, and enters the state.
func (w *spaceWatch) beforeOpen() {
	free := w.read()
	if free < 0 || free >= w.minFree && free > 0 {
		return
	}
	released := w.releaseBallast()
	w.enter(fmt.Sprintf("%d bytes free at start, below storage_min_free_bytes %d", free, w.minFree), nil, released)
}

// openMargin is the free space, in bytes, that opening the metadata for
// writing needs beyond its logs' size: a new log, a manifest and an
// options file.
const openMargin = 8 << 20

// roomToOpen reports whether the free space lets Pebble open metaDir for
// writing: its Open flushes the logs it replays (an sstable about their
// size) and waits for the flush, which it retries forever when it finds
// no room. Unknown free space is taken as room.
func (w *spaceWatch) roomToOpen(metaDir string) bool {
	free := w.read()
	if free < 0 {
		return true
	}
	var logs int64
	names, _ := w.fs.List(metaDir)
	for _, name := range names {
		if strings.HasSuffix(name, ".log") {
			if st, err := w.fs.Stat(w.fs.PathJoin(metaDir, name)); err == nil {
				logs += st.Size()
			}
		}
	}
	return free >= logs+openMargin
}

// afterOpen reserves the ballast when it is missing and there is room
// for it above the mark. The data directory exists by now.
func (w *spaceWatch) afterOpen() {
	if w.freeFn == nil || w.ballastBytes == 0 {
		return
	}
	if _, err := w.fs.Stat(w.ballast); err == nil {
		w.mu.Lock()
		w.ballastHeld = true
		w.mu.Unlock()
		return
	}
	w.reserveBallast(w.read())
}

// reserveBallast writes the ballast (a .tmp filled, synced, renamed)
// when free (bytes) leaves room for it above the mark, and reports
// whether it is held now.
func (w *spaceWatch) reserveBallast(free int64) bool {
	if w.ballastBytes == 0 {
		return true
	}
	w.mu.Lock()
	held := w.ballastHeld
	w.mu.Unlock()
	if held {
		return true
	}
	if free < 0 || free < w.minFree+w.ballastBytes {
		return false
	}
	tmp := w.ballast + extTmp
	err := writeBallast(w.fs, tmp, w.ballastBytes)
	if err == nil {
		err = w.fs.Rename(tmp, w.ballast)
	}
	if err == nil {
		err = syncDir(w.fs, w.dir)
	}
	if err != nil {
		_ = w.fs.Remove(tmp)
		if ok, left := w.warnLimit.allow("reserve"); ok {
			w.log.Warn("reserving the disk ballast failed", zap.String("path", w.ballast), zap.Error(err), zap.Int("lines_left_out", left))
		}
		return false
	}
	w.mu.Lock()
	w.ballastHeld = true
	w.mu.Unlock()
	w.free.Add(-w.ballastBytes)
	w.log.Info("disk ballast reserved", zap.String("path", w.ballast), zap.Int64("bytes", w.ballastBytes))
	return true
}

// writeBallast makes path a file of n bytes whose blocks are allocated:
// fallocate where the file has a descriptor, else zeros written.
func writeBallast(fsys vfs.FS, path string, n int64) error {
	f, err := fsys.Create(path, vfs.WriteCategoryUnspecified)
	if err != nil {
		return err
	}
	if !fallocate(f, n) {
		zeros := make([]byte, min(n, 1<<20))
		for left := n; left > 0 && err == nil; left -= int64(len(zeros)) {
			_, err = f.Write(zeros[:min(left, int64(len(zeros)))])
		}
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// releaseBallast deletes the ballast and reports whether it held one.
func (w *spaceWatch) releaseBallast() bool {
	if w.ballastBytes == 0 {
		return false
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	err := w.fs.Remove(w.ballast)
	if err != nil && !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, os.ErrNotExist) {
		if ok, left := w.warnLimit.allow("delete"); ok {
			w.log.Warn("deleting the disk ballast failed", zap.String("path", w.ballast), zap.Error(err), zap.Int("lines_left_out", left))
		}
		return false
	}
	held := err == nil
	w.ballastHeld = false
	if held {
		w.free.Add(w.ballastBytes)
		w.log.Warn("disk ballast deleted to make room", zap.String("path", w.ballast), zap.Int64("bytes", w.ballastBytes))
	}
	return held
}

// onENOSPC is called when a write failed with ENOSPC (by vfs.OnDiskFull
// for Pebble's and the index files' writes, before they are made again
// once; by the writer for a segment write): it deletes the ballast and
// enters the state.
func (w *spaceWatch) onENOSPC(err error) {
	released := w.releaseBallast()
	if err == nil {
		err = syscall.ENOSPC
	}
	w.enter("a write failed for lack of space", err, released)
}

// enter makes the store refuse appends, with reason (and err, the write
// that failed, if any) in the log line and /readyz.
func (w *spaceWatch) enter(reason string, err error, ballastReleased bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.full.Load() {
		return
	}
	w.full.Store(true)
	w.reason, w.since = reason, time.Now()
	free := w.free.Load()
	w.metrics.SetStorage(true, free)
	w.logLocked(zap.WarnLevel, "disk full: refusing produces", zap.String("reason", reason), zap.Int64("free_bytes", free),
		zap.Int64("min_free_bytes", w.minFree), zap.Bool("ballast_deleted", ballastReleased), zap.Error(err))
}

// logLocked writes a state line unless one was written within
// spaceLogEvery; the lines left out are counted in the next one.
// Requires mu.
func (w *spaceWatch) logLocked(lvl zapcore.Level, msg string, fields ...zap.Field) {
	now := time.Now()
	if !w.lastLog.IsZero() && now.Sub(w.lastLog) < spaceLogEvery {
		w.suppressed++
		return
	}
	if w.suppressed > 0 {
		fields = append(fields, zap.Int("changes_not_logged", w.suppressed))
	}
	w.lastLog, w.suppressed = now, 0
	if ce := w.log.Check(lvl, msg); ce != nil {
		ce.Write(fields...)
	}
}

// check reads the free space (every spaceCheck): it enters the state below
// the mark, reserves a missing ballast when there is room, and leaves the
// state once the free space is at least the mark plus an eighth (at
// least minLeaveFree), the ballast reserved again first.
func (w *spaceWatch) check() {
	free := w.read()
	if free < 0 {
		return
	}
	if !w.full.Load() {
		if free < w.minFree {
			w.enter(fmt.Sprintf("%d bytes free, below storage_min_free_bytes %d", free, w.minFree), nil, false)
			return
		}
		w.reserveBallast(free)
		return
	}
	w.mu.Lock()
	readOnly, since := w.readOnly, w.since
	w.mu.Unlock()
	leaveAt := max(w.minFree+w.minFree/8, minLeaveFree)
	if readOnly && free >= leaveAt+w.ballastBytes+openMargin && w.reopen != nil && w.reopen() {
		w.mu.Lock()
		w.readOnly = false
		w.mu.Unlock()
		readOnly = false
	}
	if readOnly || free < leaveAt {
		w.mu.Lock()
		w.logLocked(zap.WarnLevel, "disk full: refusing produces", zap.String("reason", w.reason),
			zap.Int64("free_bytes", free), zap.Int64("min_free_bytes", w.minFree), zap.Duration("for", time.Since(since).Round(time.Second)),
			zap.Bool("metadata_read_only", readOnly))
		w.mu.Unlock()
		return
	}
	if !w.reserveBallast(free) {
		return
	}
	w.mu.Lock()
	w.full.Store(false)
	w.reason = ""
	w.metrics.SetStorage(false, w.free.Load())
	w.log.Info("disk space available again: accepting produces", zap.Int64("free_bytes", free),
		zap.Duration("was_full_for", time.Since(since).Round(time.Millisecond)))
	w.mu.Unlock()
}

// take counts n bytes about to be written by the writer and reports
// whether they would take the free space below the mark (then the state
// is entered and the write is not to be made).
func (w *spaceWatch) take(n int64) bool {
	if w.minFree == 0 {
		return false
	}
	free := w.free.Load()
	if free < 0 {
		return false
	}
	if free-n < w.minFree {
		w.enter(fmt.Sprintf("%d bytes free, %d more would go below storage_min_free_bytes %d", free, n, w.minFree), nil, false)
		return true
	}
	w.free.Add(-n)
	return false
}

// fullErr returns ErrStorageFull with the reason while the store is full,
// nil when it is not.
func (w *spaceWatch) fullErr() error {
	why := w.notReady()
	if why == "" {
		return nil
	}
	return fmt.Errorf("%w: %s", disbackend.ErrStorageFull, why)
}

// notReady is StorageNotReady's answer.
func (w *spaceWatch) notReady() string {
	if !w.full.Load() {
		return ""
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	why := "disk full: " + w.reason
	if free := w.free.Load(); free >= 0 {
		why += fmt.Sprintf("; %d bytes free, storage_min_free_bytes %d", free, w.minFree)
	}
	if w.readOnly {
		why += "; metadata opened read-only until there is room"
	}
	return why
}

// setReadOnly records that the metadata is open read-only: the state
// lasts until check finds room to open it for writing (reopen).
func (w *spaceWatch) setReadOnly() {
	w.onENOSPC(nil)
	w.mu.Lock()
	w.readOnly = true
	w.mu.Unlock()
}

// metaErr is err of a metadata write, with pebble.ErrReadOnly (the
// metadata opened read-only on a full disk) made ErrStorageFull.
func metaErr(err error) error {
	if errors.Is(err, pebble.ErrReadOnly) {
		return fmt.Errorf("%w: the metadata is read-only on a full disk: %v", disbackend.ErrStorageFull, err)
	}
	return err
}

// reopenMeta opens the metadata for writing again, after a start that
// opened it read-only on a full disk, now that check found room. It
// reports whether it did; if the metadata cannot even be opened
// read-only again, the store is closed (a restart is needed).
func (s *Store) reopenMeta() bool {
	s.dbMu.Lock()
	defer s.dbMu.Unlock()
	if s.closed.Load() {
		return false
	}
	if err := s.db.Close(); err != nil {
		s.log.Warn("closing the read-only metadata failed", zap.Error(err))
	}
	db, err := pebble.Open(s.metaDir, s.pebbleOpts(false))
	if err == nil {
		s.db = db
		s.log.Info("metadata opened for writing again")
		return true
	}
	s.log.Warn("opening the metadata for writing failed; it stays read-only", zap.Error(err))
	if db, err = pebble.Open(s.metaDir, s.pebbleOpts(true)); err == nil {
		s.db = db
		return false
	}
	s.fail(fmt.Errorf("the metadata cannot be opened again: %w", err))
	s.closed.Store(true)
	return false
}

// StorageNotReady says why the store refuses appends (a full disk), ""
// while it takes them (disbackend.StorageReporter, /readyz).
func (s *Store) StorageNotReady() string { return s.space.notReady() }

var _ disbackend.StorageReporter = (*Store)(nil)

// limitedLog lets one line per key through every interval and counts
// the others, for log lines that could otherwise repeat without bound
// (Pebble's background errors while the disk is full).
type limitedLog struct {
	interval time.Duration
	mu       sync.Mutex
	last     map[string]time.Time
	left     map[string]int
}

// allow reports whether a line under key may be written now and how many
// were left out since the last one written.
func (l *limitedLog) allow(key string) (bool, int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.last == nil {
		l.last, l.left = make(map[string]time.Time), make(map[string]int)
	}
	now := time.Now()
	if t, ok := l.last[key]; ok && now.Sub(t) < l.interval {
		l.left[key]++
		return false, 0
	}
	if len(l.last) > 1000 { // keys are format strings: few; bound them anyway
		clear(l.last)
	}
	n := l.left[key]
	delete(l.left, key)
	l.last[key] = now
	return true, n
}
