package disrest

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/huaweicloud/huaweicloud-sdk-go-v3/services/dis/v2/model"
	"go.uber.org/zap"

	"github.com/disgw/disgw/disbackend"
	"github.com/disgw/disgw/disbackend/disapi"
)

// gatewayStream reports whether name is one of the gateway's own streams,
// which are not topics.
func gatewayStream(name string) bool {
	return name == MetaStream || name == SnapshotStream || name == GroupStream || name == ClusterStream || name == TxnStream
}

// MetaStream is the gateway-owned stream whose partition 0 carries, as
// checkpoint metadata of gateway apps, what DIS has no field for (group ids
// that app names cannot give back, the producer-id allocator). It is not a
// topic: ListStreams hides it and CreateStream refuses a topic mapping to it.
const MetaStream = "__disgw_meta"

// Stream tags (DIS: at most 10, key 1-36 and value up to 43 characters of
// letters, digits, '-', '_' and, in values, '.').
const (
	// tagDots marks which '_' of the stream name were '.' in the topic name:
	// a 64-bit mask by position, 16 hex digits. Absent: no dots.
	tagDots = "disgw-topic-dots"
	// tagTimestampType is "LogAppendTime" when the topic says so.
	tagTimestampType = "disgw-timestamp-type"
	// tagMaxMessageBytes is max.message.bytes, decimal.
	tagMaxMessageBytes = "disgw-max-message-bytes"
	// tagRecordFormat is dis.record.format, when the topic sets it.
	tagRecordFormat = "disgw-record-format"
	// tagMaxDecompressedBytes is max.decompressed.message.bytes, decimal,
	// when the topic sets it.
	tagMaxDecompressedBytes = "disgw-max-decompressed-bytes"
	// tagCleanupPolicy is cleanup.policy when it is not delete: "compact"
	// "compact-delete" or "delete-compact" (a tag value cannot hold a
	// comma).
	tagCleanupPolicy = "disgw-cleanup-policy"
	// tagExtConfig is "1" when the stream has topic configs that no tag
	// holds (extConfig), kept as checkpoint metadata of gatewayApp on the
	// stream's partition 0.
	tagExtConfig = "disgw-ext-config"
)

// streamInfo is what Append and Read need of a stream, cached.
type streamInfo struct {
	st       disbackend.Stream
	id       string // DIS stream_id
	advanced bool   // stream_type ADVANCED (higher limits)
	// writable is DIS's writable_partition_count: partitions from it up to
	// st.PartitionCount (the readable ones) were left DELETED by a
	// scale-down, readable and not writable. 0 when unknown.
	writable int32
	fetched  time.Time
}

// streamCache keeps streams by name for streamTTL; local changes
// invalidate it.
type streamCache struct {
	mu sync.Mutex
	m  map[string]streamInfo
	// ids maps "name/create_time" to stream_id so ListStreams need not
	// describe streams it has seen.
	ids map[string]string
}

const streamTTL = 5 * time.Second

func (c *streamCache) init() {
	c.m = map[string]streamInfo{}
	c.ids = map[string]string{}
}

func (c *streamCache) get(name string) (streamInfo, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	si, ok := c.m[name]
	if !ok || time.Since(si.fetched) > streamTTL {
		return streamInfo{}, false
	}
	return si, true
}

func (c *streamCache) put(si streamInfo) {
	c.mu.Lock()
	c.m[si.st.Name] = si
	c.ids[si.st.Name+"/"+strconv.FormatInt(si.st.CreatedAt.UnixMilli(), 10)] = si.id
	c.mu.Unlock()
}

// peek returns the cached stream however old it is.
func (c *streamCache) peek(name string) (streamInfo, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	si, ok := c.m[name]
	return si, ok
}

func (c *streamCache) drop(name string) {
	c.mu.Lock()
	delete(c.m, name)
	c.mu.Unlock()
}

func (c *streamCache) idOf(name string, created int64) (string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	id, ok := c.ids[name+"/"+strconv.FormatInt(created, 10)]
	return id, ok
}

// topicID derives the Kafka topic id from DIS's stream_id
// (docs/dis-backend.md, "Topics, tags and retention"): stable across
// restarts and nodes, new for a re-created stream.
func topicID(streamID string) [16]byte {
	sum := sha256.Sum256([]byte("disgw topic id\x00" + streamID))
	var id [16]byte
	copy(id[:], sum[:16])
	if id == ([16]byte{}) {
		id[15] = 1
	}
	return id
}

