package localstore

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sort"

	"github.com/cockroachdb/pebble/v2"
	"go.uber.org/zap"

	"github.com/disgw/disgw/disbackend"
)

// streamMeta is the persisted form of a stream (JSON under 'm' name).
type streamMeta struct {
	Stream disbackend.Stream
	// Sid is the stream's internal number, the key prefix of its data.
	Sid uint64
}

// MaxPartitions is the most partitions one stream may have in the embedded
// store; each partition costs memory at open, so an absurd count asked by a
// client must be refused before it is persisted.
const MaxPartitions = 100_000

// CreateStream creates a stream with a new random TopicID and partitions
// starting at sequence number 0; the metadata is synced before it returns.
// DIS CreateStream, Kafka CreateTopics. Errors: ErrStreamExists (the same
// topic exists), ErrNameCollision (another topic maps to the same stream
// name), ErrInvalidName, ErrInvalidPartitionCount (<= 0 or over
// MaxPartitions), ErrInvalidConfig,
// ErrClosed, or a storage error.
func (s *Store) CreateStream(ctx context.Context, spec disbackend.StreamSpec) (disbackend.Stream, error) {
	op := "create stream " + fmt.Sprintf("%q", spec.Name)
	if err := ctx.Err(); err != nil {
		return disbackend.Stream{}, fmt.Errorf("localstore: %s: %w", op, err)
	}
	if err := validateStreamName(spec.Name); err != nil {
		return disbackend.Stream{}, fmt.Errorf("localstore: %s: %w", op, err)
	}
	if spec.PartitionCount <= 0 || spec.PartitionCount > MaxPartitions {
		return disbackend.Stream{}, fmt.Errorf("localstore: %s: %w: %d partitions, must be 1 to %d",
			op, disbackend.ErrInvalidPartitionCount, spec.PartitionCount, MaxPartitions)
	}
	spec.Config = spec.Config.WithDefaults()
	if err := validateConfig(spec.Config); err != nil {
		return disbackend.Stream{}, fmt.Errorf("localstore: %s: %w", op, err)
	}
	if err := s.enter(op); err != nil {
		return disbackend.Stream{}, err
	}
	defer s.dbMu.RUnlock()
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if st := s.streams[spec.Name]; st != nil {
		if st.meta.TopicName == spec.TopicName {
			return disbackend.Stream{}, fmt.Errorf("localstore: %s: %w", op, disbackend.ErrStreamExists)
		}
		return disbackend.Stream{}, fmt.Errorf("localstore: %s for topic %q: %w: topic %q already uses it",
			op, spec.TopicName, disbackend.ErrNameCollision, st.meta.TopicName)
	}
	meta := streamMeta{
		Stream: disbackend.Stream{
			Name:           spec.Name,
			TopicName:      spec.TopicName,
			TopicID:        newTopicID(),
			PartitionCount: spec.PartitionCount,
			Config:         spec.Config,
			CreatedAt:      s.now().UTC().Truncate(0),
		},
		Sid: s.nextSid,
	}
	b := s.db.NewBatch()
	defer b.Close()
	_ = b.Set(metaKey(spec.Name), mustJSON(meta), nil)
	_ = b.Set([]byte{keySidCounter}, putInt64(int64(s.nextSid+1)), nil)
	if err := b.Commit(pebble.Sync); err != nil {
		return disbackend.Stream{}, fmt.Errorf("localstore: %s: %w", op, metaErr(err))
	}
	s.nextSid++
	st := &stream{meta: meta.Stream, sid: meta.Sid}
	st.parts = newPartitions(st, 0, spec.PartitionCount)
	s.mu.Lock()
	s.streams[spec.Name] = st
	s.mu.Unlock()
	s.log.Info("stream created", zap.String("stream", spec.Name), zap.String("topic", spec.TopicName),
		zap.Int32("partitions", spec.PartitionCount))
	return st.meta, nil
}

