package disrest

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/huaweicloud/huaweicloud-sdk-go-v3/services/dis/v2/model"

	"github.com/disgw/disgw/disbackend"
)

// Topic configs that no stream tag holds (DIS: at most 10 tags, values of
// at most 43 characters of a narrow alphabet; the gateway uses up to 7) are
// the stream's "ext config": the checkpoint metadata (at most 1000
// characters) of gatewayApp on the stream's partition 0, as
// "sid=<stream_id>;<key>=<value>;...". The stream_id guards against a
// checkpoint left from an earlier stream of the same name. Only values
// other than Kafka's defaults are kept; the tag tagExtConfig says there
// is one to read, so listing streams reads checkpoints only for those.
//
// A topic whose name is longer than a stream name can be (65-249
// characters: its stream has a hashed name, disbackend.StreamNameForTopic)
// keeps its name there too, as "topic=<name>" after the stream_id; such a
// stream always has an ext config, so every node and a restarted gateway
// list it under its topic name. A name is taken only if it maps to the
// stream's name.
//
// The other keys are Kafka's topic config names: delete.retention.ms,
// min.compaction.lag.ms, max.compaction.lag.ms, min.cleanable.dirty.ratio,
// segment.bytes, segment.ms, compression.type, compression.gzip.level,
// compression.lz4.level, compression.zstd.level. Of these only
// delete.retention.ms acts on DIS (how long the compactor keeps
// re-appending a tombstone); the others are kept and reported as set (DIS
// stores records, and fetches build their batches uncompressed).
//
// "set=<key>,<key>,..." is StreamConfig.SetToDefault: the topic config
// keys set explicitly to their default value (which DescribeConfigs
// reports as set, as Kafka does), whatever holds their value.

// encodeExtConfig returns the key=value list of cfg's non-default values
// that no tag holds, "" when there are none.
func encodeExtConfig(cfg disbackend.StreamConfig) string {
	var kv []string
	add := func(k, v string) { kv = append(kv, k+"="+v) }
	ms := func(d time.Duration) string { return strconv.FormatInt(d.Milliseconds(), 10) }
	if cfg.DeleteRetention != 0 && cfg.DeleteRetention != disbackend.DefaultDeleteRetention {
		add("delete.retention.ms", ms(cfg.DeleteRetention))
	}
	if cfg.MinCompactionLag > 0 {
		add("min.compaction.lag.ms", ms(cfg.MinCompactionLag))
	}
	if cfg.MaxCompactionLag > 0 {
		add("max.compaction.lag.ms", ms(cfg.MaxCompactionLag))
	}
	if cfg.MinCleanableDirtyRatio != 0 && cfg.MinCleanableDirtyRatio != disbackend.DefaultMinCleanableDirtyRatio {
		add("min.cleanable.dirty.ratio", strconv.FormatFloat(cfg.MinCleanableDirtyRatio, 'g', -1, 64))
	}
	if cfg.SegmentBytes > 0 && cfg.SegmentBytes != disbackend.DefaultSegmentBytes {
		add("segment.bytes", strconv.FormatInt(cfg.SegmentBytes, 10))
	}
	if cfg.SegmentTime > 0 && cfg.SegmentTime != disbackend.DefaultSegmentTime {
		add("segment.ms", ms(cfg.SegmentTime))
	}
	if cfg.CompressionType != "" && cfg.CompressionType != "producer" {
		add("compression.type", cfg.CompressionType)
	}
	for _, l := range []struct {
		k string
		v int32
	}{{"compression.gzip.level", cfg.GzipLevel}, {"compression.lz4.level", cfg.LZ4Level}, {"compression.zstd.level", cfg.ZstdLevel}} {
		if l.v != 0 {
			add(l.k, strconv.Itoa(int(l.v)))
		}
	}
	if cfg.SetToDefault != "" {
		add("set", cfg.SetToDefault)
	}
	return strings.Join(kv, ";")
}

// hashedTopic reports whether stream is topic's hashed stream name, which
// does not give the topic name back (the ext config keeps it).
func hashedTopic(topic, stream string) bool {
	return stream != strings.ReplaceAll(topic, ".", "_")
}

