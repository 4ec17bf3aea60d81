package disrest

import (
	"strings"
	"testing"

	"github.com/disgw/disgw/disbackend"
	"github.com/disgw/disgw/disbackend/disapi"
)

// TestExtRecordTopicName: a hashed stream keeps its topic name in its ext
// config (with the configs no tag holds); a plain one does not; decoding
// takes the name only for the stream_id written and only when the name maps
// to the stream; the record fits DIS's checkpoint metadata.
func TestExtRecordTopicName(t *testing.T) {
	long := strings.Repeat("a.b-", 62) + "c" // 249 characters
	stream := disbackend.HashedStreamName(long)
	cfg := disbackend.StreamConfig{SegmentBytes: 1 << 20, DeleteRetention: 1000}.WithDefaults()
	rec := extRecord(long, stream, cfg)
	if !strings.HasPrefix(rec, "topic="+long+";") || !strings.Contains(rec, "segment.bytes=1048576") {
		t.Fatalf("extRecord = %q", rec)
	}
	if got := extRecord("a.b", "a_b", disbackend.StreamConfig{}.WithDefaults()); got != "" {
		t.Fatalf("extRecord of a plain name = %q, want none", got)
	}
	if got := extRecord(long, stream, disbackend.StreamConfig{}.WithDefaults()); got != "topic="+long {
		t.Fatalf("extRecord with default configs = %q", got)
	}
	meta := "sid=" + strings.Repeat("9", 32) + ";" + rec
	if len(meta) > disapi.MaxCheckpointMetadataLen {
		t.Fatalf("metadata of %d characters, DIS keeps %d", len(meta), disapi.MaxCheckpointMetadataLen)
	}
	st := disbackend.Stream{Name: stream, TopicName: stream}
	if !decodeExtConfig(meta, strings.Repeat("9", 32), &st) || st.TopicName != long || st.Config.SegmentBytes != 1<<20 {
		t.Fatalf("decoded %q segment.bytes %d", st.TopicName, st.Config.SegmentBytes)
	}
	other := disbackend.Stream{Name: stream, TopicName: stream}
	if decodeExtConfig(meta, "another-id", &other) || other.TopicName != stream {
		t.Fatalf("a record of another stream_id was applied: %q", other.TopicName)
	}
	wrong := disbackend.Stream{Name: disbackend.HashedStreamName(long + "x")[:64], TopicName: "x"}
	decodeExtConfig(meta, strings.Repeat("9", 32), &wrong)
	if wrong.TopicName != "x" {
		t.Fatalf("a topic name that does not map to the stream was taken: %q", wrong.TopicName)
	}
}

// TestExtRecordSetToDefault: StreamConfig.SetToDefault is kept in the ext
// config record and read back; with a 249-character topic name, every ext
// key at a non-default value and every other honoured key set to its
// default, the record still fits DIS's checkpoint metadata.
func TestExtRecordSetToDefault(t *testing.T) {
	long := strings.Repeat("a.b-", 62) + "c"
	stream := disbackend.HashedStreamName(long)
	cfg := disbackend.StreamConfig{
		DeleteRetention: 123456789012, MinCompactionLag: 123456789012, MaxCompactionLag: 123456789012,
		MinCleanableDirtyRatio: 0.123456789, SegmentBytes: 1234567890, SegmentTime: 123456789012,
		CompressionType: "uncompressed", GzipLevel: 9, LZ4Level: 17, ZstdLevel: -131072,
		SetToDefault: "cleanup.policy,dis.record.format,max.decompressed.message.bytes,max.message.bytes," +
			"message.timestamp.type,remote.storage.enable,retention.bytes,retention.ms",
	}.WithDefaults()
	meta := "sid=" + strings.Repeat("9", 32) + ";" + extRecord(long, stream, cfg)
	if len(meta) > disapi.MaxCheckpointMetadataLen {
		t.Fatalf("metadata of %d characters, DIS keeps %d", len(meta), disapi.MaxCheckpointMetadataLen)
	}
	st := disbackend.Stream{Name: stream, TopicName: stream}
	if !decodeExtConfig(meta, strings.Repeat("9", 32), &st) || st.Config.SetToDefault != cfg.SetToDefault || st.TopicName != long {
		t.Fatalf("decoded %q, SetToDefault %q", st.TopicName, st.Config.SetToDefault)
	}
	if got := extRecord("a.b", "a_b", disbackend.StreamConfig{SetToDefault: "retention.ms"}.WithDefaults()); got != "set=retention.ms" {
		t.Fatalf("extRecord of a key set to its default = %q", got)
	}
}