// ValidateStreamConfig checks cfg as CreateStream and UpdateStreamConfig
// would: retention 24-168 hours (or -1), a known record format, a known
// cleanup policy, max.message.bytes at most MaxMessageBytes (what DIS can
// store per record). Errors wrap ErrInvalidConfig (Kafka INVALID_CONFIG).
func (s *Store) ValidateStreamConfig(cfg disbackend.StreamConfig) error {
	if _, err := dataDuration(cfg); err != nil {
		return err
	}
	if cfg.MaxMessageBytes > MaxMessageBytes {
		return fmt.Errorf("%w: max.message.bytes %d: DIS stores at most %d bytes per record, so max.message.bytes can be at most %d",
			disbackend.ErrInvalidConfig, cfg.MaxMessageBytes, maxRecordBytes, MaxMessageBytes)
	}
	if !disbackend.ValidRecordFormat(cfg.RecordFormat) {
		return fmt.Errorf("%w: unknown record format %q", disbackend.ErrInvalidConfig, cfg.RecordFormat)
	}
	if !disbackend.ValidCleanupPolicy(cfg.CleanupPolicy) {
		return fmt.Errorf("%w: cleanup.policy %q", disbackend.ErrInvalidConfig, cfg.CleanupPolicy)
	}
	return nil
}

// dataDuration is the stream's data_duration in hours for cfg:
//   - cleanup.policy=compact (without delete): DIS's longest, 168 hours,
//     whatever retention.ms says (Kafka applies no retention to such a
//     topic; the compactor re-appends every live key before DIS expires
//     it, compact.go), so that keys are copied as seldom as DIS allows;
//   - retention.ms=-1 (unlimited): DIS's longest, 168 hours. DIS keeps no
//     data longer, and the topic then reports retention.ms 604800000, what
//     it really is;
//   - otherwise retention.ms rounded up to hours, 24 to 168.
//
// Errors: ErrInvalidConfig naming DIS's range.
func dataDuration(cfg disbackend.StreamConfig) (int32, error) {
	if cfg.CleanupPolicy == disbackend.CleanupCompact || cfg.Retention == disbackend.UnlimitedRetention {
		return disapi.MaxRetentionHours, nil
	}
	return retentionHours(cfg.Retention)
}

// retentionHours maps a retention to data_duration hours, rounded up.
// Errors: ErrInvalidConfig naming DIS's range.
func retentionHours(r time.Duration) (int32, error) {
	h := (r + time.Hour - 1) / time.Hour
	if r <= 0 || h < disapi.MinRetentionHours || h > disapi.MaxRetentionHours {
		return 0, fmt.Errorf("%w: retention.ms %d: DIS keeps data %d to %d hours (retention.ms %d to %d)",
			disbackend.ErrInvalidConfig, r.Milliseconds(), disapi.MinRetentionHours, disapi.MaxRetentionHours,
			int64(disapi.MinRetentionHours)*3600_000, int64(disapi.MaxRetentionHours)*3600_000)
	}
	return int32(h), nil
}

// configTags are the tags that keep cfg and the topic name (a hashed
// stream name keeps its topic name in the ext config instead).
func configTags(topic, stream string, cfg disbackend.StreamConfig) []model.Tag {
	tag := func(k, v string) model.Tag { return model.Tag{Key: &k, Value: &v} }
	var tags []model.Tag
	var mask uint64
	for i := 0; i < len(topic) && i < 64 && !hashedTopic(topic, stream); i++ {
		if topic[i] == '.' {
			mask |= 1 << i
		}
	}
	if mask != 0 {
		tags = append(tags, tag(tagDots, fmt.Sprintf("%016x", mask)))
	}
	if cfg.TimestampType == disbackend.LogAppendTime {
		tags = append(tags, tag(tagTimestampType, "LogAppendTime"))
	}
	tags = append(tags, tag(tagMaxMessageBytes, strconv.FormatInt(int64(cfg.MaxMessageBytes), 10)))
	if cfg.RecordFormat != "" {
		tags = append(tags, tag(tagRecordFormat, cfg.RecordFormat))
	}
	if cfg.MaxDecompressedMessageBytes > 0 {
		tags = append(tags, tag(tagMaxDecompressedBytes, strconv.FormatInt(cfg.MaxDecompressedMessageBytes, 10)))
	}
	if cfg.Compacted() {
		tags = append(tags, tag(tagCleanupPolicy, strings.ReplaceAll(cfg.CleanupPolicy, ",", "-")))
	}
	if extRecord(topic, stream, cfg) != "" {
		tags = append(tags, tag(tagExtConfig, "1"))
	}
	return tags
}

