// The error strings of this file are Kafka's ConfigDef messages ("Value must
// be at least 1"), sent to clients as Kafka words them: they keep Kafka's
// capitals.
//
//lint:file-ignore ST1005 Kafka's ConfigDef error messages, sent on the wire as Kafka words them

package gateway

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/disgw/disgw/disbackend"
	"github.com/disgw/disgw/kafkawire/batch"
)

// Topic configs: one row per key the gateway honours, with how a value is
// applied to a disbackend.StreamConfig and how the config's value is
// shown. Resetting a key (IncrementalAlterConfigs DELETE, AlterConfigs
// replacing) applies the default's value; a key is at its default when it
// shows the default's value. Keys Kafka has for its own storage
// (replication, flushing, indexes) are accepted with any value and ignored
// (ignoredTopicConfigs); any other key is INVALID_CONFIG.
type topicConfig struct {
	name string
	// apply sets the key in cfg; errors say why the value is refused
	// (wrapped in ErrInvalidConfig by applyTopicConfig).
	apply func(cfg *disbackend.StreamConfig, v string) error
	// show is the value DescribeConfigs gives.
	show func(s *Server, cfg *disbackend.StreamConfig) string
}

// dis.record.format resets to "", which follows the gateway's
// dis_record_format, not to what the default shows.
func resetRecordFormat(cfg, def *disbackend.StreamConfig) { cfg.RecordFormat = def.RecordFormat }

const (
	cfgRetentionMs     = "retention.ms"
	cfgCleanupPolicy   = "cleanup.policy"
	cfgMaxMessageBytes = "max.message.bytes"
	// cfgMaxDecompressed is Kafka's (undocumented) topic config: the most
	// bytes a batch's records may decompress to; disgw holds the whole
	// batch to it, Kafka each record (see decompress.go).
	cfgMaxDecompressed = "max.decompressed.message.bytes"
	cfgTimestampType   = "message.timestamp.type"
	cfgRecordFormat    = "dis.record.format" // disgw's own (docs/dis-backend.md)
	cfgCompressionType = "compression.type"
)

// compressionCodecs are compression.type's values (Kafka's
// BrokerCompressionType) and the batch codec each recompresses to;
// producer keeps the producer's.
var compressionCodecs = map[string]batch.Codec{
	"uncompressed": batch.CodecNone,
	"zstd":         batch.CodecZstd,
	"lz4":          batch.CodecLZ4,
	"snappy":       batch.CodecSnappy,
	"gzip":         batch.CodecGzip,
	"producer":     -1,
}

// compressionLevel applies a compression.*.level: an integer from lo to
// hi, or also (when other is not 0) other, as Kafka validates it; def,
// Kafka's default, is kept as 0.
func compressionLevel(field func(*disbackend.StreamConfig) *int32, def, lo, hi, other int32) func(*disbackend.StreamConfig, string) error {
	return func(c *disbackend.StreamConfig, v string) error {
		n, err := strconv.ParseInt(v, 10, 32)
		switch {
		case err != nil:
			return fmt.Errorf("Not a number of type INT")
		case other != 0 && n == int64(other):
		case other != 0 && (n < int64(lo) || n > int64(hi)):
			return fmt.Errorf("Value must be between %d and %d or equal to %d", lo, hi, other)
		case n < int64(lo):
			return fmt.Errorf("Value must be at least %d", lo)
		case n > int64(hi):
			return fmt.Errorf("Value must be no more than %d", hi)
		}
		*field(c) = int32(n)
		if n == int64(def) {
			*field(c) = 0
		}
		return nil
	}
}

func showLevel(field func(*disbackend.StreamConfig) int32, def int32) func(*Server, *disbackend.StreamConfig) string {
	return func(_ *Server, c *disbackend.StreamConfig) string {
		if l := field(c); l != 0 {
			return strconv.Itoa(int(l))
		}
		return strconv.Itoa(int(def))
	}
}

