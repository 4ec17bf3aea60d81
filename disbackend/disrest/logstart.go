package disrest

// DeleteRecords on DIS. DIS cannot delete records: they stay until their
// data_duration. The gateway keeps a partition's Kafka log start offset
// set by DeleteRecords in DIS, as the checkpoint of the gateway-owned app
// logStartApp on that partition (sequence number = the log start offset,
// metadata "sid=<stream_id>", which guards against a checkpoint left from
// an earlier stream of the same name), so that every gateway node agrees.
// Every range this Store hands out (Range, Read, the Produce answer's log
// start offset) starts at that floor at the earliest, so Fetch below it
// gets OFFSET_OUT_OF_RANGE and ListOffsets earliest returns it.
//
// The node that served DeleteRecords knows the floor at once; the others
// read the app's checkpoints when they next read a range from DIS, at most
// every Options.LogStartRefresh: one DescribeApp, then one
// ShowConsumerState per stream that has a floor, and one GetCheckpoint per
// floor that changed.
//
// The compactor re-appends live keys only of cleanup.policy=compact
// streams, where DeleteRecords is refused (POLICY_VIOLATION), so it never
// brings deleted records back; a stream changed from compact,delete to
// compact after a DeleteRecords would have its live keys below the floor
// re-appended (not handled).

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/disgw/disgw/disbackend"
	"github.com/disgw/disgw/disbackend/disapi"
)

// logStartApp is the gateway-owned app whose checkpoint on a partition is
// the partition's DeleteRecords log start offset.
const logStartApp = "__disgw-logstart"

const defaultLogStartRefresh = 5 * time.Second

var (
	_ disbackend.RecordDeleter   = (*Store)(nil)
	_ disbackend.LogDirDescriber = (*Store)(nil)
)

// floor is a partition's DeleteRecords log start offset as kept in DIS.
type floor struct {
	off int64
	sid string // DIS stream_id of the stream it was set on
}

// logStartState paces the reading of other nodes' floors.
type logStartState struct {
	mu      sync.Mutex   // held by the one refresh running
	at      atomic.Int64 // unix nanoseconds of the last refresh's start
	loaded  atomic.Bool  // a refresh has succeeded
	appOnce onceOK       // logStartApp created
}

// setFloor records f as k's floor unless a higher one of the same stream
// is known.
func (c *rangeCache) setFloor(k partKey, f floor) {
	c.mu.Lock()
	if old, ok := c.floors[k]; !ok || old.sid != f.sid || old.off < f.off {
		c.floors[k] = f
	}
	c.mu.Unlock()
}

func (c *rangeCache) floorOf(k partKey) (floor, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	f, ok := c.floors[k]
	return f, ok
}

func (c *rangeCache) floorKeys() []partKey {
	c.mu.Lock()
	defer c.mu.Unlock()
	ks := make([]partKey, 0, len(c.floors))
	for k := range c.floors {
		ks = append(ks, k)
	}
	return ks
}

func (c *rangeCache) dropFloor(k partKey, sid string) {
	c.mu.Lock()
	if f, ok := c.floors[k]; ok && f.sid == sid {
		delete(c.floors, k)
	}
	c.mu.Unlock()
}

// DeleteRecords keeps offset as the partition's log start offset in DIS
// (CommitCheckpoint of logStartApp) and returns the new log start offset;
// an offset at or below the current one (DIS's first sequence number, or
// an earlier DeleteRecords of any node) leaves it. The records stay in DIS
// until their data_duration; reads below the new start fail with
// ErrOffsetOutOfRange. Kafka DeleteRecords (API 21). DIS DescribeStream,
// GetCheckpoint, CreateApp, CommitCheckpoint. Errors: ErrStreamNotFound,
// ErrPartitionNotFound, ErrOffsetOutOfRange (offset < 0 or beyond the
// partition's next sequence number), ErrNotLeader (cluster mode: another
// node leads the partition, or the lease lapsed), or DIS's.
func (s *Store) DeleteRecords(ctx context.Context, stream string, part int32, offset int64) (int64, error) {
	if gatewayStream(stream) {
		return 0, fmt.Errorf("disrest: delete records %s/%d: %w", stream, part, disbackend.ErrStreamNotFound)
	}
	key := disbackend.PartitionKey(stream, part)
	if err := s.fenced(key); err != nil {
		return 0, fmt.Errorf("disrest: delete records %s/%d: %w", stream, part, err)
	}
	k := partKey{stream, part}
	si, err := s.streamInfo(ctx, stream, true)
	if err != nil {
		return 0, err
	}
	r, err := s.describeRange(ctx, stream, part)
	if err != nil {
		return 0, err
	}
	if offset < 0 || offset > r.Next {
		return 0, fmt.Errorf("disrest: delete records %s/%d before %d: %w [%d : %d]",
			stream, part, offset, disbackend.ErrOffsetOutOfRange, r.First, r.Next)
	}
	// Another node's floor that this one has not read yet.
	sn, meta, err := s.checkpointOf(ctx, logStartApp, stream, part)
	switch {
	case err == nil:
		if sn >= 0 && meta == sidMeta(si.id) {
			s.ranges.setFloor(k, floor{off: sn, sid: si.id})
		}
	case !errors.Is(err, disbackend.ErrAppNotFound) && codeOf(err) != disapi.CodeNoCheckpoint:
		return 0, err
	}
	r, _ = s.ranges.get(k, 0)
	if offset <= r.First {
		return r.First, nil
	}
	if err := s.logStarts.appOnce.do(func() error { return s.ensureApp(ctx, logStartApp) }); err != nil {
		return 0, err
	}
	if err := s.fenced(key); err != nil {
		return 0, fmt.Errorf("disrest: delete records %s/%d: %w", stream, part, err)
	}
	if err := s.commit(ctx, logStartApp, stream, part, offset, sidMeta(si.id)); err != nil {
		return 0, fmt.Errorf("disrest: keep the log start offset of %s/%d: %w", stream, part, err)
	}
	s.ranges.setFloor(k, floor{off: offset, sid: si.id})
	s.log.Info("log start offset moved", zap.String("stream", stream), zap.Int32("partition", part),
		zap.Int64("log_start_offset", offset))
	r, _ = s.ranges.get(k, 0)
	return r.First, nil
}