// DeleteStream removes a stream with its metadata, every app's checkpoints
// of it (synced in one Pebble batch), its producer states and its segment
// files. A stream created again with the same
// name gets a new TopicID and starts at sequence number 0. Appends still
// queued for it fail with ErrStreamNotFound. DIS DeleteStream, Kafka
// DeleteTopics. Errors: ErrStreamNotFound, ErrClosed, or a storage error.
func (s *Store) DeleteStream(ctx context.Context, name string) error {
	op := fmt.Sprintf("delete stream %q", name)
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("localstore: %s: %w", op, err)
	}
	if err := s.enter(op); err != nil {
		return err
	}
	defer s.dbMu.RUnlock()
	s.wmu.Lock()
	defer s.wmu.Unlock()
	st := s.streams[name]
	if st == nil {
		return fmt.Errorf("localstore: %s: %w", op, disbackend.ErrStreamNotFound)
	}
	s.appsMu.Lock()
	b := s.db.NewBatch()
	defer b.Close()
	_ = b.Delete(metaKey(name), nil)
	_ = b.Delete(cleanerKey(st.sid), nil)
	start, end := streamSpan(prefixFloor, st.sid)
	_ = b.DeleteRange(start, end, nil)
	err := s.deleteStreamCheckpoints(b, name)
	if err == nil {
		err = b.Commit(pebble.Sync)
	}
	s.appsMu.Unlock()
	if err != nil {
		return fmt.Errorf("localstore: %s: %w", op, metaErr(err))
	}
	s.mu.Lock()
	delete(s.streams, name)
	s.mu.Unlock()
	for _, p := range st.parts {
		p.mu.Lock()
		p.deleted = true
		n := int64(len(p.cache))
		freed := p.dropCache()
		p.mu.Unlock()
		s.cache.release(freed, n)
	}
	s.producers.DropIf(func(k producerKey) bool { return k.sid == st.sid })
	s.notifyChanged()
	// Groups in flight may still sync the stream's active segment. A file
	// left behind by a failure here is removed at the next Open, as it
	// belongs to no stream.
	s.quiesce()
	if seg := s.active[st.sid]; seg != nil {
		s.activeChunks.Add(-seg.chunks.Load())
		seg.chunks.Store(0)
		s.dropJournal(seg)
	}
	for _, sg := range s.segs[st.sid] {
		if err := s.removeSegment(sg); err != nil {
			s.log.Warn("removing segment of deleted stream failed", zap.String("segment", sg.path), zap.Error(err))
		}
	}
	for _, n := range st.snapshots {
		path := s.fs.PathJoin(s.segDir, segmentName(st.sid, n)+"."+extSnapshot)
		if err := s.fs.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
			s.log.Warn("removing a producer snapshot of deleted stream failed", zap.String("snapshot", path), zap.Error(err))
		}
	}
	delete(s.segs, st.sid)
	delete(s.active, st.sid)
	if err := syncDir(s.fs, s.segDir); err != nil {
		s.log.Warn("syncing segment directory failed", zap.Error(err))
	}
	s.log.Info("stream deleted", zap.String("stream", name))
	return nil
}