var topicConfigs = []topicConfig{
	{cfgCleanupPolicy, applyCleanupPolicy,
		func(_ *Server, c *disbackend.StreamConfig) string {
			return cmp.Or(c.CleanupPolicy, disbackend.CleanupDelete)
		}},
	{cfgCompressionType, func(c *disbackend.StreamConfig, v string) error {
		if _, ok := compressionCodecs[v]; !ok {
			return fmt.Errorf("String must be one of: uncompressed, zstd, lz4, snappy, gzip, producer")
		}
		c.CompressionType = v
		if v == "producer" {
			c.CompressionType = ""
		}
		return nil
	}, func(_ *Server, c *disbackend.StreamConfig) string { return cmp.Or(c.CompressionType, "producer") }},
	{"compression.gzip.level", compressionLevel(func(c *disbackend.StreamConfig) *int32 { return &c.GzipLevel }, -1, 1, 9, -1),
		showLevel(func(c *disbackend.StreamConfig) int32 { return c.GzipLevel }, -1)},
	{"compression.lz4.level", compressionLevel(func(c *disbackend.StreamConfig) *int32 { return &c.LZ4Level }, 9, 1, 17, 0),
		showLevel(func(c *disbackend.StreamConfig) int32 { return c.LZ4Level }, 9)},
	{"compression.zstd.level", compressionLevel(func(c *disbackend.StreamConfig) *int32 { return &c.ZstdLevel }, 3, -131072, 22, 0),
		showLevel(func(c *disbackend.StreamConfig) int32 { return c.ZstdLevel }, 3)},
	{"delete.retention.ms", durationMs(func(c *disbackend.StreamConfig) *time.Duration { return &c.DeleteRetention }, 0),
		showMs(func(c *disbackend.StreamConfig) time.Duration { return c.DeleteRetention })},
	{cfgRecordFormat, func(c *disbackend.StreamConfig, v string) error {
		if v == "" || !disbackend.ValidRecordFormat(v) {
			return fmt.Errorf("must be auto, native or envelope")
		}
		c.RecordFormat = v
		return nil
	}, func(s *Server, c *disbackend.StreamConfig) string {
		return cmp.Or(c.RecordFormat, s.cfg.DefaultRecordFormat)
	}},
	{"max.compaction.lag.ms", func(c *disbackend.StreamConfig, v string) error {
		ms, err := strconv.ParseInt(v, 10, 64)
		if err != nil || ms < 1 {
			return fmt.Errorf("must be a number of milliseconds, at least 1")
		}
		c.MaxCompactionLag = msDuration(ms)
		if ms == math.MaxInt64 {
			c.MaxCompactionLag = 0 // no limit
		}
		return nil
	}, func(_ *Server, c *disbackend.StreamConfig) string {
		if c.MaxCompactionLag == 0 {
			return strconv.FormatInt(math.MaxInt64, 10)
		}
		return strconv.FormatInt(c.MaxCompactionLag.Milliseconds(), 10)
	}},
	{cfgMaxDecompressed, func(c *disbackend.StreamConfig, v string) error {
		n, err := strconv.ParseInt(v, 10, 32)
		if err != nil || n <= 0 {
			return fmt.Errorf("must be a positive number of bytes")
		}
		c.MaxDecompressedMessageBytes = n
		return nil
	}, func(s *Server, c *disbackend.StreamConfig) string {
		return strconv.FormatInt(cmp.Or(c.MaxDecompressedMessageBytes, s.cfg.MaxDecompressedMessageBytes), 10)
	}},
	{cfgMaxMessageBytes, func(c *disbackend.StreamConfig, v string) error {
		n, err := strconv.ParseInt(v, 10, 32)
		if err != nil || n <= 0 {
			return fmt.Errorf("must be a positive number of bytes")
		}
		c.MaxMessageBytes = int32(n)
		return nil
	}, func(_ *Server, c *disbackend.StreamConfig) string { return strconv.Itoa(int(c.MaxMessageBytes)) }},
	{cfgTimestampType, func(c *disbackend.StreamConfig, v string) error {
		switch v {
		case "CreateTime":
			c.TimestampType = disbackend.CreateTime
		case "LogAppendTime":
			c.TimestampType = disbackend.LogAppendTime
		default:
			return fmt.Errorf("must be CreateTime or LogAppendTime")
		}
		return nil
	}, func(_ *Server, c *disbackend.StreamConfig) string { return c.TimestampType.String() }},
	{"min.cleanable.dirty.ratio", func(c *disbackend.StreamConfig, v string) error {
		r, err := strconv.ParseFloat(v, 64)
		if err != nil || !(r >= 0 && r <= 1) {
			return fmt.Errorf("must be a number from 0 to 1")
		}
		c.MinCleanableDirtyRatio = r
		return nil
	}, func(_ *Server, c *disbackend.StreamConfig) string {
		return strconv.FormatFloat(c.MinCleanableDirtyRatio, 'g', -1, 64)
	}},
	{"min.compaction.lag.ms", durationMs(func(c *disbackend.StreamConfig) *time.Duration { return &c.MinCompactionLag }, 0),
		showMs(func(c *disbackend.StreamConfig) time.Duration { return c.MinCompactionLag })},
	{"remote.storage.enable", only("false", "tiered storage is not supported"), constant("false")},
	{"retention.bytes", only("-1", "size-based retention is not supported; only -1"), constant("-1")},
	{cfgRetentionMs, func(c *disbackend.StreamConfig, v string) error {
		ms, err := strconv.ParseInt(v, 10, 64)
		switch {
		case err != nil:
			return fmt.Errorf("not a number")
		case ms == -1:
			c.Retention = disbackend.UnlimitedRetention
		case ms <= 0:
			return fmt.Errorf("must be -1 (unlimited) or a positive number of milliseconds")
		default:
			c.Retention = msDuration(ms)
		}
		return nil
	}, func(_ *Server, c *disbackend.StreamConfig) string {
		if c.Retention <= 0 {
			return "-1"
		}
		return strconv.FormatInt(c.Retention.Milliseconds(), 10)
	}},
	{"segment.bytes", func(c *disbackend.StreamConfig, v string) error {
		n, err := strconv.ParseInt(v, 10, 32)
		if err != nil || n < 14 {
			return fmt.Errorf("must be a number of bytes from 14 to %d", math.MaxInt32)
		}
		c.SegmentBytes = n
		return nil
	}, func(_ *Server, c *disbackend.StreamConfig) string {
		return strconv.FormatInt(cmp.Or(c.SegmentBytes, disbackend.DefaultSegmentBytes), 10)
	}},
	{"segment.ms", durationMs(func(c *disbackend.StreamConfig) *time.Duration { return &c.SegmentTime }, 1),
		showMs(func(c *disbackend.StreamConfig) time.Duration {
			return cmp.Or(c.SegmentTime, disbackend.DefaultSegmentTime)
		})},
}