// streamFromDIS builds a Stream from what DIS answers.
// ext is set when the tags say the stream has an extConfig to read.
func streamFromDIS(name, id string, created int64, retention int32, parts int32, tags *[]model.Tag, ext *bool) disbackend.Stream {
	st := disbackend.Stream{
		Name: name, TopicName: name, TopicID: topicID(id), PartitionCount: parts,
		Config:    disbackend.StreamConfig{Retention: time.Duration(retention) * time.Hour, MaxMessageBytes: maxRecordBytes}.WithDefaults(),
		CreatedAt: time.UnixMilli(created),
	}
	if tags == nil {
		return st
	}
	for _, t := range *tags {
		if t.Key == nil || t.Value == nil {
			continue
		}
		switch *t.Key {
		case tagDots:
			mask, err := strconv.ParseUint(*t.Value, 16, 64)
			if err != nil {
				continue
			}
			b := []byte(name)
			for i := range b {
				if mask&(1<<i) != 0 && b[i] == '_' {
					b[i] = '.'
				}
			}
			st.TopicName = string(b)
		case tagTimestampType:
			if *t.Value == "LogAppendTime" {
				st.Config.TimestampType = disbackend.LogAppendTime
			}
		case tagMaxMessageBytes:
			if v, err := strconv.ParseInt(*t.Value, 10, 32); err == nil {
				st.Config.MaxMessageBytes = int32(v)
			}
		case tagRecordFormat:
			if disbackend.ValidRecordFormat(*t.Value) {
				st.Config.RecordFormat = *t.Value
			}
		case tagMaxDecompressedBytes:
			if v, err := strconv.ParseInt(*t.Value, 10, 64); err == nil && v > 0 {
				st.Config.MaxDecompressedMessageBytes = v
			}
		case tagCleanupPolicy:
			switch *t.Value {
			case "compact":
				st.Config.CleanupPolicy = disbackend.CleanupCompact
			case "compact-delete":
				st.Config.CleanupPolicy = disbackend.CleanupCompactDelete
			case "delete-compact":
				st.Config.CleanupPolicy = disbackend.CleanupDeleteCompact
			}
		case tagExtConfig:
			*ext = *t.Value == "1"
		}
	}
	return st
}

// CreateStream creates the stream of a topic (Kafka CreateTopics), with
// its configs as tags and, when they do not fit, its ext config
// (extconfig.go). In cluster mode only the controller writes
// (ErrNotController, docs/cluster.md §7). DIS CreateStream,
// DescribeStream, CreateApp, CommitCheckpoint.
func (s *Store) CreateStream(ctx context.Context, spec disbackend.StreamSpec) (disbackend.Stream, error) {
	if gatewayStream(spec.Name) {
		return disbackend.Stream{}, fmt.Errorf("%w: stream name %q is reserved by disgw", disbackend.ErrInvalidName, spec.Name)
	}
	if err := s.controllerWrite("create stream " + spec.Name); err != nil {
		return disbackend.Stream{}, err
	}
	if spec.PartitionCount <= 0 {
		return disbackend.Stream{}, fmt.Errorf("disrest: create stream %q: %w: %d", spec.Name, disbackend.ErrInvalidPartitionCount, spec.PartitionCount)
	}
	if err := s.ValidateStreamConfig(spec.Config); err != nil {
		return disbackend.Stream{}, fmt.Errorf("disrest: create stream %q: %w", spec.Name, err)
	}
	hours, err := dataDuration(spec.Config)
	if err != nil {
		return disbackend.Stream{}, fmt.Errorf("disrest: create stream %q: %w", spec.Name, err)
	}
	if err := s.createStream(ctx, spec.Name, spec.PartitionCount, hours, configTags(spec.TopicName, spec.Name, spec.Config)); err != nil {
		if errors.Is(err, disbackend.ErrStreamExists) {
			if have, derr := s.DescribeStream(ctx, spec.Name); derr == nil && have.TopicName != spec.TopicName {
				return disbackend.Stream{}, fmt.Errorf("disrest: create stream %q: %w: topic %q maps to the stream of topic %q",
					spec.Name, disbackend.ErrNameCollision, spec.TopicName, have.TopicName)
			}
		}
		return disbackend.Stream{}, err
	}
	if extRecord(spec.TopicName, spec.Name, spec.Config) != "" {
		si, err := s.streamInfo(ctx, spec.Name, true)
		if err == nil {
			err = s.controllerWrite("create stream " + spec.Name)
		}
		if err == nil {
			err = s.saveExtConfig(ctx, spec.Name, si.id, spec.TopicName, spec.Config)
		}
		if err != nil {
			// Without its ext config the stream would list under its
			// stream name or with default configs: take it back.
			if derr := s.DeleteStream(context.WithoutCancel(ctx), spec.Name); derr != nil {
				s.log.Warn("stream without its ext config left behind", zap.String("stream", spec.Name), zap.Error(derr))
			}
			return disbackend.Stream{}, err
		}
		s.streams.drop(spec.Name)
	}
	st, err := s.DescribeStream(ctx, spec.Name)
	if err == nil {
		s.compact.watch(st)
	}
	return st, err
}

