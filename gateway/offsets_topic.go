package gateway

import (
	"crypto/sha256"

	"github.com/disgw/disgw/disbackend"
)

// offsetsTopic is Kafka's internal topic of committed offsets and group
// metadata. disgw keeps offsets in its backend (groupcoord), not in a
// topic, yet lists the topic as Apache Kafka 4.4 does, so that clients
// that look for it (franz-go's suite, regex consumers that skip internal
// topics) see Kafka's answer:
//   - Metadata, listing all topics or naming it: is_internal true,
//     offsetsTopicPartitions partitions (Kafka's offsets.topic.num.partitions
//     default) led by this node;
//   - Produce: INVALID_TOPIC_EXCEPTION, as Kafka;
//   - CreateTopics: TOPIC_ALREADY_EXISTS, as Kafka;
//   - DescribeConfigs: Kafka's configs of it (cleanup.policy compact,
//     segment.bytes 104857600);
//   - DeleteTopics: TOPIC_DELETION_DISABLED (Kafka deletes it and creates
//     it again at the next FindCoordinator; disgw's offsets are not in it);
//   - Fetch, ListOffsets and the rest: UNKNOWN_TOPIC_OR_PARTITION (Kafka
//     serves its records; disgw has none to serve).
const (
	offsetsTopic           = "__consumer_offsets"
	offsetsTopicPartitions = 50
	// offsetsTopicSegmentBytes is Kafka's offsets.topic.segment.bytes
	// default, the topic's segment.bytes.
	offsetsTopicSegmentBytes = 100 << 20
)

// offsetsTopicStream is offsetsTopic as a stream that no backend holds;
// its topic id is derived from the cluster id, the same on every node.
func (s *Server) offsetsTopicStream() *disbackend.Stream {
	cfg := s.defaultStreamConfig()
	cfg.CleanupPolicy = disbackend.CleanupCompact
	cfg.SegmentBytes = offsetsTopicSegmentBytes
	sum := sha256.Sum256([]byte("disgw " + offsetsTopic + " " + s.cfg.ClusterID))
	var id [16]byte
	copy(id[:], sum[:])
	return &disbackend.Stream{Name: offsetsTopic, TopicName: offsetsTopic, TopicID: id,
		PartitionCount: offsetsTopicPartitions, Config: cfg}
}

// cachedTopic is topic name's stream from the topic cache, or
// offsetsTopicStream for __consumer_offsets (which no backend holds); nil
// when neither knows it.
func (s *Server) cachedTopic(name string) *disbackend.Stream {
	if name == offsetsTopic {
		return s.offsetsTopicStream()
	}
	return s.topics.get(name)
}