// ignoredTopicConfigs are Kafka's storage, replication and tiered-storage
// configs, accepted with any value and ignored: DIS and the embedded store
// replace what they tune. DescribeConfigs shows them at Kafka's default,
// or at the value given here where the gateway really behaves otherwise.
// Keys Kafka 4.0 removed (message.downconversion.enable,
// message.timestamp.difference.max.ms) are unknown, as in Kafka 4.
var ignoredTopicConfigs = map[string]string{
	"min.insync.replicas":             "",
	"segment.index.bytes":             "",
	"segment.jitter.ms":               "",
	"index.interval.bytes":            "",
	"flush.messages":                  "",
	"flush.ms":                        "",
	"file.delete.delay.ms":            "",
	"preallocate":                     "",
	"unclean.leader.election.enable":  "",
	"message.timestamp.before.max.ms": "",
	// Kafka 4's default is 1 hour (3600000): a batch whose timestamp is
	// further in the future is refused. disgw does not check it.
	"message.timestamp.after.max.ms":          "9223372036854775807",
	"follower.replication.throttled.replicas": "",
	"leader.replication.throttled.replicas":   "",
	"local.retention.ms":                      "",
	"local.retention.bytes":                   "",
	"remote.copy.lag.bytes":                   "",
	"remote.copy.lag.ms":                      "",
	"remote.log.copy.disable":                 "",
	"remote.log.delete.on.disable":            "",
	"errors.deadletterqueue.group.enable":     "",
}

func findTopicConfig(key string) *topicConfig {
	for i := range topicConfigs {
		if topicConfigs[i].name == key {
			return &topicConfigs[i]
		}
	}
	return nil
}

// applyTopicConfig applies one Kafka topic config to cfg; a null value
// keeps what cfg has (CreateTopics: the default). Errors wrap
// disbackend.ErrInvalidConfig (Kafka INVALID_CONFIG) and say why.
func applyTopicConfig(cfg *disbackend.StreamConfig, key string, value *string) error {
	if value == nil {
		return nil
	}
	tc := findTopicConfig(key)
	if tc == nil {
		if _, ok := ignoredTopicConfigs[key]; ok {
			return nil
		}
		return fmt.Errorf("%w: Unknown topic config name: %s", disbackend.ErrInvalidConfig, key)
	}
	if err := tc.apply(cfg, *value); err != nil {
		return fmt.Errorf("%w: %s=%q: %v", disbackend.ErrInvalidConfig, key, *value, err)
	}
	return nil
}