func (s *Store) createStream(ctx context.Context, name string, parts, hours int32, tags []model.Tag) error {
	typ := model.GetCreateStreamReqStreamTypeEnum().COMMON
	dt := model.GetCreateStreamReqDataTypeEnum().BLOB
	req := &model.CreateStreamRequest{Body: &model.CreateStreamReq{
		StreamName: name, PartitionCount: parts, StreamType: &typ, DataType: &dt,
		DataDuration: &hours, Tags: &tags,
	}}
	op, f := "create stream "+name, func() (*model.CreateStreamResponse, error) { return s.cl(ctx).CreateStream(req) }
	var err error
	if gatewayStream(name) {
		// The gateway's own stream: sending it again after a lost answer
		// finds it created (ErrStreamExists, which ensureMeta takes), so a
		// transient failure at start is retried instead of stopping the
		// gateway.
		_, err = callIdempotent(ctx, s, op, f)
	} else {
		_, err = call(ctx, s, op, f)
	}
	s.streams.drop(name)
	return err
}

// DeleteStream deletes the stream of a topic (Kafka DeleteTopics). In
// cluster mode only the controller writes (ErrNotController). DIS
// DeleteStream.
func (s *Store) DeleteStream(ctx context.Context, name string) error {
	if gatewayStream(name) {
		return fmt.Errorf("disrest: delete stream %q: %w", name, disbackend.ErrStreamNotFound)
	}
	if err := s.controllerWrite("delete stream " + name); err != nil {
		return err
	}
	_, err := call(ctx, s, "delete stream "+name, func() (*model.DeleteStreamResponse, error) {
		return s.cl(ctx).DeleteStream(&model.DeleteStreamRequest{StreamName: name})
	})
	s.forgetStream(name)
	return err
}

// describe answers DescribeStream with up to limit partitions after
// start (exclusive; "" for the first).
func (s *Store) describe(ctx context.Context, name, start string, limit int32) (*model.ShowStreamResponse, error) {
	req := &model.ShowStreamRequest{StreamName: name, LimitPartitions: &limit}
	if start != "" {
		req.StartPartitionId = &start
	}
	return callIdempotent(ctx, s, "describe stream "+name, func() (*model.ShowStreamResponse, error) { return s.cl(ctx).ShowStream(req) })
}

func (s *Store) DescribeStream(ctx context.Context, name string) (disbackend.Stream, error) {
	si, err := s.streamInfo(ctx, name, true)
	return si.st, err
}

// streamInfo returns the stream, from the cache unless fresh is set.
func (s *Store) streamInfo(ctx context.Context, name string, fresh bool) (streamInfo, error) {
	if !fresh {
		if si, ok := s.streams.get(name); ok {
			return si, nil
		}
	}
	resp, err := s.describe(ctx, name, "", 1)
	if err != nil {
		return streamInfo{}, err
	}
	si, ext := s.fromDescribe(name, resp)
	if ext {
		if err := s.loadExtConfig(ctx, name, si.id, &si.st); err != nil {
			return streamInfo{}, err
		}
	}
	s.streams.put(si)
	return si, nil
}