func sidMeta(streamID string) string { return "sid=" + streamID }

// refreshLogStarts reads the floors kept in DIS when the last refresh
// started Options.LogStartRefresh ago or more (or force). Until a first
// read succeeds every caller waits for it (a range handed out before it
// could lie below a floor); afterwards a caller that finds a refresh
// running goes on with the floors known. A failed read is logged and tried
// again after the interval. Nothing it calls reads a range (no recursion).
func (s *Store) refreshLogStarts(ctx context.Context, force bool) {
	ls := &s.logStarts
	due := func() bool { return force || time.Since(time.Unix(0, ls.at.Load())) >= s.opts.LogStartRefresh }
	if ls.loaded.Load() {
		if !due() || !ls.mu.TryLock() {
			return
		}
	} else {
		ls.mu.Lock()
	}
	defer ls.mu.Unlock()
	if !due() && (ls.loaded.Load() || ls.at.Load() != 0) {
		return // refreshed while this caller waited, or a first read failed just now
	}
	ls.at.Store(time.Now().UnixNano())
	if err := s.loadLogStarts(ctx); err != nil {
		s.log.Warn("read log start offsets failed", zap.Error(err))
		return
	}
	ls.loaded.Store(true)
}

// loadLogStarts reads logStartApp's checkpoints into the range cache's
// floors and drops floors of streams that are gone or were recreated.
// DIS DescribeApp, ShowConsumerState, GetCheckpoint.
func (s *Store) loadLogStarts(ctx context.Context) error {
	resp, err := s.showApp(ctx, logStartApp)
	if errors.Is(err, disbackend.ErrAppNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	if resp.CommitCheckpointStreamNames != nil {
		for _, name := range *resp.CommitCheckpointStreamNames {
			if err := s.loadStreamLogStarts(ctx, name); err != nil {
				return err
			}
		}
	}
	for _, k := range s.ranges.floorKeys() {
		f, ok := s.ranges.floorOf(k)
		if !ok {
			continue
		}
		si, err := s.streamInfo(ctx, k.stream, false)
		if errors.Is(err, disbackend.ErrStreamNotFound) || err == nil && si.id != f.sid {
			s.ranges.dropFloor(k, f.sid)
		}
	}
	return nil
}

// loadStreamLogStarts reads the floors of one stream.
func (s *Store) loadStreamLogStarts(ctx context.Context, name string) error {
	si, err := s.streamInfo(ctx, name, false)
	if errors.Is(err, disbackend.ErrStreamNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	return s.eachCheckpointed(ctx, logStartApp, name, func(part int32, sequenceNumber string) error {
		k := partKey{name, part}
		if f, ok := s.ranges.floorOf(k); ok && f.sid == si.id && fmt.Sprint(f.off) == sequenceNumber {
			return nil // known and checked
		}
		sn, meta, err := s.checkpointOf(ctx, logStartApp, name, part)
		if err != nil {
			return err
		}
		if sn >= 0 && meta == sidMeta(si.id) {
			s.ranges.setFloor(k, floor{off: sn, sid: si.id})
		}
		return nil
	})
}

// LogDir names the data's place, "dis:<endpoint>/<project id>"; DIS does
// not tell sizes, so TotalBytes and UsableBytes are -1. Kafka
// DescribeLogDirs (API 35).
func (s *Store) LogDir() (disbackend.LogDir, error) {
	return disbackend.LogDir{Dir: "dis:" + s.opts.Endpoint + "/" + s.opts.ProjectID, TotalBytes: -1, UsableBytes: -1}, nil
}

// PartitionBytes returns -1: DIS does not tell a partition's size. Kafka
// DescribeLogDirs' partition size. Errors: none (the gateway checks the
// partition exists).
func (s *Store) PartitionBytes(stream string, part int32) (int64, error) {
	return -1, nil
}