// resetTopicConfig puts key back to its default in cfg (a DELETE of
// IncrementalAlterConfigs). A key the gateway does not know is left alone
// without an error, as Apache Kafka 4.4 does (it answers NONE to a DELETE
// of any name, known or not): MirrorMaker 2's topic config sync DELETEs
// every config the source cluster reports at its default, among them
// Kafka 4.4's errors.deadletterqueue.group.enable, compression.*.level and
// remote.* that disgw has no row for, and one refused DELETE failed the
// whole resource.
func (s *Server) resetTopicConfig(cfg *disbackend.StreamConfig, def disbackend.StreamConfig, key string) error {
	if key == cfgRecordFormat {
		resetRecordFormat(cfg, &def)
		return nil
	}
	if tc := findTopicConfig(key); tc != nil {
		return tc.apply(cfg, tc.show(s, &def))
	}
	return nil
}

// applyCleanupPolicy takes "delete", "compact" or both, comma-separated,
// as Kafka 4.4 keeps the list: items trimmed, a repeated item dropped,
// the rest in the order given ("delete,compact" stays so, and
// " compact , delete,compact" is "compact,delete").
func applyCleanupPolicy(c *disbackend.StreamConfig, v string) error {
	var items []string
	for _, p := range strings.Split(v, ",") {
		p = strings.TrimSpace(p)
		if p != "compact" && p != "delete" {
			return fmt.Errorf("must be delete, compact or both, comma-separated")
		}
		if !slices.Contains(items, p) {
			items = append(items, p)
		}
	}
	c.CleanupPolicy = strings.Join(items, ",")
	return nil
}

// explicitTopicKeys are the keys of topicConfigs that cfg has set: those
// of cfg.SetToDefault and those whose value is not def's.
func (s *Server) explicitTopicKeys(cfg, def *disbackend.StreamConfig) map[string]bool {
	keys := make(map[string]bool)
	for _, k := range strings.Split(cfg.SetToDefault, ",") {
		if k != "" {
			keys[k] = true
		}
	}
	for i := range topicConfigs {
		if tc := &topicConfigs[i]; tc.show(s, cfg) != tc.show(s, def) {
			keys[tc.name] = true
		}
	}
	return keys
}

// keepExplicitTopicKeys records in cfg.SetToDefault the keys of explicit
// (topicConfigs keys set) whose value in cfg is def's: the ones a value
// does not show as set.
func (s *Server) keepExplicitTopicKeys(cfg, def *disbackend.StreamConfig, explicit map[string]bool) {
	var keys []string
	for i := range topicConfigs {
		if tc := &topicConfigs[i]; explicit[tc.name] && tc.show(s, cfg) == tc.show(s, def) {
			keys = append(keys, tc.name)
		}
	}
	slices.Sort(keys)
	cfg.SetToDefault = strings.Join(keys, ",")
}

// durationMs applies a number of milliseconds, at least min.
func durationMs(field func(*disbackend.StreamConfig) *time.Duration, min int64) func(*disbackend.StreamConfig, string) error {
	return func(c *disbackend.StreamConfig, v string) error {
		ms, err := strconv.ParseInt(v, 10, 64)
		if err != nil || ms < min {
			return fmt.Errorf("must be a number of milliseconds, at least %d", min)
		}
		*field(c) = msDuration(ms)
		return nil
	}
}

func showMs(field func(*disbackend.StreamConfig) time.Duration) func(*Server, *disbackend.StreamConfig) string {
	return func(_ *Server, c *disbackend.StreamConfig) string {
		return strconv.FormatInt(field(c).Milliseconds(), 10)
	}
}

// msDuration is ms milliseconds, saturating where a Duration ends (292
// years).
func msDuration(ms int64) time.Duration {
	if ms > math.MaxInt64/int64(time.Millisecond) {
		return math.MaxInt64
	}
	return time.Duration(ms) * time.Millisecond
}

// only accepts the one value supported.
func only(value, why string) func(*disbackend.StreamConfig, string) error {
	return func(_ *disbackend.StreamConfig, v string) error {
		if v != value {
			return fmt.Errorf("%s", why)
		}
		return nil
	}
}

func constant(v string) func(*Server, *disbackend.StreamConfig) string {
	return func(*Server, *disbackend.StreamConfig) string { return v }
}