// remember caches the stream DescribeStream answered; a stream with an
// ext config keeps what the cache had of it (the ext config is read by
// streamInfo).
func (s *Store) remember(name string, resp *model.ShowStreamResponse) streamInfo {
	si, ext := s.fromDescribe(name, resp)
	if ext {
		old, ok := s.streams.peek(name)
		if !ok || old.id != si.id {
			return si // not cached: streamInfo reads the ext config
		}
		si.st.Config = old.st.Config
		si.st.TopicName = old.st.TopicName
		si.st.Config.Retention = time.Duration(retentionOf(resp)) * time.Hour
	}
	s.streams.put(si)
	return si
}

func retentionOf(resp *model.ShowStreamResponse) int32 {
	if resp.RetentionPeriod != nil {
		return *resp.RetentionPeriod
	}
	return 0
}

// fromDescribe builds the stream of a DescribeStream answer; ext reports
// whether it has an ext config to read.
func (s *Store) fromDescribe(name string, resp *model.ShowStreamResponse) (si streamInfo, ext bool) {
	var id string
	var created int64
	var parts int32
	if resp.StreamId != nil {
		id = *resp.StreamId
	}
	if resp.CreateTime != nil {
		created = *resp.CreateTime
	}
	if resp.ReadablePartitionCount != nil {
		parts = *resp.ReadablePartitionCount
	}
	si = streamInfo{st: streamFromDIS(name, id, created, retentionOf(resp), parts, resp.Tags, &ext), id: id, fetched: time.Now(),
		advanced: resp.StreamType != nil && resp.StreamType.Value() == "ADVANCED"}
	if resp.WritablePartitionCount != nil {
		si.writable = *resp.WritablePartitionCount
	}
	return si, ext
}

// UpdatePartitionCount grows the stream to n partitions (Kafka
// CreatePartitions). In cluster mode only the controller writes
// (ErrNotController). DIS DescribeStream, UpdatePartitionCount.
func (s *Store) UpdatePartitionCount(ctx context.Context, name string, n int32) error {
	if err := s.controllerWrite("update partition count of " + name); err != nil {
		return err
	}
	st, err := s.DescribeStream(ctx, name)
	if err != nil {
		return err
	}
	if n <= st.PartitionCount {
		return fmt.Errorf("disrest: update partition count of %q: %w: %d is not more than the current %d",
			name, disbackend.ErrInvalidPartitionCount, n, st.PartitionCount)
	}
	_, err = call(ctx, s, "update partition count of "+name, func() (*model.UpdatePartitionCountResponse, error) {
		return s.cl(ctx).UpdatePartitionCount(&model.UpdatePartitionCountRequest{StreamName: name,
			Body: &model.UpdatePartitionCountReq{StreamName: name, TargetPartitionCount: n}})
	})
	s.streams.drop(name)
	return err
}

