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