// ListStreams returns every stream, sorted by Name. DIS ListStreams, Kafka
// Metadata. Errors: ErrClosed.
func (s *Store) ListStreams(ctx context.Context) ([]disbackend.Stream, error) {
	if s.closed.Load() {
		return nil, fmt.Errorf("localstore: list streams: %w", disbackend.ErrClosed)
	}
	s.mu.RLock()
	out := make([]disbackend.Stream, 0, len(s.streams))
	for _, st := range s.streams {
		out = append(out, st.meta)
	}
	s.mu.RUnlock()
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// DescribeStream returns one stream. DIS DescribeStream, Kafka Metadata and
// DescribeConfigs. Errors: ErrStreamNotFound, ErrClosed.
func (s *Store) DescribeStream(ctx context.Context, name string) (disbackend.Stream, error) {
	if s.closed.Load() {
		return disbackend.Stream{}, fmt.Errorf("localstore: describe stream %q: %w", name, disbackend.ErrClosed)
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	st := s.streams[name]
	if st == nil {
		return disbackend.Stream{}, fmt.Errorf("localstore: describe stream %q: %w", name, disbackend.ErrStreamNotFound)
	}
	return st.meta, nil
}

// UpdatePartitionCount raises the stream's partition count to n; the new
// partitions start at sequence number 0. DIS UpdatePartitionCount, Kafka
// CreatePartitions. Errors: ErrStreamNotFound, ErrInvalidPartitionCount (n
// not larger than the current count), ErrClosed, or a storage error.
func (s *Store) UpdatePartitionCount(ctx context.Context, name string, n int32) error {
	op := fmt.Sprintf("update partition count of stream %q", name)
	return s.updateMeta(ctx, op, name, func(m *disbackend.Stream) error {
		if n <= m.PartitionCount {
			return fmt.Errorf("%w: %d partitions requested, stream has %d and can only grow",
				disbackend.ErrInvalidPartitionCount, n, m.PartitionCount)
		}
		if n > MaxPartitions {
			return fmt.Errorf("%w: %d partitions requested, at most %d per stream",
				disbackend.ErrInvalidPartitionCount, n, MaxPartitions)
		}
		m.PartitionCount = n
		return nil
	})
}

// UpdateStreamConfig replaces the stream's config (retention, timestamp
// type, max message bytes); it applies to later appends and retention passes.
// DIS UpdateStream, Kafka AlterConfigs. Errors: ErrStreamNotFound,
// ErrInvalidConfig, ErrClosed, or a storage error.
func (s *Store) UpdateStreamConfig(ctx context.Context, name string, cfg disbackend.StreamConfig) error {
	op := fmt.Sprintf("update config of stream %q", name)
	cfg = cfg.WithDefaults()
	if err := validateConfig(cfg); err != nil {
		return fmt.Errorf("localstore: %s: %w", op, err)
	}
	return s.updateMeta(ctx, op, name, func(m *disbackend.Stream) error {
		m.Config = cfg
		return nil
	})
}

// updateMeta applies change to a copy of the stream's metadata, syncs it, and
// then installs it (adding partitions if the count grew).
func (s *Store) updateMeta(ctx context.Context, op, name string, change func(*disbackend.Stream) error) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("localstore: %s: %w", op, err)
	}
	if err := s.enter(op); err != nil {
		return err
	}
	defer s.dbMu.RUnlock()
	s.wmu.Lock()
	defer s.wmu.Unlock()
	st := s.streams[name]
	if st == nil {
		return fmt.Errorf("localstore: %s: %w", op, disbackend.ErrStreamNotFound)
	}
	meta := st.meta
	if err := change(&meta); err != nil {
		return fmt.Errorf("localstore: %s: %w", op, err)
	}
	if err := s.db.Set(metaKey(name), mustJSON(streamMeta{Stream: meta, Sid: st.sid}), pebble.Sync); err != nil {
		return fmt.Errorf("localstore: %s: %w", op, metaErr(err))
	}
	s.mu.Lock()
	if n := meta.PartitionCount; int(n) > len(st.parts) {
		st.parts = append(st.parts, newPartitions(st, int32(len(st.parts)), n)...)
	}
	st.meta = meta
	s.mu.Unlock()
	s.notifyChanged()
	return nil
}

func newPartitions(st *stream, from, to int32) []*partition {
	ps := make([]*partition, 0, to-from)
	for i := from; i < to; i++ {
		ps = append(ps, &partition{sid: st.sid, id: i, st: st})
	}
	return ps
}

// StreamNameForTopic is the embedded store's stream name for a topic
// (disbackend.StreamNamer): '.' as '_' at any length up to 249
// characters (disbackend.PlainStreamNameForTopic); unlike DIS, the store
// has no 64-character limit, so no name is hashed. Errors wrap
// disbackend.ErrInvalidName.
func (s *Store) StreamNameForTopic(topic string) (string, error) {
	return disbackend.PlainStreamNameForTopic(topic)
}