// UpdateStreamConfig applies a topic's configs (Kafka AlterConfigs,
// IncrementalAlterConfigs): retention as data_duration, the others as
// tags and ext config. In cluster mode only the controller writes
// (ErrNotController), asked before each DIS write. DIS DescribeStream,
// UpdateStream, BatchDeleteTags, BatchCreateTags, CommitCheckpoint.
func (s *Store) UpdateStreamConfig(ctx context.Context, name string, cfg disbackend.StreamConfig) error {
	if err := s.ValidateStreamConfig(cfg); err != nil {
		return fmt.Errorf("disrest: update stream %q: %w", name, err)
	}
	op := "update stream " + name
	if err := s.controllerWrite(op); err != nil {
		return err
	}
	hours, err := dataDuration(cfg)
	if err != nil {
		return fmt.Errorf("disrest: update stream %q: %w", name, err)
	}
	si, err := s.streamInfo(ctx, name, true)
	if err != nil {
		return err
	}
	defer s.streams.drop(name)
	if si.st.Config.Retention != time.Duration(hours)*time.Hour {
		if err := s.controllerWrite(op); err != nil {
			return err
		}
		_, err = call(ctx, s, "update stream "+name, func() (*model.UpdateStreamResponse, error) {
			return s.cl(ctx).UpdateStream(&model.UpdateStreamRequest{StreamName: name,
				Body: &model.UpdateStreamReq{StreamName: name, DataDuration: &hours}})
		})
		if err != nil {
			return err
		}
	}
	want := configTags(si.st.TopicName, name, cfg)
	var drop []model.Tag
	if cfg.TimestampType != disbackend.LogAppendTime && si.st.Config.TimestampType == disbackend.LogAppendTime {
		k := tagTimestampType
		drop = append(drop, model.Tag{Key: &k})
	}
	if cfg.RecordFormat == "" && si.st.Config.RecordFormat != "" {
		k := tagRecordFormat
		drop = append(drop, model.Tag{Key: &k})
	}
	if cfg.MaxDecompressedMessageBytes <= 0 && si.st.Config.MaxDecompressedMessageBytes > 0 {
		k := tagMaxDecompressedBytes
		drop = append(drop, model.Tag{Key: &k})
	}
	if !cfg.Compacted() && si.st.Config.Compacted() {
		k := tagCleanupPolicy
		drop = append(drop, model.Tag{Key: &k})
	}
	ext, hadExt := extRecord(si.st.TopicName, name, cfg), extRecord(si.st.TopicName, name, si.st.Config)
	if ext == "" && hadExt != "" {
		k := tagExtConfig
		drop = append(drop, model.Tag{Key: &k})
	}
	if ext != "" && ext != hadExt {
		if err := s.controllerWrite(op); err != nil {
			return err
		}
		if err := s.saveExtConfig(ctx, name, si.id, si.st.TopicName, cfg); err != nil {
			return err
		}
	}
	if len(drop) > 0 {
		if err := s.controllerWrite(op); err != nil {
			return err
		}
		_, err = call(ctx, s, "delete tags of "+name, func() (*model.BatchDeleteTagsResponse, error) {
			return s.cl(ctx).BatchDeleteTags(&model.BatchDeleteTagsRequest{StreamId: si.id,
				Body: &model.BatchDeleteTagsReq{Action: model.GetBatchDeleteTagsReqActionEnum().DELETE, Tags: drop}})
		})
		if err != nil {
			return err
		}
	}
	if err := s.controllerWrite(op); err != nil {
		return err
	}
	_, err = call(ctx, s, "tag stream "+name, func() (*model.BatchCreateTagsResponse, error) {
		return s.cl(ctx).BatchCreateTags(&model.BatchCreateTagsRequest{StreamId: si.id,
			Body: &model.BatchCreateTagsReq{Action: model.GetBatchCreateTagsReqActionEnum().CREATE, Tags: want}})
	})
	if err == nil {
		st := si.st
		st.Config = cfg
		s.compact.watch(st)
	}
	return err
}

// parseRange parses "[first : next]".
func parseRange(v string) (disbackend.PartitionRange, bool) {
	v = strings.TrimSpace(v)
	if !strings.HasPrefix(v, "[") || !strings.HasSuffix(v, "]") {
		return disbackend.PartitionRange{}, false
	}
	a, b, ok := strings.Cut(v[1:len(v)-1], ":")
	if !ok {
		return disbackend.PartitionRange{}, false
	}
	first, err1 := strconv.ParseInt(strings.TrimSpace(a), 10, 64)
	next, err2 := strconv.ParseInt(strings.TrimSpace(b), 10, 64)
	if err1 != nil || err2 != nil {
		return disbackend.PartitionRange{}, false
	}
	return disbackend.PartitionRange{First: first, Next: next}, true
}

// rangeCache keeps each partition's last known range and when it was read,
// and the log start offsets DeleteRecords set (logstart.go): every range it
// hands out starts at the partition's floor at the earliest.
type rangeCache struct {
	mu sync.Mutex
	m  map[partKey]cachedRange
	// floors are the partitions' DeleteRecords log start offsets known to
	// this node, with the DIS stream_id they were set on.
	floors map[partKey]floor
}

type cachedRange struct {
	r  disbackend.PartitionRange
	at time.Time
}

func (c *rangeCache) init() {
	c.m = map[partKey]cachedRange{}
	c.floors = map[partKey]floor{}
}

// floored is r starting at k's floor at the earliest. Requires mu.
func (c *rangeCache) floored(k partKey, r disbackend.PartitionRange) disbackend.PartitionRange {
	if f, ok := c.floors[k]; ok && f.off > r.First {
		r.First = min(f.off, max(r.Next, r.First))
	}
	return r
}

