package localstore

import (
	"context"
	"fmt"
	"path/filepath"

	"go.uber.org/zap"

	"github.com/disgw/disgw/disbackend"
)

var (
	_ disbackend.RecordDeleter   = (*Store)(nil)
	_ disbackend.LogDirDescriber = (*Store)(nil)
)

// DeleteRecords moves the partition's first sequence number (Kafka's log
// start offset) up to offset, persisted and synced before it returns as
// retention persists it (the partition's floor in Pebble), and returns the
// new first; an offset at or below first leaves it. The batches wholly
// below it are dropped from the index and the tail cache at once and
// their segments removed once every partition's batches in them are below
// first, as retention removes them. Kafka DeleteRecords (API 21). Errors:
// ErrStreamNotFound, ErrPartitionNotFound, ErrOffsetOutOfRange (offset < 0
// or > next), ErrClosed, or a storage error.
func (s *Store) DeleteRecords(ctx context.Context, stream string, partition int32, offset int64) (int64, error) {
	if err := s.enter("delete records"); err != nil {
		return 0, err
	}
	defer s.dbMu.RUnlock()
	p, err := s.lookup("delete records", stream, partition)
	if err != nil {
		return 0, err
	}
	first, next := p.span()
	if offset < 0 || offset > next {
		return 0, outOfRange(stream, partition, offset, disbackend.PartitionRange{First: first, Next: next})
	}
	if offset > first {
		if err := ctx.Err(); err != nil {
			return 0, fmt.Errorf("localstore: delete records stream %q partition %d: %w", stream, partition, err)
		}
		if err := s.applyExpiry([]expiry{{name: stream, p: p, from: first, to: offset}}, s.now().UnixMilli()); err != nil {
			return 0, fmt.Errorf("localstore: delete records stream %q partition %d: %w", stream, partition, err)
		}
		s.log.Info("records deleted", zap.String("stream", stream), zap.Int32("partition", partition), zap.Int64("new_first", offset))
	}
	first, _ = p.span()
	return first, nil
}

// LogDir returns the data directory (absolute) and its volume's total and
// available bytes (-1 when the filesystem does not say). Kafka
// DescribeLogDirs (API 35). Errors: ErrClosed.
func (s *Store) LogDir() (disbackend.LogDir, error) {
	if s.closed.Load() {
		return disbackend.LogDir{}, fmt.Errorf("localstore: log dir: %w", disbackend.ErrClosed)
	}
	d := disbackend.LogDir{Dir: s.dir, TotalBytes: -1, UsableBytes: -1}
	if abs, err := filepath.Abs(s.dir); err == nil {
		d.Dir = abs
	}
	if u, err := s.fs.GetDiskUsage(s.dir); err == nil {
		d.TotalBytes, d.UsableBytes = int64(u.TotalBytes), int64(u.AvailBytes)
	}
	return d, nil
}

// PartitionBytes returns the bytes of the partition's synced batches that
// hold records at or after its first (whole batches, as stored in the
// segments). Kafka DescribeLogDirs' partition size. Errors:
// ErrStreamNotFound, ErrPartitionNotFound, ErrClosed.
func (s *Store) PartitionBytes(stream string, partition int32) (int64, error) {
	if s.closed.Load() {
		return 0, fmt.Errorf("localstore: partition bytes stream %q partition %d: %w", stream, partition, disbackend.ErrClosed)
	}
	p, err := s.lookup("partition bytes", stream, partition)
	if err != nil {
		return 0, err
	}
	p.mu.RLock()
	defer p.mu.RUnlock()
	n := -p.belowFirst
	for _, sp := range p.segs {
		if sp.last >= p.first {
			n += sp.bytes
		}
	}
	return max(n, 0), nil
}