// extRecord is the ext config of topic's stream (DIS name stream) with
// cfg, without the stream_id: the topic name when the stream name is
// hashed, then encodeExtConfig(cfg); "" when there is nothing to keep.
func extRecord(topic, stream string, cfg disbackend.StreamConfig) string {
	ext := encodeExtConfig(cfg)
	if !hashedTopic(topic, stream) {
		return ext
	}
	if ext == "" {
		return "topic=" + topic
	}
	return "topic=" + topic + ";" + ext
}

// decodeExtConfig applies meta (from saveExtConfig) to st (DIS stream
// st.Name) when it names streamID; it reports whether it did.
func decodeExtConfig(meta, streamID string, st *disbackend.Stream) bool {
	fields := strings.Split(meta, ";")
	if len(fields) == 0 || fields[0] != "sid="+streamID {
		return false
	}
	cfg := &st.Config
	for _, f := range fields[1:] {
		k, v, ok := strings.Cut(f, "=")
		if !ok {
			continue
		}
		n, err := strconv.ParseInt(v, 10, 64)
		d := time.Duration(n) * time.Millisecond
		switch k {
		case "topic":
			if name, err := disbackend.StreamNameForTopic(v); err == nil && name == st.Name {
				st.TopicName = v
			}
		case "delete.retention.ms":
			if err == nil {
				cfg.DeleteRetention = d
			}
		case "min.compaction.lag.ms":
			if err == nil {
				cfg.MinCompactionLag = d
			}
		case "max.compaction.lag.ms":
			if err == nil {
				cfg.MaxCompactionLag = d
			}
		case "min.cleanable.dirty.ratio":
			if r, err := strconv.ParseFloat(v, 64); err == nil {
				cfg.MinCleanableDirtyRatio = r
			}
		case "segment.bytes":
			if err == nil {
				cfg.SegmentBytes = n
			}
		case "segment.ms":
			if err == nil {
				cfg.SegmentTime = d
			}
		case "compression.type":
			cfg.CompressionType = v
		case "set":
			cfg.SetToDefault = v
		case "compression.gzip.level":
			if err == nil {
				cfg.GzipLevel = int32(n)
			}
		case "compression.lz4.level":
			if err == nil {
				cfg.LZ4Level = int32(n)
			}
		case "compression.zstd.level":
			if err == nil {
				cfg.ZstdLevel = int32(n)
			}
		}
	}
	return true
}

// ensureApp creates a gateway-owned app if it is missing.
func (s *Store) ensureApp(ctx context.Context, app string) error {
	_, err := call(ctx, s, "create app "+app, func() (*model.CreateAppResponse, error) {
		return s.c.CreateApp(&model.CreateAppRequest{Body: &model.CreateAppReq{AppName: app}})
	})
	if err != nil && !errors.Is(err, disbackend.ErrAppExists) {
		return err
	}
	return nil
}

// saveExtConfig writes the ext config of topic's stream name (DIS
// stream_id streamID) with cfg as gatewayApp's checkpoint on its partition
// 0, at the partition's first sequence number (a checkpoint must lie in
// the partition's range). DIS CreateApp, DescribeStream, CommitCheckpoint.
func (s *Store) saveExtConfig(ctx context.Context, name, streamID, topic string, cfg disbackend.StreamConfig) error {
	ext := extRecord(topic, name, cfg)
	if ext == "" {
		return nil
	}
	if err := s.ensureApp(ctx, gatewayApp); err != nil {
		return err
	}
	r, err := s.describeRange(ctx, name, 0)
	if err != nil {
		return err
	}
	if err := s.commit(ctx, gatewayApp, name, 0, r.First, "sid="+streamID+";"+ext); err != nil {
		return fmt.Errorf("disrest: keep the topic name and configs of %s: %w", name, err)
	}
	return nil
}

// loadExtConfig reads the ext config of stream name into st (its configs
// and, for a hashed stream name, its topic name). A missing checkpoint
// leaves st as it is. DIS GetCheckpoint.
func (s *Store) loadExtConfig(ctx context.Context, name, streamID string, st *disbackend.Stream) error {
	_, meta, err := s.checkpointOf(ctx, gatewayApp, name, 0)
	if err != nil {
		if errors.Is(err, disbackend.ErrAppNotFound) || errors.Is(err, disbackend.ErrStreamNotFound) {
			return nil
		}
		return err
	}
	decodeExtConfig(meta, streamID, st)
	return nil
}