func (c *rangeCache) get(k partKey, ttl time.Duration) (disbackend.PartitionRange, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	cr, ok := c.m[k]
	return c.floored(k, cr.r), ok && ttl > 0 && time.Since(cr.at) < ttl
}

// put records r unless a later one is known (next only grows).
func (c *rangeCache) put(k partKey, r disbackend.PartitionRange) {
	c.mu.Lock()
	if old, ok := c.m[k]; ok && old.r.Next > r.Next {
		r.Next = old.r.Next
	}
	c.m[k] = cachedRange{r: r, at: time.Now()}
	c.mu.Unlock()
}

func (c *rangeCache) dropStream(name string) {
	c.mu.Lock()
	for k := range c.m {
		if k.stream == name {
			delete(c.m, k)
		}
	}
	for k := range c.floors {
		if k.stream == name {
			delete(c.floors, k)
		}
	}
	c.mu.Unlock()
}

// first returns the last known first sequence number, 0 when unknown.
func (c *rangeCache) first(k partKey) int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.floored(k, c.m[k].r).First
}

// Range answers DescribeStream's sequence_number_range of the partition.
func (s *Store) Range(stream string, part int32) (disbackend.PartitionRange, error) {
	ctx, cancel := s.ctxTimeout()
	defer cancel()
	return s.rangeOf(ctx, stream, part)
}

func (s *Store) rangeOf(ctx context.Context, stream string, part int32) (disbackend.PartitionRange, error) {
	if r, ok := s.ranges.get(partKey{stream, part}, s.opts.RangeTTL); ok {
		return r, nil
	}
	return s.describeRange(ctx, stream, part)
}

// describeRange reads the partition's range from DIS (DescribeStream of
// that one partition) and caches it.
func (s *Store) describeRange(ctx context.Context, stream string, part int32) (disbackend.PartitionRange, error) {
	k := partKey{stream, part}
	if part < 0 {
		return disbackend.PartitionRange{}, fmt.Errorf("disrest: range of %s/%d: %w", stream, part, disbackend.ErrPartitionNotFound)
	}
	start := ""
	if part > 0 {
		start = disbackend.PartitionID(part - 1)
	}
	resp, err := s.describe(ctx, stream, start, 1)
	if err != nil {
		return disbackend.PartitionRange{}, err
	}
	si := s.remember(stream, resp)
	if part >= si.st.PartitionCount || resp.Partitions == nil || len(*resp.Partitions) == 0 {
		return disbackend.PartitionRange{}, fmt.Errorf("disrest: range of %s/%d: %w", stream, part, disbackend.ErrPartitionNotFound)
	}
	pr := (*resp.Partitions)[0]
	if pr.PartitionId == nil || *pr.PartitionId != disbackend.PartitionID(part) {
		return disbackend.PartitionRange{}, fmt.Errorf("disrest: range of %s/%d: %w", stream, part, disbackend.ErrPartitionNotFound)
	}
	var r disbackend.PartitionRange
	if pr.SequenceNumberRange != nil {
		var ok bool
		if r, ok = parseRange(*pr.SequenceNumberRange); !ok {
			return disbackend.PartitionRange{}, fmt.Errorf("disrest: range of %s/%d: unparsable sequence_number_range %q",
				stream, part, *pr.SequenceNumberRange)
		}
	}
	s.ranges.put(k, r)
	s.refreshLogStarts(ctx, false)
	r, _ = s.ranges.get(k, 0)
	return r, nil
}

// ClusterID returns the cluster id Kafka clients see, derived from the
// stream_id DIS gave MetaStream (created if missing): the same for every
// gateway node of the project and across restarts, new only if MetaStream
// is deleted. DIS DescribeStream. Errors: DIS's.
func (s *Store) ClusterID(ctx context.Context) (string, error) {
	if err := s.ensureMeta(ctx); err != nil {
		return "", err
	}
	si, err := s.streamInfo(ctx, MetaStream, false)
	if err != nil {
		return "", err
	}
	if si.id == "" {
		return "", fmt.Errorf("disrest: cluster id: DIS gave %s no stream_id", MetaStream)
	}
	sum := sha256.Sum256([]byte("disgw cluster id\x00" + si.id))
	return base64.RawURLEncoding.EncodeToString(sum[:16]), nil
}