// validateStreamName allows 1-249 (disbackend.MaxTopicNameLen) characters
// of [A-Za-z0-9_-]: every name PlainStreamNameForTopic gives, and DIS's
// (dislocal, in front of the store, keeps DIS's 64).
func validateStreamName(name string) error {
	if name == "" || len(name) > disbackend.MaxTopicNameLen {
		return fmt.Errorf("%w: stream name must be 1-%d characters", disbackend.ErrInvalidName, disbackend.MaxTopicNameLen)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return fmt.Errorf("%w: stream name %q has character %q; allowed are ASCII letters, digits, '_' and '-'",
				disbackend.ErrInvalidName, name, c)
		}
	}
	return nil
}

// ValidateStreamConfig checks cfg as CreateStream and UpdateStreamConfig
// would. Errors wrap ErrInvalidConfig (Kafka INVALID_CONFIG).
func (s *Store) ValidateStreamConfig(cfg disbackend.StreamConfig) error { return validateConfig(cfg) }

func validateConfig(cfg disbackend.StreamConfig) error {
	if cfg.Retention <= 0 && cfg.Retention != disbackend.UnlimitedRetention {
		return fmt.Errorf("%w: retention %v must be > 0 or unlimited (-1)", disbackend.ErrInvalidConfig, cfg.Retention)
	}
	if cfg.TimestampType != disbackend.CreateTime && cfg.TimestampType != disbackend.LogAppendTime {
		return fmt.Errorf("%w: unknown timestamp type %d", disbackend.ErrInvalidConfig, cfg.TimestampType)
	}
	if cfg.MaxMessageBytes < 0 {
		return fmt.Errorf("%w: max message bytes %d must be >= 0", disbackend.ErrInvalidConfig, cfg.MaxMessageBytes)
	}
	if cfg.MaxDecompressedMessageBytes < 0 {
		return fmt.Errorf("%w: max decompressed message bytes %d must be >= 0", disbackend.ErrInvalidConfig, cfg.MaxDecompressedMessageBytes)
	}
	if !disbackend.ValidRecordFormat(cfg.RecordFormat) {
		return fmt.Errorf("%w: unknown record format %q", disbackend.ErrInvalidConfig, cfg.RecordFormat)
	}
	switch cfg.CompressionType {
	case "", "producer", "uncompressed", "gzip", "snappy", "lz4", "zstd":
	default:
		return fmt.Errorf("%w: unknown compression type %q", disbackend.ErrInvalidConfig, cfg.CompressionType)
	}
	if cfg.CleanupPolicy == "" || !disbackend.ValidCleanupPolicy(cfg.CleanupPolicy) {
		return fmt.Errorf("%w: unknown cleanup policy %q", disbackend.ErrInvalidConfig, cfg.CleanupPolicy)
	}
	switch {
	case cfg.DeleteRetention < 0, cfg.MinCompactionLag < 0, cfg.MaxCompactionLag < 0, cfg.SegmentBytes < 0, cfg.SegmentTime < 0:
		return fmt.Errorf("%w: negative compaction or segment setting", disbackend.ErrInvalidConfig)
	case !(cfg.MinCleanableDirtyRatio >= 0 && cfg.MinCleanableDirtyRatio <= 1):
		return fmt.Errorf("%w: min cleanable dirty ratio %v must be 0 to 1", disbackend.ErrInvalidConfig, cfg.MinCleanableDirtyRatio)
	}
	return nil
}

// newTopicID returns 16 random bytes, never all zero (Kafka's null topic id).
func newTopicID() [16]byte {
	var id [16]byte
	for id == ([16]byte{}) {
		_, _ = rand.Read(id[:]) // crypto/rand.Read never fails (Go 1.24+)
	}
	return id
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("localstore: marshal %T: %v", v, err))
	}
	return b
}
